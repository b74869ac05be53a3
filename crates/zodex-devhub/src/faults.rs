//! Fault injection: the next N requests (of the API, of git, or of either; optionally only those
//! with one method and path) answer with a server error, a rate limit, or after a delay — or are
//! carried out and then answered with a server error, as when GitHub makes a change and the
//! answer is lost. Faults queue up and are consumed in order.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What a faulty answer looks like. As JSON (the admin endpoint):
/// `{"kind": "status", "status": 502}`, `{"kind": "secondary_rate_limit", "retry_after": 3}`,
/// `{"kind": "primary_rate_limit", "reset_in": 5}`, `{"kind": "delay", "ms": 300}`,
/// `{"kind": "status_after", "status": 502, "request": "POST /repos/demo/app/pulls"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer this status (500, 502, 503, 504) with GitHub's body for it.
    Status { status: u16 },
    /// 403 with `Retry-After` and GitHub's secondary-rate-limit message.
    SecondaryRateLimit { retry_after: u64 },
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` `reset_in` seconds ahead.
    PrimaryRateLimit { reset_in: u64 },
    /// Answer normally, but only after this many milliseconds.
    Delay { ms: u64 },
    /// Carry the request out, then answer this status (5xx) with GitHub's body for it instead
    /// of the real answer: the change is made and the caller does not know. REST API only; a
    /// git request hit by it is answered the status without being carried out.
    StatusAfter { status: u16 },
}

/// Which requests a fault applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultScope {
    /// REST API requests (the default).
    #[default]
    Api,
    /// Git smart HTTP requests.
    Git,
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "FaultJson", into = "FaultJson")]
pub struct Fault {
    pub kind: FaultKind,
    /// How many requests it hits (default 1).
    pub times: u32,
    pub scope: FaultScope,
    /// Only requests with this method and path (`POST /repos/demo/app/pulls`; the query is not
    /// compared); every request of the scope when `None`.
    pub request: Option<String>,
}

/// The admin endpoint's flat JSON form of a fault; unknown keys are refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultJson {
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reset_in: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ms: Option<u64>,
    #[serde(default)]
    times: Option<u32>,
    #[serde(default)]
    scope: FaultScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request: Option<String>,
}

/// Why a fault a test asked devhub to inject was refused (serde shows it in its error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    #[error("fault kind `{kind}` needs `{key}`")]
    Missing { kind: String, key: &'static str },
    #[error("{kind} fault {status}: use a 5xx status")]
    NotServerStatus { kind: String, status: u16 },
    #[error(
        "unknown fault kind `{0}`: use status, status_after, secondary_rate_limit, primary_rate_limit or delay"
    )]
    UnknownKind(String),
    #[error("fault request {0:?}: write it as METHOD /path, like \"POST /repos/demo/app/pulls\"")]
    Request(String),
}

impl TryFrom<FaultJson> for Fault {
    type Error = FaultError;

    fn try_from(json: FaultJson) -> Result<Self, FaultError> {
        let need = |value: Option<u64>, key: &'static str| {
            value.ok_or_else(|| FaultError::Missing {
                kind: json.kind.clone(),
                key,
            })
        };
        let kind = match json.kind.as_str() {
            "status" | "status_after" => {
                let status = need(json.status.map(u64::from), "status")? as u16;
                if !(500..=599).contains(&status) {
                    return Err(FaultError::NotServerStatus {
                        kind: json.kind.clone(),
                        status,
                    });
                }
                if json.kind == "status" {
                    FaultKind::Status { status }
                } else {
                    FaultKind::StatusAfter { status }
                }
            }
            "secondary_rate_limit" => FaultKind::SecondaryRateLimit {
                retry_after: need(json.retry_after, "retry_after")?,
            },
            "primary_rate_limit" => FaultKind::PrimaryRateLimit {
                reset_in: need(json.reset_in, "reset_in")?,
            },
            "delay" => FaultKind::Delay {
                ms: need(json.ms, "ms")?,
            },
            other => {
                return Err(FaultError::UnknownKind(other.to_string()));
            }
        };
        if let Some(request) = &json.request
            && !request
                .split_once(' ')
                .is_some_and(|(m, p)| !m.is_empty() && p.starts_with('/'))
        {
            return Err(FaultError::Request(request.clone()));
        }
        Ok(Fault {
            kind,
            times: json.times.unwrap_or(1),
            scope: json.scope,
            request: json.request,
        })
    }
}

impl From<Fault> for FaultJson {
    fn from(fault: Fault) -> Self {
        let mut json = FaultJson {
            kind: String::new(),
            status: None,
            retry_after: None,
            reset_in: None,
            ms: None,
            times: Some(fault.times),
            scope: fault.scope,
            request: fault.request,
        };
        match fault.kind {
            FaultKind::Status { status } => {
                json.kind = "status".into();
                json.status = Some(status);
            }
            FaultKind::SecondaryRateLimit { retry_after } => {
                json.kind = "secondary_rate_limit".into();
                json.retry_after = Some(retry_after);
            }
            FaultKind::PrimaryRateLimit { reset_in } => {
                json.kind = "primary_rate_limit".into();
                json.reset_in = Some(reset_in);
            }
            FaultKind::Delay { ms } => {
                json.kind = "delay".into();
                json.ms = Some(ms);
            }
            FaultKind::StatusAfter { status } => {
                json.kind = "status_after".into();
                json.status = Some(status);
            }
        }
        json
    }
}

impl Fault {
    pub fn status(status: u16, times: u32) -> Self {
        Self::new(FaultKind::Status { status }, times)
    }

    pub fn secondary_rate_limit(retry_after_secs: u64, times: u32) -> Self {
        Self::new(
            FaultKind::SecondaryRateLimit {
                retry_after: retry_after_secs,
            },
            times,
        )
    }

    pub fn primary_rate_limit(reset_in_secs: u64, times: u32) -> Self {
        Self::new(
            FaultKind::PrimaryRateLimit {
                reset_in: reset_in_secs,
            },
            times,
        )
    }

    pub fn delay(ms: u64, times: u32) -> Self {
        Self::new(FaultKind::Delay { ms }, times)
    }

    /// Carries the request out, then answers `status` (see [`FaultKind::StatusAfter`]).
    pub fn status_after(status: u16, times: u32) -> Self {
        Self::new(FaultKind::StatusAfter { status }, times)
    }

    pub fn new(kind: FaultKind, times: u32) -> Self {
        Self {
            kind,
            times,
            scope: FaultScope::Api,
            request: None,
        }
    }

    /// The same fault, only for requests with `method` and `path` (`"POST"`,
    /// `"/repos/demo/app/pulls"`).
    pub fn matching(mut self, method: &str, path: &str) -> Self {
        self.request = Some(format!("{} {path}", method.to_ascii_uppercase()));
        self
    }

    fn applies(&self, scope: FaultScope, method: &str, path: &str) -> bool {
        (self.scope == FaultScope::Any || self.scope == scope)
            && self.request.as_deref().is_none_or(|request| {
                request
                    .split_once(' ')
                    .is_some_and(|(m, p)| m.eq_ignore_ascii_case(method) && p == path)
            })
    }

    /// The same fault, for git requests instead of API ones.
    pub fn on(mut self, scope: FaultScope) -> Self {
        self.scope = scope;
        self
    }
}

#[derive(Debug, Default)]
pub struct Faults {
    queue: VecDeque<Fault>,
}

impl Faults {
    pub fn push(&mut self, fault: Fault) {
        if fault.times > 0 {
            self.queue.push_back(fault);
        }
    }

    pub fn clear(&mut self) {
        self.queue.clear();
    }

    pub fn pending(&self) -> Vec<Fault> {
        self.queue.iter().cloned().collect()
    }

    /// Consumes one hit of the first fault that applies to a request of `scope` with `method`
    /// and `path`.
    pub fn take(&mut self, scope: FaultScope, method: &str, path: &str) -> Option<FaultKind> {
        let index = self
            .queue
            .iter()
            .position(|f| f.applies(scope, method, path))?;
        let fault = &mut self.queue[index];
        fault.times -= 1;
        let kind = fault.kind.clone();
        if fault.times == 0 {
            self.queue.remove(index);
        }
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_consumed_in_order_per_scope() {
        let mut faults = Faults::default();
        faults.push(Fault::status(500, 2));
        faults.push(Fault::delay(10, 1).on(FaultScope::Git));
        assert_eq!(
            faults.take(FaultScope::Git, "GET", "/x"),
            Some(FaultKind::Delay { ms: 10 })
        );
        assert_eq!(faults.take(FaultScope::Git, "GET", "/x"), None);
        assert_eq!(
            faults.take(FaultScope::Api, "GET", "/x"),
            Some(FaultKind::Status { status: 500 })
        );
        assert_eq!(
            faults.take(FaultScope::Api, "GET", "/x"),
            Some(FaultKind::Status { status: 500 })
        );
        assert_eq!(faults.take(FaultScope::Api, "GET", "/x"), None);
        let parsed: Fault =
            serde_json::from_str(r#"{"kind":"secondary_rate_limit","retry_after":3}"#).unwrap();
        assert_eq!(parsed, Fault::secondary_rate_limit(3, 1));
        assert!(serde_json::from_str::<Fault>(r#"{"kind":"status","status":500,"x":1}"#).is_err());
        assert!(serde_json::from_str::<Fault>(r#"{"kind":"status","status":200}"#).is_err());
        let round: Fault =
            serde_json::from_value(serde_json::to_value(Fault::delay(5, 2)).unwrap()).unwrap();
        assert_eq!(round, Fault::delay(5, 2));
    }

    #[test]
    fn a_fault_for_one_request_skips_the_others() {
        let mut faults = Faults::default();
        faults.push(Fault::status_after(502, 1).matching("post", "/repos/demo/app/pulls"));
        assert_eq!(
            faults.take(FaultScope::Api, "GET", "/repos/demo/app/pulls"),
            None
        );
        assert_eq!(
            faults.take(FaultScope::Api, "POST", "/repos/demo/app/pulls"),
            Some(FaultKind::StatusAfter { status: 502 })
        );
        assert!(faults.pending().is_empty());
        let parsed: Fault = serde_json::from_str(
            r#"{"kind":"status_after","status":502,"request":"POST /repos/demo/app/pulls"}"#,
        )
        .unwrap();
        assert_eq!(
            parsed,
            Fault::status_after(502, 1).matching("POST", "/repos/demo/app/pulls")
        );
        assert!(
            serde_json::from_str::<Fault>(
                r#"{"kind":"status_after","status":502,"request":"pulls"}"#
            )
            .is_err()
        );
    }
}
