//! The one response shape of both sockets: a result or a typed error, and the error kinds the
//! CLIs map to exit codes.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request was malformed: fix it and retry (CLI exit 2).
    Usage,
    /// A policy refused it (CLI exit 3).
    Denied,
    /// The peer may not use this socket at all.
    Forbidden,
    NotFound,
    Conflict,
    Internal,
    /// GitHub (or the way to it) failed — a 5xx, a timeout, a rate limit: nothing was decided
    /// against the agent; try again (CLI exit 1, never 3).
    Upstream,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unblock: Option<String>,
}

/// Every response, on either socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// On a paged answer (`requests`, `audit`) with more rows: send the same request again
    /// with `before` set to this to get the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

impl Response {
    pub fn ok(result: impl Serialize) -> Self {
        Self {
            ok: true,
            result: Some(serde_json::to_value(result).unwrap_or(serde_json::Value::Null)),
            error: None,
            next_before: None,
        }
    }

    /// A page of a longer list: `next_before` is the cursor of the next page, if any.
    pub fn page(items: impl Serialize, next_before: Option<i64>) -> Self {
        Self {
            next_before,
            ..Self::ok(items)
        }
    }

    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            ok: false,
            result: None,
            error: Some(WireError {
                kind,
                message: message.into(),
                policies: Vec::new(),
                unblock: None,
            }),
            next_before: None,
        }
    }

    /// The result as the typed answer of the request it answers (see [`super::answers`]). An
    /// error response, or a result of another shape, is an [`AnswerError`].
    pub fn answer<T: serde::de::DeserializeOwned>(&self) -> Result<T, AnswerError> {
        if !self.ok {
            return Err(AnswerError::Refused(
                self.error
                    .as_ref()
                    .map_or("the publisher refused without a reason".into(), |e| {
                        e.message.clone()
                    }),
            ));
        }
        let result = self.result.clone().unwrap_or(serde_json::Value::Null);
        serde_json::from_value(result).map_err(|e| AnswerError::Shape(e.to_string()))
    }

    /// The response as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("responses always serialise");
        line.push('\n');
        line
    }
}

/// Why a response gave no typed answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("{0}")]
    Refused(String),
    #[error(
        "zodex-prd answered in a shape this build cannot read ({0}); install matching zodex, zodex-agent and zodex-prd versions"
    )]
    Shape(String),
}
