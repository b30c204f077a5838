-- Adding jobs. {now} is the database clock in epoch seconds. The PostgreSQL backend has
-- the same statement names with the same parameters.

-- name: insert_job
-- Returns what the database decided; the caller knows the rest of the new job.
INSERT INTO conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, job_group, depends_on,
     waiting_for, trace_context, created_at, updated_at)
VALUES
    (:queue, :task, :payload, :key, :priority, coalesce(:run_at, {now}), :max_attempts,
     :job_group, :depends_on, :waiting_for, :trace_context, {now}, {now})
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING id, run_at, created_at;

-- name: insert_plain_job
-- A job without a key or dependencies committed on its own (bulk.insert_plain_job): no
-- conflict to look for and nothing to return, its times bound as the driver's clock read
-- them (SQLite's 'now' reads the same clock), its id the connection's last rowid.
INSERT INTO conveyor_jobs
    (queue, task, payload, priority, run_at, max_attempts, job_group, trace_context,
     created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: insert_jobs
-- Many jobs without keys or dependencies in one statement (bulk.py): {values} stands for
-- one job_values group per job, its columns bound by position as plain parameters. (A
-- JSON array of the jobs, taken apart by json_each and an ->> per column, took 1.2x as
-- long per job: docs/benchmarks.md.)
INSERT INTO conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, job_group, trace_context,
     created_at, updated_at)
VALUES {values}
RETURNING id, run_at, created_at;

-- name: insert_job_ids_only
-- The same, for bulk loads that need only the new ids: bulk.py reads them after it from
-- last_insert_rowid() and changes(), which spares RETURNING a row per job.
INSERT INTO conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, job_group, trace_context,
     created_at, updated_at)
VALUES {values};

-- name: job_values
-- Not a statement: one job of insert_jobs and insert_job_ids_only, its parameters [queue,
-- task, payload, priority, run_at, max_attempts, job_group, trace_context].
(?, ?, ?, NULL, ?, coalesce(?, {now}), ?, ?, ?, {now}, {now});

-- name: jobs_by_key
-- The jobs of :queue with :key: the active ones (:active), or the newest of any state
-- (of :task, when given).
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE queue = :queue AND key = :key
  AND status IN ('pending', 'running')  -- if :active
  AND task = :task  -- if :task
ORDER BY id DESC  -- unless :active
LIMIT 1  -- unless :active
;

-- name: lock_subscribers
-- SQLite's write transaction is the lock.
SELECT id FROM conveyor_jobs WHERE id = :job_id;

-- name: add_subscriber
-- Unless the job has :cap subscribers already.
INSERT INTO conveyor_subscribers (job_id, subscriber, created_at)
SELECT :job_id, :subscriber, {now}
WHERE (SELECT count(*) FROM conveyor_subscribers WHERE job_id = :job_id) < :cap
ON CONFLICT DO NOTHING;

-- name: mark_dependencies
-- The jobs a new job runs after learn that it waits on them; returns their states.
UPDATE conveyor_jobs SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, status;

-- name: insert_dependencies
-- Dependency edges: :items is a JSON array of [job_id, depends_on, run_on_failure (0
-- or 1)].
INSERT INTO conveyor_dependencies (job_id, depends_on, run_on_failure)
SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(:items);

-- name: cancel_for_dependency
-- A new job whose dependency already failed or was cancelled: it will never run.
UPDATE conveyor_jobs
SET key = conveyor_jobs.key,  -- fires the count trigger (migration 0018)
    status = 'cancelled', error = :error, error_kind = 'terminal', finished_at = {now},
    updated_at = {now}
WHERE id = :id AND status IN {from_cancel_for_dependency}
RETURNING *;
