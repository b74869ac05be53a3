//! The typed result of every request: what `Response::result` holds, by request.
//!
//! The publisher builds these values and the clients read them back with
//! [`Response::answer`](super::Response::answer), so renaming a field breaks the build on both
//! sides instead of silently blanking the operator's output. Every one is the protocol's own:
//! where the engine computes the value (a grant, a decision, an audit row), the answer mirrors
//! it field for field and is made from it with `From`, so the engine can change how it stores
//! or computes a thing without changing the wire, and the wire changes only here (its JSON is
//! pinned by `golden_tests`; `docs/json.md` describes it).
//!
//! - [`grants`]: grants, YOLO scopes, their views and `status`;
//! - [`decision`]: a decision, a repository's facts, a denial;
//! - [`audit`]: audit rows, the chains' heads and walks, the sinks' cursors;
//! - [`bytes`]: [`WireBytes`], the measure the engine's page budgets count in.
//!
//! | request | answer |
//! |---|---|
//! | admin `ping`, agent `ping` | [`Pong`] |
//! | `grant_push`, `approve`, `deny`, agent `request_push` | [`Grant`] |
//! | `revoke_push` (both sockets) | `Vec<`[`Grant`]`>` |
//! | `yolo`, `default` | `Vec<`[`YoloScope`]`>` |
//! | admin `status` | [`StatusAnswer`] |
//! | agent `status` | [`Status`] |
//! | `requests` (paged) | `Vec<`[`GrantView`]`>` |
//! | `audit` (paged) | `Vec<`[`AuditRow`]`>` |
//! | `audit_verify` | [`AuditVerification`] |
//! | `explain` | [`Explanation`] |
//! | `set_mcp_key_hash` | [`KeyHashStored`] |
//! | `check_coverage` | [`CoverageAnswer`](super::CoverageAnswer) |
//! | `prove_policies` | the proof report (`publisher::prove::Report`) |
//! | agent `request_state` | [`Grant`] |
//! | agent `credential` | [`CredentialGrant`](super::CredentialGrant) |
//! | agent `list_refs` | `Vec<`[`ListedRef`](super::ListedRef)`>` |
//! | agent `push` | [`PushOutcome`](super::PushOutcome) |
//! | agent `publish_pr` | [`Published`](super::Published) |
//! | agent `mcp_oauth` | [`OAuthHttpReply`](super::OAuthHttpReply) |
//! | `mcp_approve`, `mcp_deny` | [`McpAuthorizationView`](super::McpAuthorizationView) |
//! | `mcp_clients` | [`McpClientsAnswer`](super::McpClientsAnswer) |
//! | `mcp_revoke` | [`McpRevoked`](super::McpRevoked) |
//! | `mcp_key_url` | [`McpKeyUrlState`](super::McpKeyUrlState) |
//! | `fleet_mcp` | the answer of the `mcp_…` request it carries |
//! | `fleet_mcp_public_url` | [`FleetMcpEndpoint`](super::FleetMcpEndpoint) |
//! | `fleet_join_code` | [`FleetJoinCodeIssued`](super::FleetJoinCodeIssued) |
//! | `fleet_join` (no certificate, fleet listener) | [`FleetEnrolled`](super::FleetEnrolled) |
//! | agent `mcp_oauth_published` | [`McpPublished`](super::McpPublished) |

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub mod audit;
#[cfg(feature = "engine")]
pub mod bytes;
pub mod decision;
pub mod grants;

pub use audit::{
    AuditEntry, AuditRow, AuditVerification, Chain, ChainCheck, ChainHead, ShadowGroup,
    ShadowReport, SinkCursor,
};
#[cfg(feature = "engine")]
pub use bytes::WireBytes;
pub use decision::{Action, Decision, Denial, RepoFacts};
pub use grants::{Grant, GrantState, GrantVia, GrantView, Status, YoloScope, YoloView};

/// Every engine value of a list as its answer (`Vec<Grant>` from the engine's grants).
pub fn all<T, A: From<T>>(values: Vec<T>) -> Vec<A> {
    values.into_iter().map(A::from).collect()
}

/// The answer to `ping` on either socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// The publisher's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The state schema the publisher runs (admin socket only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i64>,
}

/// The answer to admin `status`: the agent's [`Status`] plus how the policy proofs and the
/// audit stand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusAnswer {
    #[serde(flatten)]
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proofs: Option<ProofStatus>,
    /// The audit chains' heads: what an operator notes to check the log against later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit_heads: Vec<ChainHead>,
    /// The longest TTL an agent's request may end in (`max_request_ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_ttl_seconds: Option<i64>,
    /// Where each configured audit sink has got to, and its last error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit_sinks: Vec<SinkCursor>,
}

/// The last proof run, in one line, and the properties the configuration waives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofStatus {
    pub summary: String,
    #[serde(default)]
    pub waived: Vec<String>,
}

/// The answer to `explain`: Cedar's decision, what would unblock a denial, and the
/// repository's grants with whether each covers the ref (display only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    pub decision: Decision,
    pub denial: Option<Denial>,
    #[serde(default)]
    pub grants: Vec<ExplainedGrant>,
}

/// One active grant of the explained repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainedGrant {
    pub id: i64,
    pub expires_at: Option<i64>,
    #[serde(default)]
    pub refs: Vec<String>,
    pub covers_ref: bool,
}

/// The answer to `set_mcp_key_hash`: where the hash was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyHashStored {
    pub stored: PathBuf,
}

#[cfg(all(test, feature = "engine"))]
mod golden_tests;
