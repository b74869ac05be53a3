-- Publishers sharing one store ship each audit sink from one process at a time: the process
-- holding a sink's lease (renewed with every batch) ships it, and another takes over once the
-- lease has run out. Moving the cursor requires the lease, so a process that lost it (stalled
-- past it) cannot move the cursor behind the one that took over.
ALTER TABLE audit_sink_cursors ADD COLUMN leased_by TEXT;
ALTER TABLE audit_sink_cursors ADD COLUMN lease_until INTEGER;
