-- A fleet sprite's MCP endpoint, with the service as its OAuth authorization server
-- (docs/fleet.md). Additive, with defaults: a replica of version 10 beside one of 11 reads and
-- writes what it knew, and its rows mean the single sprite's own endpoint.
--
-- The public URL of a sprite's MCP endpoint (its OAuth resource; the issuer is its origin with
-- `/oauth`). Set only by an operator (`zodex fleet mcp public-url`), never by the sprite: the
-- service answers OAuth for the sprite only once it is set. Two sprites never share one.
ALTER TABLE fleet_members ADD COLUMN mcp_public_url TEXT;
CREATE UNIQUE INDEX fleet_members_by_mcp_public_url ON fleet_members (mcp_public_url)
    WHERE mcp_public_url IS NOT NULL;

-- Which sprite's consent page an operator's decision is for: only a page that sprite shows
-- may collect it. NULL: the single sprite's own endpoint.
ALTER TABLE mcp_oauth_decisions ADD COLUMN sprite TEXT;
