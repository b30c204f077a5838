-- Retention policies and the pruning they lead to.

-- name: save_retention
-- A new policy only while fewer than :cap exist; the one of (queue, task, status) is
-- replaced whatever their number.
INSERT INTO conveyor_retention (queue, task, status, keep_seconds, archive, retire_keys, updated_at)
SELECT :queue, :task, :status, :keep_seconds, :archive, :retire_keys, {now}
WHERE (SELECT count(*) FROM conveyor_retention) < :cap
   OR EXISTS (SELECT 1 FROM conveyor_retention
              WHERE queue = :queue AND task = :task AND status = :status)
ON CONFLICT (queue, task, status) DO UPDATE
SET keep_seconds = excluded.keep_seconds, archive = excluded.archive,
    retire_keys = excluded.retire_keys, updated_at = excluded.updated_at;

-- name: delete_retention
DELETE FROM conveyor_retention
WHERE queue = :queue AND task = :task
  AND status = :status -- if :status
RETURNING status;

-- name: list_retention
-- Every policy; with :lock, writers of policies take their turn (SQLite's write
-- transaction is the lock).
SELECT queue, task, status, keep_seconds, archive, retire_keys, updated_at
FROM conveyor_retention
ORDER BY status, queue, task
;

-- name: expired_jobs
-- Final jobs of one policy, oldest ids first, that no more specific policy covers.
SELECT * FROM conveyor_jobs AS j
WHERE j.status = :status
  AND j.id > :after
  AND j.finished_at <= {now} - :keep_seconds
  AND j.queue = :queue -- if :queue
  AND j.task = :task -- if :task
  AND NOT EXISTS (SELECT 1 FROM json_each(:exclude) AS e
                  WHERE json_extract(e.value, '$[0]') IN ('', j.queue)
                    AND json_extract(e.value, '$[1]') IN ('', j.task))
ORDER BY j.id
LIMIT :limit;

-- name: lock_expired
-- The same among :ids, each looked up by id (SQLite's write transaction is the lock).
SELECT j.* FROM json_each(:ids) AS i CROSS JOIN conveyor_jobs AS j ON j.id = i.value
WHERE j.status = :status
  AND j.finished_at <= {now} - :keep_seconds
  AND j.queue = :queue -- if :queue
  AND j.task = :task -- if :task
  AND NOT EXISTS (SELECT 1 FROM json_each(:exclude) AS e
                  WHERE json_extract(e.value, '$[0]') IN ('', j.queue)
                    AND json_extract(e.value, '$[1]') IN ('', j.task))
ORDER BY j.id;

-- name: retire_keys
INSERT INTO conveyor_retired_keys
    (queue, key, job_id, task, status, attempts, max_attempts, created_at, finished_at,
     retired_at)
SELECT queue, key, id, task, status, attempts, max_attempts, created_at, finished_at, {now}
FROM conveyor_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND key IS NOT NULL
ORDER BY id
ON CONFLICT (queue, key) DO UPDATE
SET job_id = excluded.job_id, task = excluded.task, status = excluded.status,
    attempts = excluded.attempts, max_attempts = excluded.max_attempts,
    created_at = excluded.created_at, finished_at = excluded.finished_at,
    retired_at = excluded.retired_at
WHERE excluded.job_id > conveyor_retired_keys.job_id;

-- name: retired_key
SELECT *, {now} AS db_now FROM conveyor_retired_keys
WHERE queue = :queue AND key = :key
  AND task = :task -- if :task
;
