-- Flow control: pause, concurrency caps and rate limits per queue. A claim of a queue
-- with any of them set runs in one transaction that first locks the queue's settings
-- row, so claims of that queue take turns and no race lets a cap be passed.

-- name: queue_settings
-- Every queue's settings, or :queue's; :lock: locked until the transaction ends.
SELECT *, {now} AS db_now FROM conveyor_queues
WHERE queue = :queue  -- if :queue
ORDER BY queue
FOR UPDATE  -- if :lock
;

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
-- The running jobs of :queue, or (:groups, a JSON array) of each of those groups.
-- group_status: the status of a job with a group, NULL for the others (migration 0014).
SELECT count(*) AS n FROM conveyor_jobs  -- unless :groups
SELECT job_group, count(*) AS n FROM conveyor_jobs  -- if :groups
WHERE queue = :queue AND status = 'running'  -- unless :groups
WHERE queue = :queue AND group_status = 'running'  -- if :groups
  AND job_group IN (SELECT g FROM JSON_TABLE(:groups, '$[*]' COLUMNS (g {text} PATH '$')) AS t)  -- if :groups
GROUP BY job_group  -- if :groups
;

-- name: claim_candidates
-- The next claimable jobs after the (:priority, :id) cursor, in claim order.
SELECT id, priority, job_group FROM conveyor_jobs
WHERE queue = :queue AND status = 'pending' AND waiting_for = 0 AND run_at <= {now}
  AND (priority, id) > (:priority, :id)  -- if :id
ORDER BY priority, id
LIMIT :limit;

-- name: count_starts
-- The jobs of :queue started in the last :period seconds, or (:groups) per group.
SELECT count(*) AS n FROM conveyor_starts  -- unless :groups
SELECT job_group, count(*) AS n FROM conveyor_starts  -- if :groups
WHERE queue = :queue AND started_at > {now} - INTERVAL :period SECOND
  AND job_group IN (SELECT g FROM JSON_TABLE(:groups, '$[*]' COLUMNS (g {text} PATH '$')) AS t)  -- if :groups
GROUP BY job_group  -- if :groups
;

-- name: record_starts
INSERT INTO conveyor_starts (queue, job_group, started_at)
SELECT :queue, t.g, {now} FROM JSON_TABLE(:groups, '$[*]' COLUMNS (g {text} PATH '$')) AS t;

-- name: forget_starts
DELETE FROM conveyor_starts
WHERE queue = :queue AND started_at <= {now} - INTERVAL :period SECOND;
