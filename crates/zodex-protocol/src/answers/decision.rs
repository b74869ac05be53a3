//! A decision and a refusal, as they travel: `explain`'s answer and what a denied request
//! says. Mirrors of the engine's values, made from them with `From`.

use serde::{Deserialize, Serialize};
#[cfg(feature = "engine")]
use zodex_engine::authority as engine_authority;

/// The actions of `policies/zodex.cedarschema`, spelt as Cedar names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    Read,
    RequestPush,
    GrantPush,
    RevokePush,
    SetYolo,
    ClearYolo,
    PublishPr,
    Push,
    IssueWriteToken,
    ViewStatus,
    ViewAudit,
}

impl From<zodex_types::Action> for Action {
    fn from(action: zodex_types::Action) -> Self {
        use zodex_types::Action as A;
        match action {
            A::Read => Self::Read,
            A::RequestPush => Self::RequestPush,
            A::GrantPush => Self::GrantPush,
            A::RevokePush => Self::RevokePush,
            A::SetYolo => Self::SetYolo,
            A::ClearYolo => Self::ClearYolo,
            A::PublishPr => Self::PublishPr,
            A::Push => Self::Push,
            A::IssueWriteToken => Self::IssueWriteToken,
            A::ViewStatus => Self::ViewStatus,
            A::ViewAudit => Self::ViewAudit,
        }
    }
}

/// What the engine decided, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub action: Action,
    pub allowed: bool,
    /// The `@id`s of the policies that decided; empty on a deny: no policy permits it.
    pub policies: Vec<String>,
    /// Evaluation errors; any error turns the decision into a deny.
    pub errors: Vec<String>,
    pub grant_id: Option<i64>,
    pub yolo_id: Option<i64>,
    /// The repository's facts as the engine saw them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<RepoFacts>,
    /// The ref a push decision was about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_name: Option<String>,
    /// On a push no grant or YOLO scope covers: the `--ref` patterns of the live ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_over_refs: Vec<String>,
    /// The longest TTL an agent's terms may carry (`max_request_ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_ttl_seconds: Option<i64>,
}

#[cfg(feature = "engine")]
impl From<zodex_engine::Decision> for Decision {
    fn from(decision: zodex_engine::Decision) -> Self {
        Self {
            action: decision.action.into(),
            allowed: decision.allowed,
            policies: decision.policies,
            errors: decision.errors,
            grant_id: decision.grant_id,
            yolo_id: decision.yolo_id,
            repository: decision.repository.map(Into::into),
            ref_name: decision.ref_name,
            passed_over_refs: decision.passed_over_refs,
            max_request_ttl_seconds: decision.max_request_ttl_seconds,
        }
    }
}

/// A repository's attributes as Cedar saw them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoFacts {
    pub key: String,
    /// GitHub's default branch as the last fresh coverage check read it; `None`: unknown.
    pub default_branch: Option<String>,
    pub configured_target: bool,
    pub writer_installed: bool,
    pub reader_installed: bool,
    /// False: the two `installed` flags mean nothing (coverage unknown or stale).
    pub coverage_known: bool,
}

#[cfg(feature = "engine")]
impl From<zodex_engine::RepoFacts> for RepoFacts {
    fn from(facts: zodex_engine::RepoFacts) -> Self {
        Self {
            key: facts.key,
            default_branch: facts.default_branch,
            configured_target: facts.configured_target,
            writer_installed: facts.writer_installed,
            reader_installed: facts.reader_installed,
            coverage_known: facts.coverage_known,
        }
    }
}

/// Why a request was refused, in the words the CLI prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    pub action: Action,
    pub repo: Option<String>,
    /// The deciding policies; empty when no policy permits the request.
    pub policies: Vec<String>,
    pub message: String,
    /// The command or change that would unblock it.
    pub unblock: String,
}

#[cfg(feature = "engine")]
impl From<engine_authority::Denial> for Denial {
    fn from(denial: engine_authority::Denial) -> Self {
        Self {
            action: denial.action.into(),
            repo: denial.repo,
            policies: denial.policies,
            message: denial.message,
            unblock: denial.unblock,
        }
    }
}
