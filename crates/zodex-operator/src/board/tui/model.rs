//! What the terminal view shows, built from the board's events (the same JSON the page gets):
//! requests waiting, grants and YOLO scopes, the latest decisions and tool calls. Every text
//! the agent wrote goes through [`clean`] before it is kept: no control character — no escape
//! sequence — ever reaches the terminal.

use serde::Deserialize;
use serde_json::Value;
use std::collections::VecDeque;
use zodex_engine::AuditDecision;
use zodex_protocol::answers::AuditRow;

/// Decisions and tool calls kept for the view.
const KEEP: usize = 1000;
/// The approvals the view offers (seconds); the request's own TTL is added when it is another.
pub const TTL_CHOICES: &[i64] = &[15 * 60, 30 * 60, 45 * 60, 3600, 2 * 3600, 8 * 3600, 86400];
/// The TTL offered when the request named none (never "no TTL").
pub const DEFAULT_TTL: i64 = 30 * 60;

/// `text` with every control character (C0, DEL, C1) and bidi override shown as `�`-free
/// visible escapes (`\u{1b}` → `^[`), on one line.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from_u32(c as u32 + 0x40).unwrap_or('?'));
            }
            '\u{7f}' => out.push_str("^?"),
            '\u{80}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn text(value: &Value, key: &str) -> String {
    clean(value.get(key).and_then(Value::as_str).unwrap_or(""))
}

/// A request waiting, as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: i64,
    pub repo: String,
    pub reason: String,
    pub ttl_seconds: Option<i64>,
    pub refs: String,
    pub workflows: bool,
    /// In a fleet, the sprite that asks (`sprite:NAME` on the wire); empty on one sprite.
    pub sprite: String,
}

/// An active grant or YOLO scope, its end on the local clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    pub label: String,
    pub repo: Option<String>,
    pub ends_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub id: i64,
    pub line: String,
    pub deny: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub conversation: String,
    pub line: String,
    pub output: String,
}

/// Everything the view shows.
#[derive(Debug, Default)]
pub struct Model {
    pub requests: Vec<Request>,
    pub authority: Vec<Authority>,
    pub proofs: String,
    pub decisions: VecDeque<Decision>,
    pub calls: VecDeque<Call>,
    pub feed: String,
    /// Which request is selected, and the TTL chosen for it (index into its choices).
    pub selected: usize,
    pub ttl_choice: Option<usize>,
    pub only_denials: bool,
    pub message: String,
}

impl Model {
    /// Takes one event; `now` is the local clock (seconds), for countdowns.
    pub fn take(&mut self, event: &Value, now: i64) {
        match event.get("kind").and_then(Value::as_str) {
            Some("status") => self.status(&event["status"], now),
            Some("audit") => self.decision(&event["row"]),
            Some("tool") => self.call(&event["call"]),
            Some("feed") => self.feed = text(event, "state"),
            Some("error") | Some("note") => self.message = text(event, "message"),
            _ => {}
        }
    }

    fn status(&mut self, status: &Value, now: i64) {
        let list = |key: &str| status[key].as_array().cloned().unwrap_or_default();
        let refs = |v: &Value| {
            let refs: Vec<String> = v["refs"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).map(clean).collect())
                .unwrap_or_default();
            if refs.is_empty() {
                "every ref".to_string()
            } else {
                refs.join(", ")
            }
        };
        let mut requests: Vec<Request> = list("pending")
            .iter()
            .map(|p| Request {
                id: p["id"].as_i64().unwrap_or(0),
                repo: text(p, "repo"),
                reason: text(p, "reason"),
                ttl_seconds: p["ttl_seconds"].as_i64(),
                refs: refs(p),
                workflows: p["allow_workflows"].as_bool().unwrap_or(false),
                sprite: p["owner"]
                    .as_str()
                    .and_then(|o| o.strip_prefix("sprite:"))
                    .map(clean)
                    .unwrap_or_default(),
            })
            .collect();
        requests.sort_by_key(|r| std::cmp::Reverse(r.id));
        if requests.len() != self.requests.len() {
            self.ttl_choice = None;
        }
        self.requests = requests;
        self.selected = self.selected.min(self.requests.len().saturating_sub(1));
        let ends = |v: &Value| v["seconds_left"].as_i64().map(|left| now + left);
        let mut authority: Vec<Authority> = list("grants")
            .iter()
            .map(|g| Authority {
                label: format!("grant {} ({})", text(g, "repo"), refs(g)),
                repo: Some(text(g, "repo")),
                ends_at: ends(g),
            })
            .collect();
        authority.extend(list("yolo").iter().map(|y| {
            let repo = y["repo"].as_str().map(clean);
            Authority {
                label: format!(
                    "YOLO {} ({})",
                    repo.clone()
                        .unwrap_or_else(|| "every installed repository".into()),
                    refs(y)
                ),
                repo: None,
                ends_at: ends(y),
            }
        }));
        self.authority = authority;
        self.proofs = clean(
            status["proofs"]["summary"]
                .as_str()
                .unwrap_or("not reported"),
        );
    }

    fn decision(&mut self, row: &Value) {
        let row = match AuditRow::deserialize(row) {
            Ok(row) => row,
            Err(e) => {
                self.message = clean(&format!("an audit row this view cannot read: {e}"));
                return;
            }
        };
        let entry = &row.entry;
        let optional = |v: &Option<String>| clean(v.as_deref().unwrap_or(""));
        let policies: Vec<String> = entry.policies.iter().map(|p| clean(p)).collect();
        let mut line = format!(
            "#{} {} {} {} {} {} [{}] {}",
            row.id,
            clean(&entry.principal),
            clean(&entry.action),
            optional(&entry.repo_key),
            optional(&entry.ref_name),
            clean(&entry.decision),
            policies.join(", "),
            optional(&entry.outcome),
        );
        line.push_str(&shadow_difference(entry.detail.as_ref()));
        self.decisions.push_front(Decision {
            id: row.id,
            line,
            deny: AuditDecision::read(&entry.decision) == AuditDecision::Deny,
        });
        self.decisions.truncate(KEEP);
    }

    fn call(&mut self, call: &Value) {
        let line = format!(
            "{} {} {} — {}",
            text(call, "tool"),
            text(call, "workdir"),
            text(call, "summary"),
            text(call, "outcome"),
        );
        let output = call["output_tail"].as_str().map(clean).unwrap_or_default();
        let tail: String = {
            let count = output.chars().count();
            output.chars().skip(count.saturating_sub(200)).collect()
        };
        self.calls.push_front(Call {
            conversation: text(call, "conversation"),
            line,
            output: tail,
        });
        self.calls.truncate(KEEP);
    }

    /// The TTL choices for the selected request, and the one chosen (what it asked, else
    /// [`DEFAULT_TTL`]).
    pub fn ttl_choices(&self) -> (Vec<i64>, usize) {
        let asked = self.requests.get(self.selected).and_then(|r| r.ttl_seconds);
        let mut choices = TTL_CHOICES.to_vec();
        if let Some(asked) = asked.filter(|a| !choices.contains(a) && *a > 0) {
            choices.push(asked);
            choices.sort();
        }
        let default = asked.unwrap_or(DEFAULT_TTL);
        let index = self
            .ttl_choice
            .unwrap_or_else(|| choices.iter().position(|c| *c == default).unwrap_or(1));
        (choices, index)
    }
}

