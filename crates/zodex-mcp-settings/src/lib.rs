//! The MCP endpoint's settings, in one place for both of their sides: `zodex-agent serve`
//! (crate `zodex-tools`) reads them, the publisher (through `zodex-config`) reads the table
//! and writes the key hash file `zodex sprite connect` sends. A leaf: no other Zodex crate,
//! so the tools stay free of the publisher's crates and the configuration of the tools'.
//!
//! Code map:
//! - `key_hash`: `KeyHash`, the SHA-256 of the capability key (the only form of it a sprite
//!   keeps), and its file: exactly the lower-case hex and a newline, replaced atomically.
//! - `table`: `McpConfig`, the `[mcp]` table (with `[mcp.context]`, `ContextConfig`); unknown
//!   keys are errors.

pub mod key_hash;
pub mod table;

pub use key_hash::{KeyHash, KeyHashError};
pub use table::{ContextConfig, McpConfig, McpConfigError};
