-- Adding jobs. MySQL has no INSERT … RETURNING: the handlers of insert_job and
-- insert_jobs read the new rows back by the ids the insert was given.

-- name: insert_job
-- A key already active makes this fail on conveyor_jobs_active_key: the handler turns
-- that into "no row inserted", as ON CONFLICT DO NOTHING does elsewhere. On MariaDB the
-- driver adds RETURNING (insert_job_returning, MySQLValues._load): one round trip fewer
-- than reading the new job back with inserted_jobs, which MySQL (no RETURNING) does.
INSERT INTO conveyor_jobs
    (queue, task, payload, `key`, priority, run_at, max_attempts, job_group, depends_on,
     waiting_for, trace_context, created_at, updated_at)
VALUES
    (:queue, :task, :payload, :key, :priority, coalesce(:run_at, {now}), :max_attempts,
     :job_group, :depends_on, coalesce(:waiting_for, 0), :trace_context, {now}, {now});

-- name: bulk_created_at
-- The creation time of the jobs of the bulk insert that follows, which its rows carry
-- and the insert trigger skips (migration 0017): count_bulk_insert counts them.
SET @conveyor_bulk_created_at = {now};

-- name: insert_jobs
-- Many jobs without keys or dependencies in one statement. :items is a JSON array of
-- rows, each [queue, task, payload, priority, run_at, max_attempts, job_group,
-- trace_context]. With :counted, created at @conveyor_bulk_created_at (bulk_created_at,
-- just before), so that the insert trigger leaves them to count_bulk_insert.
INSERT INTO conveyor_jobs
    (queue, task, payload, `key`, priority, run_at, max_attempts, job_group,
     trace_context, created_at, updated_at)
SELECT e.queue, e.task, e.payload, NULL, e.priority,
       coalesce(e.run_at, {now}), e.max_attempts, e.job_group,  -- unless :counted
       e.trace_context, {now}, {now}  -- unless :counted
       coalesce(e.run_at, @conveyor_bulk_created_at), e.max_attempts, e.job_group,  -- if :counted
       e.trace_context, @conveyor_bulk_created_at, @conveyor_bulk_created_at  -- if :counted
FROM JSON_TABLE(:items, '$[*]' COLUMNS (
         ord          FOR ORDINALITY,
         queue        {text} PATH '$[0]',
         task         {text} PATH '$[1]',
         payload      LONGTEXT PATH '$[2]',
         priority     INT PATH '$[3]',
         run_at       DATETIME(6) PATH '$[4]',
         max_attempts INT PATH '$[5]',
         job_group    {text} PATH '$[6]',
         trace_context LONGTEXT PATH '$[7]')) AS e
ORDER BY e.ord;

-- name: count_bulk_insert
-- The counts of the jobs insert_jobs just made from :items (all pending), one delta row
-- per queue and task rather than one per job.
INSERT INTO conveyor_count_deltas (queue, status, task, n, entered, at)
SELECT queue, 'pending', task, count(*), count(*), {now}
FROM JSON_TABLE(:items, '$[*]' COLUMNS (queue {text} PATH '$[0]', task {text} PATH '$[1]')) AS e
GROUP BY queue, task
ORDER BY queue, task;

-- name: inserted_jobs
-- What the database decided for the jobs just inserted (ids :first_id … :last_id).
SELECT id, run_at, created_at FROM conveyor_jobs
WHERE id BETWEEN :first_id AND :last_id
ORDER BY id;

-- name: jobs_by_key
-- The jobs of :queue with :key: the active ones (:active), or the newest of any state
-- (of :task, when given).
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE queue = :queue AND `key` = :key
  AND status IN ('pending', 'running')  -- if :active
  AND task = :task  -- if :task
ORDER BY id DESC  -- unless :active
LIMIT 1  -- unless :active
;

-- name: lock_subscribers
-- Callers adding subscribers to the job take their turn: each one's guard below then
-- counts what the others committed (READ COMMITTED).
SELECT id FROM conveyor_jobs WHERE id = :job_id FOR UPDATE;

-- name: add_subscriber
-- Unless the job has :cap subscribers already.
INSERT INTO conveyor_subscribers (job_id, subscriber, created_at)
SELECT :job_id, :subscriber, {now}
FROM DUAL
WHERE (SELECT count(*) FROM conveyor_subscribers WHERE job_id = :job_id) < :cap
ON DUPLICATE KEY UPDATE job_id = conveyor_subscribers.job_id;

