//! Human output: the JSON results of the publisher rendered as short, readable text.
//!
//! Much of what is shown was written by the agent (reasons, repository and ref names, error
//! messages the daemon relays). Every such string goes through [`safe`] before it reaches a
//! terminal, so a control sequence or a bidi override cannot rewrite what the operator sees;
//! `--json` output goes through [`safe_json`].

use crate::engine::ttl::format_duration;
use crate::publisher::wire::Response;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

/// Characters a terminal would act on or that reorder the text around them: C0 controls
/// (newline and tab included: one value stays on one line), DEL, C1 controls, the bidi
/// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), the bidi marks
/// (U+061C, U+200E, U+200F), zero-width characters (U+200B–U+200D, U+FEFF) and the Unicode
/// line and paragraph separators (U+2028, U+2029).
pub fn is_unsafe_char(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{feff}')
}

/// `text` made safe to print: every [`is_unsafe_char`] is shown as a visible escape (`\r`,
/// `\n`, `\t`, `\x1b`, `\u{202e}`), and a backslash as `\\` so an escape cannot be forged.
/// Text with nothing to escape is returned as is.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || is_unsafe_char(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 && is_unsafe_char(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text with every non-ASCII [`is_unsafe_char`] (and DEL) written as a `\uXXXX` escape:
/// the same JSON value, but nothing in it a terminal acts on. serde_json already escapes the
/// C0 controls inside strings; the characters replaced here can only occur inside strings.
pub fn safe_json(json: String) -> String {
    if !json.chars().any(|c| c as u32 >= 0x7f && is_unsafe_char(c)) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c as u32 >= 0x7f && is_unsafe_char(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value pretty-printed for a terminal (see [`safe_json`]).
pub fn json_pretty(value: &impl serde::Serialize) -> String {
    safe_json(serde_json::to_string_pretty(value).unwrap_or_default())
}

fn s<'a>(v: &'a Value, key: &str) -> Cow<'a, str> {
    safe(v.get(key).and_then(Value::as_str).unwrap_or(""))
}

