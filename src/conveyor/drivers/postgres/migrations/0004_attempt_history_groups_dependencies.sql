-- Every failed attempt's error, kept on the job (the latest 20): a JSON array of
-- {"attempt", "error", "kind", "at", "worker"}.
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN errors jsonb;

-- A concurrency group ("book-42"): a queue may cap how many of a group run at once.
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN job_group text;

-- Dependencies: the ids this job runs after (for reading), how many of them are not yet
-- satisfied (a job is claimable only at 0), and whether other jobs wait on this one.
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN depends_on jsonb;
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN waiting_for integer NOT NULL DEFAULT 0;
ALTER TABLE {schema}.conveyor_jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;

CREATE TABLE {schema}.conveyor_dependencies (
    job_id         bigint  NOT NULL REFERENCES {schema}.conveyor_jobs (id) ON DELETE CASCADE,
    depends_on     bigint  NOT NULL REFERENCES {schema}.conveyor_jobs (id) ON DELETE CASCADE,
    -- true: the job runs once the dependency is final, whatever its end; false: only
    -- once it completed (its failure or cancellation cancels the job).
    run_on_failure boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, depends_on)
);

CREATE INDEX conveyor_dependencies_of ON {schema}.conveyor_dependencies (depends_on);

-- Claims scan only jobs whose dependencies are met.
DROP INDEX {schema}.conveyor_jobs_claimable;
CREATE INDEX conveyor_jobs_claimable
    ON {schema}.conveyor_jobs (queue, priority, id)
    WHERE status = 'pending' AND waiting_for = 0;

-- Pending jobs deferred (scheduled or backing off: run_at past their creation), and
-- those waiting on others: counted to tell how many jobs are claimable now without
-- scanning the backlog. Any job not yet due is a deferred one, and the index holds only
-- those, so other queries over pending jobs never mistake it for theirs.
CREATE INDEX conveyor_jobs_deferred
    ON {schema}.conveyor_jobs (queue, run_at)
    WHERE status = 'pending' AND run_at > created_at;
CREATE INDEX conveyor_jobs_waiting
    ON {schema}.conveyor_jobs (queue, run_at)
    WHERE status = 'pending' AND waiting_for > 0;

-- Running jobs per group, for group caps.
CREATE INDEX conveyor_jobs_running_group
    ON {schema}.conveyor_jobs (queue, job_group)
    WHERE status = 'running' AND job_group IS NOT NULL;

CREATE INDEX conveyor_jobs_task ON {schema}.conveyor_jobs (task, id);
CREATE INDEX conveyor_jobs_created ON {schema}.conveyor_jobs (created_at);

-- A dependency changed state: its dependents still pending count it as met or unmet,
-- or are cancelled. An edge with run_on_failure false is met when the dependency
-- completed; one with true when it is final. Cancelling a dependent fires this
-- trigger again for its own dependents.
CREATE FUNCTION {schema}.conveyor_dependency_met() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.conveyor_jobs
    SET waiting_for = greatest(waiting_for - 1, 0), updated_at = now()
    WHERE status = 'pending'
      AND id IN (SELECT d.job_id FROM {schema}.conveyor_dependencies AS d
                 WHERE d.depends_on = NEW.id
                   AND ((NOT d.run_on_failure AND NEW.status = 'completed')
                        OR (d.run_on_failure
                            AND NEW.status IN ('completed', 'failed', 'cancelled')
                            AND OLD.status IN ('pending', 'running'))));

    UPDATE {schema}.conveyor_jobs
    SET waiting_for = waiting_for + 1, updated_at = now()
    WHERE status = 'pending'
      AND id IN (SELECT d.job_id FROM {schema}.conveyor_dependencies AS d
                 WHERE d.depends_on = NEW.id
                   AND ((NOT d.run_on_failure AND OLD.status = 'completed')
                        OR (d.run_on_failure
                            AND OLD.status IN ('completed', 'failed', 'cancelled')
                            AND NEW.status IN ('pending', 'running'))));

    IF NEW.status IN ('failed', 'cancelled') THEN
        UPDATE {schema}.conveyor_jobs
        SET status = 'cancelled',
            error = 'dependency job ' || NEW.id || ' ' || NEW.status,
            error_kind = 'terminal',
            finished_at = now(),
            updated_at = now()
        WHERE status = 'pending'
          AND id IN (SELECT d.job_id FROM {schema}.conveyor_dependencies AS d
                     WHERE d.depends_on = NEW.id AND NOT d.run_on_failure);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER conveyor_dependency_met
AFTER UPDATE OF status ON {schema}.conveyor_jobs
FOR EACH ROW
WHEN (NEW.has_dependents AND OLD.status <> NEW.status)
EXECUTE FUNCTION {schema}.conveyor_dependency_met();
