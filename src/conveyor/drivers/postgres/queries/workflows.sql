-- Workflows: runs of jobs enqueued together as steps. The SQLite backend has the same
-- statement names with the same parameters.

-- name: insert_workflow
INSERT INTO {schema}.conveyor_workflows (label, created_at) VALUES (:label, now())
RETURNING id, created_at;

-- name: reserve_job_ids
SELECT nextval(pg_get_serial_sequence('{schema}.conveyor_jobs', 'id')) AS id
FROM generate_series(1, :n::integer)
ORDER BY 1;

-- name: insert_steps
-- :items: rows [id, queue, task, payload, key, priority, run_at, max_attempts, job_group,
-- step, waiting_for, has_dependents, depends_on, trace_context]. A step whose key an active job holds
-- answers no row.
INSERT INTO {schema}.conveyor_jobs
    (id, queue, task, payload, key, priority, run_at, max_attempts, job_group,
     workflow_id, step, waiting_for, has_dependents, depends_on, trace_context,
     created_at, updated_at)
OVERRIDING SYSTEM VALUE
SELECT (e.value ->> 0)::bigint, e.value ->> 1, e.value ->> 2, (e.value ->> 3)::jsonb,
       e.value ->> 4, (e.value ->> 5)::integer, coalesce((e.value ->> 6)::timestamptz, now()),
       (e.value ->> 7)::integer, e.value ->> 8, :workflow_id::bigint, e.value ->> 9,
       (e.value ->> 10)::integer, (e.value ->> 11)::integer = 1,
       nullif(e.value -> 12, 'null'::jsonb), e.value ->> 13, now(), now()
FROM jsonb_array_elements(:items::jsonb) WITH ORDINALITY AS e(value, ord)
ORDER BY e.ord
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING id, step, run_at, created_at;

-- name: get_workflow
SELECT id, label, created_at FROM {schema}.conveyor_workflows WHERE id = :id;

-- name: list_workflows
-- Optional filters: the label, and the run's status as read from its steps (running
-- while any is pending or running; then failed, cancelled, completed).
SELECT w.id, w.label, w.created_at FROM {schema}.conveyor_workflows AS w
WHERE true
  AND w.id > :after  -- if :after
  AND w.id < :before  -- if :before
  AND w.label = :label  -- if :label
  AND CASE WHEN EXISTS (SELECT 1 FROM {schema}.conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.status IN ('pending', 'running')) THEN 'running' WHEN EXISTS (SELECT 1 FROM {schema}.conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.status = 'failed') THEN 'failed' WHEN EXISTS (SELECT 1 FROM {schema}.conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.status = 'cancelled') THEN 'cancelled' ELSE 'completed' END = :status  -- if :status
ORDER BY w.id  -- unless :newest
ORDER BY w.id DESC  -- if :newest
LIMIT :limit;

-- name: workflow_counts
SELECT workflow_id, status, count(*) AS n FROM {schema}.conveyor_jobs
WHERE workflow_id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint)
GROUP BY workflow_id, status;

-- name: workflow_edges
SELECT d.job_id, d.depends_on, d.run_on_failure
FROM {schema}.conveyor_dependencies AS d
JOIN {schema}.conveyor_jobs AS j ON j.id = d.job_id
WHERE j.workflow_id = :workflow_id;

-- name: lock_parents
-- Locked until the transaction ends: a parent that would finish meanwhile waits, and
-- its trigger then sees its dependents as this transaction left them.
SELECT id FROM {schema}.conveyor_jobs
WHERE id IN (SELECT d.depends_on FROM {schema}.conveyor_dependencies AS d
             WHERE d.job_id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint))
ORDER BY id
FOR UPDATE;

-- name: recount_waiting
UPDATE {schema}.conveyor_jobs AS j
SET waiting_for = (
        SELECT count(*) FROM {schema}.conveyor_dependencies AS d
        JOIN {schema}.conveyor_jobs AS p ON p.id = d.depends_on
        WHERE d.job_id = j.id
          AND CASE WHEN d.run_on_failure THEN p.status IN ('pending', 'running')
                   ELSE p.status <> 'completed' END),
    updated_at = now()
WHERE j.id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint) AND j.status = 'pending';

-- name: parent_jobs
SELECT p.* FROM {schema}.conveyor_dependencies AS d
JOIN {schema}.conveyor_jobs AS p ON p.id = d.depends_on
WHERE d.job_id = :job_id
ORDER BY p.id;
