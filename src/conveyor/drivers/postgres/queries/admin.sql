-- An operator's changes to jobs.

-- name: reopen_job
-- An explicit retry: a final job becomes pending again with a fresh set of attempts.
UPDATE {schema}.conveyor_jobs
SET status = 'pending', attempts = 0, run_at = now(), result = NULL, finished_at = NULL,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE id = :id AND status IN {from_retry}
RETURNING *;

-- name: reopen_job_within_attempts
-- A retry that keeps the attempts spent: only a failed or cancelled job that has
-- attempts left becomes pending again.
UPDATE {schema}.conveyor_jobs
SET status = 'pending', run_at = now(), result = NULL, finished_at = NULL,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE id = :id AND status IN {from_retry_within_attempts} AND attempts < max_attempts
RETURNING *;

-- name: cancel_job
UPDATE {schema}.conveyor_jobs
SET status = 'cancelled', finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE id = :id AND status IN {from_cancel}
RETURNING *;

-- name: complete_by_key
-- :statuses: the states a job may be completed from (active ones; failed ones too
-- when the caller reconciles work done elsewhere).
UPDATE {schema}.conveyor_jobs
SET status = 'completed', result = :result::jsonb, error = NULL, error_kind = NULL,
    finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE queue = :queue AND key = :key
  AND status IN (SELECT jsonb_array_elements_text(:statuses::jsonb))
RETURNING id, queue;

-- name: prune_jobs
DELETE FROM {schema}.conveyor_jobs
WHERE status IN (SELECT jsonb_array_elements_text(:statuses::jsonb))
  AND finished_at <= now() - make_interval(secs => :older_than_s);

-- name: sealed_jobs
-- Jobs whose payload or result is encrypted (conveyor.crypto), by id, after :after.
SELECT id, payload, result FROM {schema}.conveyor_jobs
WHERE id > :after
  AND (strpos(payload::text, :marker) > 0 OR strpos(result::text, :marker) > 0)
ORDER BY id
LIMIT :limit;

-- name: reseal_payload
-- The payload sealed again (conveyor reencrypt), if it is still what was read.
UPDATE {schema}.conveyor_jobs SET payload = :new::jsonb
WHERE id = :id AND payload = :old::jsonb;

-- name: reseal_result
-- The result sealed again (conveyor reencrypt), if it is still what was read.
UPDATE {schema}.conveyor_jobs SET result = :new::jsonb
WHERE id = :id AND result = :old::jsonb;
