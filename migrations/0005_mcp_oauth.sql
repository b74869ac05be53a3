-- OAuth for the MCP endpoint (src/publisher/oauth): the authorization server's state. Only the
-- publisher user can read state.db, so the signing key and the refresh tokens' hashes stay out
-- of the agent's reach; the agent side verifies access tokens with the public key alone.

-- The Ed25519 key access tokens are signed with (PKCS#8). One row is current; a retired key
-- is kept while tokens it signed may still be live.
CREATE TABLE mcp_oauth_keys (
    kid          TEXT PRIMARY KEY,
    pkcs8        BLOB NOT NULL,
    public_key   BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    retired_at   INTEGER
) STRICT;

-- Clients: registered dynamically (RFC 7591, `dcr`) or named by the URL of their metadata
-- document (`cimd`, fetched and checked at each authorization).
CREATE TABLE mcp_oauth_clients (
    client_id      TEXT PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('dcr', 'cimd')),
    name           TEXT NOT NULL,
    redirect_uris  TEXT NOT NULL,            -- JSON array, matched exactly
    auth_method    TEXT NOT NULL CHECK (auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    secret_sha256  TEXT,                     -- only for the client_secret_* methods
    created_at     INTEGER NOT NULL,
    last_used_at   INTEGER,
    revoked_at     INTEGER
) STRICT;

-- One authorization request, from the consent page to its code. `browser_sha256` is the hash
-- of the secret the page holds (only that page may collect the code); `user_code` is what the
-- operator approves. The code is stored by its hash and used at most once.
CREATE TABLE mcp_oauth_authorizations (
    id              INTEGER PRIMARY KEY,
    user_code       TEXT NOT NULL UNIQUE,
    browser_sha256  TEXT NOT NULL UNIQUE,
    client_id       TEXT NOT NULL REFERENCES mcp_oauth_clients(client_id),
    redirect_uri    TEXT NOT NULL,
    state           TEXT,
    code_challenge  TEXT NOT NULL,
    scope           TEXT NOT NULL,
    resource        TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    approved_at     INTEGER,
    approved_by     TEXT,
    denied_at       INTEGER,
    code_sha256     TEXT UNIQUE,
    code_expires_at INTEGER,
    code_used_at    INTEGER,
    family          TEXT
) STRICT;

-- A refresh-token family: everything issued from one approved authorization. Revoking it (the
-- operator, or a refresh token used twice) ends every token in it.
CREATE TABLE mcp_oauth_families (
    family        TEXT PRIMARY KEY,
    client_id     TEXT NOT NULL REFERENCES mcp_oauth_clients(client_id),
    scope         TEXT NOT NULL,
    resource      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    revoked_at    INTEGER,
    revoked_why   TEXT
) STRICT;

CREATE TABLE mcp_oauth_refresh_tokens (
    token_sha256  TEXT PRIMARY KEY,
    family        TEXT NOT NULL REFERENCES mcp_oauth_families(family),
    issued_at     INTEGER NOT NULL,
    used_at       INTEGER
) STRICT;
CREATE INDEX mcp_oauth_refresh_by_family ON mcp_oauth_refresh_tokens(family);

-- Switches the operator sets: `key_url` (`on`/`off`) — whether `?key=` still opens /mcp.
CREATE TABLE mcp_oauth_settings (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) STRICT;
