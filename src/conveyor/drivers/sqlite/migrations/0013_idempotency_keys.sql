-- The first answer to a create request that carried an Idempotency-Key header, kept
-- until expires_at (epoch seconds) so that the same request sent again replays it. A
-- row is written in the same transaction as the jobs the request created.
-- scope: a SHA-256 (hex) of who asked (never the token itself); request_hash: a SHA-256
-- of the method, the path and the canonical body.
CREATE TABLE conveyor_idempotency_keys (
    scope         TEXT    NOT NULL,
    idem_key      TEXT    NOT NULL,
    request_hash  TEXT    NOT NULL,
    answer_status INTEGER,
    body          TEXT,
    created_at    REAL    NOT NULL,
    expires_at    REAL    NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX conveyor_idempotency_keys_expiry ON conveyor_idempotency_keys (expires_at);
