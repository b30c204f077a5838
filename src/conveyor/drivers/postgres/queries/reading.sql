-- Reading jobs and counts.

-- name: get_job
SELECT *, now() AS db_now FROM {schema}.conveyor_jobs WHERE id = :id;

-- name: jobs_by_id
SELECT * FROM {schema}.conveyor_jobs
WHERE id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint);

-- name: list_jobs
-- Each filter is a line of its own, kept only when given (see Statements): every
-- combination is a plain conjunction that an index serves.
SELECT * FROM {schema}.conveyor_jobs
WHERE id > :after
  AND queue = :queue                      -- if :queue
  AND status = :status                    -- if :status
  AND key = :key                          -- if :key
  AND task = :task                        -- if :task
  AND created_at >= :created_after        -- if :created_after
  AND created_at < :created_before        -- if :created_before
ORDER BY id
LIMIT :limit;

-- name: list_jobs_newest
SELECT * FROM {schema}.conveyor_jobs
WHERE true
  AND id < :before                        -- if :before
  AND queue = :queue                      -- if :queue
  AND status = :status                    -- if :status
  AND key = :key                          -- if :key
  AND task = :task                        -- if :task
  AND created_at >= :created_after        -- if :created_after
  AND created_at < :created_before        -- if :created_before
ORDER BY id DESC
LIMIT :limit;

-- name: dependents
SELECT job_id FROM {schema}.conveyor_dependencies WHERE depends_on = :id ORDER BY job_id;

-- name: subscribers
SELECT subscriber FROM {schema}.conveyor_subscribers
WHERE job_id = :job_id
ORDER BY created_at, subscriber;

-- name: count_by_queue_status
-- The folded counts plus the deltas not yet folded.
SELECT queue, status, sum(n) AS n
FROM (SELECT queue, status, n FROM {schema}.conveyor_counts
      UNION ALL
      SELECT queue, status, n FROM {schema}.conveyor_count_deltas) AS parts
WHERE (:queue::text IS NULL OR queue = :queue)
GROUP BY queue, status
HAVING sum(n) <> 0;

-- name: count_deltas
-- How many deltas wait to be folded, counted no further than :limit.
SELECT count(*) AS n FROM (SELECT 1 FROM {schema}.conveyor_count_deltas LIMIT :limit) AS d;

-- name: fold_counts
-- Moves the deltas into the counts and the throughput, one folder at a time (a second
-- one, finding the lock taken, folds nothing).
WITH folder AS (SELECT pg_try_advisory_xact_lock(hashtext('conveyor_fold:{schema}')) AS ok),
gone AS (DELETE FROM {schema}.conveyor_count_deltas
         WHERE (SELECT ok FROM folder)
         RETURNING queue, status, n, entered, at),
counted AS (INSERT INTO {schema}.conveyor_counts AS c (queue, status, n)
            SELECT queue, status, sum(n) FROM gone GROUP BY queue, status
            ORDER BY queue, status
            ON CONFLICT (queue, status) DO UPDATE SET n = c.n + excluded.n),
charted AS (INSERT INTO {schema}.conveyor_throughput AS t (minute, queue, completed, failed)
            SELECT date_trunc('minute', at), queue,
                   coalesce(sum(entered) FILTER (WHERE status = 'completed'), 0),
                   coalesce(sum(entered) FILTER (WHERE status = 'failed'), 0)
            FROM gone WHERE status IN ('completed', 'failed') AND entered > 0
            GROUP BY 1, 2
            ORDER BY 1, 2
            ON CONFLICT (minute, queue) DO UPDATE
            SET completed = t.completed + excluded.completed,
                failed = t.failed + excluded.failed)
SELECT count(*) AS folded FROM gone;

-- name: pending_summary
-- Per queue with pending jobs: the oldest (an index probe each) and how many are not
-- yet due (an index range).
SELECT q.queue,
       (SELECT j.created_at FROM {schema}.conveyor_jobs AS j
        WHERE j.status = 'pending' AND j.queue = q.queue
        ORDER BY j.id LIMIT 1) AS oldest_pending_at,
       (SELECT count(*) FROM {schema}.conveyor_jobs AS j
        WHERE j.queue = q.queue AND j.status = 'pending' AND j.run_at > j.created_at
          AND j.run_at > now()) AS scheduled
FROM (SELECT queue FROM (SELECT queue, n FROM {schema}.conveyor_counts WHERE status = 'pending'
                         UNION ALL
                         SELECT queue, n FROM {schema}.conveyor_count_deltas
                         WHERE status = 'pending') AS parts
      WHERE (:queue::text IS NULL OR queue = :queue)
      GROUP BY queue HAVING sum(n) > 0) AS q;

-- name: expired_summary
SELECT queue, count(*) AS n FROM {schema}.conveyor_jobs
WHERE status = 'running' AND lease_expires_at < now()
  AND (:queue::text IS NULL OR queue = :queue)
GROUP BY queue;

-- name: throughput
-- Jobs completed and failed per minute since :since, folded or not.
SELECT minute, sum(completed) AS completed, sum(failed) AS failed
FROM (SELECT minute, queue, completed, failed FROM {schema}.conveyor_throughput
      UNION ALL
      SELECT date_trunc('minute', at), queue,
             CASE WHEN status = 'completed' THEN entered ELSE 0 END,
             CASE WHEN status = 'failed' THEN entered ELSE 0 END
      FROM {schema}.conveyor_count_deltas
      WHERE status IN ('completed', 'failed') AND entered > 0) AS parts
WHERE minute >= :since::timestamptz AND (:queue::text IS NULL OR queue = :queue)
GROUP BY minute
ORDER BY minute;

-- name: prune_throughput
DELETE FROM {schema}.conveyor_throughput
WHERE minute < now() - make_interval(secs => :older_than_s);

-- name: db_now
SELECT now() AS db_now;