/// ` (shadow: would deny [policy])` when the shadow policies (`policy_dir/shadow/`) decided
/// the row otherwise; empty when they agreed or there are none.
fn shadow_difference(detail: Option<&Value>) -> String {
    let shadow = &detail.unwrap_or(&Value::Null)["shadow"];
    if shadow["differs"] != Value::Bool(true) {
        return String::new();
    }
    let verdict = match shadow["allowed"].as_bool() {
        Some(true) => "allow",
        _ => "deny",
    };
    let policies: Vec<String> = shadow["policies"]
        .as_array()
        .map(|p| p.iter().filter_map(Value::as_str).map(clean).collect())
        .unwrap_or_default();
    format!(" (shadow: would {verdict} [{}])", policies.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_escape_sequence_reaches_the_terminal() {
        assert_eq!(clean("a\u{1b}[31mred\u{7}"), "a^[[31mred^G");
        assert_eq!(clean("x\u{9b}2J\u{202e}y"), "x\\u{9b}2J\\u{202e}y");
        assert_eq!(clean("two\nlines"), "two lines");
    }

    #[test]
    fn a_decision_the_shadow_set_would_change_says_so() {
        let mut model = Model::default();
        let row = |id: i64, shadow: Value| {
            json!({"kind": "audit", "row": {"id": id, "at": 0, "principal": "agent", "action": "Push",
                "repo_key": "demo/app", "ref_name": "refs/heads/x", "decision": "allow",
                "policies": ["explicit-grant-push"], "detail": {"shadow": shadow}}})
        };
        model.take(
            &row(
                1,
                json!({"allowed": false, "policies": ["no-fridays"], "differs": true}),
            ),
            0,
        );
        model.take(
            &row(
                2,
                json!({"allowed": true, "policies": ["explicit-grant-push"], "differs": false}),
            ),
            0,
        );
        let lines: Vec<&str> = model.decisions.iter().map(|d| d.line.as_str()).collect();
        assert!(
            lines[1].ends_with("(shadow: would deny [no-fridays])"),
            "{lines:?}"
        );
        assert!(!lines[0].contains("shadow"), "{lines:?}");
    }

    #[test]
    fn only_a_denial_is_marked_and_an_unreadable_row_is_said() {
        let mut model = Model::default();
        for (id, decision) in [(1, "deny"), (2, "allow"), (3, "event"), (4, "Deny")] {
            let row = json!({"kind": "audit", "row": {"id": id, "at": 0, "principal": "agent",
                "action": "Push", "decision": decision, "policies": []}});
            model.take(&row, 0);
        }
        let denied: Vec<i64> = model
            .decisions
            .iter()
            .filter(|d| d.deny)
            .map(|d| d.id)
            .collect();
        assert_eq!(
            denied,
            [1],
            "a text no build writes is kept, not read as a denial"
        );
        model.take(&json!({"kind": "audit", "row": {"id": "five"}}), 0);
        assert_eq!(model.decisions.len(), 4);
        assert!(model.message.contains("cannot read"), "{}", model.message);
    }

    #[test]
    fn a_request_defaults_to_the_ttl_it_asked_for() {
        let mut model = Model::default();
        let status = json!({"kind": "status", "status": {"pending": [
            {"id": 3, "repo": "demo/app", "reason": "\u{1b}]0;pwned\u{7}", "ttl_seconds": 600,
             "owner": "sprite:web1"},
            {"id": 4, "repo": "demo/lib", "ttl_seconds": null}
        ], "grants": [], "yolo": []}});
        model.take(&status, 0);
        assert_eq!(model.requests[0].id, 4, "newest first");
        let (choices, index) = model.ttl_choices();
        assert_eq!(choices[index], DEFAULT_TTL);
        model.selected = 1;
        let (choices, index) = model.ttl_choices();
        assert_eq!(choices[index], 600);
        assert!(!model.requests[1].reason.contains('\u{1b}'));
        // In a fleet, a request names the sprite that asks; on one sprite, none.
        assert_eq!(model.requests[1].sprite, "web1");
        assert_eq!(model.requests[0].sprite, "");
    }
}
