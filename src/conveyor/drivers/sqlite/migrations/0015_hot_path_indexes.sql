-- Indexes that every write kept up to date and no statement reads (EXPLAIN QUERY PLAN of
-- every statement): running jobs are found through the status index (the rescuer's reads
-- are bounded by how many jobs run), and listing by creation time walks the primary key
-- in id order. Each claim, heartbeat and ending wrote the lease index; each enqueue the
-- creation index (one WAL page of about eight per enqueue).
DROP INDEX IF EXISTS conveyor_jobs_running_lease;
DROP INDEX IF EXISTS conveyor_jobs_created;
