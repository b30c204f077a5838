-- Jobs per queue and status, so stats() and Claim.remaining never count the whole
-- table. Statement triggers record each statement's net change per queue and status as
-- rows of conveyor_count_deltas: inserts only, so concurrent transactions never wait on
-- a shared counter row. Readers add the deltas to conveyor_counts; a fold (run by
-- workers' upkeep, and by readers when deltas pile up) moves them into it.
CREATE TABLE {schema}.conveyor_counts (
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (queue, status)
);

CREATE TABLE {schema}.conveyor_count_deltas (
    queue   text        NOT NULL,
    status  text        NOT NULL,
    n       integer     NOT NULL,  -- net change
    entered integer     NOT NULL,  -- jobs that reached this status
    at      timestamptz NOT NULL
);

-- Jobs that reached completed or failed, per queue and minute: the throughput a
-- console charts.
CREATE TABLE {schema}.conveyor_throughput (
    minute    timestamptz NOT NULL,
    queue     text        NOT NULL,
    completed bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
);

-- No job may change while the counts start, or it would be counted twice or never.
LOCK TABLE {schema}.conveyor_jobs IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO {schema}.conveyor_counts (queue, status, n)
SELECT queue, status, count(*) FROM {schema}.conveyor_jobs GROUP BY queue, status;

CREATE FUNCTION {schema}.conveyor_count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.conveyor_count_deltas (queue, status, n, entered, at)
    SELECT queue, status, count(*), count(*), now() FROM new_rows GROUP BY queue, status;
    RETURN NULL;
END
$$;

-- The join of the transition tables is planned once per connection and the plan kept: a
-- plan made for a one-row claim (a nested loop) would make a later update of a million
-- rows quadratic. Without nested loops it is a hash join at every size.
CREATE FUNCTION {schema}.conveyor_count_changed() RETURNS trigger
LANGUAGE plpgsql SET enable_nestloop = off AS $$
BEGIN
    INSERT INTO {schema}.conveyor_count_deltas (queue, status, n, entered, at)
    SELECT queue, status, sum(n), sum(entered), now()
    FROM (SELECT after.queue, after.status, 1 AS n, 1 AS entered
          FROM new_rows AS after JOIN old_rows AS before ON before.id = after.id
          WHERE before.status <> after.status
          UNION ALL
          SELECT before.queue, before.status, -1, 0
          FROM new_rows AS after JOIN old_rows AS before ON before.id = after.id
          WHERE before.status <> after.status) AS moved
    GROUP BY queue, status;
    RETURN NULL;
END
$$;

CREATE FUNCTION {schema}.conveyor_count_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.conveyor_count_deltas (queue, status, n, entered, at)
    SELECT queue, status, -count(*), 0, now() FROM old_rows GROUP BY queue, status;
    RETURN NULL;
END
$$;

CREATE TRIGGER conveyor_count_inserted AFTER INSERT ON {schema}.conveyor_jobs
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.conveyor_count_inserted();

CREATE TRIGGER conveyor_count_changed AFTER UPDATE ON {schema}.conveyor_jobs
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.conveyor_count_changed();

CREATE TRIGGER conveyor_count_deleted AFTER DELETE ON {schema}.conveyor_jobs
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.conveyor_count_deleted();
