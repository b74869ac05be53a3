//! The board's events: what the sprite's `zodex-prd admin watch` streams (and, in local mode,
//! the tool calls), numbered in the order they arrived, kept in a bounded window for browsers
//! that (re)connect, and broadcast to the live ones.
//!
//! Every audit row is kept once: a row whose id the feed already has is dropped, so a watch
//! restarted with `--after` (or one that overlaps) never shows a row twice. A browser that
//! reconnects with `Last-Event-ID` gets the events after it and the latest status.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// Events kept for browsers that connect later (audit rows, outcomes, tool calls). Snapshots
/// (status, a fleet's members, feed state, hello, the watch's last error while it lasts) are
/// kept once each; notes are never kept.
pub const WINDOW: usize = 5000;

/// One event as the browser receives it: its number and its JSON (with `seq` inside).
#[derive(Debug)]
pub struct Event {
    pub seq: u64,
    pub json: String,
}

#[derive(Default)]
struct Window {
    next_seq: u64,
    events: VecDeque<Arc<Event>>,
    /// The latest snapshots, replayed to every new browser: `status`, `members`, `feed`, `hello`.
    latest: Vec<(String, Arc<Event>)>,
    last_audit_id: Option<i64>,
    last_call_id: Option<i64>,
}

/// The shared feed: producers push lines, the server subscribes browsers.
pub struct Feed {
    window: Mutex<Window>,
    live: broadcast::Sender<Arc<Event>>,
}

