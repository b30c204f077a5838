-- The first answer to a create request that carried an Idempotency-Key header, kept
-- until expires_at so that the same request sent again replays it. A row is written in
-- the same transaction as the jobs the request created.
-- scope: a SHA-256 (hex) of who asked (never the token itself); request_hash: a SHA-256
-- of the method, the path and the canonical body. Keys are printable ASCII, compared
-- byte for byte. (Migration 0013 of the SQLite and PostgreSQL schemas.)
CREATE TABLE conveyor_idempotency_keys (
    scope         CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    idem_key      VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    request_hash  CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    answer_status INT,
    body          LONGTEXT,
    created_at    DATETIME(6)  NOT NULL,
    expires_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (scope, idem_key),
    KEY conveyor_idempotency_keys_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {collation};
