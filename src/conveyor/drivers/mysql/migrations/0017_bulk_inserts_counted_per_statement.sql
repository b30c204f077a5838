-- A bulk insert counts its jobs in one statement, as every change of state has since
-- 0015: the insert trigger wrote a delta row per job, so a load of a million jobs left
-- a million deltas, which each counted claim then read (its queue's pending deltas,
-- and how many there are) until the folds had taken them all, 5,000 at a time: claims
-- of 100-400 ms at the 99th percentile (benchmarks/backlog.py). The jobs of a bulk
-- insert carry the creation time it set in @conveyor_bulk_created_at just before
-- (insert_jobs); the trigger skips those and counts every other job as before. A value
-- left behind by an interrupted bulk insert skips nothing later: the jobs inserted after
-- it on that connection are created at a later instant. A process that connected before
-- this migration does not set it, and the trigger counts its bulk inserts as before.
LOCK TABLES conveyor_jobs WRITE, conveyor_count_deltas WRITE;
DROP TRIGGER conveyor_count_inserted;
CREATE TRIGGER conveyor_count_inserted AFTER INSERT ON conveyor_jobs FOR EACH ROW
BEGIN
    IF NOT (NEW.created_at <=> @conveyor_bulk_created_at) THEN
        INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
        VALUES (NEW.queue, NEW.status, NEW.task, 1, 1, UTC_TIMESTAMP(6));
    END IF;
END;
UNLOCK TABLES;