fn i(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

fn b(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `2026-11-30 03:10:00 UTC`
pub fn time(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| unix.to_string())
}

fn left(seconds: Option<i64>) -> String {
    match seconds {
        Some(s) if s > 0 => format!("{} left", format_duration(Duration::from_secs(s as u64))),
        Some(_) => "expired".to_string(),
        None => "no TTL".to_string(),
    }
}

pub fn error_text(response: &Response) -> String {
    let Some(error) = &response.error else {
        return "error: the publisher answered without a result".to_string();
    };
    let mut out = format!("error: {}", safe(&error.message));
    if let Some(unblock) = &error.unblock {
        let _ = write!(out, "\n  next: {}", safe(unblock));
    }
    out
}

fn grant_line(g: &Value) -> String {
    let mut line = format!("#{} {} ", i(g, "id").unwrap_or(0), s(g, "repo"));
    let state = match g.get("shown_state").and_then(Value::as_str) {
        Some(shown) => safe(shown),
        None => s(g, "state"),
    };
    match state.as_ref() {
        "active" => {
            // A fresh grant carries no `seconds_left`: derive it from the expiry for display.
            let seconds_left = i(g, "seconds_left")
                .or_else(|| i(g, "expires_at").map(|at| at - chrono::Utc::now().timestamp()));
            let _ = write!(line, "active, {}", left(seconds_left));
            if let Some(at) = i(g, "expires_at") {
                let _ = write!(line, " (until {})", time(at));
            }
        }
        "pending" => {
            let ttl = i(g, "ttl_seconds").map_or("no TTL".into(), |t| {
                format_duration(Duration::from_secs(t as u64))
            });
            let _ = write!(line, "pending, asks for {ttl}");
        }
        other => {
            let _ = write!(line, "{other}");
            if let Some(at) = i(g, "ended_at").or(i(g, "expires_at")) {
                let _ = write!(line, " at {}", time(at));
            }
        }
    }
    let _ = write!(line, ", via {}", s(g, "via"));
    line.push_str(&refs_part(g));
    if b(g, "allow_workflows") {
        line.push_str(", workflows allowed");
    }
    if let Some(reason) = g.get("reason").and_then(Value::as_str) {
        let _ = write!(line, ", reason: {}", safe(reason));
    }
    line
}

/// `, refs: refs/heads/feature/*, …` for a grant or scope limited to refs; empty otherwise.
fn refs_part(v: &Value) -> String {
    let refs: Vec<Cow<'_, str>> = v
        .get("refs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(safe)
        .collect();
    if refs.is_empty() {
        String::new()
    } else {
        format!(", refs: {}", refs.join(", "))
    }
}

/// A grant just made or approved.
pub fn grant(g: &Value, verb: &str) -> String {
    let mut out = format!("{verb}: {}", grant_line(g));
    if s(g, "state") == "pending" {
        let _ = write!(
            out,
            "\nAn operator approves it with `zodex sprite github approve {}`.",
            i(g, "id").unwrap_or(0)
        );
    }
    if s(g, "via") == "token" {
        let _ = write!(
            out,
            "\nWarning: {}",
            crate::engine::authority::TOKEN_PATH_WARNING
        );
    }
    out
}

/// A request the operator just denied.
pub fn denied(g: &Value) -> String {
    format!(
        "Denied request #{} for {}.",
        i(g, "id").unwrap_or(0),
        s(g, "repo")
    )
}

pub fn grants(list: &Value, verb: &str, empty: &str) -> String {
    let items = list.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return empty.to_string();
    }
    items
        .iter()
        .map(|g| format!("{verb}: {}", grant_line(g)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn yolo_line(y: &Value) -> String {
    let what = y
        .get("repo")
        .and_then(Value::as_str)
        .map_or(Cow::Borrowed("all installed repositories"), safe);
    let state = y
        .get("shown_state")
        .and_then(Value::as_str)
        .map_or(Cow::Borrowed("active"), safe);
    let mut line = format!("YOLO #{} on {what}: {state}", i(y, "id").unwrap_or(0));
    if state == "active" {
        let _ = write!(line, ", {}", left(i(y, "seconds_left")));
    }
    if let Some(at) = i(y, "expires_at") {
        let _ = write!(line, " (until {})", time(at));
    }
    line.push_str(&refs_part(y));
    if b(y, "allow_workflows") {
        line.push_str(", workflows allowed");
    }
    line
}

pub fn yolo(list: &Value) -> String {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .map(|y| format!("Set {}", yolo_line(y)))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub fn cleared(list: &Value) -> String {
    let n = list.as_array().map_or(0, Vec::len);
    format!("Cleared {n} YOLO scope(s); explicit grants are untouched.")
}

/// What a status line says about the writer App's coverage of the grant's repository: nothing
/// when installed; "unknown" — never "not installed" — with the command that checks when the
/// publisher has no fresh check.
fn writer_app_note(grant: &Value) -> Option<String> {
    let repo = s(grant, "repo");
    match grant.get("writer_app").and_then(Value::as_str)? {
        "not_installed" => Some(format!(
            "writer App: not installed on {repo} (checked); pushes are refused until it is installed there"
        )),
        "unknown" => Some(format!(
            "writer App: unknown (not checked yet, or the check is stale); `zodex sprite policy explain --action push --repo {repo} --ref BRANCH` checks it"
        )),
        _ => None,
    }
}

pub fn status(v: &Value) -> String {
    let mut out = String::new();
    let section =
        |out: &mut String, title: &str, key: &str, more: &str, line: &dyn Fn(&Value) -> String| {
            let items = v
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let _ = writeln!(out, "{title}:");
            if items.is_empty() {
                let _ = writeln!(out, "  none");
            }
            for item in &items {
                let _ = writeln!(out, "  {}", line(item));
                if let Some(w) = item.get("warning").and_then(Value::as_str) {
                    let _ = writeln!(out, "    warning: {}", safe(w));
                }
                if let Some(note) = writer_app_note(item) {
                    let _ = writeln!(out, "    {note}");
                }
            }
            // The publisher shows a bounded number of each; it says how many there are in all.
            let total = i(v, &format!("{key}_total")).unwrap_or(items.len() as i64);
            if total > items.len() as i64 {
                let _ = writeln!(out, "  … and {} more: {more}", total - items.len() as i64);
            }
        };
    section(
        &mut out,
        "Active grants",
        "grants",
        "see them all with --json, or revoke with `zodex sprite github revoke-push --repo OWNER/NAME`",
        &grant_line,
    );
    section(
        &mut out,
        "YOLO scopes",
        "yolo",
        "clear them with `zodex sprite github default`",
        &yolo_line,
    );
    section(
        &mut out,
        "Pending requests",
        "pending",
        "list them all with `zodex sprite github requests`",
        &grant_line,
    );
    section(
        &mut out,
        "Ended in the last 24h",
        "recently_ended",
        "see `zodex sprite github audit --since 1d`",
        &grant_line,
    );
    out.push_str(&super::proofs::status(v));
    out
}

pub fn audit(rows: &Value) -> String {
    let items = rows.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return "No audit rows match.".to_string();
    }
    let mut out = String::new();
    for r in items {
        let policies: Vec<Cow<'_, str>> = r
            .get("policies")
            .and_then(Value::as_array)
            .map(|p| p.iter().filter_map(Value::as_str).map(safe).collect())
            .unwrap_or_default();
        let _ = write!(
            out,
            "{} {} {} {} {}",
            time(i(&r, "at").unwrap_or(0)),
            s(&r, "principal"),
            s(&r, "action"),
            r.get("repo_key")
                .and_then(Value::as_str)
                .map_or(Cow::Borrowed("-"), safe),
            s(&r, "decision"),
        );
        if let Some(reference) = r.get("ref_name").and_then(Value::as_str) {
            let _ = write!(out, " {}", safe(reference));
        }
        if !policies.is_empty() {
            let _ = write!(out, " [{}]", policies.join(", "));
        }
        if let Some(outcome) = r.get("outcome").and_then(Value::as_str) {
            let _ = write!(out, " -> {}", safe(outcome));
        }
        if let Some(detail) = r.get("detail").filter(|d| !d.is_null()) {
            let _ = write!(out, " {}", safe(&detail.to_string()));
        }
        out.push('\n');
    }
    out
}

/// The line under a partial listing that says how to see the rest.
pub fn more_rows(next_before: i64) -> String {
    format!("Older rows exist: run the same command with `--before {next_before}` to see them.")
}

pub fn explain(v: &Value) -> String {
    let decision = v.get("decision").cloned().unwrap_or_default();
    let allowed = b(&decision, "allowed");
    let policies: Vec<String> = decision
        .get("policies")
        .and_then(Value::as_array)
        .map(|p| {
            p.iter()
                .filter_map(|x| x.as_str().map(|t| safe(t).into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let mut out = format!(
        "{}: {}",
        if allowed { "ALLOW" } else { "DENY" },
        if policies.is_empty() {
            "no policy permits it".to_string()
        } else {
            policies.join(", ")
        }
    );
    if let Some(repo) = decision.get("repository") {
        // Coverage not checked (or stale) is "unknown", never "not installed".
        let known = repo
            .get("coverage_known")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let installed = |key: &str| {
            if known {
                b(repo, key).to_string()
            } else {
                "unknown".to_string()
            }
        };
        let branch = match repo.get("default_branch").and_then(Value::as_str) {
            Some(branch) => safe(branch).into_owned(),
            None => "unknown".to_string(),
        };
        let _ = write!(
            out,
            "\n  repository {}: default branch {branch}, configured target {}, writer installed {}, reader installed {}",
            s(repo, "key"),
            b(repo, "configured_target"),
            installed("writer_installed"),
            installed("reader_installed"),
        );
    }
    for grant in v
        .get("grants")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let refs = refs_part(grant);
        let _ = write!(
            out,
            "\n  grant #{}{}{}",
            i(grant, "id").unwrap_or(0),
            if refs.is_empty() {
                ", every ref"
            } else {
                refs.as_str()
            },
            if b(grant, "covers_ref") {
                ""
            } else {
                " (does not cover this ref)"
            }
        );
    }
    if let Some(denial) = v.get("denial").filter(|d| !d.is_null()) {
        let _ = write!(out, "\n  next: {}", s(denial, "unblock"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn safe_escapes_every_class_visibly_and_leaves_plain_text_alone() {
        assert!(matches!(safe("demo/app fix CI"), Cow::Borrowed(_)));
        assert_eq!(safe("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(safe("\u{1b}[2K\u{0}\u{7}"), "\\x1b[2K\\x00\\x07");
        assert_eq!(safe("x\u{7f}y"), "x\\x7fy");
        assert_eq!(safe("\u{9b}31m\u{85}"), "\\x9b31m\\x85");
        for c in ['\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}'] {
            assert_eq!(safe(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
        for c in [
            '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{200f}', '\u{2028}',
        ] {
            assert_eq!(safe(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
        // A literal backslash cannot pose as an escape; other text (accents, CJK) stays.
        assert_eq!(safe("\\x1b é 漢"), "\\\\x1b é 漢");
        for text in [
            "\u{1b}]0;t\u{7}",
            "\u{202e}ppa/omed",
            "a\u{9d}b",
            "\u{2069}",
        ] {
            assert!(!safe(text).chars().any(is_unsafe_char), "{text:?}");
        }
    }

    #[test]
    fn safe_json_is_the_same_value_without_raw_controls() {
        let value = json!({"reason": "\u{202e}x\u{9b}y\u{7f}\u{1b}z", "n": 1});
        let text = json_pretty(&value);
        assert!(
            !text.chars().any(|c| c != '\n' && is_unsafe_char(c)),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }

    /// The attack from issue 8: a reason that returns the cursor and rewrites the line.
    #[test]
    fn a_hostile_reason_cannot_rewrite_the_requests_line() {
        let request = json!({
            "id": 7, "repo": "demo/app", "state": "pending", "ttl_seconds": null,
            "via": "gateway", "allow_workflows": false,
            "reason": "ok\r\u{1b}[2K#7 demo/other pending, asks for 30m\u{202e}",
        });
        let text = grants(&json!([request]), "Request", "none");
        assert!(!text.contains('\r') && !text.contains('\u{1b}'), "{text:?}");
        assert!(!text.contains('\u{202e}'), "{text:?}");
        assert!(
            text.starts_with("Request: #7 demo/app pending, asks for no TTL"),
            "{text}"
        );
        assert!(
            text.contains("reason: ok\\r\\x1b[2K#7 demo/other"),
            "{text}"
        );
    }

    #[test]
    fn every_rendering_escapes_agent_text() {
        let evil = "a\u{1b}[31m\rb\u{2066}";
        let check = |text: String| {
            assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
            assert!(!text.contains('\u{2066}'), "{text:?}");
        };
        let grant = json!({"id": 1, "repo": evil, "state": "active", "via": evil,
                           "shown_state": evil, "reason": evil, "warning": evil});
        check(grant_line(&grant));
        check(self::grant(&grant, "Approved"));
        check(denied(&grant));
        check(status(
            &json!({"grants": [grant.clone()], "pending": [grant.clone()],
                             "yolo": [{"id": 2, "repo": evil, "shown_state": evil}],
                             "recently_ended": [grant]}),
        ));
        check(audit(
            &json!([{"at": 1, "principal": evil, "action": evil, "repo_key": evil,
                             "decision": evil, "ref_name": evil, "policies": [evil],
                             "outcome": evil, "detail": {"error": evil}}]),
        ));
        check(explain(
            &json!({"decision": {"allowed": false, "policies": [evil],
                               "repository": {"key": evil, "default_branch": evil}},
                              "denial": {"unblock": evil}}),
        ));
        let response = Response {
            ok: false,
            result: None,
            error: Some(crate::publisher::wire::WireError {
                kind: crate::publisher::wire::ErrorKind::Denied,
                message: evil.into(),
                policies: vec![],
                unblock: Some(evil.into()),
            }),
            next_before: None,
        };
        check(error_text(&response));
    }

    #[test]
    fn status_says_how_many_more_there_are() {
        let text = status(
            &json!({"pending": [{"id": 1, "repo": "demo/a", "state": "pending"}],
                                  "pending_total": 41}),
        );
        assert!(
            text.contains("… and 40 more: list them all with `zodex sprite github requests`"),
            "{text}"
        );
    }
}
