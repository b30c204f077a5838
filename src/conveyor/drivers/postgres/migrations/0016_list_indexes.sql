-- A key without its queue (the console's key filter, q.jobs(key=...)) read the whole
-- (queue, key, id) index: with the key first, the index finds it, and still serves a
-- key within a queue in id order (latest, complete_by_key, the list filtered by queue and
-- key). Built in place: the build holds the table's writes for as long as it reads it.
DROP INDEX IF EXISTS {schema}.conveyor_jobs_key;
CREATE INDEX conveyor_jobs_key ON {schema}.conveyor_jobs (key, queue, id) WHERE key IS NOT NULL;
