-- An operator's statements: per-task counts, changes by key, the console's runs,
-- deletes and searches, run times, and hourly throughput. {now} is the database
-- clock, UTC_TIMESTAMP(6). A name that PostgreSQL writes as UPDATE/DELETE … RETURNING is
-- several statements here, run by its handler in operator_handlers.py in one
-- transaction: <name>_lock picks and locks the rows, <name>_update (or _delete) changes
-- exactly those (:locked, their ids), and a SELECT reads them back.

-- name: fail_by_key_lock
-- Every active job with the key, failed for good: no retry, whatever attempts remain.
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE queue = :queue AND `key` = :key AND status IN {from_fail_by_key}
ORDER BY id
FOR UPDATE;

-- name: fail_by_key_update
-- The error joins the job's history (written first: MySQL assigns from left to right);
-- a running job keeps its claim id, so its worker's later writes are refused.
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET errors = JSON_ARRAY_APPEND({errors_kept}, '$', JSON_OBJECT(
        'attempt', attempts, 'error', right(:error, 4000), 'kind', 'terminal',
        'at', {now}, 'worker', worker)),
    status = 'failed', error = :error, error_kind = 'terminal',
    finished_at = {now}, lease_expires_at = NULL, updated_at = {now}
WHERE id IN :locked AND status IN {from_fail_by_key};

-- name: run_now_lock
-- A pending job due now: a scheduled job, or one waiting to retry, stops waiting
-- (a job already due keeps its run_at). Dependencies still hold it.
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE id = :id AND status IN {from_run_now}
FOR UPDATE;

-- name: run_now_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET run_at = LEAST(run_at, {now}), updated_at = {now}
WHERE id IN :locked AND status IN {from_run_now};

-- name: run_now_jobs_lock
-- At most :limit pending jobs not yet due, soonest first; rows another transaction
-- holds are left for the next request.
-- (pending_run_at: run_at while pending, NULL after; a queue's are indexed, migration
-- 0014.)
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE pending_run_at > {now} AND run_at > created_at
  AND queue = :queue                  -- if :queue
  AND task = :task                    -- if :task
  AND attempts = 0                    -- if :first_only
  AND attempts > 0                    -- if :retries_only
ORDER BY pending_run_at, id
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: run_now_jobs_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET run_at = {now}, updated_at = {now}
WHERE id IN :locked AND status IN {from_run_now};

-- name: delete_jobs
-- Final jobs, the one :id or those among :ids (a JSON array); their subscribers and
-- dependency edges go with them (ON DELETE CASCADE). The ids are joined as a table:
-- MariaDB runs a one-table DELETE's IN (subquery) as a dependent subquery, a scan of
-- every job that waits on every row another transaction has locked; the join reads
-- each id's row by its key. A schema before migration 0018 only: the delete trigger
-- counts each row; from 0018 on the delete_jobs handler runs the statements below.
DELETE j FROM JSON_TABLE(:ids, '$[*]' COLUMNS (i BIGINT PATH '$')) AS t  -- if :ids
JOIN conveyor_jobs AS j ON j.id = t.i                                    -- if :ids
DELETE j FROM conveyor_jobs AS j FORCE INDEX (PRIMARY)                   -- if :id
WHERE j.status IN {from_delete}
  AND j.id = :id                                                         -- if :id
;

-- name: delete_jobs_lock
-- The same jobs, locked, with what their counts are kept by.
SELECT j.id, j.queue, j.status, j.task                                   -- if :ids
FROM JSON_TABLE(:ids, '$[*]' COLUMNS (i BIGINT PATH '$')) AS t           -- if :ids
STRAIGHT_JOIN conveyor_jobs AS j ON j.id = t.i                           -- if :ids
SELECT j.id, j.queue, j.status, j.task FROM conveyor_jobs AS j           -- if :id
WHERE j.status IN {from_delete}
  AND j.id = :id                                                         -- if :id
FOR UPDATE;

-- name: deletes_counted
-- The delete trigger skips the rows of the statement that follows on this connection
-- (migration 0018): delete_jobs_locked counts them in one row per queue, status and task.
SET @conveyor_deletes_counted = 1;

-- name: delete_jobs_locked
DELETE j FROM conveyor_jobs AS j FORCE INDEX (PRIMARY)
WHERE j.id IN :locked AND j.status IN {from_delete};

