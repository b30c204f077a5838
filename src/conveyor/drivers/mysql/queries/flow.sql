-- Flow control: pause, concurrency caps and rate limits per queue. A claim of a queue
-- with any of them set runs in one transaction that first locks the queue's settings
-- row, so claims of that queue take turns and no race lets a cap be passed.

-- name: queue_settings
SELECT *, {now} AS db_now FROM conveyor_queues
WHERE (:queue IS NULL OR queue = :queue)
ORDER BY queue;

-- name: lock_queue_settings
SELECT *, {now} AS db_now FROM conveyor_queues WHERE queue = :queue FOR UPDATE;

-- name: save_queue_settings_upsert
INSERT INTO conveyor_queues
    (queue, paused, max_running, group_max_running, rate_limit, rate_period,
     group_rate_limit, group_rate_period, controlled, updated_at)
VALUES
    (:queue, :paused, :max_running, :group_max_running, :rate_limit, :rate_period,
     :group_rate_limit, :group_rate_period, :controlled, {now})
ON DUPLICATE KEY UPDATE
    paused = VALUES(paused),
    max_running = VALUES(max_running),
    group_max_running = VALUES(group_max_running),
    rate_limit = VALUES(rate_limit),
    rate_period = VALUES(rate_period),
    group_rate_limit = VALUES(group_rate_limit),
    group_rate_period = VALUES(group_rate_period),
    controlled = VALUES(controlled),
    updated_at = {now};

-- name: count_running
SELECT count(*) AS n FROM conveyor_jobs WHERE status = 'running' AND queue = :queue;

-- name: count_running_in_groups
-- group_status: the status of a job with a group, NULL for the others (migration 0014).
SELECT job_group, count(*) AS n FROM conveyor_jobs
WHERE queue = :queue AND group_status = 'running'
  AND job_group IN (SELECT g FROM JSON_TABLE(:groups, '$[*]' COLUMNS (g {text} PATH '$')) AS t)
GROUP BY job_group;

-- name: claim_candidates
-- The next claimable jobs after the (:priority, :id) cursor, in claim order.
SELECT id, priority, job_group FROM conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND waiting_for = 0 AND run_at <= {now}
  AND (:id IS NULL OR (priority, id) > (:priority, :id))
ORDER BY priority, id
LIMIT :limit;

-- name: count_starts
SELECT count(*) AS n FROM conveyor_starts
WHERE queue = :queue AND started_at > {now} - INTERVAL :period SECOND;

-- name: count_starts_in_groups
SELECT job_group, count(*) AS n FROM conveyor_starts
WHERE queue = :queue AND started_at > {now} - INTERVAL :period SECOND
  AND job_group IN (SELECT g FROM JSON_TABLE(:groups, '$[*]' COLUMNS (g {text} PATH '$')) AS t)
GROUP BY job_group;

-- name: record_starts
INSERT INTO conveyor_starts (queue, job_group, started_at)
SELECT :queue, t.g, {now} FROM JSON_TABLE(:groups, '$[*]' COLUMNS (g {text} PATH '$')) AS t;

-- name: forget_starts
DELETE FROM conveyor_starts
WHERE queue = :queue AND started_at <= {now} - INTERVAL :period SECOND;
