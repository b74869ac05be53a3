-- Version 15, as migrations/0015_grants_ended_indexes.sql: what ended lately, by index.
CREATE INDEX grants_by_ended ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_by_sprite_ended ON grants (sprite, ended_at) WHERE sprite IS NOT NULL;
CREATE INDEX grants_by_label_ended ON grants (sprite_label, ended_at)
    WHERE sprite_label IS NOT NULL;
