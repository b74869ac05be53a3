-- Version 10, as migrations/0010_allowances.sql: what a grant or YOLO scope allows beyond the
-- shipped rules (paths, secret fingerprints).
ALTER TABLE grants ADD COLUMN allowances TEXT
    CHECK (allowances IS NULL OR zodex_json_valid(allowances));
ALTER TABLE yolo_scopes ADD COLUMN allowances TEXT
    CHECK (allowances IS NULL OR zodex_json_valid(allowances));
