-- Dependency edges without per-row foreign-key checks.
--
-- An edge is written only by the transaction that inserts its job, and only to jobs it
-- holds: a job enqueued after others first locks each of them and reads it back
-- (mark_dependencies: a missing one is refused before anything is written); a
-- workflow's steps are inserted just before their edges, in the same transaction. The
-- two foreign keys checked every edge again, one lookup and one row lock per key and
-- edge, in an after-trigger per row: two thirds of the time a 10,000-step workflow
-- spent writing its edges. They go. What their ON DELETE CASCADE did, a trigger now
-- does once per statement: the edges of deleted jobs, either end, go with them.
ALTER TABLE {schema}.conveyor_dependencies
    DROP CONSTRAINT IF EXISTS conveyor_dependencies_job_id_fkey;
ALTER TABLE {schema}.conveyor_dependencies
    DROP CONSTRAINT IF EXISTS conveyor_dependencies_depends_on_fkey;

-- Edges left by a job deleted before this migration are none: the keys removed them.
CREATE FUNCTION {schema}.conveyor_forget_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.conveyor_dependencies AS d
    USING old_rows AS o WHERE d.job_id = o.id;
    DELETE FROM {schema}.conveyor_dependencies AS d
    USING old_rows AS o WHERE d.depends_on = o.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER conveyor_forget_edges AFTER DELETE ON {schema}.conveyor_jobs
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.conveyor_forget_edges();
