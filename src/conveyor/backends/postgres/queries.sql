-- Named statements of the PostgreSQL backend. The SQLite backend has the same names with
-- the same parameters. {schema} is the configured schema. now() is the database clock
-- (the start of the transaction). Every state change is a single statement guarded by the
-- state it expects.

-- name: insert_job
INSERT INTO {schema}.conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, created_at, updated_at)
VALUES
    (:queue, :task, :payload::jsonb, :key, :priority, coalesce(:run_at::timestamptz, now()),
     :max_attempts, now(), now())
ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING *;

-- name: insert_jobs
-- Many jobs without keys in one statement; :items is a JSON array of objects.
INSERT INTO {schema}.conveyor_jobs
    (queue, task, payload, key, priority, run_at, max_attempts, created_at, updated_at)
SELECT e.value ->> 'queue', e.value ->> 'task', (e.value ->> 'payload')::jsonb, NULL,
       (e.value ->> 'priority')::integer,
       coalesce((e.value ->> 'run_at')::timestamptz, now()),
       (e.value ->> 'max_attempts')::integer, now(), now()
FROM jsonb_array_elements(:items::jsonb) WITH ORDINALITY AS e(value, ord)
ORDER BY e.ord
RETURNING *;

-- name: active_by_key
SELECT * FROM {schema}.conveyor_jobs
WHERE queue = :queue AND key = :key AND status IN ('pending', 'running');

-- name: latest_by_key
SELECT *, now() AS db_now FROM {schema}.conveyor_jobs
WHERE queue = :queue AND key = :key
ORDER BY id DESC
LIMIT 1;

-- name: add_subscriber
INSERT INTO {schema}.conveyor_subscribers (job_id, subscriber, created_at)
VALUES (:job_id, :subscriber, now())
ON CONFLICT DO NOTHING;

-- name: subscribers
SELECT subscriber FROM {schema}.conveyor_subscribers
WHERE job_id = :job_id
ORDER BY created_at, subscriber;

-- name: claim_jobs
-- SKIP LOCKED: concurrent claimers take different rows instead of queueing on one.
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
      WHERE queue = :queue AND status = 'pending' AND run_at <= now()
      ORDER BY priority, id
      LIMIT :limit
      FOR UPDATE SKIP LOCKED) AS picked
WHERE j.id = picked.id
RETURNING j.*;

-- name: count_claimable
SELECT count(*) AS n FROM {schema}.conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND run_at <= now();

-- name: complete_jobs
-- :items is a JSON array of {"id", "claim_id", "result" (JSON text or null)}.
UPDATE {schema}.conveyor_jobs AS j
SET status = 'completed',
    result = item.result::jsonb,
    finished_at = now(),
    lease_expires_at = NULL,
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb) AS item(id bigint, claim_id text, result text)
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.status = 'running'
RETURNING j.*;

-- name: fail_jobs
-- :items is a JSON array of {"id", "claim_id", "error", "error_kind", "retry", "delay_s"}.
-- A retryable failure with attempts left goes back to pending after the delay.
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
    updated_at = now()
FROM (SELECT i.id, i.claim_id, i.error, i.error_kind, coalesce(i.delay_s, 0) AS delay_s,
             coalesce(i.retry, false) AND cur.attempts < cur.max_attempts AS again
      FROM jsonb_to_recordset(:items::jsonb)
           AS i(id bigint, claim_id text, error text, error_kind text, retry boolean,
                delay_s double precision)
      JOIN {schema}.conveyor_jobs AS cur ON cur.id = i.id) AS item
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.status = 'running'
RETURNING j.*;

-- name: heartbeat_jobs
-- :items is a JSON array of {"id", "claim_id"}; a null :extend_s keeps each claim's lease.
UPDATE {schema}.conveyor_jobs AS j
SET heartbeat_at = now(),
    lease_expires_at = now() + make_interval(
        secs => coalesce(:extend_s::double precision, j.lease_seconds)),
    updated_at = now()
FROM jsonb_to_recordset(:items::jsonb) AS item(id bigint, claim_id text)
WHERE j.id = item.id AND j.claim_id = item.claim_id AND j.status = 'running'
RETURNING j.*;

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
WHERE id = :id AND claim_id = :claim_id AND status = 'running'
RETURNING *;

-- name: ack_claim
UPDATE {schema}.conveyor_jobs
SET status = 'completed', finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE claim_id = :claim_id AND status = 'running'
RETURNING id, queue;

-- name: release_claim
UPDATE {schema}.conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = now()
WHERE claim_id = :claim_id AND status = 'running'
RETURNING id, queue;

-- name: reset_claims
UPDATE {schema}.conveyor_jobs
SET status = 'pending', claim_id = NULL, claimed_at = NULL, worker = NULL,
    heartbeat_at = NULL, lease_expires_at = NULL, updated_at = now()
WHERE status = 'running' AND claimed_at <= now() - make_interval(secs => :older_than_s)
RETURNING id, queue;

