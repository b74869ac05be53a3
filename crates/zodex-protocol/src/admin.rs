//! The admin socket's requests (one JSON line each, sent through `zodex-prd admin`) and the
//! answers that are the protocol's own.

use super::Ttl;
use super::answers::GrantVia;
use serde::{Deserialize, Serialize};

/// Which sprites of a fleet: one sprite, or every sprite with a label. On a grant or YOLO
/// scope, the agents it serves (neither: the single sprite's own agent; for a revoke, every
/// owner); on `requests` and `audit`, the sprites whose rows the list keeps (neither: every
/// row), echoed in [`Response::filtered`](crate::Response::filtered) by a publisher that
/// applied it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForSprites {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sprite: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl ForSprites {
    /// Names no sprite and no label.
    pub fn is_empty(&self) -> bool {
        self.sprite.is_none() && self.label.is_none()
    }
}

/// Requests an operator sends through `zodex-prd admin`.
/// `op` (its [`Into<&'static str>`], from strum) is the request's serde tag, for the metrics'
/// labels: a name from this fixed set, never a value the client chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(tag = "op", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AdminRequest {
    Ping,
    GrantPush {
        repo: String,
        ttl: Ttl,
        #[serde(default)]
        allow_workflows: bool,
        #[serde(default)]
        via: GrantVia,
        /// Ref patterns the grant is limited to (`feature/*`, `refs/tags/*`, `main`); none:
        /// every ref. The publisher normalises and checks them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
        /// Protected paths the grant allows (`--allow-path`): globs from the repository's root.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow_paths: Vec<String>,
        /// Secret findings the grant allows, by fingerprint (`--allow-secret`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow_secrets: Vec<String>,
        /// In a fleet: the sprite whose agent the grant serves, or (`label`) every sprite with
        /// a `key=value` label; neither: the single sprite's own agent.
        #[serde(flatten)]
        to: ForSprites,
        /// Grant for a sprite not enrolled, or a label no enrolled sprite carries (refused
        /// otherwise: a typo would wait silently).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        allow_empty: bool,
    },
    /// Ends the repository's grants and requests: those of `to` when it names a sprite or
    /// label, else every one.
    RevokePush {
        repo: String,
        #[serde(flatten)]
        to: ForSprites,
    },
    /// An empty `repos` sets one scope over every installed repository.
    Yolo {
        #[serde(default)]
        repos: Vec<String>,
        ttl: Ttl,
        #[serde(default)]
        allow_workflows: bool,
        /// Ref patterns the scope is limited to; none: every ref.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
        /// Protected paths the scope allows (`--allow-path`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow_paths: Vec<String>,
        #[serde(flatten)]
        to: ForSprites,
        /// As on `grant_push`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        allow_empty: bool,
    },
    Default,
    /// Prove the write invariants of the daemon's effective policy set now; the answer is a
    /// `publisher::prove::Report`.
    ProvePolicies,
    /// Ask GitHub now (read-only, audited as `CheckCoverage`) whether each App is installed on
    /// `repo`: what `zodex sprite setup` and `doctor` check for every target.
    CheckCoverage {
        repo: String,
    },
    /// Grants, scopes and requests, each list bounded (with its total) so the answer always
    /// fits the reply cap; `requests` and `audit` page through the rest.
    Status {
        /// In a fleet: what this sprite may use, or the rows of the sprites with this label
        /// (echoed in [`Response::filtered`] as for `requests`).
        #[serde(flatten)]
        of: ForSprites,
    },
    /// One page of pending requests, newest first from `before` (exclusive); the answer's
    /// [`Response::next_before`] is the cursor of the next page.
    Requests {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<i64>,
        /// In a fleet: only the requests of this sprite or of the sprites with this label. A
        /// publisher that applied it says so in [`Response::filtered`]; one too old to know
        /// the fields ignores them, so a client must not show an answer without that echo.
        #[serde(flatten)]
        of: ForSprites,
    },
    Approve {
        id: i64,
        #[serde(default)]
        ttl: Option<Ttl>,
    },
    Deny {
        id: i64,
    },
    /// One page of audit rows (the newest first from `before`, shown oldest first); the
    /// answer's [`Response::next_before`] is the cursor of the next page.
    Audit {
        #[serde(default)]
        since_seconds: Option<i64>,
        #[serde(default)]
        repo: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<i64>,
        /// In a fleet: only the rows this sprite's agent (or those of the sprites with this
        /// label) made; echoed in [`Response::filtered`] as for `requests`.
        #[serde(flatten)]
        of: ForSprites,
    },
    /// Walk the audit's hash chains and name the first row that does not hold.
    AuditVerify,
    /// What the shadow policies (`policy_dir/shadow/`) would have decided otherwise in the last
    /// `since_seconds` (default a day). The answer is a `ShadowReport`.
    PolicyShadow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_seconds: Option<i64>,
    },
    /// Store the SHA-256 (hex) of a new MCP capability key; the key itself never travels here.
    SetMcpKeyHash {
        sha256: String,
    },
    /// Approve the MCP client's authorization whose page shows `code` (OAuth consent).
    McpApprove {
        code: String,
    },
    /// Refuse the MCP client's authorization whose page shows `code`.
    McpDeny {
        code: String,
    },
    /// The MCP endpoint's OAuth clients, their live grants and the authorizations waiting.
    McpClients,
    /// End every grant of an OAuth client; its tokens stop working at once.
    McpRevoke {
        client: String,
    },
    /// Turn the `?key=` capability URL on or off.
    McpKeyUrl {
        enabled: bool,
    },
    /// Enrol a fleet member: the service signs `request_pem` (the member's own certificate
    /// request; its private key never travels) and registers the key's hash and the labels.
    /// The answer is a [`FleetEnrolled`].
    FleetEnroll {
        role: FleetRole,
        name: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        labels: Vec<String>,
        request_pem: String,
    },
    /// Remove a fleet member: its next request is refused, and everything a sprite owns
    /// ends with it. The answer is a [`FleetRemoved`].
    FleetRemove {
        role: FleetRole,
        name: String,
    },
    /// Change enrolled sprite `name`'s labels: `set` adds or replaces (`key=value`, one value
    /// per key), `remove` takes keys away. The answer is the [`FleetMember`] as it is now.
    FleetLabel {
        name: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        set: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
    /// The fleet's members, enrolled and removed.
    FleetMembers,
    /// A new certificate for the asking operator's own key (`request_pem`, signed with the key
    /// it enrolled with): a [`FleetRenewed`]. `zodex` asks once two thirds of its certificate's
    /// life have passed, before its request.
    FleetRenew {
        request_pem: String,
    },
    /// What the answering replica checks of its own ground and sees of the members (a
    /// [`FleetDoctorAnswer`](crate::FleetDoctorAnswer)); `zodex fleet doctor` asks each.
    FleetDoctor,
    /// Record a one-time join code admitting operator `name` (a [`FleetJoinCodeIssued`]):
    /// the asking operator made the code and sends only the SHA-256 of its secret; the new
    /// operator redeems it with a [`FleetJoinRequest`].
    FleetJoinCode {
        name: String,
        code_sha256: String,
    },
    /// One of the MCP OAuth requests (`mcp_approve`, `mcp_deny`, `mcp_clients`, `mcp_revoke`,
    /// `mcp_key_url`) for fleet sprite `sprite`'s endpoint: the service answers it as that
    /// sprite's authorization server, with the same answer types.
    FleetMcp {
        sprite: String,
        request: Box<AdminRequest>,
    },
    /// Set the public URL of fleet sprite `sprite`'s MCP endpoint (its OAuth resource), clear
    /// it (`clear`: the service then serves the sprite no OAuth), or with neither show it. The
    /// answer is a [`FleetMcpEndpoint`].
    FleetMcpPublicUrl {
        sprite: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        clear: bool,
    },
    /// A what-if `Push` decision for the agent; no side effects.
    Explain {
        repo: String,
        ref_name: String,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        delete: bool,
        #[serde(default)]
        bytes: i64,
        #[serde(default)]
        touches_workflows: bool,
        #[serde(default)]
        ref_exists: bool,
        /// The paths the update would change (`--path`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<String>,
        /// In a fleet: decided as this sprite's agent (`sprite`; a label is refused). Echoed in
        /// [`Response::filtered`]: a replica too old to know it decides for no sprite.
        #[serde(flatten)]
        of: ForSprites,
    },
}

