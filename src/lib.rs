//! Zodex: a chat model's terminal on a real machine, with every GitHub write behind one gate.
//!
//! See `ARCHITECTURE.md` for the module map and the data flow.

pub mod agent;
pub mod cli;
pub mod config;
pub mod devhub;
/// The policy engine (crate `zodex-engine`).
pub use zodex_engine as engine;
pub mod operator;
pub mod protocol;
pub mod publisher;
/// The MCP server and its tools (crate `zodex-tools`).
pub use zodex_tools as tools;
