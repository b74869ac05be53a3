-- Zodex publisher state, version 1. Never edit once released: add a new numbered file instead.
-- All times are Unix seconds. Repository keys are lower-cased `owner/name`.

-- What the publisher learned about each repository from GitHub, per App.
CREATE TABLE coverage (
    repo_key        TEXT NOT NULL,
    app             TEXT NOT NULL CHECK (app IN ('reader', 'writer')),
    installed       INTEGER NOT NULL CHECK (installed IN (0, 1)),
    installation_id INTEGER,
    default_branch  TEXT,
    checked_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    PRIMARY KEY (repo_key, app)
) STRICT;

-- Explicit push grants and the agent's requests for them.
CREATE TABLE grants (
    id              INTEGER PRIMARY KEY,
    repo_key        TEXT NOT NULL,
    repo_display    TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'active', 'revoked', 'expired', 'denied')),
    created_by      TEXT NOT NULL CHECK (created_by IN ('agent', 'operator')),
    reason          TEXT,
    ttl_seconds     INTEGER CHECK (ttl_seconds IS NULL OR ttl_seconds > 0),
    via             TEXT NOT NULL CHECK (via IN ('gateway', 'token')),
    allow_workflows INTEGER NOT NULL CHECK (allow_workflows IN (0, 1)),
    created_at      INTEGER NOT NULL,
    activated_at    INTEGER,
    expires_at      INTEGER,
    approved_by     TEXT,
    ended_at        INTEGER,
    ended_by        TEXT,
    CHECK (state != 'active' OR activated_at IS NOT NULL),
    CHECK (expires_at IS NULL OR ttl_seconds IS NOT NULL)
) STRICT;
CREATE INDEX grants_by_repo_state ON grants (repo_key, state);
CREATE INDEX grants_by_state ON grants (state, expires_at);

-- YOLO scopes: one repository, or every repository the writer App is installed on.
CREATE TABLE yolo_scopes (
    id              INTEGER PRIMARY KEY,
    repo_key        TEXT,            -- NULL: all installed repositories
    repo_display    TEXT,
    allow_workflows INTEGER NOT NULL CHECK (allow_workflows IN (0, 1)),
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER,         -- NULL: no TTL (recorded as the operator's explicit choice)
    created_by      TEXT NOT NULL,
    cleared_at      INTEGER,
    cleared_by      TEXT,
    CHECK ((repo_key IS NULL) = (repo_display IS NULL))
) STRICT;
CREATE INDEX yolo_live ON yolo_scopes (cleared_at, repo_key);

-- Installation tokens the publisher minted: their hash only, never the token.
CREATE TABLE issued_tokens (
    token_sha256    TEXT PRIMARY KEY,
    repo_key        TEXT NOT NULL,
    app             TEXT NOT NULL CHECK (app IN ('reader', 'writer')),
    permissions     TEXT NOT NULL,   -- JSON object, e.g. {"contents":"write"}
    purpose         TEXT NOT NULL,
    grant_id        INTEGER REFERENCES grants (id),
    audit_id        INTEGER REFERENCES audit_events (id),
    issued_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    revoked_at      INTEGER
) STRICT;
CREATE INDEX issued_tokens_live ON issued_tokens (revoked_at, expires_at);

-- Review-first pull requests, keyed by the client's idempotency key.
CREATE TABLE publications (
    idempotency_key TEXT PRIMARY KEY,
    repo_key        TEXT NOT NULL,
    branch          TEXT NOT NULL,
    base            TEXT NOT NULL,
    pr_number       INTEGER,
    url             TEXT,
    state           TEXT NOT NULL CHECK (state IN ('pushing', 'pushed', 'opened', 'failed')),
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

-- Every decision, allow or deny, and every change of authority.
CREATE TABLE audit_events (
    id              INTEGER PRIMARY KEY,
    at              INTEGER NOT NULL,
    principal       TEXT NOT NULL,
    action          TEXT NOT NULL,
    repo_key        TEXT,
    ref_name        TEXT,
    old_oid         TEXT,
    new_oid         TEXT,
    bundle_bytes    INTEGER,
    bundle_sha256   TEXT,
    decision        TEXT NOT NULL CHECK (decision IN ('allow', 'deny', 'event')),
    policies        TEXT NOT NULL,   -- JSON array of deciding policy ids
    token_sha256    TEXT,
    outcome         TEXT,
    detail          TEXT
) STRICT;
CREATE INDEX audit_by_time ON audit_events (at);
CREATE INDEX audit_by_repo ON audit_events (repo_key, at);
