-- Grants and YOLO scopes limited to ref patterns (`--ref 'feature/*'`): a JSON array of
-- normalised patterns (`refs/heads/feature/*`), or NULL for every ref.
ALTER TABLE grants ADD COLUMN ref_patterns TEXT CHECK (ref_patterns IS NULL OR json_valid(ref_patterns));
ALTER TABLE yolo_scopes ADD COLUMN ref_patterns TEXT CHECK (ref_patterns IS NULL OR json_valid(ref_patterns));
