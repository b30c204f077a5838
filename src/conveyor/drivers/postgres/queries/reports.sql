-- What the holder of a claim reports. Every statement names the claim and changes
-- nothing once that claim no longer holds the job.
--
-- Each also finds its jobs by the claims its items name (`{claims_of_items}`). Without
-- that, the planner read the whole index of running claims and joined the items to
-- it; but a job that ends leaves its entry there until the table is vacuumed, so a
-- report read every entry of the jobs finished since (over a hundred per job with
-- four workers, tests/drivers/test_postgres_plans.py). Keyed by claim, it reads its
-- own.

-- name: complete_jobs
-- :items is a JSON array of {"id", "claim_id", "result" (JSON text or null)}; :brief:
-- answer only what a worker needs of each job.
UPDATE {schema}.conveyor_jobs AS j
SET status = 'completed',
    result = item.result::jsonb,
    error = NULL,
    error_kind = NULL,
    finished_at = now(),
    lease_expires_at = NULL,
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb) AS item(id bigint, claim_id text, result text)
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.status IN {from_complete}
  AND j.claim_id = {claims_of_items}
RETURNING j.*  -- unless :brief
RETURNING j.id, j.queue, j.status  -- if :brief
;

-- name: fail_jobs
-- :items is a JSON array of {"id", "claim_id", "attempts", "again", "error",
-- "error_kind", "delay_s"}: back to pending after the delay when "again", else failed
-- for good (decided above, from the attempts read: the guard checks they still hold).
UPDATE {schema}.conveyor_jobs AS j
SET status = CASE WHEN item.again THEN 'pending' ELSE 'failed' END,
    run_at = CASE WHEN item.again
                  THEN now() + make_interval(secs => item.delay_s) ELSE j.run_at END,
    finished_at = CASE WHEN item.again THEN NULL ELSE now() END,
    claim_id = CASE WHEN item.again THEN NULL ELSE j.claim_id END,
    claimed_at = CASE WHEN item.again THEN NULL ELSE j.claimed_at END,
    worker = CASE WHEN item.again THEN NULL ELSE j.worker END,
    heartbeat_at = CASE WHEN item.again THEN NULL ELSE j.heartbeat_at END,
    lease_expires_at = NULL,
    error = item.error,
    error_kind = item.error_kind,
    errors = {errors_kept} || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempts, 'error', right(item.error, 4000), 'kind', item.error_kind,
        'at', now(), 'worker', j.worker)),
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb)
     AS item(id bigint, claim_id text, attempts integer, again boolean, error text,
             error_kind text, delay_s double precision)
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.attempts = item.attempts
  AND j.status IN {from_fail_retry}
  AND j.claim_id = {claims_of_items}
RETURNING j.*;

-- name: snooze_jobs
-- :items is a JSON array of {"id", "claim_id", "delay_s"}. Back to pending after the
-- delay without spending an attempt: waiting on something is not a failure. No delay
-- keeps a run_at already past: the job is due at once either way, and its run_at still
-- says when it first was (a schedule's slot, say).
UPDATE {schema}.conveyor_jobs AS j
SET status = 'pending',
    attempts = greatest(j.attempts - 1, 0),
    run_at = CASE WHEN item.delay_s > 0 THEN now() + make_interval(secs => item.delay_s)
                  ELSE least(j.run_at, now()) END,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb)
     AS item(id bigint, claim_id text, delay_s double precision)
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.status IN {from_snooze}
  AND j.claim_id = {claims_of_items}
RETURNING j.*;

-- name: heartbeat_jobs
-- :items is a JSON array of {"id", "claim_id"}; a null :extend_s keeps each claim's lease;
-- :brief: answer only the ids still held (a worker's background renewal).
UPDATE {schema}.conveyor_jobs AS j
SET heartbeat_at = now(),
    lease_expires_at = now() + make_interval(
        secs => coalesce(:extend_s::double precision, j.lease_seconds)),
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb) AS item(id bigint, claim_id text)
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.status IN {from_heartbeat}
  AND j.claim_id = {claims_of_items}
RETURNING j.*  -- unless :brief
RETURNING j.id  -- if :brief
;

-- name: progress_job
-- Absolute values, so a replayed call changes nothing; null leaves a field as it was.
-- Reporting progress also renews the lease.
UPDATE {schema}.conveyor_jobs
SET progress_total = coalesce(:total::integer, progress_total),
    progress_completed = coalesce(:completed::integer, progress_completed),
    progress_failed = coalesce(:failed::integer, progress_failed),
    progress_current = coalesce(:current::jsonb, progress_current),
    progress_checkpoint = coalesce(:checkpoint::jsonb, progress_checkpoint),
    progress_detail = coalesce(:detail::jsonb, progress_detail),
    heartbeat_at = now(),
    lease_expires_at = now() + make_interval(secs => lease_seconds),
    updated_at = now()
WHERE id = :id AND claim_id = :claim_id AND status IN {from_heartbeat}
RETURNING *;
