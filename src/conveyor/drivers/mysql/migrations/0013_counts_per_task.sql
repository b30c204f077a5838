-- Counts per queue, status and task, kept by the same row triggers, so task_stats()
-- reads a few rows of counts instead of an index entry per job (3.7 s at a million
-- jobs: benchmarks/growth.py), and the (queue, task, status) index it read goes: every
-- claim and every ending wrote it. Readers of a queue's counts add up its tasks' rows.
-- (Migration 0017 of the SQLite and PostgreSQL schemas.)
CREATE TABLE conveyor_counts_per_task (
    queue  VARCHAR(200) NOT NULL,
    status VARCHAR(16)  NOT NULL,
    task   VARCHAR(200) NOT NULL,
    n      BIGINT       NOT NULL,
    PRIMARY KEY (queue, status, task)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};

-- No job may change from here to UNLOCK TABLES, or it would be counted twice or never
-- (MySQL's DDL is not transactional, and it has no CREATE OR REPLACE TRIGGER).
LOCK TABLES conveyor_jobs WRITE, conveyor_counts_per_task WRITE,
            conveyor_count_deltas WRITE, conveyor_throughput WRITE;

-- The deltas not yet folded carry throughput the chart still needs: folded into it
-- first (as fold_counts does), then the counts are recounted from the jobs themselves.
INSERT INTO conveyor_throughput (minute, queue, completed, failed)
SELECT {minute_of_at}, queue,
       sum(CASE WHEN status = 'completed' THEN entered ELSE 0 END),
       sum(CASE WHEN status = 'failed' THEN entered ELSE 0 END)
FROM conveyor_count_deltas
WHERE status IN ('completed', 'failed') AND entered > 0
GROUP BY 1, 2
ON DUPLICATE KEY UPDATE completed = conveyor_throughput.completed + VALUES(completed),
                        failed = conveyor_throughput.failed + VALUES(failed);
DELETE FROM conveyor_count_deltas;
ALTER TABLE conveyor_count_deltas ADD COLUMN task VARCHAR(200) NOT NULL AFTER status;

DROP TRIGGER conveyor_count_inserted;
DROP TRIGGER conveyor_count_changed;
DROP TRIGGER conveyor_count_deleted;

CREATE TRIGGER conveyor_count_inserted AFTER INSERT ON conveyor_jobs FOR EACH ROW
    INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
    VALUES (NEW.queue, NEW.status, NEW.task, 1, 1, UTC_TIMESTAMP(6));

-- A job's queue and task never change, only its status.
CREATE TRIGGER conveyor_count_changed AFTER UPDATE ON conveyor_jobs FOR EACH ROW
BEGIN
    IF OLD.status <> NEW.status THEN
        INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
        VALUES (NEW.queue, NEW.status, NEW.task, 1, 1, UTC_TIMESTAMP(6)),
               (OLD.queue, OLD.status, OLD.task, -1, 0, UTC_TIMESTAMP(6));
    END IF;
END;

CREATE TRIGGER conveyor_count_deleted AFTER DELETE ON conveyor_jobs FOR EACH ROW
    INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
    VALUES (OLD.queue, OLD.status, OLD.task, -1, 0, UTC_TIMESTAMP(6));

INSERT INTO conveyor_counts_per_task (queue, status, task, n)
SELECT queue, status, task, count(*) FROM conveyor_jobs GROUP BY queue, status, task;

DROP INDEX conveyor_jobs_queue_task_status ON conveyor_jobs;
UNLOCK TABLES;

RENAME TABLE conveyor_counts TO conveyor_counts_by_queue,
             conveyor_counts_per_task TO conveyor_counts;
DROP TABLE conveyor_counts_by_queue;
