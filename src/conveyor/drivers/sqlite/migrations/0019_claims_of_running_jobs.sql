-- The index of claim ids holds running jobs only. A completed job keeps its claim id
-- (a report repeated under that claim is told the job is completed, not that another
-- claim holds it), and the index held every one of them: with millions of finished
-- jobs, each claim wrote its new id into a large tree at a random place. Only the
-- statements that act on a running claim look jobs up by it (`ack_claim`,
-- `release_claim`), and their guard is written as this predicate is, so the planner
-- can match the two: `status IN ('running')` (tests/drivers/test_sqlite_plans.py).
DROP INDEX conveyor_jobs_claim;
CREATE INDEX conveyor_jobs_claim ON conveyor_jobs (claim_id) WHERE status IN ('running');
