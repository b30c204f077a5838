-- A delete counts its jobs in one statement, as a bulk insert has since 0017: the
-- delete trigger wrote a delta row per job, so a prune of a million finished jobs left
-- a million deltas for the folds and every counted claim to go through. The delete_jobs
-- handler sets @conveyor_deletes_counted just before its DELETE and clears it just
-- after, then writes one delta per queue, status and task; the trigger skips rows
-- while it is set. Nothing else in conveyor deletes jobs, so a value left set by a
-- DELETE that failed is only ever met by the next delete of the same handler, which
-- sets it again. A process that connected before this migration never sets it, and the
-- trigger counts its deletes as before.
LOCK TABLES conveyor_jobs WRITE, conveyor_count_deltas WRITE;
DROP TRIGGER conveyor_count_deleted;
CREATE TRIGGER conveyor_count_deleted AFTER DELETE ON conveyor_jobs FOR EACH ROW
BEGIN
    IF @conveyor_deletes_counted IS NULL THEN
        INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
        VALUES (OLD.queue, OLD.status, OLD.task, -1, 0, UTC_TIMESTAMP(6));
    END IF;
END;
UNLOCK TABLES;
