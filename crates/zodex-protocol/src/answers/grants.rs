//! Grants, YOLO scopes and the status that lists them, as they travel. Each mirrors the
//! engine's row or view field for field and is made from it with `From`: the engine may change
//! how it stores a grant, and only a change here changes what clients read.

use serde::{Deserialize, Serialize};
#[cfg(feature = "engine")]
use zodex_engine::authority as engine_authority;
#[cfg(feature = "engine")]
use zodex_engine::store as engine_store;

/// Where a grant is in its life (`grants.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantState {
    Pending,
    Active,
    Revoked,
    Expired,
    Denied,
}

#[cfg(feature = "engine")]
impl From<engine_store::GrantState> for GrantState {
    fn from(state: engine_store::GrantState) -> Self {
        match state {
            engine_store::GrantState::Pending => Self::Pending,
            engine_store::GrantState::Active => Self::Active,
            engine_store::GrantState::Revoked => Self::Revoked,
            engine_store::GrantState::Expired => Self::Expired,
            engine_store::GrantState::Denied => Self::Denied,
        }
    }
}

/// How a grant's pushes may travel: in answers, and in the operator's `grant_push` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantVia {
    /// Only through `git-remote-zodex`, where every ref update is decided on its own.
    #[default]
    Gateway,
    /// Also through a one-repo write token the credential helper hands to git.
    Token,
}

#[cfg(feature = "engine")]
impl From<engine_store::GrantVia> for GrantVia {
    fn from(via: engine_store::GrantVia) -> Self {
        match via {
            engine_store::GrantVia::Gateway => Self::Gateway,
            engine_store::GrantVia::Token => Self::Token,
        }
    }
}

/// The way back, for the request: the publisher hands the engine the terms it was asked for.
#[cfg(feature = "engine")]
impl From<GrantVia> for engine_store::GrantVia {
    fn from(via: GrantVia) -> Self {
        match via {
            GrantVia::Gateway => Self::Gateway,
            GrantVia::Token => Self::Token,
        }
    }
}

/// A push grant or an agent's request for one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub id: i64,
    pub repo_key: String,
    pub repo: String,
    pub state: GrantState,
    pub created_by: String,
    pub reason: Option<String>,
    pub ttl_seconds: Option<i64>,
    pub via: GrantVia,
    pub allow_workflows: bool,
    pub created_at: i64,
    pub activated_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub approved_by: Option<String>,
    pub ended_at: Option<i64>,
    pub ended_by: Option<String>,
    /// The refs the grant covers (normalised patterns); empty: every ref.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// In a fleet, whose agent it serves: `sprite:NAME` or `label:KEY=VALUE`; absent: the
    /// single sprite's own agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Protected paths it allows (`--allow-path` globs); absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_paths: Vec<String>,
    /// Secret findings it allows, by fingerprint; absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_secrets: Vec<String>,
}

#[cfg(feature = "engine")]
impl From<engine_store::Grant> for Grant {
    fn from(grant: engine_store::Grant) -> Self {
        Self {
            id: grant.id,
            repo_key: grant.repo_key,
            repo: grant.repo,
            state: grant.state.into(),
            created_by: grant.created_by,
            reason: grant.reason,
            ttl_seconds: grant.ttl_seconds,
            via: grant.via.into(),
            allow_workflows: grant.allow_workflows,
            created_at: grant.created_at,
            activated_at: grant.activated_at,
            expires_at: grant.expires_at,
            approved_by: grant.approved_by,
            ended_at: grant.ended_at,
            ended_by: grant.ended_by,
            refs: grant.refs,
            owner: fleet_owner(&grant.owner),
            allow_paths: grant.allow.paths,
            allow_secrets: grant.allow.secrets,
        }
    }
}

/// A grant as shown to people: its state at the publisher's `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantView {
    #[serde(flatten)]
    pub grant: Grant,
    /// `active`, `pending`, `expired`, `revoked` or `denied`, judged at `now`.
    pub shown_state: String,
    pub seconds_left: Option<i64>,
    /// Set for `--via token` grants: the per-ref rules cannot hold on that path.
    pub warning: Option<String>,
    /// In `status`, for active and pending grants: `installed`, `not_installed` or `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_app: Option<String>,
}

