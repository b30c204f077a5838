-- Claims: taking jobs, and handing them back.

-- name: claim_jobs
-- The fast path: queues without flow control (pause, limits) only. SKIP LOCKED:
-- concurrent claimers take different rows instead of queueing on one.
-- The claim times are clock_timestamp(), not now() (the transaction's start): a claim
-- riding in a transaction that began before another one released its job must not date
-- the start before that job's dependencies finished.
UPDATE {schema}.conveyor_jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = clock_timestamp(),
    heartbeat_at = clock_timestamp(),
    started_at = clock_timestamp(),
    lease_seconds = :lease_s,
    lease_expires_at = now() + make_interval(secs => :lease_s),
    updated_at = now()
FROM (SELECT id FROM {schema}.conveyor_jobs
      WHERE queue = :queue AND status IN {from_claim} AND waiting_for = 0 AND run_at <= now()
        AND NOT EXISTS (SELECT 1 FROM {schema}.conveyor_queues AS c
                        WHERE c.queue = :queue AND c.controlled)
      ORDER BY priority, id
      LIMIT :limit
      FOR UPDATE SKIP LOCKED) AS picked
WHERE j.id = picked.id
RETURNING j.*;

-- name: claim_ids
-- Jobs named by id: :ids (a JSON array), or the one job :id (claimable while pending
-- with its dependencies met). :ids is the flow-controlled path: the jobs chosen under
-- the queue's limits, while the queue's settings row is locked. Still guarded. The
-- guard is a CASE so that the ids drive the plan (primary-key lookups): as plain
-- conditions, the statistics of a freshly loaded table send the planner down the
-- claimable index, over the backlog.
UPDATE {schema}.conveyor_jobs
SET status = 'running',
    attempts = attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = clock_timestamp(),
    heartbeat_at = clock_timestamp(),
    started_at = clock_timestamp(),
    lease_seconds = :lease_s,
    lease_expires_at = now() + make_interval(secs => :lease_s),
    updated_at = now()
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb)::bigint))  -- if :ids
  AND CASE WHEN status IN {from_claim} AND waiting_for = 0 THEN true ELSE false END  -- if :ids
WHERE id = :id AND status IN {from_claim_job} AND waiting_for = 0  -- if :id
RETURNING *;

-- name: count_claimable
-- Claimable now: pending, minus those not yet due or waiting on others. Counted from
-- the counts and two small index ranges, never the backlog; 0 while paused. Also how
-- many count deltas wait, up to :deltas_limit: the caller folds them when they pile up,
-- and a count of them all would read every one.
SELECT (SELECT count(*) FROM (SELECT 1 FROM {schema}.conveyor_count_deltas LIMIT :deltas_limit) AS d) AS deltas,
CASE
    WHEN EXISTS (SELECT 1 FROM {schema}.conveyor_queues WHERE queue = :queue AND paused) THEN 0
    ELSE coalesce((SELECT sum(n) FROM (
                       SELECT n FROM {schema}.conveyor_counts
                       WHERE queue = :queue AND status = 'pending'
                       UNION ALL
                       SELECT n FROM {schema}.conveyor_count_deltas
                       WHERE queue = :queue AND status = 'pending') AS parts), 0)
         - (SELECT count(*) FROM {schema}.conveyor_jobs
            WHERE queue = :queue AND status = 'pending' AND run_at > created_at
              AND run_at > now())
         - (SELECT count(*) FROM {schema}.conveyor_jobs
            WHERE queue = :queue AND status = 'pending' AND waiting_for > 0
              AND run_at <= now())
    END AS n;

-- name: ack_claim
UPDATE {schema}.conveyor_jobs
SET status = 'completed', error = NULL, error_kind = NULL, finished_at = now(),
    lease_expires_at = NULL, updated_at = now()
WHERE claim_id = :claim_id AND status IN {from_ack}
RETURNING id, queue;

-- name: release_jobs
-- Running jobs back to pending, their claim forgotten: those of :claim_id (a worker hands
-- its claim back), the job :id (an admin's reset, whoever holds it), or those claimed
-- more than :older_than_s ago; of :queues and :tasks (JSON arrays), when given.
UPDATE {schema}.conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = now()
WHERE true
  AND claim_id = :claim_id AND status IN {from_release}  -- if :claim_id
  AND id = :id AND status IN {from_release_job}  -- if :id
  AND status IN {from_reset_claims} AND claimed_at <= now() - make_interval(secs => :older_than_s)  -- if :older_than_s
  AND queue IN (SELECT jsonb_array_elements_text(:queues::jsonb))  -- if :queues
  AND task IN (SELECT jsonb_array_elements_text(:tasks::jsonb))  -- if :tasks
RETURNING id, queue  -- unless :id
RETURNING *  -- if :id
;

-- name: expired_leases
-- Running jobs whose lease ran out: their worker died or hung. What ends them is
-- decided above (conveyor.machine), then written by end_leases.
SELECT id, queue, claim_id, worker, attempts, max_attempts
FROM {schema}.conveyor_jobs
WHERE status IN {from_recover_retry} AND lease_expires_at < now()
  AND queue IN (SELECT jsonb_array_elements_text(:queues::jsonb))  -- if :queues
  AND id = :id  -- if :id
  AND task IN (SELECT jsonb_array_elements_text(:tasks::jsonb))  -- if :tasks
ORDER BY lease_expires_at
LIMIT :limit;

-- name: end_leases
-- :items is a JSON array of {"id", "claim_id", "again", "error", "cause"}: back to
-- pending when "again", else failed for good. Guarded: the same claim, still expired.
-- The checkpoint is kept for resume; the attempt's error joins the job's history.
UPDATE {schema}.conveyor_jobs AS j
SET status = CASE WHEN item.again THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN item.again THEN NULL ELSE now() END,
    error = item.error,
    error_kind = 'retryable',
    errors = {errors_kept} || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempts, 'kind', 'retryable', 'at', now(), 'worker', j.worker,
        'error', item.cause)),
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb)
     AS item(id bigint, claim_id text, again boolean, error text, cause text)
WHERE j.id = item.id AND j.claim_id = item.claim_id
  AND j.status IN {from_recover_retry} AND j.lease_expires_at < now()
  AND j.claim_id = {claims_of_items}
RETURNING j.id, j.queue, j.status;
