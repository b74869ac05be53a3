-- A fleet: one publisher service for many sprites (docs/fleet.md).
--
-- The registry of the fleet's members: sprites (their relays) and operators. A member is
-- admitted by a certificate from the fleet's CA *and* this row: the service looks the member up
-- on every request, so removing it takes effect at its next request, whatever its certificate
-- still says. `key_sha256` is the SHA-256 of the public key (SubjectPublicKeyInfo, DER) the
-- member enrolled with: a certificate for the same name over another key is refused.
CREATE TABLE fleet_members (
    role        TEXT NOT NULL CHECK (role IN ('sprite', 'operator')),
    name        TEXT NOT NULL,
    labels      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(labels)),
    key_sha256  TEXT NOT NULL,
    enrolled_at INTEGER NOT NULL,
    enrolled_by TEXT NOT NULL,
    removed_at  INTEGER,
    removed_by  TEXT,
    PRIMARY KEY (role, name)
) STRICT;

-- Who a grant or YOLO scope belongs to. Both NULL: the single sprite's own agent (every row
-- made before a fleet). `sprite`: one sprite of the fleet. `sprite_label`: every sprite whose
-- labels include this `key=value`. Never both.
ALTER TABLE grants ADD COLUMN sprite TEXT;
ALTER TABLE grants ADD COLUMN sprite_label TEXT
    CHECK (sprite_label IS NULL OR sprite IS NULL);
ALTER TABLE yolo_scopes ADD COLUMN sprite TEXT;
ALTER TABLE yolo_scopes ADD COLUMN sprite_label TEXT
    CHECK (sprite_label IS NULL OR sprite IS NULL);
