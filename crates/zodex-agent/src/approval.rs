//! `request-push --wait`: asking for a push grant and waiting for the operator's answer.
//!
//! The wait polls the publisher (`request_state`) twice a second; the request lives in the
//! publisher either way, so stopping the wait (Ctrl-C) loses nothing. A publisher that cannot
//! answer for a while (restarting; in a fleet every replica down for an upgrade, or the relay
//! itself restarting) does not end the wait: the request stays pending there, so the wait
//! keeps its place and asks again, backing off to [`MAX_BACKOFF`], until an answer says the
//! request's fate. [`wait_for_decision`]
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
/// The longest pause between two tries while the publisher does not answer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// What one poll found while the request is not yet decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// The operator has not answered yet.
    Pending { elapsed: Duration },
    /// The publisher did not answer (why), and is asked again after `retry_in`.
    Unreachable {
        elapsed: Duration,
        why: String,
        retry_in: Duration,
    },
}

/// Whether a failed poll is the publisher's absence (ask again later) rather than an answer.
/// An answer that refuses (the request unknown, the sprite removed, a usage error) is final.
fn transient(polled: &Result<Response, ClientError>) -> Option<String> {
    match polled {
        Err(ClientError::Connect { source, .. }) => {
            Some(format!("zodex-prd is not answering: {source}"))
        }
        Err(ClientError::Io(e)) => Some(format!("the connection to zodex-prd broke: {e}")),
        Err(_) => None,
        Ok(answer) => answer
            .error
            .as_ref()
            .filter(|e| e.kind == zodex_protocol::ErrorKind::Upstream)
            .map(|e| e.message.clone()),
    }
}

/// The pause before try `failures` (1, 2, …) after the publisher stopped answering: doubling
/// from one second to [`MAX_BACKOFF`], with up to a quarter more at random so that agents
/// waiting on one service do not all come back in the same instant.
fn backoff(failures: u32) -> Duration {
    let base = Duration::from_secs(1u64 << failures.saturating_sub(1).min(4)).min(MAX_BACKOFF);
    // Spread, not secrecy: the clock's nanoseconds and the process id differ between agents.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let spread = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % 256;
    base + base.mul_f64(f64::from(spread) / 1024.0)
}

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

/// Polls request `id` until it is no longer pending; `waiting` is told after each poll that
/// found it still pending, or found the publisher not answering (then the wait backs off and
/// asks again: only an answer ends it).
pub fn wait_for_decision(
    socket: &Path,
    id: i64,
    mut waiting: impl FnMut(&Waiting),
) -> Result<Decided, ClientError> {
    let start = Instant::now();
    let mut pause = POLL_EVERY;
    let mut failures = 0u32;
    loop {
        std::thread::sleep(pause);
        let polled = client::call(socket, &AgentRequest::RequestState { id });
        if let Some(why) = transient(&polled) {
            failures += 1;
            pause = backoff(failures);
            waiting(&Waiting::Unreachable {
                elapsed: start.elapsed(),
                why,
                retry_in: pause,
            });
            continue;
        }
        failures = 0;
        pause = POLL_EVERY;
        let answer = polled?;
        let Ok(grant) = answer.answer::<Grant>() else {
            return Ok(Decided::Failed(answer));
        };
        match grant.state {
            GrantState::Pending => waiting(&Waiting::Pending {
                elapsed: start.elapsed(),
            }),
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
    /// The publisher stopped answering, and a line said so.
    away: bool,
}

impl WaitDisplay {
    pub fn new(progress: Progress, id: i64) -> Self {
        Self {
            progress,
            id,
            polls: 0,
            minutes_said: 0,
            away: false,
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

    /// After a poll the publisher did not answer: one line when it stops answering, none
    /// while it stays away (the wait goes on), one when it answers again (from
    /// [`WaitDisplay::still_pending`]).
    pub fn unreachable(&mut self, why: &str, retry_in: Duration) -> Option<String> {
        if self.away {
            return None;
        }
        self.away = true;
        let start = if self.progress == Progress::Redraw && self.polls > 0 {
            "\n"
        } else {
            ""
        };
        Some(format!(
            "{start}zodex-prd does not answer ({why}); request #{} stays pending there, still waiting (asking again every {}s at most)\n",
            self.id,
            retry_in.as_secs().max(1).min(MAX_BACKOFF.as_secs())
        ))
    }

    /// What to write for one poll.
    pub fn show(&mut self, waiting: &Waiting) -> Option<String> {
        match waiting {
            Waiting::Pending { elapsed } => {
                let back = std::mem::take(&mut self.away).then(|| {
                    format!(
                        "zodex-prd answers again; request #{} is still pending\n",
                        self.id
                    )
                });
                let line = self.still_pending(*elapsed);
                match (back, line) {
                    (None, line) => line,
                    (Some(back), None) => Some(back),
                    (Some(back), Some(line)) => Some(back + &line),
                }
            }
            Waiting::Unreachable { why, retry_in, .. } => self.unreachable(why, *retry_in),
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

    /// The publisher away for a while: one line when it goes, none while it stays away, one
    /// when it answers again; the pauses double to the cap, each a little apart.
    #[test]
    fn a_wait_through_an_outage_says_so_once_and_backs_off() {
        let mut display = WaitDisplay::new(Progress::Lines, 9);
        let away = Waiting::Unreachable {
            elapsed: Duration::from_secs(3),
            why: "no replica of the fleet's service answered".into(),
            retry_in: Duration::from_secs(2),
        };
        let first = display.show(&away).unwrap();
        assert!(
            first.contains("request #9 stays pending") && first.contains("still waiting"),
            "{first}"
        );
        assert_eq!(display.show(&away), None);
        let back = display
            .show(&Waiting::Pending {
                elapsed: Duration::from_secs(20),
            })
            .unwrap();
        assert!(back.contains("answers again"), "{back}");
        let pauses: Vec<Duration> = (1..=8).map(backoff).collect();
        for (n, pause) in pauses.iter().enumerate() {
            let base = Duration::from_secs(1 << n.min(4)).min(MAX_BACKOFF);
            assert!(
                *pause >= base && *pause <= base + base / 4,
                "{n}: {pause:?}"
            );
        }
        // A refusal is an answer: it ends the wait. Only the publisher's absence does not.
        let refused = Response::error(zodex_protocol::ErrorKind::Forbidden, "removed");
        assert_eq!(transient(&Ok(refused)), None);
        let upstream = Response::error(zodex_protocol::ErrorKind::Upstream, "no replica");
        assert!(transient(&Ok(upstream)).is_some());
    }

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
