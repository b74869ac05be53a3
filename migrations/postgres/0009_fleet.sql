-- Version 9, as migrations/0009_fleet.sql: the fleet's members, and who a grant or YOLO
-- scope belongs to.
CREATE TABLE fleet_members (
    role        TEXT NOT NULL CHECK (role IN ('sprite', 'operator')),
    name        TEXT NOT NULL,
    labels      TEXT NOT NULL DEFAULT '{}' CHECK (zodex_json_valid(labels)),
    key_sha256  TEXT NOT NULL,
    enrolled_at BIGINT NOT NULL,
    enrolled_by TEXT NOT NULL,
    removed_at  BIGINT,
    removed_by  TEXT,
    PRIMARY KEY (role, name)
);

ALTER TABLE grants ADD COLUMN sprite TEXT;
ALTER TABLE grants ADD COLUMN sprite_label TEXT
    CHECK (sprite_label IS NULL OR sprite IS NULL);
ALTER TABLE yolo_scopes ADD COLUMN sprite TEXT;
ALTER TABLE yolo_scopes ADD COLUMN sprite_label TEXT
    CHECK (sprite_label IS NULL OR sprite IS NULL);