-- name: deletes_uncounted
SET @conveyor_deletes_counted = NULL;

-- name: list_deferred
-- Pending jobs not yet due: scheduled (never tried) or waiting to retry (an attempt
-- failed), soonest first.
SELECT *, {now} AS db_now FROM conveyor_jobs
WHERE pending_run_at > {now} AND run_at > created_at
  AND queue = :queue                      -- if :queue
  AND task = :task                        -- if :task
  AND attempts = 0                        -- if :first_only
  AND attempts > 0                        -- if :retries_only
ORDER BY pending_run_at, id
LIMIT :limit;

-- name: search_payload
-- Jobs whose payload's top-level :field reads :value, among the :scan newest below id
-- :before: a bounded walk of the primary key (or of the filters' index) backwards, the
-- JSON read only for the rows walked. The caller goes on from scan_floor. The value
-- read is compared in the binary collation, and a JSON null matches nothing, as on the
-- other databases.
SELECT * FROM (SELECT * FROM conveyor_jobs
               WHERE id < :before
                 AND queue = :queue               -- if :queue
                 AND status = :status             -- if :status
                 AND task = :task                 -- if :task
               ORDER BY id DESC
               LIMIT :scan) AS walked
WHERE CONVERT(JSON_UNQUOTE(JSON_EXTRACT(payload, :path)) USING utf8mb4) COLLATE {collation}
      = :value
  AND JSON_TYPE(JSON_EXTRACT(payload, :path)) <> 'NULL'
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
-- run time (seconds), by window functions.
WITH recent AS (
    SELECT task, status,
           TIMESTAMPDIFF(MICROSECOND, started_at, finished_at) / 1e6 AS took
    FROM conveyor_jobs
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
FROM (SELECT task, count(*) AS runs, CAST(sum(status = 'failed') AS SIGNED) AS failures
      FROM recent GROUP BY task) AS t
ORDER BY t.task;

-- name: throughput_hours
-- Jobs completed and failed per hour since :since: the hourly roll-ups, the per-minute
-- rows of the last day, and the deltas not yet folded, summed by hour.
SELECT hour, CAST(sum(completed) AS SIGNED) AS completed,
       CAST(sum(failed) AS SIGNED) AS failed
FROM (SELECT hour, queue, completed, failed FROM conveyor_throughput_hours
      WHERE hour >= :since
      UNION ALL
      SELECT CAST(DATE_FORMAT(minute, '%Y-%m-%d %H:00:00') AS DATETIME), queue,
             completed, failed
      FROM conveyor_throughput
      WHERE minute >= :since
      UNION ALL
      SELECT CAST(DATE_FORMAT(at, '%Y-%m-%d %H:00:00') AS DATETIME), queue,
             CASE WHEN status = 'completed' THEN entered ELSE 0 END,
             CASE WHEN status = 'failed' THEN entered ELSE 0 END
      FROM conveyor_count_deltas
      WHERE status IN ('completed', 'failed') AND entered > 0
        AND at >= :since) AS parts
WHERE true
  AND queue = :queue  -- if :queue
GROUP BY hour
ORDER BY hour;

-- name: roll_up_throughput_lock
-- Per-minute rows before :before (a day ago) are locked, added to their hour's row,
-- then deleted (drop_rolled_minutes) in the same transaction: a second roll-up waits
-- for the first and then finds the rows gone, so no minute is counted twice.
SELECT DATE_FORMAT(minute, '%Y-%m-%d %H') AS hour, queue FROM conveyor_throughput
WHERE minute < :before
FOR UPDATE;

-- name: roll_up_throughput_add
INSERT INTO conveyor_throughput_hours (hour, queue, completed, failed)
SELECT CAST(DATE_FORMAT(minute, '%Y-%m-%d %H:00:00') AS DATETIME) AS h, queue,
       sum(completed) AS c, sum(failed) AS f
FROM conveyor_throughput
WHERE minute < :before
GROUP BY h, queue
ON DUPLICATE KEY UPDATE
    completed = conveyor_throughput_hours.completed + VALUES(completed),
    failed = conveyor_throughput_hours.failed + VALUES(failed);

-- name: drop_rolled_minutes
DELETE FROM conveyor_throughput WHERE minute < :before;

-- name: prune_throughput_hours
-- Then hourly rows before :prune_before (roll_up_throughput's last statement).
DELETE FROM conveyor_throughput_hours WHERE hour < :prune_before;

