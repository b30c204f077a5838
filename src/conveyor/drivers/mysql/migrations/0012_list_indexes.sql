-- Lists of jobs of one status in id order (the console's tabs, q.jobs(status=...)): the
-- lists no longer walk the primary key when a status is given (reading.sql, list_jobs),
-- and this index gives them the order without reading every job of the status.
CREATE INDEX conveyor_jobs_status_id ON conveyor_jobs (status, id);

-- A key without its queue (the console's key filter, q.jobs(key=...)) read the whole
-- table: with the key first, the index finds it, and still serves a key within a queue
-- (latest, complete_by_key, the list filtered by queue and key). (Migration 0016 of the
-- SQLite and PostgreSQL schemas.)
DROP INDEX conveyor_jobs_key ON conveyor_jobs;
CREATE INDEX conveyor_jobs_key ON conveyor_jobs (`key`(255), queue, id);
