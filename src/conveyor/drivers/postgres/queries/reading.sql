-- Reading jobs and counts.

-- name: get_job
-- One job (:id), the jobs :ids (a JSON array), or the steps of the run :workflow_id.
SELECT *, now() AS db_now FROM {schema}.conveyor_jobs
WHERE id = :id  -- if :id
WHERE id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint)  -- if :ids
WHERE workflow_id = :workflow_id  -- if :workflow_id
ORDER BY id  -- if :workflow_id
;

-- name: list_jobs
-- Each filter is a line of its own, kept only when given (see Statements): every
-- combination is a plain conjunction that an index serves.
SELECT * FROM {schema}.conveyor_jobs
WHERE true
  AND id > :after                         -- if :after
  AND id < :before                        -- if :before
  AND queue = :queue                      -- if :queue
  AND status = :status                    -- if :status
  AND key = :key                          -- if :key
  AND task = :task                        -- if :task
  AND created_at >= :created_after        -- if :created_after
  AND created_at < :created_before        -- if :created_before
ORDER BY id                               -- unless :newest
ORDER BY id DESC                          -- if :newest
LIMIT :limit;

-- name: list_deferred
-- Pending jobs not yet due: scheduled (never tried) or waiting to retry (an attempt
-- failed), soonest first. The deferred index holds exactly the pending jobs whose run_at
-- lies past their creation, so the scan is bounded by how many jobs wait, not by the
-- table.
SELECT *, now() AS db_now FROM {schema}.conveyor_jobs
WHERE status = 'pending' AND run_at > created_at AND run_at > now()
  AND queue = :queue                      -- if :queue
  AND task = :task                        -- if :task
  AND attempts = 0                        -- if :first_only
  AND attempts > 0                        -- if :retries_only
ORDER BY run_at, id
LIMIT :limit;

-- name: dependents
SELECT job_id FROM {schema}.conveyor_dependencies WHERE depends_on = :id ORDER BY job_id;

-- name: subscribers
SELECT subscriber FROM {schema}.conveyor_subscribers
WHERE job_id = :job_id
  AND subscriber = :subscriber  -- if :subscriber
ORDER BY created_at, subscriber;

-- name: count_by_queue_status
-- Jobs per queue and status (of :queue when given), or with :per_task per queue, task and
-- status: the folded counts plus the deltas not yet folded.
SELECT queue, status, sum(n) AS n  -- unless :per_task
SELECT queue, task, status, sum(n) AS n  -- if :per_task
FROM (SELECT queue, task, status, n FROM {schema}.conveyor_counts
      UNION ALL
      SELECT queue, task, status, n FROM {schema}.conveyor_count_deltas) AS parts
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY queue, status  -- unless :per_task
GROUP BY queue, task, status  -- if :per_task
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
         RETURNING queue, status, task, n, entered, at),
counted AS (INSERT INTO {schema}.conveyor_counts AS c (queue, status, task, n)
            SELECT queue, status, task, sum(n) FROM gone GROUP BY queue, status, task
            ORDER BY queue, status, task
            ON CONFLICT (queue, status, task) DO UPDATE SET n = c.n + excluded.n),
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
-- Per queue with pending jobs: since when the oldest job that is due has been due (an
-- index probe each, stepping over jobs not yet due) and how many are not yet due (an
-- index range).
SELECT q.queue,
       (SELECT j.run_at FROM {schema}.conveyor_jobs AS j
        WHERE j.status = 'pending' AND j.run_at <= now() AND j.queue = q.queue
        ORDER BY j.id LIMIT 1) AS oldest_pending_at,
       (SELECT count(*) FROM {schema}.conveyor_jobs AS j
        WHERE j.queue = q.queue AND j.status = 'pending' AND j.run_at > j.created_at
          AND j.run_at > now()) AS scheduled
FROM (SELECT queue FROM (SELECT queue, n FROM {schema}.conveyor_counts WHERE status = 'pending'
                         UNION ALL
                         SELECT queue, n FROM {schema}.conveyor_count_deltas
                         WHERE status = 'pending') AS parts
      WHERE true
        AND queue = :queue  -- if :queue
      GROUP BY queue HAVING sum(n) > 0) AS q;

