-- Flow control: pause, concurrency caps and rate limits per queue. A claim of a queue
-- with any of them set runs in one transaction that first locks the queue's settings
-- row, so claims of that queue take turns and no race lets a cap be passed. Starts are
-- dated and counted by clock_timestamp(), taken once the lock is held (as the claim
-- dates its jobs): now() is the transaction's start, before any wait for the lock.

-- name: queue_settings
SELECT *, now() AS db_now FROM {schema}.conveyor_queues
WHERE (:queue::text IS NULL OR queue = :queue)
ORDER BY queue;

-- name: lock_queue_settings
SELECT *, now() AS db_now FROM {schema}.conveyor_queues WHERE queue = :queue FOR UPDATE;

-- name: save_queue_settings
INSERT INTO {schema}.conveyor_queues AS q
    (queue, paused, max_running, group_max_running, rate_limit, rate_period,
     group_rate_limit, group_rate_period, controlled, updated_at)
VALUES
    (:queue, :paused, :max_running, :group_max_running, :rate_limit, :rate_period,
     :group_rate_limit, :group_rate_period, :controlled, now())
ON CONFLICT (queue) DO UPDATE
SET paused = excluded.paused,
    max_running = excluded.max_running,
    group_max_running = excluded.group_max_running,
    rate_limit = excluded.rate_limit,
    rate_period = excluded.rate_period,
    group_rate_limit = excluded.group_rate_limit,
    group_rate_period = excluded.group_rate_period,
    controlled = excluded.controlled,
    updated_at = now()
RETURNING *, now() AS db_now;

-- name: count_running
SELECT count(*) AS n FROM {schema}.conveyor_jobs WHERE status = 'running' AND queue = :queue;

-- name: count_running_in_groups
SELECT job_group, count(*) AS n FROM {schema}.conveyor_jobs
WHERE status = 'running' AND queue = :queue AND job_group IS NOT NULL
  AND job_group IN (SELECT jsonb_array_elements_text(:groups::jsonb))
GROUP BY job_group;

-- name: claim_candidates
-- The next claimable jobs after the (:priority, :id) cursor, in claim order.
SELECT id, priority, job_group FROM {schema}.conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND waiting_for = 0 AND run_at <= now()
  AND (:id::bigint IS NULL OR (priority, id) > (:priority::integer, :id::bigint))
ORDER BY priority, id
LIMIT :limit;

-- name: count_starts
SELECT count(*) AS n FROM {schema}.conveyor_starts
WHERE queue = :queue AND started_at > clock_timestamp() - make_interval(secs => :period);

-- name: count_starts_in_groups
SELECT job_group, count(*) AS n FROM {schema}.conveyor_starts
WHERE queue = :queue AND started_at > clock_timestamp() - make_interval(secs => :period)
  AND job_group IN (SELECT jsonb_array_elements_text(:groups::jsonb))
GROUP BY job_group;

-- name: record_starts
INSERT INTO {schema}.conveyor_starts (queue, job_group, started_at)
SELECT :queue, e, clock_timestamp() FROM jsonb_array_elements_text(:groups::jsonb) AS e;

-- name: forget_starts
DELETE FROM {schema}.conveyor_starts
WHERE queue = :queue AND started_at <= clock_timestamp() - make_interval(secs => :period);
