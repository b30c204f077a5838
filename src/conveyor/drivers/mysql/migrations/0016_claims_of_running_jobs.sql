-- The index of claim ids holds running jobs only. A completed job keeps its claim id
-- (a report repeated under that claim is told the job is completed, not that another
-- claim holds it), and the index held every one of them: with millions of finished
-- jobs, each claim wrote its new id into a large tree at a random place, out of the
-- buffer pool once the history outgrew it. As in 0014, MySQL has no partial index: the
-- index holds a generated column that is NULL outside running jobs. Only the statements
-- that act on a running claim look jobs up by it (`ack_claim_lock`, `release_claim_lock`).
ALTER TABLE conveyor_jobs
    ADD COLUMN running_claim VARCHAR(255)
        AS (CASE WHEN status = 'running' THEN claim_id END) VIRTUAL,
    DROP INDEX conveyor_jobs_claim,
    ADD INDEX conveyor_jobs_claim (running_claim);
