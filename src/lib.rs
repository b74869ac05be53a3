//! Zodex: a chat model's terminal on a real machine, with every GitHub write behind one gate.
//!
//! See `ARCHITECTURE.md` for the crate map and the data flows; each crate's `lib.rs` has its code map.

/// The agent's side: clients of the agent socket, git helpers (crate `zodex-agent`).
pub use zodex_agent as agent;
pub mod cli;
/// zodex.toml, parsed and checked once (crate `zodex-config`).
pub use zodex_config as config;
/// The local GitHub stand-in (crate `zodex-devhub`).
pub use zodex_devhub as devhub;
/// The policy engine (crate `zodex-engine`).
pub use zodex_engine as engine;
/// `zodex-prd install` and the rest of a sprite's deployment (crate `zodex-install`).
pub use zodex_install as install;
/// The operator's side, `zodex` (crate `zodex-operator`).
pub use zodex_operator as operator;
/// What the publisher and its clients say to each other (crate `zodex-protocol`).
pub use zodex_protocol as protocol;
/// `zodex-prd`, the publisher service (crate `zodex-publisher`).
pub use zodex_publisher as publisher;
/// The MCP server and its tools (crate `zodex-tools`).
pub use zodex_tools as tools;
