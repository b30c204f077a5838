-- Idempotent create requests (conveyor.ops.idempotency): the first answer to a request
-- with an Idempotency-Key, written in the transaction of the jobs it created.

-- name: forget_expired_idempotency_key
-- The record of this key, if its retention is over: the key may be used again.
DELETE FROM conveyor_idempotency_keys
WHERE scope = :scope AND idem_key = :idem_key AND expires_at <= {now};

-- name: claim_idempotency_key
-- 1 row: the key is this request's now (its answer is saved before the commit); 0: an
-- earlier request has it (its transaction committed first: read its record).
INSERT INTO conveyor_idempotency_keys (scope, idem_key, request_hash, created_at, expires_at)
VALUES (:scope, :idem_key, :request_hash, {now}, {now} + :keep_s)
ON CONFLICT (scope, idem_key) DO NOTHING;

-- name: idempotency_record
SELECT request_hash, answer_status, body, expires_at <= {now} AS expired FROM conveyor_idempotency_keys
WHERE scope = :scope AND idem_key = :idem_key;

-- name: save_idempotent_answer
UPDATE conveyor_idempotency_keys SET answer_status = :answer_status, body = :body
WHERE scope = :scope AND idem_key = :idem_key AND answer_status IS NULL;

-- name: prune_idempotency_keys
-- At most :limit expired records, oldest first (a small batch: a short write lock).
DELETE FROM conveyor_idempotency_keys
WHERE (scope, idem_key) IN (
    SELECT scope, idem_key FROM conveyor_idempotency_keys
    WHERE expires_at <= {now}
    ORDER BY expires_at
    LIMIT :limit
);
