-- A fleet's join codes (docs/fleet.md, "More operators"): an operator asks the service for a
-- one-time code that admits one new operator, who redeems it from their own machine with a
-- certificate request for a key made there. Only the code's SHA-256 is stored: the code itself
-- is shown once, to the operator who asked. A code admits the operator `name` once
-- (`used_at`), until `expires_at`. Additive: a replica of version 12 never reads this table.
CREATE TABLE fleet_join_codes (
    code_sha256 TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    issued_by   TEXT NOT NULL,
    issued_at   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT;
