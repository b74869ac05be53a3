-- Version 16, as migrations/0016_audit_shards.sql: an audit chain per fleet sprite, and sinks
-- that follow each chain.
CREATE TABLE audit_sink_chain_cursors (
    sink           TEXT NOT NULL,
    chain          TEXT NOT NULL,
    delivered_seq  BIGINT NOT NULL,
    PRIMARY KEY (sink, chain)
);

INSERT INTO audit_sink_chain_cursors (sink, chain, delivered_seq)
SELECT c.sink, ch.chain,
       COALESCE((SELECT MAX(e.seq) FROM audit_events e
                 WHERE e.chain = ch.chain AND e.id <= c.delivered_id), ch.base_seq)
FROM audit_sink_cursors c CROSS JOIN audit_chains ch;

-- Appends of different shards run at once, so ids come from the identity sequence (until now
-- each append took the largest id plus one, under the one writer's lock): start it after
-- every id in use.
SELECT setval(pg_get_serial_sequence('audit_events', 'id'),
              COALESCE((SELECT MAX(id) FROM audit_events), 0) + 1, false);

-- A publisher's role may now add a chain, and only a sprite's, only empty: it cannot add a
-- chain with rows it did not append, nor one of the store's own names. Deleting or emptying
-- a chain stays the owner's alone (audit_chains_owner_only, now without INSERT).
DROP TRIGGER audit_chains_owner_only ON audit_chains;
CREATE TRIGGER audit_chains_owner_only BEFORE DELETE OR TRUNCATE ON audit_chains
    FOR EACH STATEMENT EXECUTE FUNCTION zodex_audit_owner_only();

CREATE FUNCTION zodex_audit_chains_new_guard() RETURNS TRIGGER
    LANGUAGE plpgsql AS $$
BEGIN
    IF zodex_owns(TG_RELID)
       OR (NEW.chain ~ '^sprite:[^/]+/(evidence|bulk)$'
           AND NEW.head_seq = 0 AND NEW.base_seq = 0 AND NEW.pruned_rows = 0
           AND NEW.pruned_at IS NULL
           AND NEW.head_link = repeat('0', 64) AND NEW.base_link = repeat('0', 64)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied: role % may only add an empty sprite chain, not %',
        current_user, NEW.chain
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_chains_new_empty BEFORE INSERT ON audit_chains
    FOR EACH ROW EXECUTE FUNCTION zodex_audit_chains_new_guard();

-- The chain names a row and a chain may carry: the store's own two, and a sprite's. (Every
-- row already satisfies the narrower check it replaces: NOT VALID skips rereading them.)
ALTER TABLE audit_events DROP CONSTRAINT audit_events_chain_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_chain_check
    CHECK (chain IS NULL OR chain IN ('evidence', 'bulk')
           OR chain ~ '^sprite:[^/]+/(evidence|bulk)$') NOT VALID;
ALTER TABLE audit_chains DROP CONSTRAINT audit_chains_chain_check;
ALTER TABLE audit_chains ADD CONSTRAINT audit_chains_chain_check
    CHECK (chain IN ('evidence', 'bulk') OR chain ~ '^sprite:[^/]+/(evidence|bulk)$') NOT VALID;

-- The publishers' roles (those `store init` gave the append-only head of audit_chains) get the
-- new table's rows and may add chains; `store init` grants the same to a role made from now on.
DO $$
DECLARE publisher RECORD;
BEGIN
    FOR publisher IN
        SELECT DISTINCT grantee FROM information_schema.column_privileges
        WHERE table_schema = current_schema() AND table_name = 'audit_chains'
          AND column_name = 'head_seq' AND privilege_type = 'UPDATE'
          AND grantee <> current_user
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON audit_sink_chain_cursors TO %I',
                       publisher.grantee);
        EXECUTE format('GRANT INSERT ON audit_chains TO %I', publisher.grantee);
    END LOOP;
END $$;
