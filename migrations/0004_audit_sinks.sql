-- Where each configured audit sink (`[[audit_sinks]]`) has got to: the audit rows are the
-- outbox, so nothing pending is lost across a restart, and every row reaches each sink in
-- order. A sink seen for the first time starts at the newest row of that moment.
CREATE TABLE audit_sink_cursors (
    sink          TEXT PRIMARY KEY,
    delivered_id  INTEGER NOT NULL,
    delivered_at  INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    last_attempt  INTEGER
) STRICT;
