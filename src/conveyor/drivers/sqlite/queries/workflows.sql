-- Workflows: runs of jobs enqueued together as steps. The PostgreSQL backend has the
-- same statement names with the same parameters.

-- name: insert_workflow
INSERT INTO conveyor_workflows (label, created_at) VALUES (:label, {now})
RETURNING id, created_at;

-- name: reserve_job_ids
-- The write transaction holds the database: ids past the largest ever handed out are
-- free until it commits, and inserting them moves the sequence past them.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :n)
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'conveyor_jobs'), 0),
           coalesce((SELECT max(id) FROM conveyor_jobs), 0)) + i AS id
FROM n
ORDER BY i;

-- name: insert_steps
-- :items: rows [id, queue, task, payload, key, priority, run_at, max_attempts, job_group,
-- step, waiting_for, has_dependents, depends_on, trace_context]. A step whose key an active job holds
-- answers no row.
INSERT INTO conveyor_jobs
    (id, queue, task, payload, key, priority, run_at, max_attempts, job_group,
     workflow_id, step, waiting_for, has_dependents, depends_on, trace_context,
     created_at, updated_at)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5,
       coalesce(value ->> 6, {now}), value ->> 7, value ->> 8, :workflow_id, value ->> 9,
       value ->> 10, value ->> 11, nullif(value -> 12, 'null'), value ->> 13, {now}, {now}
FROM json_each(:items)
WHERE true
ORDER BY json_each.key
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING id, step, run_at, created_at;

-- name: get_workflow
SELECT id, label, created_at FROM conveyor_workflows WHERE id = :id;

-- name: list_workflows
-- Optional filters: the label, and the run's status as read from its steps (running
-- while any is pending or running; then failed, cancelled, completed).
SELECT w.id, w.label, w.created_at FROM conveyor_workflows AS w
WHERE true
  AND w.id > :after  -- if :after
  AND w.id < :before  -- if :before
  AND w.label = :label  -- if :label
  AND CASE WHEN EXISTS (SELECT 1 FROM conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.status IN ('pending', 'running')) THEN 'running' WHEN EXISTS (SELECT 1 FROM conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.status = 'failed') THEN 'failed' WHEN EXISTS (SELECT 1 FROM conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.status = 'cancelled') THEN 'cancelled' ELSE 'completed' END = :status  -- if :status
ORDER BY w.id  -- unless :newest
ORDER BY w.id DESC  -- if :newest
LIMIT :limit;

-- name: workflow_counts
SELECT workflow_id, status, count(*) AS n FROM conveyor_jobs
WHERE workflow_id IN (SELECT value FROM json_each(:ids))
GROUP BY workflow_id, status;

-- name: workflow_edges
SELECT d.job_id, d.depends_on, d.run_on_failure
FROM conveyor_dependencies AS d
JOIN conveyor_jobs AS j ON j.id = d.job_id
WHERE j.workflow_id = :workflow_id;

-- name: lock_parents
-- SQLite has one writer at a time: the write transaction holds them already.
SELECT DISTINCT depends_on AS id FROM conveyor_dependencies
WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: recount_waiting
UPDATE conveyor_jobs
SET waiting_for = (
        SELECT count(*) FROM conveyor_dependencies AS d
        JOIN conveyor_jobs AS p ON p.id = d.depends_on
        WHERE d.job_id = conveyor_jobs.id
          AND CASE WHEN d.run_on_failure THEN p.status IN ('pending', 'running')
                   ELSE p.status <> 'completed' END),
    updated_at = {now}
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending';

-- name: parent_jobs
SELECT p.* FROM conveyor_dependencies AS d
JOIN conveyor_jobs AS p ON p.id = d.depends_on
WHERE d.job_id = :job_id
ORDER BY p.id;
