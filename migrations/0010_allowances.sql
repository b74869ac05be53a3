-- What a grant or YOLO scope allows beyond the shipped rules (`--allow-path PATTERN`,
-- `--allow-secret FINGERPRINT`): a JSON object `{"paths": [...], "secrets": [...]}`, or NULL
-- for nothing. Read by the engine (crate zodex-engine, `store::Allowances`).
ALTER TABLE grants ADD COLUMN allowances TEXT CHECK (allowances IS NULL OR json_valid(allowances));
ALTER TABLE yolo_scopes ADD COLUMN allowances TEXT CHECK (allowances IS NULL OR json_valid(allowances));
