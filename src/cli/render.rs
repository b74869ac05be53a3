//! Human output: the JSON results of the publisher rendered as short, readable text.

use crate::engine::ttl::format_duration;
use crate::publisher::wire::Response;
use serde_json::Value;
use std::fmt::Write as _;
use std::time::Duration;

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
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
    let mut out = format!("error: {}", error.message);
    if let Some(unblock) = &error.unblock {
        let _ = write!(out, "\n  next: {unblock}");
    }
    out
}

fn grant_line(g: &Value) -> String {
    let mut line = format!("#{} {} ", i(g, "id").unwrap_or(0), s(g, "repo"));
    let state = g
        .get("shown_state")
        .and_then(Value::as_str)
        .unwrap_or(s(g, "state"));
    match state {
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
    if b(g, "allow_workflows") {
        line.push_str(", workflows allowed");
    }
    if let Some(reason) = g.get("reason").and_then(Value::as_str) {
        let _ = write!(line, ", reason: {reason}");
    }
    line
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
        .unwrap_or("all installed repositories");
    let state = y
        .get("shown_state")
        .and_then(Value::as_str)
        .unwrap_or("active");
    let mut line = format!("YOLO #{} on {what}: {state}", i(y, "id").unwrap_or(0));
    if state == "active" {
        let _ = write!(line, ", {}", left(i(y, "seconds_left")));
    }
    if let Some(at) = i(y, "expires_at") {
        let _ = write!(line, " (until {})", time(at));
    }
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

pub fn status(v: &Value) -> String {
    let mut out = String::new();
    let section = |out: &mut String,
                   title: &str,
                   items: Option<&Vec<Value>>,
                   line: &dyn Fn(&Value) -> String| {
        let items = items.cloned().unwrap_or_default();
        let _ = writeln!(out, "{title}:");
        if items.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for item in &items {
            let _ = writeln!(out, "  {}", line(item));
            if let Some(w) = item.get("warning").and_then(Value::as_str) {
                let _ = writeln!(out, "    warning: {w}");
            }
        }
    };
    section(
        &mut out,
        "Active grants",
        v.get("grants").and_then(Value::as_array),
        &grant_line,
    );
    section(
        &mut out,
        "YOLO scopes",
        v.get("yolo").and_then(Value::as_array),
        &yolo_line,
    );
    section(
        &mut out,
        "Pending requests",
        v.get("pending").and_then(Value::as_array),
        &grant_line,
    );
    section(
        &mut out,
        "Ended in the last 24h",
        v.get("recently_ended").and_then(Value::as_array),
        &grant_line,
    );
    out
}

pub fn audit(rows: &Value) -> String {
    let items = rows.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return "No audit rows match.".to_string();
    }
    let mut out = String::new();
    for r in items {
        let policies: Vec<&str> = r
            .get("policies")
            .and_then(Value::as_array)
            .map(|p| p.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let _ = write!(
            out,
            "{} {} {} {} {}",
            time(i(&r, "at").unwrap_or(0)),
            s(&r, "principal"),
            s(&r, "action"),
            r.get("repo_key").and_then(Value::as_str).unwrap_or("-"),
            s(&r, "decision"),
        );
        if let Some(reference) = r.get("ref_name").and_then(Value::as_str) {
            let _ = write!(out, " {reference}");
        }
        if !policies.is_empty() {
            let _ = write!(out, " [{}]", policies.join(", "));
        }
        if let Some(detail) = r.get("detail").filter(|d| !d.is_null()) {
            let _ = write!(out, " {detail}");
        }
        out.push('\n');
    }
    out
}

pub fn explain(v: &Value) -> String {
    let decision = v.get("decision").cloned().unwrap_or_default();
    let allowed = b(&decision, "allowed");
    let policies: Vec<String> = decision
        .get("policies")
        .and_then(Value::as_array)
        .map(|p| {
            p.iter()
                .filter_map(|x| x.as_str().map(String::from))
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
        let _ = write!(
            out,
            "\n  repository {}: default branch {}, configured target {}, writer installed {}, reader installed {}",
            s(repo, "key"),
            s(repo, "default_branch"),
            b(repo, "configured_target"),
            b(repo, "writer_installed"),
            b(repo, "reader_installed"),
        );
    }
    if let Some(denial) = v.get("denial").filter(|d| !d.is_null()) {
        let _ = write!(out, "\n  next: {}", s(denial, "unblock"));
    }
    out
}
