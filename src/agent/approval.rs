//! `request-push --wait`: asking for a push grant and waiting for the operator's answer.
//!
//! The wait polls the publisher (`request_state`) twice a second; the request lives in the
//! publisher either way, so stopping the wait (Ctrl-C) loses nothing. Showing the wait is the
//! caller's: [`wait_for_decision`] reports each poll to it.

use super::client::{self, ClientError};
use crate::protocol::answers::{Grant, GrantState};
use crate::protocol::{AgentRequest, Response};
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the request's state is asked for.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// How a wait ended.
#[derive(Debug)]
pub enum Decided {
    /// The operator approved: the answer holds the active grant.
    Approved(Response),
    /// The request ended without a grant (`denied`, `expired`, `revoked`).
    Ended { state: GrantState, answer: Response },
    /// The publisher refused to say, or answered what this build cannot read.
    Failed(Response),
}

/// The id of a request still waiting for an operator, if `answer` (to `request_push`) is one.
pub fn pending_request(answer: &Response) -> Option<i64> {
    answer
        .answer::<Grant>()
        .ok()
        .filter(|g| g.state == GrantState::Pending)
        .map(|g| g.id)
}

/// Polls request `id` until it is no longer pending; `waiting(elapsed)` is called after each
/// poll that found it still pending.
pub fn wait_for_decision(
    socket: &Path,
    id: i64,
    mut waiting: impl FnMut(Duration),
) -> Result<Decided, ClientError> {
    let start = Instant::now();
    loop {
        std::thread::sleep(POLL_EVERY);
        let answer = client::call(socket, &AgentRequest::RequestState { id })?;
        let Ok(grant) = answer.answer::<Grant>() else {
            return Ok(Decided::Failed(answer));
        };
        match grant.state {
            GrantState::Pending => waiting(start.elapsed()),
            GrantState::Active => return Ok(Decided::Approved(answer)),
            state => return Ok(Decided::Ended { state, answer }),
        }
    }
}
