//! The board's events from a fleet's service (`zodex fleet watch`): the watch
//! ([`zodex_protocol::watch`]) runs here, on the operator's machine, and asks the service over
//! mutual TLS with the operator's own certificate — there is no process of ours on the
//! service's host to run `zodex-prd admin watch` for a fleet, and none is needed: the watch is
//! only the operator's read requests. Its lines go into the feed as a sprite's watch's do.
//!
//! Not here: tool calls (each sprite's own, never the service's), and the PR links' GitHub base
//! (the service does not say it).

use super::feed::Feed;
use crate::fleet_transport::FleetCall;
use crate::registry::FleetReach;
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use zodex_protocol::watch::WatchOptions;

/// Audit rows a first look starts with.
const BACKLOG: usize = 1000;
/// How often the watch looks: each look is a TLS connection to a replica.
const INTERVAL: Duration = Duration::from_secs(1);

/// Follows the fleet `name` for as long as the process lives; when the watch fails (no replica
/// answers, a refusal), starts it again after the last row held, after a pause that grows to
/// 10 s while it keeps failing.
pub fn follow_fleet(feed: Arc<Feed>, name: String, reach: FleetReach) {
    {
        let (feed, name, reach) = (feed.clone(), name.clone(), reach.clone());
        std::thread::spawn(move || follow_members(&feed, &name, &reach));
    }
    let mut pause = Duration::from_millis(500);
    let mut service = FleetCall { name, reach };
    loop {
        let (after, _) = feed.cursor();
        let options = WatchOptions {
            after,
            backlog: BACKLOG,
            interval: INTERVAL,
            heartbeat: Duration::from_secs(5),
            web_url: None,
            after_call: None,
        };
        let mut lines = FeedLines {
            feed: &feed,
            pending: Vec::new(),
            delivered: false,
        };
        let ended = zodex_protocol::watch::run(&options, &mut service, None, &mut lines);
        let detail = match ended {
            Ok(()) => "the watch ended".to_string(),
            Err(e) => e.to_string(),
        };
        if lines.delivered {
            pause = Duration::from_millis(500);
        }
        feed.push(json!({"kind": "feed", "state": "reconnecting", "detail": detail}));
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

/// How often the fleet's members are asked for (a removal or a label change shows within it).
const MEMBERS_INTERVAL: Duration = Duration::from_secs(3);

/// Pushes the fleet's sprites (`{"kind": "members"}`: each with its labels and whether it was
/// removed) into the feed whenever they change, so the board names removed members as such.
fn follow_members(feed: &Feed, name: &str, reach: &FleetReach) {
    let mut shown: Option<Value> = None;
    loop {
        let answer =
            crate::fleet_transport::call(name, reach, &zodex_protocol::AdminRequest::FleetMembers);
        if let Ok(response) = answer
            && let Ok(members) = response.answer::<Vec<zodex_protocol::FleetMember>>()
        {
            let members = members_event(&members);
            if shown.as_ref() != Some(&members) {
                feed.push(members.clone());
                shown = Some(members);
            }
        }
        std::thread::sleep(MEMBERS_INTERVAL);
    }
}

/// The feed's event for the fleet's sprites (operators are not shown: they own nothing).
fn members_event(members: &[zodex_protocol::FleetMember]) -> Value {
    let sprites: Vec<Value> = members
        .iter()
        .filter(|m| m.role == zodex_protocol::FleetRole::Sprite)
        .map(|m| json!({"name": m.name, "labels": m.labels, "removed": m.removed_at.is_some()}))
        .collect();
    json!({"kind": "members", "members": sprites})
}

/// The watch's output: each complete JSON line is pushed into the feed, the first one after
/// the feed is said to be live.
struct FeedLines<'a> {
    feed: &'a Feed,
    pending: Vec<u8>,
    delivered: bool,
}

impl Write for FeedLines<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            if let Ok(value) = serde_json::from_slice::<Value>(&line)
                && value.is_object()
            {
                if !self.delivered {
                    self.delivered = true;
                    self.feed.push(json!({"kind": "feed", "state": "live"}));
                }
                self.feed.push(value);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_reach_the_feed_whole_however_they_are_cut() {
        let feed = Feed::new();
        let mut lines = FeedLines {
            feed: &feed,
            pending: Vec::new(),
            delivered: false,
        };
        lines
            .write_all(br#"{"kind":"audit","row":{"id":1}}"#)
            .unwrap();
        assert!(feed.subscribe(None).0.is_empty(), "half a line is held");
        lines
            .write_all(b"\n{\"kind\":\"audit\",\"row\":{\"id\":2}}\nnot json\n")
            .unwrap();
        let (backlog, _) = feed.subscribe(None);
        let kinds: Vec<&str> = backlog.iter().map(|e| e.json.as_str()).collect();
        assert_eq!(backlog.len(), 3, "{kinds:?}");
        assert!(kinds[0].contains("\"live\""), "{kinds:?}");
        assert_eq!(feed.cursor(), (Some(2), None));
    }
}
