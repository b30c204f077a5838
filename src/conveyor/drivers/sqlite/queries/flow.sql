-- Flow control: pause, concurrency caps and rate limits per queue. A claim of a queue
-- with any of them set runs in one write transaction that reads the settings first
-- (on SQLite, BEGIN IMMEDIATE already serialises such claims).

-- name: queue_settings
SELECT *, {now} AS db_now FROM conveyor_queues
WHERE (:queue IS NULL OR queue = :queue)
ORDER BY queue;

-- name: lock_queue_settings
SELECT *, {now} AS db_now FROM conveyor_queues WHERE queue = :queue;

-- name: save_queue_settings
INSERT INTO conveyor_queues
    (queue, paused, max_running, group_max_running, rate_limit, rate_period,
     group_rate_limit, group_rate_period, controlled, updated_at)
VALUES
    (:queue, :paused, :max_running, :group_max_running, :rate_limit, :rate_period,
     :group_rate_limit, :group_rate_period, :controlled, {now})
ON CONFLICT (queue) DO UPDATE
SET paused = excluded.paused,
    max_running = excluded.max_running,
    group_max_running = excluded.group_max_running,
    rate_limit = excluded.rate_limit,
    rate_period = excluded.rate_period,
    group_rate_limit = excluded.group_rate_limit,
    group_rate_period = excluded.group_rate_period,
    controlled = excluded.controlled,
    updated_at = {now}
RETURNING *, {now} AS db_now;

-- name: count_running
SELECT count(*) AS n FROM conveyor_jobs WHERE status = 'running' AND queue = :queue;

-- name: count_running_in_groups
SELECT job_group, count(*) AS n FROM conveyor_jobs
WHERE status = 'running' AND queue = :queue AND job_group IS NOT NULL
  AND job_group IN (SELECT value FROM json_each(:groups))
GROUP BY job_group;

-- name: claim_candidates
-- The next claimable jobs after the (:priority, :id) cursor, in claim order.
SELECT id, priority, job_group FROM conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND waiting_for = 0 AND +run_at <= {now}
  AND (:id IS NULL OR priority > :priority OR (priority = :priority AND id > :id))
ORDER BY priority, id
LIMIT :limit;

-- name: count_starts
SELECT count(*) AS n FROM conveyor_starts
WHERE queue = :queue AND started_at > {now} - :period;

-- name: count_starts_in_groups
SELECT job_group, count(*) AS n FROM conveyor_starts
WHERE queue = :queue AND started_at > {now} - :period
  AND job_group IN (SELECT value FROM json_each(:groups))
GROUP BY job_group;

-- name: record_starts
INSERT INTO conveyor_starts (queue, job_group, started_at)
SELECT :queue, value, {now} FROM json_each(:groups);

-- name: forget_starts
DELETE FROM conveyor_starts WHERE queue = :queue AND started_at <= {now} - :period;
