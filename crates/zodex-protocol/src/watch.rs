//! The board's watch: one long-lived stream of JSON lines for the operator's board, made of the
//! operator's existing read requests (`audit` pages and `status`) asked of the publisher every
//! [`WatchOptions::interval`] through an [`AdminCall`]: `zodex-prd admin watch` asks its admin
//! socket on the sprite (the exec transport carries that one process for as long as the board
//! watches, never a command per look); `zodex fleet watch` asks the fleet's service over mutual
//! TLS from the operator's machine, one connection per look. Each new audit row is written once, in id order,
//! as `{"kind":"audit","row":…}`; a restarted watch given `--after ID` (the last id the board
//! saw) starts right after it, so nothing is missed or written twice. A snapshot of the
//! authority (`{"kind":"status",…}`, the `status` answer) follows every batch of new rows and a
//! heartbeat of it every few seconds, so countdowns and ended grants stay current.
//!
//! Not a decision point and holds no authority: it reads what the operator could read with
//! `zodex sprite github audit` and `status`, as the same peer. Knows no socket and no TLS: the
//! caller's [`AdminCall`] carries each request.

use crate::{AdminRequest, Response};
use serde_json::{Value, json};
use std::io::Write;
use std::time::{Duration, Instant};

/// Rows asked of one `audit` page (the publisher's own page maximum).
const PAGE: u32 = 1000;
/// Most rows written to catch up after a cursor: past it, the oldest missed rows are said to be
/// skipped (`{"kind":"gap"}`) rather than read for ever.
const CATCH_UP_ROWS: usize = 20_000;

/// Carries one admin request to the publisher and brings its answer back.
pub trait AdminCall {
    fn call(&mut self, request: &AdminRequest) -> Result<Response, Unreachable>;
}

/// No answer came: where the watch asked, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach zodex-prd at {to}: {detail}; is it running?")]
pub struct Unreachable {
    /// The admin socket, or the fleet's name.
    pub to: String,
    pub detail: String,
}

/// How the watch paces itself and where it starts.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// The last audit id already seen; `None`: start with the newest `backlog` rows.
    pub after: Option<i64>,
    pub backlog: usize,
    pub interval: Duration,
    /// A status snapshot at least this often, even when nothing happened.
    pub heartbeat: Duration,
    /// The GitHub web base (`[github] git_url`), for links to pull requests.
    pub web_url: Option<String>,
    /// The last tool call already seen (see [`Follow`]); `None`: the newest `backlog` calls.
    pub after_call: Option<i64>,
}

/// Another record the watch carries in the same stream, each row with an `id`: on a sprite,
/// the tool calls the MCP server records (read by the caller: the publisher knows nothing of
/// the tools). Written as `{"kind":"tool","call":…}`.
pub trait Follow {
    /// The newest row's id (0 when there is none).
    fn newest(&mut self) -> Result<i64, FollowError>;
    /// At most `limit` rows with an id above `after`, oldest first.
    fn after(&mut self, after: i64, limit: u32) -> Result<Vec<Value>, FollowError>;
}

/// The implementor's own error (the publisher knows nothing of the tools), shown to the
/// operator as a note line of the watch.
pub type FollowError = Box<dyn std::error::Error + Send + Sync>;

/// Rows asked of a [`Follow`] per look.
const FOLLOW_ROWS: u32 = 500;

/// A [`Follow`] and where it stands; it stops (said once) at its first failure.
struct Calls<'a> {
    follow: Option<&'a mut dyn Follow>,
    cursor: i64,
}