#[cfg(feature = "engine")]
impl From<engine_authority::GrantView> for GrantView {
    fn from(view: engine_authority::GrantView) -> Self {
        Self {
            grant: view.grant.into(),
            shown_state: view.shown_state,
            seconds_left: view.seconds_left,
            warning: view.warning,
            writer_app: view.writer_app,
        }
    }
}

#[cfg(feature = "engine")]
impl From<&engine_authority::GrantView> for GrantView {
    fn from(view: &engine_authority::GrantView) -> Self {
        view.clone().into()
    }
}

/// A YOLO scope: time-boxed push authority over one repository or every installed one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct YoloScope {
    pub id: i64,
    /// `None`: every repository the writer App is installed on.
    pub repo_key: Option<String>,
    pub repo: Option<String>,
    pub allow_workflows: bool,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub created_by: String,
    pub cleared_at: Option<i64>,
    pub cleared_by: Option<String>,
    /// The refs the scope covers (normalised patterns); empty: every ref.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// As on a grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// As on a grant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_paths: Vec<String>,
}

#[cfg(feature = "engine")]
impl From<engine_store::YoloScope> for YoloScope {
    fn from(scope: engine_store::YoloScope) -> Self {
        Self {
            id: scope.id,
            repo_key: scope.repo_key,
            repo: scope.repo,
            allow_workflows: scope.allow_workflows,
            created_at: scope.created_at,
            expires_at: scope.expires_at,
            created_by: scope.created_by,
            cleared_at: scope.cleared_at,
            cleared_by: scope.cleared_by,
            refs: scope.refs,
            owner: fleet_owner(&scope.owner),
            allow_paths: scope.allow.paths,
        }
    }
}

/// A YOLO scope as shown in `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct YoloView {
    #[serde(flatten)]
    pub scope: YoloScope,
    pub shown_state: String,
    pub seconds_left: Option<i64>,
}

#[cfg(feature = "engine")]
impl From<engine_authority::YoloView> for YoloView {
    fn from(view: engine_authority::YoloView) -> Self {
        Self {
            scope: view.scope.into(),
            shown_state: view.shown_state,
            seconds_left: view.seconds_left,
        }
    }
}

#[cfg(feature = "engine")]
impl From<&engine_authority::YoloView> for YoloView {
    fn from(view: &engine_authority::YoloView) -> Self {
        view.clone().into()
    }
}

/// The answer to `status` on either socket (the operator's adds to it, see
/// [`StatusAnswer`](super::StatusAnswer)): each list bounded, with its total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub now: i64,
    pub grants: Vec<GrantView>,
    pub grants_total: u64,
    pub pending: Vec<GrantView>,
    pub pending_total: u64,
    pub yolo: Vec<YoloView>,
    pub yolo_total: u64,
    /// Grants and scopes that ended in the last 24 hours, shown as ended.
    pub recently_ended: Vec<GrantView>,
    pub recently_ended_total: u64,
}

#[cfg(feature = "engine")]
impl From<engine_authority::Status> for Status {
    fn from(status: engine_authority::Status) -> Self {
        Self {
            now: status.now,
            grants: super::all(status.grants),
            grants_total: status.grants_total,
            pending: super::all(status.pending),
            pending_total: status.pending_total,
            yolo: super::all(status.yolo),
            yolo_total: status.yolo_total,
            recently_ended: super::all(status.recently_ended),
            recently_ended_total: status.recently_ended_total,
        }
    }
}

/// A fleet owner as answers show it; the single sprite's own grants show none.
#[cfg(feature = "engine")]
fn fleet_owner(owner: &zodex_engine::fleet::Owner) -> Option<String> {
    (*owner != zodex_engine::fleet::Owner::Local).then(|| owner.cedar())
}
