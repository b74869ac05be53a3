-- Version 12, as migrations/0012_audit_base_guard.sql: the audit's chains, guarded by the
-- database itself. Only the database's owner (the maintenance role: `zodex-prd store prune`)
-- removes audit rows and moves a chain's base; any other role — the publishers' — moves a
-- chain only by appending: the head one sequence number on, to a row it has just inserted.
--
-- Until version 11 pruning went through zodex_prune_chain, a function running with the owner's
-- rights that the publisher's role could call with any bounds: whoever held a replica's
-- password could delete every row of a chain and move its base with it, leaving a chain that
-- still verified. The function goes (with its grants); the owner deletes directly, under the
-- same rule the engine applies on SQLite (from a chain's start only, in the transaction that
-- appends the prune's own evidence row).
DROP FUNCTION zodex_prune_chain(TEXT, BIGINT, BIGINT);

-- Whether the role running the statement is the owner of `rel` (or a member of its role, or a
-- superuser). A trigger runs as the role of the statement that fired it.
CREATE FUNCTION zodex_owns(rel OID) RETURNS BOOLEAN
    LANGUAGE sql STABLE AS $$
    SELECT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = rel), 'MEMBER')
$$;

-- audit_chains: a role other than the owner may only append: head_seq one on, head_link the
-- link of the row of that sequence number, everything else as it was.
CREATE FUNCTION zodex_audit_chains_guard() RETURNS TRIGGER
    LANGUAGE plpgsql AS $$
BEGIN
    IF zodex_owns(TG_RELID)
       OR (NEW.chain = OLD.chain
           AND NEW.base_seq = OLD.base_seq AND NEW.base_link = OLD.base_link
           AND NEW.pruned_rows = OLD.pruned_rows
           AND NEW.pruned_at IS NOT DISTINCT FROM OLD.pruned_at
           AND NEW.head_seq = OLD.head_seq + 1
           AND EXISTS (SELECT 1 FROM audit_events
                       WHERE chain = NEW.chain AND seq = NEW.head_seq AND link = NEW.head_link)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied: role % may only append to audit chain %', current_user,
        OLD.chain
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'only the database''s owner prunes the audit: zodex-prd store prune';
END $$;
CREATE TRIGGER audit_chains_append_only BEFORE UPDATE ON audit_chains
    FOR EACH ROW EXECUTE FUNCTION zodex_audit_chains_guard();

-- Everything else that could take evidence away is the owner's alone: changing or deleting an
-- audit row, emptying either table, adding or deleting a chain. The grants `store init` gives
-- say the same; these hold whatever is granted. (Statement triggers: once per statement, so
-- the owner's prune of many rows costs one check.)
CREATE FUNCTION zodex_audit_owner_only() RETURNS TRIGGER
    LANGUAGE plpgsql AS $$
BEGIN
    IF NOT zodex_owns(TG_RELID) THEN
        RAISE EXCEPTION 'permission denied: role % may not % %', current_user, lower(TG_OP),
            TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'only the database''s owner prunes the audit: zodex-prd store prune';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER audit_events_owner_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION zodex_audit_owner_only();
CREATE TRIGGER audit_chains_owner_only BEFORE INSERT OR DELETE OR TRUNCATE ON audit_chains
    FOR EACH STATEMENT EXECUTE FUNCTION zodex_audit_owner_only();
