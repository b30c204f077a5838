-- The index of claim ids holds running jobs only. A completed job keeps its claim id
-- (a report repeated under that claim is told the job is completed, not that another
-- claim holds it), and the index held every one of them: with ten million finished
-- jobs, each claim wrote its new id into a large tree at a random place, and the worker
-- drained a third slower than on an empty table (benchmarks/growth.py). Only the
-- statements that act on a running claim look jobs up by it (`ack_claim`,
-- `release_claim`, whose guard implies this predicate).
DROP INDEX {schema}.conveyor_jobs_claim;
CREATE INDEX conveyor_jobs_claim ON {schema}.conveyor_jobs (claim_id) WHERE status = 'running';
