-- Tamper evidence: every audit row is a link of one of two hash chains. `evidence` holds what
-- must outlive the agent (operator actions, allowed writes, tokens, approvals, outcomes);
-- `bulk` what the agent can make again and again (its refusals and push requests), which has a
-- row budget of its own. Each chain is pruned only from its start, so what stays is checkable
-- from the recorded base: the sequence number and link of the last row pruned.
ALTER TABLE audit_events ADD COLUMN chain TEXT CHECK (chain IS NULL OR chain IN ('evidence', 'bulk'));
ALTER TABLE audit_events ADD COLUMN seq INTEGER;
-- Hex SHA-256 over the previous row's link and this row's content (`store::audit_chain`).
ALTER TABLE audit_events ADD COLUMN link TEXT;
-- An outcome row (what happened at GitHub after an allow) names the decision row it completes:
-- rows are never updated, so a later outcome is a row of its own.
ALTER TABLE audit_events ADD COLUMN outcome_of INTEGER;
CREATE INDEX audit_by_chain ON audit_events (chain, seq);
CREATE INDEX audit_outcomes ON audit_events (outcome_of) WHERE outcome_of IS NOT NULL;

CREATE TABLE audit_chains (
    chain       TEXT PRIMARY KEY CHECK (chain IN ('evidence', 'bulk')),
    head_seq    INTEGER NOT NULL,
    head_link   TEXT NOT NULL,
    -- Where the kept part starts: the last pruned row's sequence number and link.
    base_seq    INTEGER NOT NULL,
    base_link   TEXT NOT NULL,
    pruned_rows INTEGER NOT NULL DEFAULT 0,
    pruned_at   INTEGER
) STRICT;
INSERT INTO audit_chains (chain, head_seq, head_link, base_seq, base_link) VALUES
    ('evidence', 0, '0000000000000000000000000000000000000000000000000000000000000000',
                 0, '0000000000000000000000000000000000000000000000000000000000000000'),
    ('bulk',     0, '0000000000000000000000000000000000000000000000000000000000000000',
                 0, '0000000000000000000000000000000000000000000000000000000000000000');
