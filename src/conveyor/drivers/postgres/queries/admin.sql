-- An operator's changes to jobs.

-- name: reopen_job
-- An explicit retry: a final job (:id, or each of :ids) becomes pending again with a
-- fresh set of attempts; with :keep_attempts, only a failed or cancelled job that has
-- attempts left, its attempts spent kept.
UPDATE {schema}.conveyor_jobs
SET status = 'pending',
    attempts = 0,  -- unless :keep_attempts
    run_at = now(), result = NULL, finished_at = NULL,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE true
  AND id = :id  -- if :id
  AND id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint)  -- if :ids
  AND status IN {from_retry}  -- unless :keep_attempts
  AND status IN {from_retry_within_attempts} AND attempts < max_attempts  -- if :keep_attempts
RETURNING *  -- if :id
RETURNING id, queue  -- unless :id
;

-- name: cancel_jobs
-- Active jobs cancelled: the job :id, the steps of the run :workflow_id not final yet, or
-- every job of :queue with :key. A running one keeps its claim id, so its worker's later
-- writes are refused.
UPDATE {schema}.conveyor_jobs
SET status = 'cancelled', finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE true
  AND id = :id AND status IN {from_cancel}  -- if :id
  AND workflow_id = :workflow_id AND status IN {from_cancel}  -- if :workflow_id
  AND queue = :queue AND key = :key AND status IN {from_cancel_by_key}  -- if :key
RETURNING *  -- if :id
RETURNING id, queue  -- unless :id
;

-- name: complete_by_key
-- :statuses: the states a job may be completed from (active ones; failed ones too
-- when the caller reconciles work done elsewhere).
UPDATE {schema}.conveyor_jobs
SET status = 'completed', result = :result::jsonb, error = NULL, error_kind = NULL,
    finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE queue = :queue AND key = :key
  AND status IN (SELECT jsonb_array_elements_text(:statuses::jsonb))
RETURNING id, queue;

-- name: fail_by_key
-- Every active job with the key, failed for good: no retry, whatever attempts remain.
-- The error joins the job's history; a running job keeps its claim id, so its
-- worker's later writes are refused.
UPDATE {schema}.conveyor_jobs
SET status = 'failed', error = :error, error_kind = 'terminal',
    errors = {errors_kept} || jsonb_build_array(jsonb_build_object(
        'attempt', attempts, 'error', right(:error::text, 4000), 'kind', 'terminal',
        'at', now(), 'worker', worker)),
    finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE queue = :queue AND key = :key AND status IN {from_fail_by_key}
RETURNING id, queue;

-- name: sealed_jobs
-- Jobs whose payload or result is encrypted (conveyor.crypto), by id, after :after.
SELECT id, payload, result FROM {schema}.conveyor_jobs
WHERE id > :after
  AND (strpos(payload::text, :marker) > 0 OR strpos(result::text, :marker) > 0)
ORDER BY id
LIMIT :limit;

-- name: reseal
-- The payload (or, with :result, the result) sealed again (conveyor reencrypt), if it
-- is still what was read.
UPDATE {schema}.conveyor_jobs
SET payload = :new::jsonb WHERE id = :id AND payload = :old::jsonb  -- unless :result
SET result = :new::jsonb WHERE id = :id AND result = :old::jsonb  -- if :result
;

-- name: run_now
-- A pending job due now: a scheduled job, or one waiting to retry, stops waiting
-- (a job already due keeps its run_at). Dependencies still hold it.
UPDATE {schema}.conveyor_jobs
SET run_at = LEAST(run_at, now()), updated_at = now()
WHERE id = :id AND status IN {from_run_now}
RETURNING *;

-- name: run_now_jobs
-- At most :limit pending jobs not yet due, soonest first, due now. The picked rows
-- are a materialized CTE, read once (as a subquery in FROM, a nested loop may rescan it
-- and, past the rows it already changed, pick more than :limit). They come from the
-- deferred index (pending jobs whose run_at lies past their creation); rows another
-- transaction holds are left for the next request.
WITH picked AS MATERIALIZED (
    SELECT id FROM {schema}.conveyor_jobs
    WHERE status = 'pending' AND run_at > created_at AND run_at > now()
      AND queue = :queue                  -- if :queue
      AND task = :task                    -- if :task
      AND attempts = 0                    -- if :first_only
      AND attempts > 0                    -- if :retries_only
    ORDER BY run_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
UPDATE {schema}.conveyor_jobs AS j
SET run_at = now(), updated_at = now()
FROM picked
WHERE j.id = picked.id AND j.status IN {from_run_now}
RETURNING j.id, j.queue;

-- name: delete_jobs
-- Final jobs, the one :id or those among :ids (a JSON array); their subscribers and
-- dependency edges go with them (ON DELETE CASCADE).
DELETE FROM {schema}.conveyor_jobs
WHERE status IN {from_delete}
  AND id = :id                                                                -- if :id
  AND id = ANY (ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb)::bigint)) -- if :ids
;
