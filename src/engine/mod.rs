//! The policy engine: SQLite state, Cedar schema and policies, and `decide()`.
//!
//! Architecture invariant: the engine never touches the network, git or the clock directly —
//! time comes in as `now`, state comes from its SQLite store, decisions go out as values.

pub mod ttl;