impl Calls<'_> {
    fn look(&mut self, out: &mut impl Write) -> Result<bool, Stop> {
        let Some(follow) = self.follow.as_mut() else {
            return Ok(false);
        };
        match follow.after(self.cursor, FOLLOW_ROWS) {
            Ok(rows) => {
                let any = !rows.is_empty();
                for row in rows {
                    self.cursor = row_id(&row).unwrap_or(self.cursor);
                    emit(out, &json!({"kind": "tool", "call": row}))?;
                }
                Ok(any)
            }
            Err(message) => {
                self.follow = None;
                emit(
                    out,
                    &json!({"kind": "note", "message": format!("tool calls: {message}")}),
                )?;
                Ok(false)
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("zodex-prd refused `{request}`: {message}")]
    Refused {
        request: &'static str,
        message: String,
    },
    #[error("zodex-prd answered `{request}` with an unexpected shape")]
    Shape { request: &'static str },
}

/// Watches until `out` stops taking lines (the board went away: `Ok`), or the daemon cannot be
/// reached or refuses (`Err`, after a `{"kind":"error"}` line the board can show).
pub fn run(
    options: &WatchOptions,
    publisher: &mut dyn AdminCall,
    calls: Option<&mut dyn Follow>,
    out: &mut impl Write,
) -> Result<(), WatchError> {
    match watch(options, publisher, calls, out) {
        Ok(()) => Ok(()),
        Err(Stop::Closed) => Ok(()),
        Err(Stop::Failed(e)) => {
            let _ = emit(out, &json!({"kind": "error", "message": e.to_string()}));
            Err(e)
        }
    }
}

enum Stop {
    Closed,
    Failed(WatchError),
}

impl From<WatchError> for Stop {
    fn from(e: WatchError) -> Self {
        Stop::Failed(e)
    }
}

fn watch(
    options: &WatchOptions,
    publisher: &mut dyn AdminCall,
    follow: Option<&mut dyn Follow>,
    out: &mut impl Write,
) -> Result<(), Stop> {
    let mut calls = Calls {
        follow,
        cursor: options.after_call.unwrap_or(0),
    };
    if options.after_call.is_none()
        && let Some(follow) = calls.follow.as_mut()
    {
        let newest = follow.newest().unwrap_or(0);
        calls.cursor = newest.saturating_sub(options.backlog as i64).max(0);
    }
    let mut outcomes = Outcomes::default();
    let mut cursor = match options.after {
        Some(after) => after,
        None => {
            let rows = newest(publisher, options.backlog)?;
            let last = rows.last().and_then(row_id).unwrap_or(0);
            for row in rows {
                outcomes.note(&row);
                emit(out, &json!({"kind": "audit", "row": row}))?;
            }
            last
        }
    };
    // The daemon's version and schema: the health the board shows (the full doctor needs root).
    let pong = ask(publisher, "ping", &AdminRequest::Ping)?.result;
    emit(
        out,
        &json!({"kind": "hello", "cursor": cursor, "web_url": options.web_url, "publisher": pong}),
    )?;
    emit_status(publisher, out)?;
    let mut last_status = Instant::now();
    loop {
        // A full page of calls is followed by the next at once.
        while calls.look(out)? {}
        std::thread::sleep(options.interval);
        let found = after(publisher, cursor)?;
        if let Some(skipped_to) = found.gap {
            emit(
                out,
                &json!({"kind": "gap", "after": cursor, "next": skipped_to}),
            )?;
        }
        let mut fresh = !found.fresh.is_empty();
        for row in found.seen.into_iter().rev() {
            if outcomes.changed(&row) {
                fresh = true;
                outcomes.note(&row);
                emit(out, &json!({"kind": "outcome", "row": row}))?;
            } else if row_id(&row).is_some_and(|id| !outcomes.0.contains_key(&id)) {
                // Rows from before a restart (`--after`): their outcome from now on.
                outcomes.note(&row);
            }
        }
        for row in found.fresh {
            cursor = row_id(&row).unwrap_or(cursor);
            outcomes.note(&row);
            emit(out, &json!({"kind": "audit", "row": row}))?;
        }
        if fresh || last_status.elapsed() >= options.heartbeat {
            emit_status(publisher, out)?;
            last_status = Instant::now();
        }
    }
}

fn emit(out: &mut impl Write, line: &Value) -> Result<(), Stop> {
    let mut text = line.to_string();
    text.push('\n');
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|_| Stop::Closed)
}

fn emit_status(publisher: &mut dyn AdminCall, out: &mut impl Write) -> Result<(), Stop> {
    let status = ask(publisher, "status", &AdminRequest::status())?;
    let result = status
        .result
        .ok_or(WatchError::Shape { request: "status" })?;
    emit(out, &json!({"kind": "status", "status": result}))
}

fn ask(
    publisher: &mut dyn AdminCall,
    name: &'static str,
    request: &AdminRequest,
) -> Result<Response, WatchError> {
    let response = publisher.call(request)?;
    if !response.ok {
        let message = response
            .error
            .map(|e| e.message)
            .unwrap_or_else(|| "no reason given".into());
        return Err(WatchError::Refused {
            request: name,
            message,
        });
    }
    Ok(response)
}

fn row_id(row: &Value) -> Option<i64> {
    row.get("id").and_then(Value::as_i64)
}

/// One `audit` page below `before`, newest first, and the cursor of the next.
fn page(
    publisher: &mut dyn AdminCall,
    limit: u32,
    before: Option<i64>,
) -> Result<(Vec<Value>, Option<i64>), WatchError> {
    let request = AdminRequest::Audit {
        since_seconds: None,
        repo: None,
        limit: Some(limit),
        before,
        of: Default::default(),
    };
    let response = ask(publisher, "audit", &request)?;
    let next = response.next_before;
    let mut rows: Vec<Value> = response
        .result
        .and_then(|r| serde_json::from_value(r).ok())
        .ok_or(WatchError::Shape { request: "audit" })?;
    rows.reverse();
    Ok((rows, next))
}

/// The newest `count` rows, oldest first.
fn newest(publisher: &mut dyn AdminCall, count: usize) -> Result<Vec<Value>, WatchError> {
    let mut rows = Vec::new();
    let mut before = None;
    while rows.len() < count {
        let want = (count - rows.len()).min(PAGE as usize) as u32;
        let (batch, next) = page(publisher, want, before)?;
        rows.extend(batch);
        match next {
            Some(cursor) if before.is_none_or(|b| cursor < b) => before = Some(cursor),
            _ => break,
        }
    }
    rows.reverse();
    Ok(rows)
}

/// What one look found: the rows after the cursor (oldest first), the recent rows at or
/// before it (whose outcome may have been recorded since), and a gap when too many came.
struct Found {
    fresh: Vec<Value>,
    seen: Vec<Value>,
    gap: Option<i64>,
}

/// Every row after `cursor`, oldest first (at most [`CATCH_UP_ROWS`]; past it, the newest
/// ones and the id the board resumes from, as a gap).
fn after(publisher: &mut dyn AdminCall, cursor: i64) -> Result<Found, WatchError> {
    let mut rows = Vec::new();
    let mut seen = Vec::new();
    let mut before = None;
    let mut limit = 50;
    loop {
        let (batch, next) = page(publisher, limit, before)?;
        let reached = batch
            .iter()
            .any(|r| row_id(r).is_some_and(|id| id <= cursor));
        let (fresh, old): (Vec<Value>, Vec<Value>) = batch
            .into_iter()
            .partition(|r| row_id(r).is_some_and(|id| id > cursor));
        rows.extend(fresh);
        seen.extend(old);
        if reached || rows.len() >= CATCH_UP_ROWS {
            break;
        }
        match next {
            Some(next) if before.is_none_or(|b| next < b) => before = Some(next),
            _ => break,
        }
        limit = PAGE;
    }
    let gap = (rows.len() >= CATCH_UP_ROWS)
        .then(|| rows.last().and_then(row_id))
        .flatten();
    rows.reverse();
    Ok(Found {
        fresh: rows,
        seen,
        gap,
    })
}

/// The outcomes of the rows written last: a push's or publication's outcome is recorded on
/// its row after the decision, and the board is told once when it is (`{"kind":"outcome"}`).
#[derive(Default)]
struct Outcomes(std::collections::BTreeMap<i64, Value>);

impl Outcomes {
    const KEEP: usize = 500;

    fn note(&mut self, row: &Value) {
        if let Some(id) = row_id(row) {
            self.0
                .insert(id, row.get("outcome").cloned().unwrap_or(Value::Null));
            while self.0.len() > Self::KEEP {
                self.0.pop_first();
            }
        }
    }

    /// Whether `row`'s outcome differs from the one written (rows not kept: no).
    fn changed(&self, row: &Value) -> bool {
        let now = row.get("outcome").cloned().unwrap_or(Value::Null);
        row_id(row)
            .and_then(|id| self.0.get(&id))
            .is_some_and(|was| *was != now)
    }
}
