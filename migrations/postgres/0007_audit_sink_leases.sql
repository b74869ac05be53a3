-- Version 7, as migrations/0007_audit_sink_leases.sql: one process ships each audit sink at a
-- time, under a lease renewed with every batch.
ALTER TABLE audit_sink_cursors ADD COLUMN leased_by TEXT;
ALTER TABLE audit_sink_cursors ADD COLUMN lease_until BIGINT;
