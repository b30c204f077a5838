-- Lists of jobs in id order (q.jobs, the console's jobs page), filtered by status alone or
-- by queue alone: SQLite keeps no statistics, so with only (status, queue, id) and
-- (queue, task, status) to go on it read every job of that status or queue and sorted
-- them (EXPLAIN QUERY PLAN: USE TEMP B-TREE FOR ORDER BY), a read that grew with the
-- finished jobs kept (benchmarks/growth.py). In these indexes' order a page of 50 is 50
-- index entries, whatever the table holds.
CREATE INDEX conveyor_jobs_status_id ON conveyor_jobs (status, id);
CREATE INDEX conveyor_jobs_queue_id ON conveyor_jobs (queue, id);

-- A key without its queue (the console's key filter) scanned the whole table: with the
-- key first, the index finds it, and still serves a key within a queue in id order
-- (latest, complete_by_key, the list filtered by queue and key).
DROP INDEX conveyor_jobs_key;
CREATE INDEX conveyor_jobs_key ON conveyor_jobs (key, queue, id) WHERE key IS NOT NULL;
