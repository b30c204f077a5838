-- The jobs a worker's tasks are running, as of its last refresh: a JSON array of
-- {"id", "started_at"}. A running job absent from its worker's list was claimed ahead
-- and waits for a free slot (the job row cannot tell: started_at is set by the claim).
ALTER TABLE conveyor_workers ADD COLUMN busy LONGTEXT CHECK (JSON_VALID(busy));

-- Throughput per queue and hour: per-minute rows older than a day are rolled up into
-- these (roll_up_throughput), so a week of history costs 168 rows per queue, not 10,080.
-- (Migration 0011 of the SQLite and PostgreSQL schemas.)
CREATE TABLE conveyor_throughput_hours (
    hour      DATETIME     NOT NULL,
    queue     VARCHAR(200) NOT NULL,
    completed BIGINT       NOT NULL DEFAULT 0,
    failed    BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};
