//! Fault injection: the next N requests (of the API, of git, or of either) answer with a server
//! error, a rate limit, or after a delay. Faults queue up and are consumed in order.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What a faulty answer looks like. As JSON (the admin endpoint):
/// `{"kind": "status", "status": 502}`, `{"kind": "secondary_rate_limit", "retry_after": 3}`,
/// `{"kind": "primary_rate_limit", "reset_in": 5}`, `{"kind": "delay", "ms": 300}`.
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
}

impl TryFrom<FaultJson> for Fault {
    type Error = String;

    fn try_from(json: FaultJson) -> Result<Self, String> {
        let need = |value: Option<u64>, key: &str| {
            value.ok_or_else(|| format!("fault kind `{}` needs `{key}`", json.kind))
        };
        let kind = match json.kind.as_str() {
            "status" => {
                let status = need(json.status.map(u64::from), "status")? as u16;
                if !(500..=599).contains(&status) {
                    return Err(format!("status fault {status}: use a 5xx status"));
                }
                FaultKind::Status { status }
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
                return Err(format!(
                    "unknown fault kind `{other}`: use status, secondary_rate_limit, primary_rate_limit or delay"
                ));
            }
        };
        Ok(Fault {
            kind,
            times: json.times.unwrap_or(1),
            scope: json.scope,
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

    pub fn new(kind: FaultKind, times: u32) -> Self {
        Self {
            kind,
            times,
            scope: FaultScope::Api,
        }
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

    /// Consumes one hit of the first fault that applies to a request of `scope`.
    pub fn take(&mut self, scope: FaultScope) -> Option<FaultKind> {
        let index = self
            .queue
            .iter()
            .position(|f| f.scope == FaultScope::Any || f.scope == scope)?;
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
            faults.take(FaultScope::Git),
            Some(FaultKind::Delay { ms: 10 })
        );
        assert_eq!(faults.take(FaultScope::Git), None);
        assert_eq!(
            faults.take(FaultScope::Api),
            Some(FaultKind::Status { status: 500 })
        );
        assert_eq!(
            faults.take(FaultScope::Api),
            Some(FaultKind::Status { status: 500 })
        );
        assert_eq!(faults.take(FaultScope::Api), None);
        let parsed: Fault =
            serde_json::from_str(r#"{"kind":"secondary_rate_limit","retry_after":3}"#).unwrap();
        assert_eq!(parsed, Fault::secondary_rate_limit(3, 1));
        assert!(serde_json::from_str::<Fault>(r#"{"kind":"status","status":500,"x":1}"#).is_err());
        assert!(serde_json::from_str::<Fault>(r#"{"kind":"status","status":200}"#).is_err());
        let round: Fault =
            serde_json::from_value(serde_json::to_value(Fault::delay(5, 2)).unwrap()).unwrap();
        assert_eq!(round, Fault::delay(5, 2));
    }
}