impl AdminRequest {
    /// `status` of every sprite (no filter).
    pub fn status() -> Self {
        Self::Status {
            of: ForSprites::default(),
        }
    }
}

/// What a fleet member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FleetRole {
    Sprite,
    Operator,
}

impl From<FleetRole> for zodex_types::fleet::MemberRole {
    fn from(role: FleetRole) -> Self {
        match role {
            FleetRole::Sprite => Self::Sprite,
            FleetRole::Operator => Self::Operator,
        }
    }
}

impl From<zodex_types::fleet::MemberRole> for FleetRole {
    fn from(role: zodex_types::fleet::MemberRole) -> Self {
        match role {
            zodex_types::fleet::MemberRole::Sprite => Self::Sprite,
            zodex_types::fleet::MemberRole::Operator => Self::Operator,
        }
    }
}

/// A fleet member as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetMember {
    pub role: FleetRole,
    pub name: String,
    pub labels: Vec<String>,
    pub key_sha256: String,
    pub enrolled_at: i64,
    pub enrolled_by: String,
    pub removed_at: Option<i64>,
    pub removed_by: Option<String>,
    /// When its newest certificate expires, when the registry knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_expires_at: Option<i64>,
}

#[cfg(feature = "engine")]
impl From<zodex_engine::store::Member> for FleetMember {
    fn from(m: zodex_engine::store::Member) -> Self {
        Self {
            role: m.role.into(),
            name: m.name.to_string(),
            labels: m.labels.iter().map(ToString::to_string).collect(),
            key_sha256: m.key_sha256,
            enrolled_at: m.enrolled_at,
            enrolled_by: m.enrolled_by,
            removed_at: m.removed_at,
            removed_by: m.removed_by,
            cert_expires_at: m.cert_expires_at,
        }
    }
}

