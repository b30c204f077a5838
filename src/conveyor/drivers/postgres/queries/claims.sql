-- Claims: taking jobs, and handing them back.

-- name: claim_jobs
-- The fast path: queues without flow control (pause, limits) only. SKIP LOCKED:
-- concurrent claimers take different rows instead of queueing on one.
UPDATE {schema}.conveyor_jobs AS j
SET status = 'running',
    attempts = j.attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = now(),
    heartbeat_at = now(),
    started_at = now(),
    lease_seconds = :lease_s,
    lease_expires_at = now() + make_interval(secs => :lease_s),
    updated_at = now()
FROM (SELECT id FROM {schema}.conveyor_jobs
      WHERE queue = :queue AND status = 'pending' AND waiting_for = 0 AND run_at <= now()
        AND NOT EXISTS (SELECT 1 FROM {schema}.conveyor_queues AS c
                        WHERE c.queue = :queue AND c.controlled)
      ORDER BY priority, id
      LIMIT :limit
      FOR UPDATE SKIP LOCKED) AS picked
WHERE j.id = picked.id
RETURNING j.*;

-- name: claim_ids
-- The flow-controlled path: the jobs chosen under the queue's limits, while the
-- queue's settings row is locked. Still guarded. The guard is a CASE so that the ids
-- drive the plan (primary-key lookups): as plain conditions, the statistics of a
-- freshly loaded table send the planner down the claimable index, over the backlog.
UPDATE {schema}.conveyor_jobs
SET status = 'running',
    attempts = attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = now(),
    heartbeat_at = now(),
    started_at = now(),
    lease_seconds = :lease_s,
    lease_expires_at = now() + make_interval(secs => :lease_s),
    updated_at = now()
WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb)::bigint))
  AND CASE WHEN status = 'pending' AND waiting_for = 0 THEN true ELSE false END
RETURNING *;

-- name: claim_job
-- One job, named by id: claimable while pending with its dependencies met.
UPDATE {schema}.conveyor_jobs
SET status = 'running',
    attempts = attempts + 1,
    claim_id = :claim_id,
    worker = :worker,
    claimed_at = now(),
    heartbeat_at = now(),
    started_at = now(),
    lease_seconds = :lease_s,
    lease_expires_at = now() + make_interval(secs => :lease_s),
    updated_at = now()
WHERE id = :id AND status = 'pending' AND waiting_for = 0
RETURNING *;

-- name: count_claimable
-- Claimable now: pending, minus those not yet due or waiting on others. Counted from
-- the counts and two small index ranges, never the backlog; 0 while paused. Also how
-- many count deltas were read (the caller folds them when they pile up).
SELECT (SELECT count(*) FROM {schema}.conveyor_count_deltas) AS deltas, CASE
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
WHERE claim_id = :claim_id AND status = 'running'
RETURNING id, queue;

-- name: release_claim
UPDATE {schema}.conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = now()
WHERE claim_id = :claim_id AND status = 'running'
  AND (:queues::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text(:queues::jsonb)))
RETURNING id, queue;

-- name: release_job
UPDATE {schema}.conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = :id AND status = 'running'
RETURNING *;

-- name: reset_claims
UPDATE {schema}.conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = now()
WHERE status = 'running' AND claimed_at <= now() - make_interval(secs => :older_than_s)
  AND (:queues::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text(:queues::jsonb)))
RETURNING id, queue;

-- name: recover_expired
-- Running jobs whose lease ran out: their worker died or hung. Back to pending while
-- attempts remain, otherwise failed for good. The checkpoint is kept for resume; the
-- attempt's error joins the job's history.
UPDATE {schema}.conveyor_jobs
SET status = CASE WHEN attempts < max_attempts THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE now() END,
    error = 'lease expired: worker ' || coalesce(worker, '?') || ' stopped renewing its claim'
            || ' (attempt ' || attempts || ' of ' || max_attempts || ')',
    error_kind = 'retryable',
    errors = {errors_kept} || jsonb_build_array(jsonb_build_object(
        'attempt', attempts, 'kind', 'retryable', 'at', now(), 'worker', worker,
        'error', 'lease expired: worker ' || coalesce(worker, '?')
                 || ' stopped renewing its claim')),
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = now()
WHERE status = 'running' AND lease_expires_at < now()
  AND (:queues::jsonb IS NULL OR queue IN (SELECT jsonb_array_elements_text(:queues::jsonb)))
  AND (:id::bigint IS NULL OR id = :id)
RETURNING id, queue, status;