impl Feed {
    pub fn new() -> Arc<Feed> {
        let (live, _) = broadcast::channel(1024);
        Arc::new(Feed {
            window: Mutex::new(Window::default()),
            live,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest audit row and tool call the feed holds: where a restarted watch resumes.
    pub fn cursor(&self) -> (Option<i64>, Option<i64>) {
        let window = self.lock();
        (window.last_audit_id, window.last_call_id)
    }

    /// Adds one event (`kind` and its fields); audit rows already held are dropped.
    pub fn push(&self, mut value: Value) {
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut window = self.lock();
        let pointer = match kind.as_str() {
            "audit" => Some("/row/id"),
            "tool" => Some("/call/id"),
            _ => None,
        };
        if let Some(pointer) = pointer {
            let last = if kind == "audit" {
                &mut window.last_audit_id
            } else {
                &mut window.last_call_id
            };
            match (value.pointer(pointer).and_then(Value::as_i64), *last) {
                (None, _) => return,
                (Some(id), Some(seen)) if id <= seen => return,
                (Some(id), _) => *last = Some(id),
            }
        }
        let seq = window.next_seq + 1;
        window.next_seq = seq;
        value["seq"] = json!(seq);
        let event = Arc::new(Event {
            seq,
            json: value.to_string(),
        });
        if kind == "note" {
            // A passing remark: shown to the browsers open now, never replayed to a later one.
        } else if matches!(
            kind.as_str(),
            "status" | "members" | "feed" | "hello" | "error"
        ) {
            // A snapshot: a new browser needs the latest of each, not its history. The watch's
            // error holds only until the feed is live again: a page opened after that must
            // not show a failure that has passed.
            window.latest.retain(|(k, _)| *k != kind);
            if kind == "feed" && value.get("state").and_then(Value::as_str) == Some("live") {
                window.latest.retain(|(k, _)| k != "error");
            }
            window.latest.push((kind, event.clone()));
        } else {
            window.events.push_back(event.clone());
            while window.events.len() > WINDOW {
                window.events.pop_front();
            }
        }
        // Nobody listening is fine: the window keeps it.
        let _ = self.live.send(event);
    }

    /// What a browser that has seen up to `last_seen` needs (the latest snapshots, then every
    /// kept event after it, in order), and the live events from then on.
    pub fn subscribe(
        &self,
        last_seen: Option<u64>,
    ) -> (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>) {
        let window = self.lock();
        let receiver = self.live.subscribe();
        let after = last_seen.unwrap_or(0);
        let mut backlog: Vec<Arc<Event>> = window.latest.iter().map(|(_, e)| e.clone()).collect();
        backlog.extend(window.events.iter().filter(|e| e.seq > after).cloned());
        (backlog, receiver)
    }
}

/// Follows the sprite's watch for as long as the process lives (a fleet's: `fleet_feed`):
/// starts `zodex-prd admin watch` through the transport, feeds its lines, and when it ends starts it again after the
/// last row held (a pause that grows to 10 s while it keeps failing).
pub fn follow_sprite(feed: Arc<Feed>, sprite: crate::registry::SpriteEntry) {
    if let Some(reach) = sprite.fleet.clone() {
        return super::fleet_feed::follow_fleet(feed, sprite.name.clone(), reach);
    }
    let mut pause = Duration::from_millis(500);
    loop {
        let (after, after_call) = feed.cursor();
        match super::super::transport::watch(&sprite, after, after_call) {
            Ok(mut child) => {
                feed.push(json!({"kind": "feed", "state": "live"}));
                let delivered = read_lines(&feed, child.stdout.take());
                let detail = child
                    .stderr
                    .take()
                    .map(|e| last_line(std::io::BufReader::new(e)))
                    .unwrap_or_default();
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                feed.push(json!({
                    "kind": "feed",
                    "state": "reconnecting",
                    "detail": if detail.is_empty() { format!("the watch ended ({status})") } else { detail },
                }));
                if delivered {
                    pause = Duration::from_millis(500);
                }
            }
            Err(e) => {
                feed.push(
                    json!({"kind": "feed", "state": "reconnecting", "detail": e.to_string()}),
                );
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

/// Follows this machine's tool-call history (local mode): every new row once, in id order.
/// The history is a local file, so it is read again every few hundred milliseconds.
pub fn follow_history(feed: Arc<Feed>, history: std::path::PathBuf) {
    feed.push(json!({"kind": "feed", "state": "live"}));
    let mut after = zodex_tools::server::history::newest_id(&history)
        .unwrap_or(0)
        .saturating_sub(1000)
        .max(0);
    loop {
        match zodex_tools::server::history::read_history_after(&history, after, 500) {
            Ok(rows) => {
                let full = rows.len() == 500;
                for row in rows {
                    after = row.id;
                    feed.push(json!({"kind": "tool", "call": row}));
                }
                if full {
                    continue;
                }
            }
            Err(e) => {
                feed.push(
                    json!({"kind": "feed", "state": "reconnecting", "detail": e.to_string()}),
                );
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Feeds every JSON line of `out`; whether any came.
fn read_lines(feed: &Feed, out: Option<std::process::ChildStdout>) -> bool {
    let Some(out) = out else { return false };
    let mut any = false;
    for line in std::io::BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        if let Ok(value) = serde_json::from_str::<Value>(&line)
            && value.is_object()
        {
            any = true;
            feed.push(value);
        }
    }
    any
}

fn last_line(reader: impl BufRead) -> String {
    reader
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.trim().is_empty())
        .last()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_row_already_held_is_not_kept_twice() {
        let feed = Feed::new();
        feed.push(json!({"kind": "audit", "row": {"id": 1}}));
        feed.push(json!({"kind": "audit", "row": {"id": 2}}));
        feed.push(json!({"kind": "audit", "row": {"id": 2}}));
        feed.push(json!({"kind": "audit", "row": {"id": 1}}));
        feed.push(json!({"kind": "status", "status": {}}));
        feed.push(json!({"kind": "status", "status": {"now": 1}}));
        let (backlog, _) = feed.subscribe(None);
        assert_eq!(backlog.len(), 3, "{backlog:?}");
        assert_eq!(feed.cursor(), (Some(2), None));
        // A browser that saw the first row gets the second and the latest status only.
        let (backlog, _) = feed.subscribe(Some(1));
        assert_eq!(backlog.len(), 2);
        assert!(backlog[0].json.contains("\"now\":1"));
    }

    #[test]
    fn a_watch_error_is_not_replayed_once_the_feed_is_live_again() {
        let feed = Feed::new();
        feed.push(json!({"kind": "feed", "state": "live"}));
        feed.push(json!({"kind": "error", "message": "cannot reach zodex-prd at /s: refused"}));
        feed.push(json!({"kind": "note", "message": "tool calls: gone"}));
        feed.push(json!({"kind": "feed", "state": "reconnecting", "detail": "x"}));
        let (backlog, _) = feed.subscribe(None);
        let shown: Vec<&str> = backlog.iter().map(|e| e.json.as_str()).collect();
        assert!(
            shown.iter().any(|e| e.contains("cannot reach zodex-prd")),
            "while it lasts, a new page sees the error: {shown:?}"
        );
        assert!(
            !shown.iter().any(|e| e.contains("tool calls: gone")),
            "{shown:?}"
        );
        feed.push(json!({"kind": "feed", "state": "live"}));
        let (backlog, _) = feed.subscribe(None);
        let shown: Vec<&str> = backlog.iter().map(|e| e.json.as_str()).collect();
        assert!(
            !shown.iter().any(|e| e.contains("cannot reach zodex-prd")),
            "a page opened after recovery sees no stale error: {shown:?}"
        );
        assert_eq!(shown.len(), 1, "{shown:?}");
    }
}