/// The answer to [`AdminRequest::FleetRemove`]: the member as removed, and what of its own
/// ended with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetRemoved {
    pub member: FleetMember,
    /// Grants revoked (their tokens are revoked at GitHub as after any revoke).
    pub grants_revoked: Vec<i64>,
    /// Pending requests denied.
    pub requests_denied: Vec<i64>,
    pub yolo_cleared: Vec<i64>,
    /// OAuth grants of its MCP endpoint revoked (its public URL is cleared too).
    pub oauth_grants_revoked: u32,
}

#[cfg(feature = "engine")]
impl From<(zodex_engine::store::Member, zodex_engine::authority::Ended)> for FleetRemoved {
    fn from(
        (member, ended): (zodex_engine::store::Member, zodex_engine::authority::Ended),
    ) -> Self {
        Self {
            member: member.into(),
            grants_revoked: ended.grants,
            requests_denied: ended.requests,
            yolo_cleared: ended.yolo,
            oauth_grants_revoked: u32::try_from(ended.oauth_grants).unwrap_or(u32::MAX),
        }
    }
}

/// The answer to [`AdminRequest::FleetEnroll`]: the member's certificate and the fleet's CA
/// certificate it trusts the service by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetEnrolled {
    pub member: FleetMember,
    pub certificate_pem: String,
    pub ca_pem: String,
    /// The identity the certificate names, `spiffe://FLEET/ROLE/NAME`.
    pub identity: String,
}

/// The answer to a renewal (`fleet_renew`, a sprite's relay's or an operator's): the new
/// certificate for the same key, the CA certificate, and when the new one expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetRenewed {
    pub certificate_pem: String,
    pub ca_pem: String,
    /// The identity the certificate names, `spiffe://FLEET/ROLE/NAME`.
    pub identity: String,
    pub expires_at: i64,
}

/// The answer to [`AdminRequest::FleetJoinCode`]: whom the code admits, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetJoinCodeIssued {
    pub name: String,
    pub expires_at: i64,
}

/// The one request a connection to the fleet's listener may send without a client
/// certificate: a new operator redeeming a join code (its secret) with a certificate request
/// for a key made on their own machine. Answered with a [`FleetEnrolled`].
/// Its `Debug` never shows the code.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename = "fleet_join")]
pub struct FleetJoinRequest {
    pub code: String,
    pub request_pem: String,
}

impl std::fmt::Debug for FleetJoinRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetJoinRequest { code: .., request_pem: .. }")
    }
}

/// The answer to [`AdminRequest::CheckCoverage`]: what GitHub said just now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageAnswer {
    pub repo: String,
    pub reader_installed: bool,
    pub writer_installed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
}

/// An authorization as the operator sees it before and after approving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpAuthorizationView {
    pub code: String,
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    /// The host (and port) `redirect_uri` sends the browser to — never its user part.
    #[serde(default)]
    pub redirect_host: String,
    pub scope: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// `waiting`, `approved`, `denied` or `expired`.
    pub state: String,
    /// The fleet sprite whose endpoint the page belongs to (absent: the single sprite's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sprite: Option<String>,
}

/// One OAuth client and its live grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpClientView {
    pub client_id: String,
    /// `dcr` (registered) or `cimd` (metadata document).
    pub kind: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Grants (refresh-token families) not revoked or expired.
    pub live_grants: u32,
}

/// The answer to [`AdminRequest::McpClients`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpClientsAnswer {
    /// The fleet sprite whose endpoint this is (absent: the single sprite's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sprite: Option<String>,
    /// Whether this sprite's publisher serves OAuth (`[mcp] oauth_file` configured).
    pub oauth: bool,
    /// Whether `?key=` still opens the MCP endpoint.
    pub key_url: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The MCP endpoint's URL OAuth issues tokens for (`[mcp] public_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    pub clients: Vec<McpClientView>,
    pub waiting: Vec<McpAuthorizationView>,
}

