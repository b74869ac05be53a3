//! Checks and their findings, as `doctor`, `check-ground` and a fleet replica's
//! `fleet_doctor` answer carry them: one line per check, what holds or what is wrong and its
//! fix. Here, not in the publisher, so a client reads a replica's findings without linking the
//! daemon.

use super::FleetRole;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// One check's outcome. `check` is a stable id (`reader-key`, `writer-key`, `state-dir`,
/// `ca-key`, `store-role`, …); `message` is one line: what holds, or what is wrong and the
/// exact fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: Cow<'static, str>,
    pub ok: bool,
    pub message: String,
    /// A failure that is the consequence of others: the checks (their ids) whose failure
    /// causes it, as `doctor` orders its findings. Empty for a cause.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub follows_from: Vec<String>,
}

impl Finding {
    pub fn ok(check: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            ok: true,
            message: message.into(),
            follows_from: Vec::new(),
        }
    }

    pub fn fail(check: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            ok: false,
            message: message.into(),
            follows_from: Vec::new(),
        }
    }
}

/// What `check-ground --json` and `check-isolation --json` answer (in the envelope).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    pub findings: Vec<Finding>,
    pub all_ok: bool,
}

impl From<Vec<Finding>> for Findings {
    fn from(findings: Vec<Finding>) -> Self {
        let all_ok = findings.iter().all(|f| f.ok);
        Self { findings, all_ok }
    }
}

impl super::CoverageAnswer {
    /// The one line `doctor` says of this target's coverage, as check `check`.
    pub fn finding(&self, check: &str) -> Finding {
        let missing: Vec<&str> = [
            ("reader", self.reader_installed),
            ("writer", self.writer_installed),
        ]
        .iter()
        .filter(|(_, installed)| !installed)
        .map(|(app, _)| *app)
        .collect();
        if missing.is_empty() {
            return Finding::ok(
                check.to_string(),
                format!("both Apps are installed on {}", self.repo),
            );
        }
        Finding::fail(
            check.to_string(),
            format!(
                "the {} App{} not installed on {}: install {} on the repository (GitHub: the App's page → Install App → {} → Only select repositories)",
                missing.join(" and "),
                if missing.len() == 1 { " is" } else { "s are" },
                self.repo,
                if missing.len() == 1 { "it" } else { "them" },
                self.repo.split('/').next().unwrap_or_default(),
            ),
        )
    }
}

/// The answer to [`AdminRequest::FleetDoctor`](super::AdminRequest::FleetDoctor): what one
/// replica checked of its own ground (its CA key, its App keys and GitHub's answer about them,
/// its database role's rights, the targets' coverage), and the members as it sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetDoctorAnswer {
    /// The replica's name (`[fleet] replica`).
    pub replica: String,
    /// When this replica started: `last_seen` counts from then.
    pub up_since: i64,
    /// The replica's clock when it answered.
    pub now: i64,
    /// How long the certificates it signs last: a relay renews at two thirds of it.
    pub member_ttl_seconds: i64,
    pub findings: Vec<Finding>,
    /// Every enrolled member (removed ones are not checked).
    pub members: Vec<MemberHealth>,
}

/// One enrolled member as a replica sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberHealth {
    pub role: FleetRole,
    pub name: String,
    /// When its newest certificate expires; `None` when the registry does not know (enrolled
    /// before it kept the expiry).
    pub cert_expires_at: Option<i64>,
    /// When this replica last admitted a request of it (since `up_since`).
    pub last_seen: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replicas_doctor_answer_is_pinned() {
        let answer = FleetDoctorAnswer {
            replica: "svc1".into(),
            up_since: 100,
            now: 200,
            member_ttl_seconds: 86_400,
            findings: vec![
                Finding::ok("ca-key", "the CA key is private"),
                Finding::fail("store-role", "role zodex may DELETE audit_events"),
            ],
            members: vec![MemberHealth {
                role: FleetRole::Sprite,
                name: "s1".into(),
                cert_expires_at: Some(86_500),
                last_seen: None,
            }],
        };
        let json = serde_json::to_string(&answer).unwrap();
        assert_eq!(
            json,
            r#"{"replica":"svc1","up_since":100,"now":200,"member_ttl_seconds":86400,"findings":[{"check":"ca-key","ok":true,"message":"the CA key is private"},{"check":"store-role","ok":false,"message":"role zodex may DELETE audit_events"}],"members":[{"role":"sprite","name":"s1","cert_expires_at":86500,"last_seen":null}]}"#
        );
        let again: FleetDoctorAnswer = serde_json::from_str(&json).unwrap();
        assert_eq!(again, answer);
    }
}
