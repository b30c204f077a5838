-- Jobs per queue and status, kept in the same transactions as every change, so stats()
-- and Claim.remaining never count the whole table. Triggers keep them whatever
-- statement changes a job.
CREATE TABLE conveyor_counts (
    queue  TEXT    NOT NULL,
    status TEXT    NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (queue, status)
) WITHOUT ROWID;

-- Jobs that reached completed or failed, per queue and minute (epoch seconds of the
-- minute's start): the throughput a console charts.
CREATE TABLE conveyor_throughput (
    minute    INTEGER NOT NULL,
    queue     TEXT    NOT NULL,
    completed INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
) WITHOUT ROWID;

INSERT INTO conveyor_counts (queue, status, n)
SELECT queue, status, count(*) FROM conveyor_jobs GROUP BY queue, status;

CREATE TRIGGER conveyor_count_inserted AFTER INSERT ON conveyor_jobs
BEGIN
    INSERT INTO conveyor_counts (queue, status, n) VALUES (NEW.queue, NEW.status, 1)
    ON CONFLICT (queue, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER conveyor_count_changed AFTER UPDATE OF status ON conveyor_jobs
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE conveyor_counts SET n = n - 1 WHERE queue = OLD.queue AND status = OLD.status;
    INSERT INTO conveyor_counts (queue, status, n) VALUES (NEW.queue, NEW.status, 1)
    ON CONFLICT (queue, status) DO UPDATE SET n = n + 1;
    INSERT INTO conveyor_throughput (minute, queue, completed, failed)
    SELECT CAST({now} / 60 AS INTEGER) * 60, NEW.queue,
           NEW.status = 'completed', NEW.status = 'failed'
    WHERE NEW.status IN ('completed', 'failed')
    ON CONFLICT (minute, queue) DO UPDATE
    SET completed = completed + excluded.completed, failed = failed + excluded.failed;
END;

CREATE TRIGGER conveyor_count_deleted AFTER DELETE ON conveyor_jobs
BEGIN
    UPDATE conveyor_counts SET n = n - 1 WHERE queue = OLD.queue AND status = OLD.status;
END;
