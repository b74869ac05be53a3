//! The admin socket's requests (one JSON line each, sent through `zodex-prd admin`) and the
//! answers that are the protocol's own.

use super::Ttl;
use serde::{Deserialize, Serialize};
use zodex_engine::store::GrantVia;

/// Requests an operator sends through `zodex-prd admin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
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
    },
    RevokePush {
        repo: String,
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
    Status,
    /// One page of pending requests, newest first from `before` (exclusive); the answer's
    /// [`Response::next_before`] is the cursor of the next page.
    Requests {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<i64>,
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
    },
    /// Walk the audit's hash chains and name the first row that does not hold.
    AuditVerify,
    /// Store the SHA-256 (hex) of a new MCP capability key; the key itself never travels here.
    SetMcpKeyHash {
        sha256: String,
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
    },
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
                before: None
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
            }
        );
    }
}
