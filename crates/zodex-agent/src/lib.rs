//! The agent's side of the publisher: the clients of the agent socket behind `zodex-agent
//! github …` (publish-pr, request-push and its wait), the git credential helper and
//! `git-remote-zodex`. It speaks `protocol` and imports nothing of `publisher`.
//!
//! Architecture invariant: the agent side never decides and holds nothing secret; it asks
//! `zodex-prd` and shows the answer. Its checks are courtesy, never security.

pub mod approval;
pub mod bundle;
pub mod client;
pub mod credential;
pub mod progress;
pub mod publish;
pub mod remote_helper;