-- name: expired_summary
SELECT queue, count(*) AS n FROM {schema}.conveyor_jobs
WHERE status = 'running' AND lease_expires_at < now()
  AND queue = :queue  -- if :queue
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
WHERE minute >= :since::timestamptz
  AND queue = :queue  -- if :queue
GROUP BY minute
ORDER BY minute;

-- name: db_now
SELECT now() AS db_now;

-- name: throughput_hours
-- Jobs completed and failed per hour since :since: the hourly roll-ups, the per-minute
-- rows of the last day, and the deltas not yet folded, summed by hour.
SELECT hour, sum(completed) AS completed, sum(failed) AS failed
FROM (SELECT hour, queue, completed, failed FROM {schema}.conveyor_throughput_hours
      WHERE hour >= :since::timestamptz
      UNION ALL
      SELECT date_trunc('hour', minute), queue, completed, failed
      FROM {schema}.conveyor_throughput
      WHERE minute >= :since::timestamptz
      UNION ALL
      SELECT date_trunc('hour', at), queue,
             CASE WHEN status = 'completed' THEN entered ELSE 0 END,
             CASE WHEN status = 'failed' THEN entered ELSE 0 END
      FROM {schema}.conveyor_count_deltas
      WHERE status IN ('completed', 'failed') AND entered > 0
        AND at >= :since::timestamptz) AS parts
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY hour
ORDER BY hour;

-- name: roll_up_throughput
-- Per-minute rows before :before (a day ago) move into their hour's row: deleted and
-- added in one statement, so two roll-ups at once never count a minute twice (the
-- second finds the rows gone).
WITH gone AS (DELETE FROM {schema}.conveyor_throughput
              WHERE minute < :before::timestamptz
              RETURNING minute, queue, completed, failed)
INSERT INTO {schema}.conveyor_throughput_hours AS h (hour, queue, completed, failed)
SELECT date_trunc('hour', minute), queue, sum(completed), sum(failed)
FROM gone
GROUP BY 1, 2
ORDER BY 1, 2
ON CONFLICT (hour, queue) DO UPDATE
SET completed = h.completed + excluded.completed, failed = h.failed + excluded.failed;

-- name: prune_throughput_hours
-- Then hourly rows before :prune_before (roll_up_throughput's second statement).
DELETE FROM {schema}.conveyor_throughput_hours WHERE hour < :prune_before::timestamptz;

-- name: search_payload
-- Jobs whose payload's top-level :field reads :value, among the :scan newest below id
-- :before: a bounded walk of the primary key (or of the filters' index) backwards, the
-- JSON read only for the rows walked. The caller goes on from scan_floor.
SELECT * FROM (SELECT * FROM {schema}.conveyor_jobs
               WHERE id < :before
                 AND queue = :queue               -- if :queue
                 AND status = :status             -- if :status
                 AND task = :task                 -- if :task
               ORDER BY id DESC
               LIMIT :scan) AS walked
WHERE payload ->> (:field::text) = :value::text
ORDER BY id DESC
LIMIT :limit;

-- name: scan_floor
SELECT min(id) AS floor, count(*) AS n
FROM (SELECT id FROM {schema}.conveyor_jobs
      WHERE id < :before
        AND queue = :queue                        -- if :queue
        AND status = :status                      -- if :status
        AND task = :task                          -- if :task
      ORDER BY id DESC
      LIMIT :scan) AS walked;

-- name: task_timings
-- Per task over the :sample jobs that finished last since :since (the finished_at index,
-- backwards): runs, failures, and the nearest-rank p50 and p95 (percentile_disc) of the
-- completed runs' run time.
SELECT task, count(*) AS runs, count(*) FILTER (WHERE status = 'failed') AS failures,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY took)
           FILTER (WHERE status = 'completed' AND took IS NOT NULL) AS p50,
       percentile_disc(0.95) WITHIN GROUP (ORDER BY took)
           FILTER (WHERE status = 'completed' AND took IS NOT NULL) AS p95
FROM (SELECT task, status, extract(epoch FROM finished_at - started_at)::float8 AS took
      FROM {schema}.conveyor_jobs
      WHERE finished_at IS NOT NULL AND finished_at >= :since::timestamptz
        AND status IN ('completed', 'failed')
        AND queue = :queue                -- if :queue
        AND task = :task                  -- if :task
      ORDER BY finished_at DESC
      LIMIT :sample) AS recent
GROUP BY task
ORDER BY task;
