//! Zodex: a chat model's terminal on a real machine, with every GitHub write behind one gate.
//!
//! See `ARCHITECTURE.md` for the module map and the data flow.

pub mod agent;
pub mod cli;
pub mod config;
/// The local GitHub stand-in (crate `zodex-devhub`).
pub use zodex_devhub as devhub;
/// The policy engine (crate `zodex-engine`).
pub use zodex_engine as engine;
pub mod operator;
/// What the publisher and its clients say to each other (crate `zodex-protocol`).
pub use zodex_protocol as protocol;
pub mod publisher;
/// The MCP server and its tools (crate `zodex-tools`).
pub use zodex_tools as tools;