/// The answer to [`AdminRequest::FleetMcpPublicUrl`]: a fleet sprite's MCP endpoint as the
/// service serves its OAuth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetMcpEndpoint {
    pub sprite: String,
    /// The endpoint's URL (the resource tokens are for); absent until an operator sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Its issuer (the URL's origin with `/oauth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

/// The answer to [`AdminRequest::McpRevoke`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpRevoked {
    pub client_id: String,
    pub grants_revoked: u32,
}

/// The answer to [`AdminRequest::McpKeyUrl`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpKeyUrlState {
    pub key_url: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_a_stable_json_shape() {
        let request = AdminRequest::GrantPush {
            repo: "demo/app".into(),
            ttl: Ttl::Seconds(1800),
            allow_workflows: false,
            via: GrantVia::Token,
            refs: Vec::new(),
            to: ForSprites::default(),
            allow_paths: Vec::new(),
            allow_secrets: Vec::new(),
            allow_empty: false,
        };
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(
            json,
            r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":1800},"allow_workflows":false,"via":"token"}"#
        );
        // The paged lists still accept the unpaged request of older clients.
        let parsed: AdminRequest = serde_json::from_str(r#"{"op":"requests"}"#).unwrap();
        assert_eq!(
            parsed,
            AdminRequest::Requests {
                limit: None,
                before: None,
                of: ForSprites::default(),
            }
        );
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            r#"{"op":"requests"}"#
        );
        let parsed: AdminRequest = serde_json::from_str(r#"{"op":"yolo","ttl":"no_ttl"}"#).unwrap();
        assert_eq!(
            parsed,
            AdminRequest::Yolo {
                repos: vec![],
                ttl: Ttl::NoTtl,
                allow_workflows: false,
                refs: vec![],
                to: ForSprites::default(),
                allow_paths: Vec::new(),
                allow_empty: false,
            }
        );
        // A fleet's owner travels as two optional fields beside the others.
        let parsed: AdminRequest =
            serde_json::from_str(r#"{"op":"revoke_push","repo":"a/b","sprite":"s1"}"#).unwrap();
        assert_eq!(
            parsed,
            AdminRequest::RevokePush {
                repo: "a/b".into(),
                to: ForSprites {
                    sprite: Some("s1".into()),
                    label: None
                }
            }
        );
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            r#"{"op":"revoke_push","repo":"a/b","sprite":"s1"}"#
        );
        // A list's filter travels the same way; an older publisher reads the request without it.
        let filtered = AdminRequest::Audit {
            since_seconds: None,
            repo: None,
            limit: Some(5),
            before: None,
            of: ForSprites {
                sprite: None,
                label: Some("team=pay".into()),
            },
        };
        assert_eq!(
            serde_json::to_string(&filtered).unwrap(),
            r#"{"op":"audit","since_seconds":null,"repo":null,"limit":5,"label":"team=pay"}"#
        );
    }
}

#[cfg(test)]
mod join_tests {
    use super::*;

    #[test]
    fn a_join_request_reads_back_and_its_debug_hides_the_code() {
        let request = FleetJoinRequest {
            code: "c0ffee".into(),
            request_pem: "PEM".into(),
        };
        let line = serde_json::to_string(&request).unwrap();
        assert_eq!(
            line,
            r#"{"op":"fleet_join","code":"c0ffee","request_pem":"PEM"}"#
        );
        assert_eq!(
            serde_json::from_str::<FleetJoinRequest>(&line).unwrap(),
            request
        );
        // Another request is not a join.
        assert!(serde_json::from_str::<FleetJoinRequest>(r#"{"op":"ping"}"#).is_err());
        assert!(!format!("{request:?}").contains("c0ffee"));
    }
}

#[cfg(test)]
mod op_name_tests {
    use super::*;
    use crate::AgentRequest;

    /// The name a metric's `op` label carries is the request's own serde tag.
    #[test]
    fn a_requests_static_name_is_its_wire_op() {
        let tag = |value: serde_json::Value| value["op"].as_str().unwrap().to_string();
        let admin = [
            AdminRequest::Ping,
            AdminRequest::ProvePolicies,
            AdminRequest::RevokePush {
                repo: "o/r".into(),
                to: Default::default(),
            },
        ];
        for request in &admin {
            let name: &'static str = request.into();
            assert_eq!(name, tag(serde_json::to_value(request).unwrap()));
        }
        let agent = [
            AgentRequest::Ping,
            AgentRequest::Status,
            AgentRequest::McpOauthPublished,
            AgentRequest::RequestState { id: 1 },
        ];
        for request in &agent {
            let name: &'static str = request.into();
            assert_eq!(name, tag(serde_json::to_value(request).unwrap()));
        }
    }
}
