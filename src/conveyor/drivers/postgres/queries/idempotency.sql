-- Idempotent create requests (conveyor.ops.idempotency): the first answer to a request
-- with an Idempotency-Key, written in the transaction of the jobs it created.

-- name: claim_idempotency_key
-- 1 row: the key is this request's now (its answer is saved before the commit); 0: an
-- earlier request has it. A request whose transaction inserted the key first and is
-- still open makes this one wait for its commit (then 0) or rollback (then 1).
INSERT INTO {schema}.conveyor_idempotency_keys (scope, idem_key, request_hash, expires_at)
VALUES (:scope, :idem_key, :request_hash, now() + make_interval(secs => :keep_s))
ON CONFLICT (scope, idem_key) DO NOTHING;

-- name: idempotency_record
SELECT request_hash, answer_status, body, expires_at <= now() AS expired FROM {schema}.conveyor_idempotency_keys
WHERE scope = :scope AND idem_key = :idem_key;

-- name: save_idempotent_answer
UPDATE {schema}.conveyor_idempotency_keys SET answer_status = :answer_status, body = :body
WHERE scope = :scope AND idem_key = :idem_key AND answer_status IS NULL;

-- name: forget_idempotency_keys
-- Expired records (their retention over: the key may be used again), at most :limit,
-- oldest first (a small batch: a short lock); or the record of :scope and :idem_key
-- alone, if it is expired.
DELETE FROM {schema}.conveyor_idempotency_keys
WHERE (scope, idem_key) IN (
    SELECT scope, idem_key FROM {schema}.conveyor_idempotency_keys
    WHERE expires_at <= now()
      AND scope = :scope AND idem_key = :idem_key  -- if :idem_key
    ORDER BY expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED  -- unless :idem_key
    FOR UPDATE  -- if :idem_key
);
