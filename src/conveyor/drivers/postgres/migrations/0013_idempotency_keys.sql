-- The first answer to a create request that carried an Idempotency-Key header, kept
-- until expires_at so that the same request sent again replays it. A row is written in
-- the same transaction as the jobs the request created.
-- scope: a SHA-256 (hex) of who asked (never the token itself); request_hash: a SHA-256
-- of the method, the path and the canonical body.
CREATE TABLE {schema}.conveyor_idempotency_keys (
    scope         text        NOT NULL,
    idem_key      text        NOT NULL,
    request_hash  text        NOT NULL,
    answer_status integer,
    body          text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX conveyor_idempotency_keys_expiry ON {schema}.conveyor_idempotency_keys (expires_at);
