-- The operator's decisions on consent pages, by the code a page shows (issue 37). Opening a
-- consent page stores nothing: the page holds its own sealed request and its code is derived
-- from it, so anonymous callers cannot fill, shadow or cancel anything here. Only the
-- operator's `approve` and `deny` add a row; the page that shows the code claims an approval
-- on its next poll, and only then is its authorization (with its one code) recorded.
CREATE TABLE mcp_oauth_decisions (
    user_code    TEXT PRIMARY KEY,
    approve      INTEGER NOT NULL CHECK (approve IN (0, 1)),
    decided_by   TEXT NOT NULL,
    decided_at   INTEGER NOT NULL,
    -- An approval no page claims by then is void (the operator was told it did not happen);
    -- a denial holds while the page it refuses may still poll.
    expires_at   INTEGER NOT NULL,
    withdrawn_at INTEGER,
    -- The page that claimed the approval (SHA-256 of its nonce) and what it showed.
    page_sha256  TEXT,
    claimed_at   INTEGER,
    client_id    TEXT,
    client_name  TEXT,
    redirect_uri TEXT
) STRICT;

-- Authorizations waiting for the operator are no longer rows: the ones left are void.
DELETE FROM mcp_oauth_authorizations WHERE approved_at IS NULL;
