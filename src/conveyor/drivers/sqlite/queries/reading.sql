-- Reading jobs and counts.

-- name: get_job
-- One job (:id), the jobs :ids (a JSON array), or the steps of the run :workflow_id.
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE id = :id  -- if :id
WHERE id IN (SELECT value FROM json_each(:ids))  -- if :ids
WHERE workflow_id = :workflow_id  -- if :workflow_id
ORDER BY id  -- if :workflow_id
;

-- name: list_jobs
-- Each filter is a line of its own, kept only when given (see Statements): every
-- combination is a plain conjunction that an index serves.
SELECT * FROM conveyor_jobs
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
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE status = 'pending' AND run_at > created_at AND run_at > {now}
  AND queue = :queue                      -- if :queue
  AND task = :task                        -- if :task
  AND attempts = 0                        -- if :first_only
  AND attempts > 0                        -- if :retries_only
ORDER BY run_at, id
LIMIT :limit;

-- name: dependents
SELECT job_id FROM conveyor_dependencies WHERE depends_on = :id ORDER BY job_id;

-- name: subscribers
SELECT subscriber FROM conveyor_subscribers
WHERE job_id = :job_id
  AND subscriber = :subscriber  -- if :subscriber
ORDER BY created_at, subscriber;

-- name: count_by_queue_status
-- Jobs per queue and status (of :queue when given), or with :per_task per queue, task and
-- status. The counts are kept per task: a queue's are the sum of its tasks'.
SELECT queue, status, sum(n) AS n FROM conveyor_counts  -- unless :per_task
SELECT queue, task, status, sum(n) AS n FROM conveyor_counts  -- if :per_task
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY queue, status  -- unless :per_task
GROUP BY queue, task, status  -- if :per_task
HAVING sum(n) <> 0;

-- name: count_deltas
-- Counts not yet folded into conveyor_counts (SQLite keeps none: its triggers update
-- the counts directly).
SELECT 0 AS n;

-- name: fold_counts
SELECT 0 AS folded;

-- name: pending_summary
-- Per queue with pending jobs: since when the oldest job that is due has been due (an
-- index probe each, stepping over jobs not yet due) and how many are not yet due (an
-- index range).
SELECT c.queue,
       (SELECT j.run_at FROM conveyor_jobs AS j
        WHERE j.status = 'pending' AND j.run_at <= {now} AND j.queue = c.queue
        ORDER BY j.id LIMIT 1) AS oldest_pending_at,
       (SELECT count(*) FROM conveyor_jobs AS j
        WHERE j.queue = c.queue AND j.status = 'pending' AND j.run_at > j.created_at
          AND j.run_at > {now}) AS scheduled
FROM (SELECT queue FROM conveyor_counts
      WHERE status = 'pending'
        AND queue = :queue  -- if :queue
      GROUP BY queue HAVING sum(n) > 0) AS c;

-- name: expired_summary
SELECT queue, count(*) AS n FROM conveyor_jobs
WHERE status = 'running' AND lease_expires_at < {now}
  AND queue = :queue  -- if :queue
GROUP BY queue;

-- name: throughput
-- Jobs completed and failed per minute since :since.
SELECT minute, sum(completed) AS completed, sum(failed) AS failed
FROM conveyor_throughput
WHERE minute >= :since
  AND queue = :queue  -- if :queue
GROUP BY minute
ORDER BY minute;

-- name: db_now
SELECT {now} AS db_now;

-- name: throughput_hours
-- Jobs completed and failed per hour since :since: the hourly roll-ups, and the
-- per-minute rows of the last day summed by hour (at most 1,440 per queue).
SELECT hour, sum(completed) AS completed, sum(failed) AS failed
FROM (SELECT hour, queue, completed, failed FROM conveyor_throughput_hours
      WHERE hour >= :since
      UNION ALL
      SELECT CAST(minute / 3600 AS INTEGER) * 3600 AS hour, queue, completed, failed
      FROM conveyor_throughput
      WHERE minute >= :since) AS parts
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY hour
ORDER BY hour;

-- name: roll_up_throughput
-- Per-minute rows before :before (a day ago) are added to their hour's row ...
INSERT INTO conveyor_throughput_hours (hour, queue, completed, failed)
SELECT CAST(minute / 3600 AS INTEGER) * 3600, queue, sum(completed), sum(failed)
FROM conveyor_throughput
WHERE minute < :before
GROUP BY 1, 2
ON CONFLICT (hour, queue) DO UPDATE
SET completed = completed + excluded.completed, failed = failed + excluded.failed;

-- name: drop_rolled_minutes
-- ... and deleted, in the same write transaction (SQLite has one writer at a time, so
-- two roll-ups never count a minute twice).
DELETE FROM conveyor_throughput WHERE minute < :before;

-- name: prune_throughput_hours
-- Then hourly rows before :prune_before (roll_up_throughput's last statement).
DELETE FROM conveyor_throughput_hours WHERE hour < :prune_before;

-- name: search_payload
-- Jobs whose payload's top-level :field reads :value, among the :scan newest below id
-- :before: a bounded walk of the primary key (or of the filters' index) backwards, the
-- JSON read only for the rows walked. The caller goes on from scan_floor.
SELECT * FROM (SELECT * FROM conveyor_jobs
               WHERE id < :before
                 AND queue = :queue               -- if :queue
                 AND status = :status             -- if :status
                 AND task = :task                 -- if :task
               ORDER BY id DESC
               LIMIT :scan) AS walked
WHERE CAST(json_extract(payload, '$."' || :field || '"') AS TEXT) = :value
ORDER BY id DESC
LIMIT :limit;

-- name: scan_floor
SELECT min(id) AS floor, count(*) AS n
FROM (SELECT id FROM conveyor_jobs
      WHERE id < :before
        AND queue = :queue                        -- if :queue
        AND status = :status                      -- if :status
        AND task = :task                          -- if :task
      ORDER BY id DESC
      LIMIT :scan) AS walked;

-- name: task_timings
-- Per task over the :sample jobs that finished last since :since (the finished_at index,
-- backwards): runs, failures, and the nearest-rank p50 and p95 of the completed runs'
-- run time, by window functions.
WITH recent AS (
    SELECT task, status, finished_at - started_at AS took FROM conveyor_jobs
    WHERE finished_at IS NOT NULL AND finished_at >= :since
      AND status IN ('completed', 'failed')
      AND queue = :queue                  -- if :queue
      AND task = :task                    -- if :task
    ORDER BY finished_at DESC
    LIMIT :sample),
ranked AS (
    SELECT task, took,
           row_number() OVER (PARTITION BY task ORDER BY took) AS r,
           count(*) OVER (PARTITION BY task) AS n
    FROM recent WHERE status = 'completed' AND took IS NOT NULL)
SELECT t.task, t.runs, t.failures,
       (SELECT min(k.took) FROM ranked AS k WHERE k.task = t.task AND k.r >= 0.50 * k.n) AS p50,
       (SELECT min(k.took) FROM ranked AS k WHERE k.task = t.task AND k.r >= 0.95 * k.n) AS p95
FROM (SELECT task, count(*) AS runs, sum(status = 'failed') AS failures
      FROM recent GROUP BY task) AS t
ORDER BY t.task;
