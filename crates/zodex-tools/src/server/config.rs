//! The `[mcp]` table of a Zodex configuration file, read by `zodex-agent serve --config`. The
//! table itself (`McpConfig`, its keys and their checks) is `zodex-mcp-settings`'s, shared with
//! the publisher's configuration; here: reading it from a file, and the server's defaults.

use std::path::Path;

use super::UsageError;

pub use zodex_mcp_settings::{McpConfig, McpConfigError};

/// Where `zodex-agent serve` listens when neither `--listen` nor the configuration says.
pub const DEFAULT_SERVE_LISTEN: &str = "127.0.0.1:8080";

/// Reads the `[mcp]` table of `path`; a file without one gives the defaults.
pub fn load(path: &Path) -> anyhow::Result<McpConfig> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read config {}: {e}", path.display())))?;
    McpConfig::parse(&text)
        .map_err(|e| UsageError(format!("config {}: {e}", path.display())).into())
}
