-- Reading jobs and counts.

-- name: get_job
SELECT *, {now} AS db_now FROM conveyor_jobs WHERE id = :id;

-- name: jobs_by_id
SELECT * FROM conveyor_jobs WHERE id IN (SELECT value FROM json_each(:ids));

-- name: list_jobs
-- Each filter is a line of its own, kept only when given (see Statements): every
-- combination is a plain conjunction that an index serves.
SELECT * FROM conveyor_jobs
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
SELECT * FROM conveyor_jobs
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
SELECT job_id FROM conveyor_dependencies WHERE depends_on = :id ORDER BY job_id;

-- name: subscribers
SELECT subscriber FROM conveyor_subscribers
WHERE job_id = :job_id
ORDER BY created_at, subscriber;

-- name: count_by_queue_status
SELECT queue, status, n FROM conveyor_counts
WHERE n <> 0 AND (:queue IS NULL OR queue = :queue);

-- name: count_deltas
-- Counts not yet folded into conveyor_counts (SQLite keeps none: its triggers update
-- the counts directly).
SELECT 0 AS n;

-- name: fold_counts
SELECT 0 AS folded;

-- name: pending_summary
-- Per queue with pending jobs: the oldest (an index probe each) and how many are not
-- yet due (an index range).
SELECT c.queue,
       (SELECT j.created_at FROM conveyor_jobs AS j
        WHERE j.status = 'pending' AND j.queue = c.queue
        ORDER BY j.id LIMIT 1) AS oldest_pending_at,
       (SELECT count(*) FROM conveyor_jobs AS j
        WHERE j.queue = c.queue AND j.status = 'pending' AND j.run_at > j.created_at
          AND j.run_at > {now}) AS scheduled
FROM conveyor_counts AS c
WHERE c.status = 'pending' AND c.n > 0 AND (:queue IS NULL OR c.queue = :queue);

-- name: expired_summary
SELECT queue, count(*) AS n FROM conveyor_jobs
WHERE status = 'running' AND lease_expires_at < {now} AND (:queue IS NULL OR queue = :queue)
GROUP BY queue;

-- name: throughput
-- Jobs completed and failed per minute since :since.
SELECT minute, sum(completed) AS completed, sum(failed) AS failed
FROM conveyor_throughput
WHERE minute >= :since AND (:queue IS NULL OR queue = :queue)
GROUP BY minute
ORDER BY minute;

-- name: prune_throughput
DELETE FROM conveyor_throughput WHERE minute < {now} - :older_than_s;

-- name: db_now
SELECT {now} AS db_now;