-- name: mark_dependencies_lock
-- The jobs a new job runs after, locked so none can finish unseen before the new job's
-- edges commit; the handler marks them as having dependents and returns their states.
SELECT id, status FROM conveyor_jobs
WHERE id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
FOR UPDATE;

-- name: mark_dependencies_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY) SET has_dependents = TRUE WHERE id IN :locked;

-- name: insert_dependencies
-- Dependency edges: :items is a JSON array of [job_id, depends_on, run_on_failure (0
-- or 1)].
INSERT INTO conveyor_dependencies (job_id, depends_on, run_on_failure)
SELECT t.j, t.d, t.r = 1
FROM JSON_TABLE(:items, '$[*]' COLUMNS (
         j BIGINT PATH '$[0]', d BIGINT PATH '$[1]', r INT PATH '$[2]')) AS t;

-- name: cancel_for_dependency_lock
-- A new job whose dependency already failed or was cancelled: it will never run.
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE id = :id AND status IN {from_cancel_for_dependency}
FOR UPDATE;

-- name: cancel_for_dependency_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'cancelled', error = :error, error_kind = 'terminal', finished_at = {now},
    updated_at = {now}
WHERE id IN :locked AND status IN {from_cancel_for_dependency};

-- name: jobs_locked
-- The rows a handler changed, read back in the same transaction: the columns of a job,
-- without the generated ones; on MariaDB packed into one JSON array per row, for the
-- clients that read every column in Python (handlers.read_jobs).
SELECT {job_row} FROM conveyor_jobs WHERE id IN :locked ORDER BY priority, id;

-- name: jobs_locked_columns
-- The same, column by column: on MySQL, through mysqlclient, and for a row whose packed
-- array the server could not make.
SELECT {job_columns} FROM conveyor_jobs WHERE id IN :locked ORDER BY priority, id;

-- name: jobs_locked_brief
-- The same, for a caller that gets only ids, queues and states.
SELECT id, queue, status FROM conveyor_jobs WHERE id IN :locked ORDER BY priority, id;

-- Dependents follow their dependencies (PostgreSQL and SQLite do this in a trigger; a
-- MySQL trigger may not change its own table). :completed are jobs that just completed,
-- :ended jobs that just became final from active, :reopened_completed jobs that were
-- completed and are not any more, :reopened jobs that became active from final.

-- name: dependencies_met
UPDATE conveyor_jobs AS j
JOIN (SELECT job_id, count(*) AS n FROM conveyor_dependencies
      WHERE (depends_on IN :completed AND NOT run_on_failure)
         OR (depends_on IN :ended AND run_on_failure)
      GROUP BY job_id) AS met ON met.job_id = j.id
SET j.waiting_for = greatest(j.waiting_for - met.n, 0), j.updated_at = {now}
WHERE j.status = 'pending';

-- name: dependencies_unmet
UPDATE conveyor_jobs AS j
JOIN (SELECT job_id, count(*) AS n FROM conveyor_dependencies
      WHERE (depends_on IN :reopened_completed AND NOT run_on_failure)
         OR (depends_on IN :reopened AND run_on_failure)
      GROUP BY job_id) AS unmet ON unmet.job_id = j.id
SET j.waiting_for = j.waiting_for + unmet.n, j.updated_at = {now}
WHERE j.status = 'pending';

-- name: dependents_to_cancel
-- Pending jobs that needed one of :failed (failed or cancelled) to complete, with the
-- dependency that dooms each.
SELECT j.id, j.queue, j.task, j.status, j.has_dependents, d.depends_on AS dependency
FROM conveyor_jobs AS j
JOIN conveyor_dependencies AS d ON d.job_id = j.id
WHERE d.depends_on IN :failed AND NOT d.run_on_failure AND j.status = 'pending'
ORDER BY j.id, d.depends_on
FOR UPDATE;

-- name: cancel_dependent
UPDATE conveyor_jobs
SET status = 'cancelled', error = :error, error_kind = 'terminal', finished_at = {now},
    updated_at = {now}
WHERE id = :id AND status IN {from_cancel_for_dependency};
