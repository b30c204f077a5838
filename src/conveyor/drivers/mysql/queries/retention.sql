-- Retention policies and the pruning they lead to.

-- name: save_retention
-- A new policy only while fewer than :cap exist; the one of (queue, task, status) is
-- replaced whatever their number.
INSERT INTO conveyor_retention
    (queue, task, status, keep_seconds, archive, retire_keys, updated_at)
SELECT :queue, :task, :status, :keep_seconds, :archive, :retire_keys, {now}
FROM DUAL
WHERE (SELECT count(*) FROM conveyor_retention) < :cap
   OR EXISTS (SELECT 1 FROM conveyor_retention
              WHERE queue = :queue AND task = :task AND status = :status)
ON DUPLICATE KEY UPDATE
    keep_seconds = VALUES(keep_seconds), archive = VALUES(archive),
    retire_keys = VALUES(retire_keys), updated_at = VALUES(updated_at);

-- name: delete_retention_lock
SELECT status FROM conveyor_retention
WHERE queue = :queue AND task = :task
  AND status = :status -- if :status
FOR UPDATE;

-- name: delete_retention_delete
DELETE FROM conveyor_retention
WHERE queue = :queue AND task = :task
  AND status = :status -- if :status
;

-- name: list_retention
-- Every policy; with :lock, writers of policies take their turn: each one's guard then
-- counts what the others committed (READ COMMITTED: each statement reads the latest
-- commits).
SELECT queue, task, status, keep_seconds, archive, retire_keys, updated_at
FROM conveyor_retention
ORDER BY status, queue, task
FOR UPDATE  -- if :lock
;

-- name: expired_jobs
-- Final jobs of one policy, oldest ids first, that no more specific policy covers.
SELECT * FROM conveyor_jobs AS j
WHERE j.status = :status
  AND j.id > :after
  AND j.finished_at <= {now} - INTERVAL :keep_seconds SECOND
  AND j.queue = :queue -- if :queue
  AND j.task = :task -- if :task
  AND NOT EXISTS (SELECT 1 FROM JSON_TABLE(:exclude, '$[*]' COLUMNS (
                      q {text} PATH '$[0]', t {text} PATH '$[1]')) AS e
                  WHERE e.q IN ('', j.queue) AND e.t IN ('', j.task))
ORDER BY j.id
LIMIT :limit;

-- name: lock_expired
-- The same among :ids, each looked up by id, locked (rows held elsewhere skipped).
SELECT j.* FROM JSON_TABLE(:ids, '$[*]' COLUMNS (i BIGINT PATH '$')) AS t
STRAIGHT_JOIN conveyor_jobs AS j ON j.id = t.i
WHERE j.status = :status
  AND j.finished_at <= {now} - INTERVAL :keep_seconds SECOND
  AND j.queue = :queue -- if :queue
  AND j.task = :task -- if :task
  AND NOT EXISTS (SELECT 1 FROM JSON_TABLE(:exclude, '$[*]' COLUMNS (
                      q {text} PATH '$[0]', t {text} PATH '$[1]')) AS e
                  WHERE e.q IN ('', j.queue) AND e.t IN ('', j.task))
ORDER BY j.id
FOR UPDATE SKIP LOCKED;

-- name: retire_keys
-- The job_id column is assigned last: the others compare against the old one.
INSERT INTO conveyor_retired_keys
    (queue, `key`, job_id, task, status, attempts, max_attempts, created_at, finished_at,
     retired_at)
SELECT j.queue, j.`key`, j.id, j.task, j.status, j.attempts, j.max_attempts, j.created_at,
       j.finished_at, {now}
FROM conveyor_jobs AS j
WHERE j.id IN (SELECT i FROM JSON_TABLE(:ids, '$[*]' COLUMNS (i BIGINT PATH '$')) AS t)
  AND j.`key` IS NOT NULL
ORDER BY j.id
ON DUPLICATE KEY UPDATE
    task = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(task), conveyor_retired_keys.task),
    status = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(status), conveyor_retired_keys.status),
    attempts = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(attempts), conveyor_retired_keys.attempts),
    max_attempts = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(max_attempts), conveyor_retired_keys.max_attempts),
    created_at = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(created_at), conveyor_retired_keys.created_at),
    finished_at = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(finished_at), conveyor_retired_keys.finished_at),
    retired_at = IF(VALUES(job_id) > conveyor_retired_keys.job_id, VALUES(retired_at), conveyor_retired_keys.retired_at),
    job_id = GREATEST(VALUES(job_id), conveyor_retired_keys.job_id);

-- name: retired_key
SELECT *, {now} AS db_now FROM conveyor_retired_keys
WHERE queue = :queue AND key_hash = UNHEX(SHA2(:key, 256)) AND `key` = :key
  AND task = :task -- if :task
;
