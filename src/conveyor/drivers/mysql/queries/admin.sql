-- An operator's changes to jobs. {now} is the database clock, UTC_TIMESTAMP(6).
-- A statement that PostgreSQL writes as UPDATE … RETURNING is three here, run by its
-- handler in handlers.py in one transaction: <name>_lock picks and locks the rows
-- (SELECT … FOR UPDATE), <name>_update changes exactly those (:locked, their ids), and
-- a SELECT reads them back.

-- name: reopen_job_lock
-- An explicit retry: a final job (:id, or each of :ids) becomes pending again with a
-- fresh set of attempts; with :keep_attempts, only a failed or cancelled job that has
-- attempts left, its attempts spent kept.
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE true
  AND id = :id  -- if :id
  AND id IN (SELECT id FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)  -- if :ids
  AND status IN {from_retry}  -- unless :keep_attempts
  AND status IN {from_retry_within_attempts} AND attempts < max_attempts  -- if :keep_attempts
ORDER BY id
FOR UPDATE;

-- name: reopen_job_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'pending',
    attempts = 0,  -- unless :keep_attempts
    run_at = {now}, result = NULL, finished_at = NULL,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL, updated_at = {now}
WHERE id IN :locked
  AND status IN {from_retry}  -- unless :keep_attempts
  AND status IN {from_retry_within_attempts}  -- if :keep_attempts
;

-- name: cancel_jobs_lock
-- Active jobs cancelled: the job :id, the steps of the run :workflow_id not final yet, or
-- every job of :queue with :key. A running one keeps its claim id, so its worker's later
-- writes are refused.
-- The cancel_jobs handler locks them here, then cancels them with cancel_job_update.
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE true
  AND id = :id AND status IN {from_cancel}  -- if :id
  AND workflow_id = :workflow_id AND status IN {from_cancel}  -- if :workflow_id
  AND queue = :queue AND `key` = :key AND status IN {from_cancel_by_key}  -- if :key
ORDER BY id
FOR UPDATE;

-- name: cancel_job_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'cancelled', finished_at = {now}, lease_expires_at = NULL, updated_at = {now}
WHERE id IN :locked
  AND status IN {from_cancel}  -- unless :key
  AND status IN {from_cancel_by_key}  -- if :key
;

-- name: complete_by_key_lock
-- :statuses: the states a job may be completed from (active ones; failed ones too
-- when the caller reconciles work done elsewhere).
SELECT id, queue, task, status, has_dependents FROM conveyor_jobs
WHERE queue = :queue AND `key` = :key
  AND status IN (SELECT s FROM JSON_TABLE(:statuses, '$[*]' COLUMNS (s {text} PATH '$')) AS t)
FOR UPDATE;

-- name: complete_by_key_update
UPDATE conveyor_jobs FORCE INDEX (PRIMARY)
SET status = 'completed', result = :result, error = NULL, error_kind = NULL,
    finished_at = {now}, lease_expires_at = NULL, updated_at = {now}
WHERE id IN :locked
  AND status IN (SELECT s FROM JSON_TABLE(:statuses, '$[*]' COLUMNS (s {text} PATH '$')) AS t);

-- name: sealed_jobs
-- Jobs whose payload or result is encrypted (conveyor.crypto), by id, after :after.
SELECT id, payload, result FROM conveyor_jobs
WHERE id > :after AND (instr(payload, :marker) > 0 OR instr(result, :marker) > 0)
ORDER BY id
LIMIT :limit;

-- name: reseal
-- The payload (or, with :result, the result) sealed again (conveyor reencrypt), if it
-- is still what was read.
UPDATE conveyor_jobs
SET payload = :new WHERE id = :id AND payload = :old  -- unless :result
SET result = :new WHERE id = :id AND result = :old  -- if :result
;

