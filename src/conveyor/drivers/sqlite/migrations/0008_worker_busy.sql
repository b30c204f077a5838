-- The jobs a worker's tasks are running, as of its last refresh: a JSON array of
-- {"id", "started_at"}. A running job absent from its worker's list was claimed ahead
-- and waits for a free slot (the job row cannot tell: started_at is set by the claim).
ALTER TABLE conveyor_workers ADD COLUMN busy TEXT;
