-- Version 16: sinks that follow each audit chain.
--
-- On PostgreSQL a fleet sprite's writes are confined to its own shard of the state (its
-- requests, decisions and audit rows) and no longer wait for every other sprite's: each
-- sprite appends to its own chains, `sprite:NAME/evidence` and `sprite:NAME/bulk`. Rows of
-- different chains then commit in any order, so a sink can no longer follow one id cursor (a
-- row with a smaller id may commit after a larger one was shipped): it follows each chain's
-- sequence numbers, which commit in order. SQLite keeps one writer and its two chains (their
-- CHECK stays), but its sinks follow the same cursors, so one code serves both.
CREATE TABLE audit_sink_chain_cursors (
    sink           TEXT NOT NULL,
    chain          TEXT NOT NULL,
    -- The last sequence number of `chain` delivered to `sink`.
    delivered_seq  INTEGER NOT NULL,
    PRIMARY KEY (sink, chain)
) STRICT;

-- Where each sink had got to, per chain: the newest row of the chain at or before its cursor.
INSERT INTO audit_sink_chain_cursors (sink, chain, delivered_seq)
SELECT c.sink, ch.chain,
       COALESCE((SELECT MAX(e.seq) FROM audit_events e
                 WHERE e.chain = ch.chain AND e.id <= c.delivered_id), ch.base_seq)
FROM audit_sink_cursors c CROSS JOIN audit_chains ch;
