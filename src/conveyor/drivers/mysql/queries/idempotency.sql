-- Idempotent create requests (conveyor.ops.idempotency): the first answer to a request
-- with an Idempotency-Key, written in the transaction of the jobs it created.

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

-- name: forget_idempotency_keys
-- Expired records (their retention over: the key may be used again), at most :limit,
-- oldest first (a small batch: a short lock); or the record of :scope and :idem_key
-- alone, if it is expired.
DELETE FROM conveyor_idempotency_keys
WHERE expires_at <= {now}
  AND scope = :scope AND idem_key = :idem_key  -- if :idem_key
ORDER BY expires_at
LIMIT :limit;
