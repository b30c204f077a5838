-- Adding jobs. {schema} is the configured schema; now() is the database clock (the
-- start of the transaction). The SQLite backend has the same statement names with the
-- same parameters.

-- name: insert_job
-- Returns what the database decided; the caller knows the rest of the new job.
INSERT INTO {schema}.conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, job_group, depends_on,
     waiting_for, trace_context, created_at, updated_at)
VALUES
    (:queue, :task, :payload::jsonb, :key, :priority, coalesce(:run_at::timestamptz, now()),
     :max_attempts, :job_group, :depends_on::jsonb, coalesce(:waiting_for::integer, 0),
     :trace_context, now(), now())
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING id, run_at, created_at;

-- name: insert_jobs
-- Many jobs without keys or dependencies in one statement. :items is a JSON array of
-- rows, each [queue, task, payload, priority, run_at, max_attempts, job_group,
-- trace_context]. :ids_only: answer only the new ids (bulk loads that need no Job
-- objects).
INSERT INTO {schema}.conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, job_group, trace_context,
     created_at, updated_at)
SELECT e.value ->> 0, e.value ->> 1, (e.value ->> 2)::jsonb, NULL,
       (e.value ->> 3)::integer, coalesce((e.value ->> 4)::timestamptz, now()),
       (e.value ->> 5)::integer, e.value ->> 6, e.value ->> 7, now(), now()
FROM jsonb_array_elements(:items::jsonb) WITH ORDINALITY AS e(value, ord)
ORDER BY e.ord
RETURNING id, run_at, created_at  -- unless :ids_only
RETURNING id  -- if :ids_only
;

-- name: jobs_by_key
-- The jobs of :queue with :key: the active ones (:active), or the newest of any state
-- (of :task, when given).
SELECT *, now() AS db_now FROM {schema}.conveyor_jobs
WHERE queue = :queue AND key = :key
  AND status IN ('pending', 'running')  -- if :active
  AND task = :task  -- if :task
ORDER BY id DESC  -- unless :active
LIMIT 1  -- unless :active
;

-- name: lock_subscribers
-- Callers adding subscribers to the job take their turn: each one's guard below then
-- counts what the others committed (a statement's snapshot is taken after the lock).
SELECT id FROM {schema}.conveyor_jobs WHERE id = :job_id FOR NO KEY UPDATE;

-- name: add_subscriber
-- Unless the job has :cap subscribers already.
INSERT INTO {schema}.conveyor_subscribers (job_id, subscriber, created_at)
SELECT :job_id, :subscriber, now()
WHERE (SELECT count(*) FROM {schema}.conveyor_subscribers WHERE job_id = :job_id) < :cap
ON CONFLICT DO NOTHING;

-- name: mark_dependencies
-- The jobs a new job runs after learn that it waits on them; returns their states. The
-- update locks them, so none can finish unseen before the new job's edges commit.
UPDATE {schema}.conveyor_jobs SET has_dependents = true
WHERE id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint)
RETURNING id, status;

-- name: insert_dependencies
-- Dependency edges: :items is a JSON array of [job_id, depends_on, run_on_failure (0
-- or 1)].
INSERT INTO {schema}.conveyor_dependencies (job_id, depends_on, run_on_failure)
SELECT (e ->> 0)::bigint, (e ->> 1)::bigint, (e ->> 2)::integer = 1
FROM jsonb_array_elements(:items::jsonb) AS e;

-- name: cancel_for_dependency
-- A new job whose dependency already failed or was cancelled: it will never run.
UPDATE {schema}.conveyor_jobs
SET status = 'cancelled', error = :error, error_kind = 'terminal', finished_at = now(),
    updated_at = now()
WHERE id = :id AND status IN {from_cancel_for_dependency}
RETURNING *;
