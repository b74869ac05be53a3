//! `request-push --wait`: asking for a push grant and waiting for the operator's answer.
//!
//! The wait polls the publisher (`request_state`) twice a second; the request lives in the
//! publisher either way, so stopping the wait (Ctrl-C) loses nothing. [`wait_for_decision`]
//! reports each poll to its caller; [`WaitDisplay`] says what a poll shows: a line redrawn in
//! place on a terminal a person watches, and otherwise — a pipe, a file, or the model's own
//! terminal (`TERM=dumb`, as the MCP tools run every command), whose every byte is read as
//! output — a plain line only when what it says changes.

use super::client::{self, ClientError};
pub use super::progress::Progress;
use std::path::Path;
use std::time::{Duration, Instant};
use zodex_protocol::answers::{Grant, GrantState};
use zodex_protocol::{AgentRequest, Response};

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

/// What the wait for request `id` writes to stderr as it goes.
#[derive(Debug)]
pub struct WaitDisplay {
    progress: Progress,
    id: i64,
    polls: usize,
    /// The whole minutes of waiting a line has said so far.
    minutes_said: u64,
}

impl WaitDisplay {
    pub fn new(progress: Progress, id: i64) -> Self {
        Self {
            progress,
            id,
            polls: 0,
            minutes_said: 0,
        }
    }

    /// After a poll that found the request still pending: a redrawn spinner, or a line each
    /// time another whole minute has passed (nothing in between).
    pub fn still_pending(&mut self, elapsed: Duration) -> Option<String> {
        self.polls += 1;
        match self.progress {
            Progress::Redraw => {
                let spinner = ['|', '/', '-', '\\'];
                Some(format!(
                    "\r{} waiting {}s ",
                    spinner[self.polls % spinner.len()],
                    elapsed.as_secs()
                ))
            }
            Progress::Lines => {
                let minutes = elapsed.as_secs() / 60;
                (minutes > self.minutes_said).then(|| {
                    self.minutes_said = minutes;
                    format!(
                        "request #{} is still pending after {minutes} min\n",
                        self.id
                    )
                })
            }
        }
    }

    /// When the wait ends: the end of a redrawn line, if one was drawn.
    pub fn finish(&self) -> Option<&'static str> {
        (self.progress == Progress::Redraw && self.polls > 0).then_some("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three minutes of polls twice a second: three plain lines, no carriage return.
    #[test]
    fn a_wait_without_a_redrawing_terminal_says_a_line_per_change_only() {
        let mut display = WaitDisplay::new(Progress::Lines, 7);
        let out: String = (1..=360)
            .filter_map(|poll| display.still_pending(Duration::from_millis(500 * poll)))
            .collect();
        assert_eq!(
            out,
            "request #7 is still pending after 1 min\n\
             request #7 is still pending after 2 min\n\
             request #7 is still pending after 3 min\n"
        );
        assert_eq!(display.finish(), None);

        let mut display = WaitDisplay::new(Progress::Redraw, 7);
        let drawn = display.still_pending(Duration::from_secs(1)).unwrap();
        assert!(
            drawn.starts_with('\r') && drawn.contains("waiting 1s"),
            "{drawn}"
        );
        assert_eq!(display.finish(), Some("\n"));
    }
}
