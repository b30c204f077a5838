-- Claims and endings count their own jobs (conveyor/drivers/sqlite/counting.py), and the
-- row trigger that counts changes of state no longer fires for them. SQLite runs a
-- trigger's program for every row of an UPDATE that fires it, even a row its WHEN skips:
-- on the claim path that was a tenth or more of the time the write lock is held per job
-- (benchmarks/lock_parts.py). The trigger now fires for an UPDATE whose SET names `key`,
-- which claims and completions of running jobs never do, and which every other
-- statement that changes a state does with `key = conveyor_jobs.key` (a value it does
-- not change): failures, releases, recoveries, cancels, reopens, the by-key changes, and
-- the dependency trigger's cancels, recreated here with it.
DROP TRIGGER conveyor_count_changed;

CREATE TRIGGER conveyor_count_changed AFTER UPDATE OF key ON conveyor_jobs
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

DROP TRIGGER conveyor_dependency_met;

CREATE TRIGGER conveyor_dependency_met
AFTER UPDATE OF status ON conveyor_jobs
WHEN NEW.has_dependents AND OLD.status <> NEW.status
BEGIN
    UPDATE conveyor_jobs
    SET waiting_for = max(waiting_for - 1, 0), updated_at = {now}
    WHERE status = 'pending'
      AND id IN (SELECT d.job_id FROM conveyor_dependencies AS d
                 WHERE d.depends_on = NEW.id
                   AND ((d.run_on_failure = 0 AND NEW.status = 'completed')
                        OR (d.run_on_failure = 1
                            AND NEW.status IN ('completed', 'failed', 'cancelled')
                            AND OLD.status IN ('pending', 'running'))));

    UPDATE conveyor_jobs
    SET waiting_for = waiting_for + 1, updated_at = {now}
    WHERE status = 'pending'
      AND id IN (SELECT d.job_id FROM conveyor_dependencies AS d
                 WHERE d.depends_on = NEW.id
                   AND ((d.run_on_failure = 0 AND OLD.status = 'completed')
                        OR (d.run_on_failure = 1
                            AND OLD.status IN ('completed', 'failed', 'cancelled')
                            AND NEW.status IN ('pending', 'running'))));

    UPDATE conveyor_jobs
    SET key = key,  -- the count trigger counts these cancels
        status = 'cancelled',
        error = 'dependency job ' || NEW.id || ' ' || NEW.status,
        error_kind = 'terminal',
        finished_at = {now},
        updated_at = {now}
    WHERE status = 'pending'
      AND NEW.status IN ('failed', 'cancelled')
      AND id IN (SELECT d.job_id FROM conveyor_dependencies AS d
                 WHERE d.depends_on = NEW.id AND d.run_on_failure = 0);
END;
