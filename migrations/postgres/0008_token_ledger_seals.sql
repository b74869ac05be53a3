-- Version 8, as migrations/0008_token_ledger_seals.sql: write tokens recorded sealed with the
-- process that minted them, and the processes alive, so a survivor revokes a dead one's tokens.
ALTER TABLE issued_tokens ADD COLUMN sealed BYTEA;
ALTER TABLE issued_tokens ADD COLUMN holder TEXT;
CREATE TABLE publisher_processes (
    holder  TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
