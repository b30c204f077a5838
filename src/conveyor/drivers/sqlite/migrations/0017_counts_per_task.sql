-- Counts per queue, status and task, kept by the same triggers, so task_stats() reads a
-- few rows of counts instead of an index entry per job (12 s at ten million jobs:
-- benchmarks/growth.py), and the (queue, task, status) index it read goes: every claim
-- and every ending wrote it. Readers of a queue's counts add up its tasks' rows.
DROP TRIGGER conveyor_count_inserted;
DROP TRIGGER conveyor_count_changed;
DROP TRIGGER conveyor_count_deleted;

CREATE TABLE conveyor_counts_per_task (
    queue  TEXT    NOT NULL,
    status TEXT    NOT NULL,
    task   TEXT    NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (queue, status, task)
) WITHOUT ROWID;

INSERT INTO conveyor_counts_per_task (queue, status, task, n)
SELECT queue, status, task, count(*) FROM conveyor_jobs GROUP BY queue, status, task;

DROP TABLE conveyor_counts;
ALTER TABLE conveyor_counts_per_task RENAME TO conveyor_counts;
DROP INDEX conveyor_jobs_queue_task_status;

CREATE TRIGGER conveyor_count_inserted AFTER INSERT ON conveyor_jobs
BEGIN
    INSERT INTO conveyor_counts (queue, status, task, n)
    VALUES (NEW.queue, NEW.status, NEW.task, 1)
    ON CONFLICT (queue, status, task) DO UPDATE SET n = n + 1;
END;

-- A job's queue and task never change, only its status.
CREATE TRIGGER conveyor_count_changed AFTER UPDATE OF status ON conveyor_jobs
WHEN OLD.status <> NEW.status
BEGIN
    UPDATE conveyor_counts SET n = n - 1
    WHERE queue = OLD.queue AND status = OLD.status AND task = OLD.task;
    INSERT INTO conveyor_counts (queue, status, task, n)
    VALUES (NEW.queue, NEW.status, NEW.task, 1)
    ON CONFLICT (queue, status, task) DO UPDATE SET n = n + 1;
    INSERT INTO conveyor_throughput (minute, queue, completed, failed)
    SELECT CAST({now} / 60 AS INTEGER) * 60, NEW.queue,
           NEW.status = 'completed', NEW.status = 'failed'
    WHERE NEW.status IN ('completed', 'failed')
    ON CONFLICT (minute, queue) DO UPDATE
    SET completed = completed + excluded.completed, failed = failed + excluded.failed;
END;

CREATE TRIGGER conveyor_count_deleted AFTER DELETE ON conveyor_jobs
BEGIN
    UPDATE conveyor_counts SET n = n - 1
    WHERE queue = OLD.queue AND status = OLD.status AND task = OLD.task;
END;
