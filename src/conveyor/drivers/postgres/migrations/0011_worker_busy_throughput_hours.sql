-- The jobs a worker's tasks are running, as of its last refresh: a JSON array of
-- {"id", "started_at"}. A running job absent from its worker's list was claimed ahead
-- and waits for a free slot (the job row cannot tell: started_at is set by the claim).
ALTER TABLE {schema}.conveyor_workers ADD COLUMN busy jsonb;

-- Throughput per queue and hour: per-minute rows older than a day are rolled up into
-- these (roll_up_throughput), so a week of history costs 168 rows per queue, not 10,080.
CREATE TABLE {schema}.conveyor_throughput_hours (
    hour      timestamptz NOT NULL,
    queue     text        NOT NULL,
    completed bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, queue)
);
