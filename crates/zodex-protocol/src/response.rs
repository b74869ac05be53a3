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
    /// On a list asked for one sprite's or one label's rows: the filter the publisher applied.
    /// Absent although asked for: the publisher is too old to filter and listed every
    /// sprite's rows ([`Response::check_filtered`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filtered: Option<crate::ForSprites>,
}

impl Response {
    pub fn ok(result: impl Serialize) -> Self {
        Self {
            ok: true,
            result: Some(serde_json::to_value(result).unwrap_or(serde_json::Value::Null)),
            error: None,
            next_before: None,
            filtered: None,
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
            filtered: None,
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

    /// The page of a list filtered by `asked` (see [`AdminRequest::Requests`]), marked as such.
    ///
    /// [`AdminRequest::Requests`]: crate::AdminRequest::Requests
    pub fn filtered_by(self, asked: &crate::ForSprites) -> Self {
        Self {
            filtered: (!asked.is_empty()).then(|| asked.clone()),
            ..self
        }
    }

    /// Refuses an answer to a list asked for `asked` (one sprite's or label's rows) that does
    /// not say it applied exactly that filter: it came from a publisher too old to filter, and
    /// holds every sprite's rows. An error answer passes (it is shown as it is).
    pub fn check_filtered(&self, asked: &crate::ForSprites) -> Result<(), AnswerError> {
        if !self.ok || asked.is_empty() || self.filtered.as_ref() == Some(asked) {
            return Ok(());
        }
        Err(AnswerError::Unfiltered)
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
    #[error(
        "the publisher that answered cannot filter by sprite or label (it is older than this zodex) and listed every sprite's rows, so none are shown; upgrade every replica of the service (`zodex-prd upgrade`), or list without --sprite/--label"
    )]
    Unfiltered,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ForSprites;

    /// A replica older than the filter fields reads the request without them and answers every
    /// sprite's rows, with no echo: the client refuses that answer instead of showing it.
    #[test]
    fn an_answer_without_the_filters_echo_is_refused() {
        let asked = ForSprites {
            sprite: Some("web1".into()),
            label: None,
        };
        let older = Response::page(vec![1, 2, 3], None);
        let line = older.to_line();
        assert!(!line.contains("filtered"), "{line}");
        let err = older.check_filtered(&asked).unwrap_err();
        assert!(err.to_string().contains("upgrade every replica"), "{err}");
        // The answer of a publisher that applied it; and of one told no filter.
        let newer = Response::page(vec![1], None).filtered_by(&asked);
        let read: Response = serde_json::from_str(&newer.to_line()).unwrap();
        read.check_filtered(&asked).unwrap();
        let other = ForSprites {
            sprite: None,
            label: Some("team=web".into()),
        };
        assert!(
            read.check_filtered(&other).is_err(),
            "another filter's rows"
        );
        older.check_filtered(&ForSprites::default()).unwrap();
        // An error is shown as it is, filter or not.
        Response::error(ErrorKind::NotFound, "no sprite named web3")
            .check_filtered(&asked)
            .unwrap();
    }
}
