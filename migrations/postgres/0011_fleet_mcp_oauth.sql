-- Version 11, as migrations/0011_fleet_mcp_oauth.sql: a fleet sprite's MCP public URL (set by
-- an operator; unique) and the sprite an operator's OAuth decision is for.
ALTER TABLE fleet_members ADD COLUMN mcp_public_url TEXT;
CREATE UNIQUE INDEX fleet_members_by_mcp_public_url ON fleet_members (mcp_public_url)
    WHERE mcp_public_url IS NOT NULL;
ALTER TABLE mcp_oauth_decisions ADD COLUMN sprite TEXT;
