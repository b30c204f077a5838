-- Idempotent create requests (conveyor.ops.idempotency): the first answer to a request
-- with an Idempotency-Key, written in the transaction of the jobs it created.

-- name: forget_expired_idempotency_key
-- The record of this key, if its retention is over: the key may be used again.
DELETE FROM conveyor_idempotency_keys
WHERE scope = :scope AND idem_key = :idem_key AND expires_at <= {now};

-- name: claim_idempotency_key
-- 1 row: the key is this request's now (its answer is saved before the commit); 0: an
-- earlier request has it. A request whose transaction inserted the key first and is
-- still open makes this one wait for its commit (then 0) or rollback (then 1). IGNORE,
-- not a no-op ON DUPLICATE KEY UPDATE: the connection counts found rows, so that would
-- answer 1 either way; every value here is checked before (no truncation to hide).
INSERT IGNORE INTO conveyor_idempotency_keys
    (scope, idem_key, request_hash, created_at, expires_at)
VALUES (:scope, :idem_key, :request_hash, {now}, {now} + INTERVAL :keep_s SECOND);

-- name: idempotency_record
-- A locking read: the latest committed row, whatever this transaction's snapshot.
SELECT request_hash, answer_status, body, expires_at <= {now} AS expired FROM conveyor_idempotency_keys
WHERE scope = :scope AND idem_key = :idem_key
LOCK IN SHARE MODE;

-- name: save_idempotent_answer
UPDATE conveyor_idempotency_keys SET answer_status = :answer_status, body = :body
WHERE scope = :scope AND idem_key = :idem_key AND answer_status IS NULL;

-- name: prune_idempotency_keys
-- At most :limit expired records, oldest first (a small batch: short locks).
DELETE FROM conveyor_idempotency_keys
WHERE expires_at <= {now}
ORDER BY expires_at
LIMIT :limit;
