//! What the board's buttons may ask: each an admin request the CLI already sends
//! (`approve`, `deny`, `revoke-push`, `default`, `policy explain`), carried through the same
//! transport as the operator — the board holds no authority of its own and decides nothing.

use crate::registry::SpriteEntry;
use crate::transport;
use serde::Deserialize;
use zodex_protocol::{AdminRequest, ErrorKind, Response, Ttl};

/// The longest approval the board offers (the publisher checks its own bounds as well).
pub const MAX_TTL_SECONDS: i64 = 7 * 24 * 3600;

/// One button press, as the page sends it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Approve request `id` for `ttl_seconds` (always a TTL: the board never offers none).
    Approve {
        id: i64,
        ttl_seconds: i64,
    },
    Deny {
        id: i64,
    },
    RevokePush {
        repo: String,
    },
    /// Clear every YOLO scope (`zodex sprite github default`).
    Default,
    /// Why a push to `repo`'s `ref_name` is refused now, and what would unblock it.
    Explain {
        repo: String,
        ref_name: String,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ActionError {
    #[error("not an action the board knows: {0}")]
    Unknown(String),
    #[error("an approval needs a TTL from 1 second to 7 days")]
    Ttl,
}

impl Action {
    pub fn parse(body: &[u8]) -> Result<Action, ActionError> {
        let action: Action =
            serde_json::from_slice(body).map_err(|e| ActionError::Unknown(e.to_string()))?;
        if let Action::Approve { ttl_seconds, .. } = action
            && !(1..=MAX_TTL_SECONDS).contains(&ttl_seconds)
        {
            return Err(ActionError::Ttl);
        }
        Ok(action)
    }

    /// The admin request the CLI sends for the same thing.
    pub fn request(self) -> AdminRequest {
        match self {
            Action::Approve { id, ttl_seconds } => AdminRequest::Approve {
                id,
                ttl: Some(Ttl::Seconds(ttl_seconds)),
            },
            Action::Deny { id } => AdminRequest::Deny { id },
            Action::RevokePush { repo } => AdminRequest::RevokePush {
                repo,
                to: Default::default(),
            },
            Action::Default => AdminRequest::Default,
            Action::Explain { repo, ref_name } => AdminRequest::Explain {
                repo,
                ref_name,
                force: false,
                delete: false,
                bytes: 0,
                touches_workflows: false,
                ref_exists: true,
                paths: Vec::new(),
                of: Default::default(),
            },
        }
    }
}

/// Sends the action's request to the sprite (blocking: the transport runs a process) and
/// returns the publisher's answer, or a transport failure as an answer of the same shape.
pub fn forward(sprite: &SpriteEntry, action: Action) -> Response {
    match transport::call(sprite, &action.request()) {
        Ok(response) => response,
        Err(e) => Response::error(ErrorKind::Internal, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_always_carries_a_ttl() {
        let approve = Action::parse(br#"{"op":"approve","id":7,"ttl_seconds":2700}"#).unwrap();
        assert_eq!(
            approve.request(),
            AdminRequest::Approve {
                id: 7,
                ttl: Some(Ttl::Seconds(2700))
            }
        );
        assert!(Action::parse(br#"{"op":"approve","id":7}"#).is_err());
        assert_eq!(
            Action::parse(br#"{"op":"approve","id":7,"ttl_seconds":0}"#),
            Err(ActionError::Ttl)
        );
        assert!(Action::parse(br#"{"op":"grant_push","repo":"a/b"}"#).is_err());
        assert!(Action::parse(br#"{"op":"deny","id":1,"extra":1}"#).is_err());
    }
}
