-- Publishers sharing one store sweep each other's write tokens: a token is recorded sealed
-- (encrypted with a key derived from the writer App's private key, which only publishers
-- hold) with the process that minted it, and every process says it is alive. A token whose
-- process stopped saying so is revoked, by value, by whichever publisher is alive. The seal
-- is removed when the token is revoked.
ALTER TABLE issued_tokens ADD COLUMN sealed BLOB;
ALTER TABLE issued_tokens ADD COLUMN holder TEXT;
CREATE TABLE publisher_processes (
    holder  TEXT PRIMARY KEY,
    seen_at INTEGER NOT NULL
) STRICT;