-- name: recover_expired
-- Running jobs whose lease ran out: their worker died or hung. Back to pending while
-- attempts remain, otherwise failed for good. The checkpoint is kept for resume.
UPDATE {schema}.conveyor_jobs
SET status = CASE WHEN attempts < max_attempts THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN attempts < max_attempts THEN NULL ELSE now() END,
    error = 'lease expired: worker ' || coalesce(worker, '?') || ' stopped renewing its claim'
            || ' (attempt ' || attempts || ' of ' || max_attempts || ')',
    error_kind = 'retryable',
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL,
    updated_at = now()
WHERE status = 'running' AND lease_expires_at < now()
RETURNING id, queue, status;

-- name: reopen_job
-- An explicit retry: a final job becomes pending again with a fresh set of attempts.
UPDATE {schema}.conveyor_jobs
SET status = 'pending', attempts = 0, run_at = now(), result = NULL, finished_at = NULL,
    claim_id = NULL, claimed_at = NULL, worker = NULL, heartbeat_at = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE id = :id AND status IN ('completed', 'failed', 'cancelled')
RETURNING *;

-- name: cancel_job
UPDATE {schema}.conveyor_jobs
SET status = 'cancelled', finished_at = now(), lease_expires_at = NULL, updated_at = now()
WHERE id = :id AND status IN ('pending', 'running')
RETURNING *;

-- name: complete_by_key
UPDATE {schema}.conveyor_jobs
SET status = 'completed', result = :result::jsonb, finished_at = now(),
    lease_expires_at = NULL, updated_at = now()
WHERE queue = :queue AND key = :key AND status IN ('pending', 'running')
RETURNING id, queue;

-- name: get_job
SELECT * FROM {schema}.conveyor_jobs WHERE id = :id;

-- name: list_jobs
SELECT * FROM {schema}.conveyor_jobs
WHERE (:queue::text IS NULL OR queue = :queue)
  AND (:status::text IS NULL OR status = :status)
  AND (:key::text IS NULL OR key = :key)
  AND id > :after
ORDER BY id
LIMIT :limit;

-- name: list_jobs_newest
SELECT * FROM {schema}.conveyor_jobs
WHERE (:queue::text IS NULL OR queue = :queue)
  AND (:status::text IS NULL OR status = :status)
  AND (:key::text IS NULL OR key = :key)
  AND (:before::bigint IS NULL OR id < :before)
ORDER BY id DESC
LIMIT :limit;

-- name: count_by_queue_status
SELECT queue, status, count(*) AS n FROM {schema}.conveyor_jobs
WHERE (:queue::text IS NULL OR queue = :queue)
GROUP BY queue, status;

-- name: pending_summary
SELECT queue,
       min(created_at) AS oldest_pending_at,
       count(*) FILTER (WHERE run_at > now()) AS scheduled
FROM {schema}.conveyor_jobs
WHERE status = 'pending' AND (:queue::text IS NULL OR queue = :queue)
GROUP BY queue;

-- name: expired_summary
SELECT queue, count(*) AS n FROM {schema}.conveyor_jobs
WHERE status = 'running' AND lease_expires_at < now()
  AND (:queue::text IS NULL OR queue = :queue)
GROUP BY queue;

-- name: prune_jobs
DELETE FROM {schema}.conveyor_jobs
WHERE status IN (SELECT jsonb_array_elements_text(:statuses::jsonb))
  AND finished_at <= now() - make_interval(secs => :older_than_s);

-- name: db_now
SELECT now() AS db_now;

-- name: take_notifications
-- Subscribers of final jobs not yet told of the job's latest finish (a job retried and
-- finished again is announced again), taken for :lease_s seconds by one dispatcher.
UPDATE {schema}.conveyor_subscribers AS s
SET notifying_until = now() + make_interval(secs => :lease_s)
FROM (SELECT c.job_id, c.subscriber
      FROM {schema}.conveyor_subscribers AS c
      JOIN {schema}.conveyor_jobs AS j ON j.id = c.job_id
      WHERE j.status IN ('completed', 'failed', 'cancelled')
        AND (c.notified_at IS NULL OR c.notified_at < j.finished_at)
        AND (c.notifying_until IS NULL OR c.notifying_until < now())
      ORDER BY c.job_id, c.subscriber
      LIMIT :limit
      FOR UPDATE OF c SKIP LOCKED) AS picked
WHERE s.job_id = picked.job_id AND s.subscriber = picked.subscriber
RETURNING s.job_id, s.subscriber;

-- name: jobs_by_id
SELECT * FROM {schema}.conveyor_jobs
WHERE id IN (SELECT jsonb_array_elements_text(:ids::jsonb)::bigint);

-- name: mark_notified
-- :items is a JSON array of {"job_id", "subscriber"}.
UPDATE {schema}.conveyor_subscribers AS s
SET notified_at = now(), notifying_until = NULL
FROM jsonb_to_recordset(:items::jsonb) AS item(job_id bigint, subscriber text)
WHERE s.job_id = item.job_id AND s.subscriber = item.subscriber;
