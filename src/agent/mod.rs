//! The agent's side of the publisher: clients of the agent socket used by `zodex-agent github …`
//! (and, later, the credential helper and `git-remote-zodex`).
//!
//! Architecture invariant: the agent side never decides and holds nothing secret; it asks
//! `zodex-prd` and shows the answer. Its checks are courtesy, never security.

pub mod approval;
pub mod bundle;
pub mod client;
pub mod credential;
pub mod publish;
pub mod remote_helper;
