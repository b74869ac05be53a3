-- Version 13, as migrations/0013_fleet_join_codes.sql: one-time codes that admit a new
-- operator, stored as their SHA-256 only.
CREATE TABLE fleet_join_codes (
    code_sha256 TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    issued_by   TEXT NOT NULL,
    issued_at   BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
