-- Jobs per queue and status, so stats() and Claim.remaining never count the whole
-- table. Row triggers record every change of a job's status as rows of
-- conveyor_count_deltas: inserts only, so concurrent transactions never wait on a shared
-- counter row. Readers add the deltas to conveyor_counts; a fold (workers' upkeep, and
-- readers when deltas pile up) moves them into it.
CREATE TABLE conveyor_counts (
    queue  VARCHAR(200) NOT NULL,
    status VARCHAR(16)  NOT NULL,
    n      BIGINT       NOT NULL,
    PRIMARY KEY (queue, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

CREATE TABLE conveyor_count_deltas (
    id      BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue   VARCHAR(200) NOT NULL,
    status  VARCHAR(16)  NOT NULL,
    n       INT          NOT NULL,  -- net change
    entered INT          NOT NULL,  -- jobs that reached this status
    at      DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- Jobs that reached completed or failed, per queue and minute: the throughput a
-- console charts.
CREATE TABLE conveyor_throughput (
    minute    DATETIME     NOT NULL,
    queue     VARCHAR(200) NOT NULL,
    completed BIGINT       NOT NULL DEFAULT 0,
    failed    BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

INSERT INTO conveyor_counts (queue, status, n)
SELECT queue, status, count(*) FROM conveyor_jobs GROUP BY queue, status;

CREATE TRIGGER conveyor_count_inserted AFTER INSERT ON conveyor_jobs FOR EACH ROW
    INSERT INTO conveyor_count_deltas (queue, status, n, entered, at)
    VALUES (NEW.queue, NEW.status, 1, 1, UTC_TIMESTAMP(6));

CREATE TRIGGER conveyor_count_changed AFTER UPDATE ON conveyor_jobs FOR EACH ROW
BEGIN
    IF OLD.status <> NEW.status THEN
        INSERT INTO conveyor_count_deltas (queue, status, n, entered, at)
        VALUES (NEW.queue, NEW.status, 1, 1, UTC_TIMESTAMP(6)),
               (OLD.queue, OLD.status, -1, 0, UTC_TIMESTAMP(6));
    END IF;
END;

CREATE TRIGGER conveyor_count_deleted AFTER DELETE ON conveyor_jobs FOR EACH ROW
    INSERT INTO conveyor_count_deltas (queue, status, n, entered, at)
    VALUES (OLD.queue, OLD.status, -1, 0, UTC_TIMESTAMP(6));
