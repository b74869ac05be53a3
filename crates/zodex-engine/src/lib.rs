//! The policy engine: SQLite state, Cedar schema and policies, and `decide()`.
//!
//! Architecture invariant: the engine never touches the network, git or the clock directly —
//! time comes in as `now`, state comes from its SQLite store, decisions go out as values.

pub mod decide;
pub mod policy;
pub mod properties;
pub mod refscope;
pub mod repo;
pub mod store;
pub mod targets;
pub mod ttl;
pub mod vocabulary;

pub use decide::{Action, Ask, Decision, Engine, GrantTerms, Principal, RefUpdate, RepoFacts};
pub use repo::RepoName;
pub use vocabulary::{Actor, AuditAction, AuditDecision, EventKind, Outcome};
pub mod authority;
pub mod hints;
pub mod ledger;
pub mod mcp_oauth;

pub use authority::{Authority, AuthorityError, Denial, Status, YoloTerms};

#[cfg(test)]
mod action_index_tests;
#[cfg(test)]
mod tests;
