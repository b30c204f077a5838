-- Workflows: runs of jobs enqueued together as steps. The SQLite and PostgreSQL
-- backends have the same operation names with the same parameters; those written here
-- as several statements are run by their handlers (handlers.py).

-- name: insert_workflow
-- The insert_workflow handler: the new run, then read back by its id.
INSERT INTO conveyor_workflows (label, created_at) VALUES (:label, {now});

-- name: workflow_created
SELECT id, created_at FROM conveyor_workflows WHERE id = :id;

-- name: reserve_savepoint
-- The reserve_job_ids handler: placeholder jobs take :slots (a JSON array, one element
-- a job) fresh ids from the table's AUTO_INCREMENT, and are rolled back. InnoDB never
-- hands out an AUTO_INCREMENT value twice, even when the row that took it is undone.
SAVEPOINT conveyor_reserve_ids;

-- name: reserve_placeholders
INSERT INTO conveyor_jobs
    (queue, task, status, run_at, max_attempts, created_at, updated_at)
SELECT '', '', 'cancelled', {now}, 0, {now}, {now}
FROM JSON_TABLE(:slots, '$[*]' COLUMNS (ord FOR ORDINALITY)) AS t
ORDER BY t.ord;

-- name: reserve_rollback
ROLLBACK TO SAVEPOINT conveyor_reserve_ids;

-- name: insert_steps
-- :items: rows [id, queue, task, payload, key, priority, run_at, max_attempts, job_group,
-- step, waiting_for, has_dependents, depends_on, trace_context]. A step whose key an active job holds
-- makes the statement fail on conveyor_jobs_active_key: the handler then answers no row
-- for the chunk (the caller names the step).
INSERT INTO conveyor_jobs
    (id, queue, task, payload, `key`, priority, run_at, max_attempts, job_group,
     workflow_id, step, waiting_for, has_dependents, depends_on, trace_context,
     created_at, updated_at)
SELECT e.id, e.queue, e.task, e.payload, e.k, e.priority, coalesce(e.run_at, {now}),
       e.max_attempts, e.job_group, :workflow_id, e.step, e.waiting_for,
       e.has_dependents = 1,
       CASE WHEN JSON_TYPE(e.depends_on) = 'NULL' THEN NULL ELSE e.depends_on END,
       e.trace_context, {now}, {now}
FROM JSON_TABLE(:items, '$[*]' COLUMNS (
         ord            FOR ORDINALITY,
         id             BIGINT PATH '$[0]',
         queue          {text} PATH '$[1]',
         task           {text} PATH '$[2]',
         payload        LONGTEXT PATH '$[3]',
         k              {text} PATH '$[4]',
         priority       INT PATH '$[5]',
         run_at         DATETIME(6) PATH '$[6]',
         max_attempts   INT PATH '$[7]',
         job_group      {text} PATH '$[8]',
         step           {text} PATH '$[9]',
         waiting_for    INT PATH '$[10]',
         has_dependents INT PATH '$[11]',
         depends_on     JSON PATH '$[12]',
         trace_context  LONGTEXT PATH '$[13]')) AS e
ORDER BY e.ord;

-- name: inserted_steps
SELECT id, step, run_at, created_at FROM conveyor_jobs
WHERE id IN (SELECT id FROM JSON_TABLE(:items, '$[*]' COLUMNS (id BIGINT PATH '$[0]')) AS t)
ORDER BY id;

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
  AND CASE WHEN EXISTS (SELECT 1 FROM conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.workflow_status IN ('pending', 'running')) THEN 'running' WHEN EXISTS (SELECT 1 FROM conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.workflow_status = 'failed') THEN 'failed' WHEN EXISTS (SELECT 1 FROM conveyor_jobs AS s WHERE s.workflow_id = w.id AND s.workflow_status = 'cancelled') THEN 'cancelled' ELSE 'completed' END = :status  -- if :status
ORDER BY w.id  -- unless :newest
ORDER BY w.id DESC  -- if :newest
LIMIT :limit;

-- name: workflow_counts
-- workflow_status: a step's status, NULL outside workflows (migration 0014); read from
-- its index alone.
SELECT workflow_id, workflow_status AS status, count(*) AS n FROM conveyor_jobs
WHERE workflow_id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
GROUP BY workflow_id, workflow_status;

-- name: workflow_edges
SELECT d.job_id, d.depends_on, d.run_on_failure
FROM conveyor_dependencies AS d
JOIN conveyor_jobs AS j ON j.id = d.job_id
WHERE j.workflow_id = :workflow_id;

-- name: lock_parents
-- The jobs that the jobs :ids run after, locked so none finishes unseen while their
-- dependents are counted again.
SELECT id FROM conveyor_jobs
WHERE id IN (SELECT d.depends_on FROM conveyor_dependencies AS d
             WHERE d.job_id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (
                                    id BIGINT PATH '$')) AS t))
ORDER BY id
FOR UPDATE;

-- name: recount_waiting
-- MySQL may not read the updated table in a subquery of the UPDATE: the unmet edges
-- are counted in a grouped (materialized) derived table instead.
UPDATE conveyor_jobs AS j
LEFT JOIN (
    SELECT d.job_id,
           sum(CASE WHEN d.run_on_failure THEN p.status IN ('pending', 'running')
                    ELSE p.status <> 'completed' END) AS n
    FROM conveyor_dependencies AS d
    JOIN conveyor_jobs AS p ON p.id = d.depends_on
    WHERE d.job_id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
    GROUP BY d.job_id) AS c ON c.job_id = j.id
SET j.waiting_for = coalesce(c.n, 0), j.updated_at = {now}
WHERE j.id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
  AND j.status = 'pending';

-- name: parent_jobs
SELECT p.* FROM conveyor_dependencies AS d
JOIN conveyor_jobs AS p ON p.id = d.depends_on
WHERE d.job_id = :job_id
ORDER BY p.id;
