-- Flow control: pause, concurrency caps and rate limits per queue. A claim of a queue
-- with any of them set runs in one write transaction that reads the settings first
-- (on SQLite, BEGIN IMMEDIATE already serialises such claims).

-- name: queue_settings
-- Every queue's settings, or :queue's; :lock: locked until the transaction ends
-- (SQLite's write transaction is the lock).
SELECT *, {now} AS db_now FROM conveyor_queues
WHERE queue = :queue  -- if :queue
ORDER BY queue;

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
-- The running jobs of :queue, or (:groups, a JSON array) of each of those groups.
SELECT count(*) AS n FROM conveyor_jobs  -- unless :groups
SELECT job_group, count(*) AS n FROM conveyor_jobs  -- if :groups
WHERE queue = :queue AND status = 'running'  -- unless :groups
WHERE queue = :queue AND status = 'running' AND job_group IS NOT NULL  -- if :groups
  AND job_group IN (SELECT value FROM json_each(:groups))  -- if :groups
GROUP BY job_group  -- if :groups
;

-- name: claim_candidates
-- The next claimable jobs after the (:priority, :id) cursor, in claim order.
SELECT id, priority, job_group FROM conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND waiting_for = 0 AND +run_at <= {now}
  AND (priority > :priority OR (priority = :priority AND id > :id))  -- if :id
ORDER BY priority, id
LIMIT :limit;

-- name: count_starts
-- The jobs of :queue started in the last :period seconds, or (:groups) per group.
SELECT count(*) AS n FROM conveyor_starts  -- unless :groups
SELECT job_group, count(*) AS n FROM conveyor_starts  -- if :groups
WHERE queue = :queue AND started_at > {now} - :period
  AND job_group IN (SELECT value FROM json_each(:groups))  -- if :groups
GROUP BY job_group  -- if :groups
;

-- name: record_starts
INSERT INTO conveyor_starts (queue, job_group, started_at)
SELECT :queue, value, {now} FROM json_each(:groups);

-- name: forget_starts
DELETE FROM conveyor_starts WHERE queue = :queue AND started_at <= {now} - :period;
