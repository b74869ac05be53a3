//! The typed answers of `protocol::answers` as short, readable text: grants, requests, YOLO
//! scopes, status, audit rows, a what-if, a publication. Every string that came from the sprite
//! goes through [`safe`].

use super::{Verbs, left, safe, time};
use crate::engine::ttl::format_duration;
use crate::protocol::Published;
use crate::protocol::answers::{
    AuditRow, AuditVerification, ChainHead, Explanation, Grant, GrantState, GrantVia, GrantView,
    Status, StatusAnswer, YoloScope, YoloView,
};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

/// The time left of something that expires at `expires_at`, at this machine's clock (a fresh
/// grant or scope carries no `seconds_left`).
fn left_until(expires_at: Option<i64>) -> Option<i64> {
    expires_at.map(|at| at - chrono::Utc::now().timestamp())
}

/// A grant just returned by a command, shown the way `status` shows it.
fn view_of(grant: &Grant) -> GrantView {
    GrantView {
        grant: grant.clone(),
        shown_state: grant_state(grant.state).to_string(),
        seconds_left: None,
        warning: None,
        writer_app: None,
    }
}

pub fn grant_state(state: GrantState) -> &'static str {
    match state {
        GrantState::Pending => "pending",
        GrantState::Active => "active",
        GrantState::Revoked => "revoked",
        GrantState::Expired => "expired",
        GrantState::Denied => "denied",
    }
}

fn via_name(via: GrantVia) -> &'static str {
    match via {
        GrantVia::Gateway => "gateway",
        GrantVia::Token => "token",
    }
}

fn grant_line(view: &GrantView) -> String {
    let g = &view.grant;
    let mut line = format!("#{} {} ", g.id, safe(&g.repo));
    match view.shown_state.as_str() {
        "active" => {
            let seconds_left = view.seconds_left.or_else(|| left_until(g.expires_at));
            let _ = write!(line, "active, {}", left(seconds_left));
            if let Some(at) = g.expires_at {
                let _ = write!(line, " (until {})", time(at));
            }
        }
        "pending" => {
            let ttl = g.ttl_seconds.map_or("no TTL".into(), |t| {
                format_duration(Duration::from_secs(t.max(0) as u64))
            });
            let _ = write!(line, "pending, asks for {ttl}");
        }
        other => {
            let _ = write!(line, "{}", safe(other));
            if let Some(at) = g.ended_at.or(g.expires_at) {
                let _ = write!(line, " at {}", time(at));
            }
        }
    }
    let _ = write!(line, ", via {}", via_name(g.via));
    line.push_str(&owner_part(g.owner.as_deref()));
    line.push_str(&refs_part(&g.refs));
    if g.allow_workflows {
        line.push_str(", workflows allowed");
    }
    line.push_str(&allowed_part("paths", &g.allow_paths));
    line.push_str(&allowed_part("secrets", &g.allow_secrets));
    if let Some(reason) = &g.reason {
        let _ = write!(line, ", reason: {}", safe(reason));
    }
    line
}

/// `, for sprite s1` or `, for label team=web`: whose agent a fleet's grant, request or scope
/// serves; empty for a single sprite's own.
fn owner_part(owner: Option<&str>) -> String {
    match owner.map(|o| o.split_once(':')) {
        Some(Some((kind @ ("sprite" | "label"), name))) => format!(", for {kind} {}", safe(name)),
        Some(_) => format!(", for {}", safe(owner.unwrap_or_default())),
        None => String::new(),
    }
}

/// `, refs: refs/heads/feature/*, …` for a grant or scope limited to refs; empty otherwise.
fn refs_part(refs: &[String]) -> String {
    if refs.is_empty() {
        String::new()
    } else {
        let shown: Vec<Cow<'_, str>> = refs.iter().map(|r| safe(r)).collect();
        format!(", refs: {}", shown.join(", "))
    }
}

/// A grant just made or approved.
pub fn grant(g: &Grant, verb: &str) -> String {
    let mut out = format!("{verb}: {}", grant_line(&view_of(g)));
    if g.state == GrantState::Pending {
        // A fleet sprite's request is decided at the fleet's service.
        let verbs = match g.owner {
            Some(_) => Verbs::Fleet,
            None => Verbs::Sprite,
        };
        let _ = write!(
            out,
            "\nAn operator approves it with `{}`.",
            verbs.github(&format!("approve {}", g.id))
        );
    }
    if g.via == GrantVia::Token {
        let _ = write!(
            out,
            "\nWarning: {}",
            crate::engine::authority::TOKEN_PATH_WARNING
        );
    }
    out
}

/// A request the operator just denied.
pub fn denied(g: &Grant) -> String {
    format!("Denied request #{} for {}.", g.id, safe(&g.repo))
}

/// Grants a command just changed (`revoke-push`).
pub fn grants(list: &[Grant], verb: &str, empty: &str) -> String {
    lines(list.iter().map(view_of), verb, empty)
}

/// Requests as `requests` lists them.
pub fn requests(list: &[GrantView], verb: &str, empty: &str) -> String {
    lines(list.iter().cloned(), verb, empty)
}

fn lines(views: impl Iterator<Item = GrantView>, verb: &str, empty: &str) -> String {
    let lines: Vec<String> = views
        .map(|g| format!("{verb}: {}", grant_line(&g)))
        .collect();
    if lines.is_empty() {
        empty.to_string()
    } else {
        lines.join("\n")
    }
}

fn yolo_line(y: &YoloView) -> String {
    let scope = &y.scope;
    let what = scope
        .repo
        .as_deref()
        .map_or(Cow::Borrowed("all installed repositories"), safe);
    let state = safe(&y.shown_state);
    let mut line = format!("YOLO #{} on {what}: {state}", scope.id);
    if state == "active" {
        let seconds_left = y.seconds_left.or_else(|| left_until(scope.expires_at));
        let _ = write!(line, ", {}", left(seconds_left));
    }
    if let Some(at) = scope.expires_at {
        let _ = write!(line, " (until {})", time(at));
    }
    line.push_str(&owner_part(scope.owner.as_deref()));
    line.push_str(&refs_part(&scope.refs));
    if scope.allow_workflows {
        line.push_str(", workflows allowed");
    }
    line.push_str(&allowed_part("paths", &scope.allow_paths));
    line
}

/// `, paths allowed: CODEOWNERS, …` for a grant or scope with allowances; empty otherwise.
fn allowed_part(what: &str, allowed: &[String]) -> String {
    if allowed.is_empty() {
        return String::new();
    }
    let shown: Vec<Cow<'_, str>> = allowed.iter().map(|a| safe(a)).collect();
    format!(", {what} allowed: {}", shown.join(", "))
}

/// Scopes just set (`yolo`).
pub fn yolo(list: &[YoloScope]) -> String {
    list.iter()
        .map(|scope| {
            let view = YoloView {
                scope: scope.clone(),
                shown_state: "active".into(),
                seconds_left: None,
            };
            format!("Set {}", yolo_line(&view))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn cleared(list: &[YoloScope]) -> String {
    format!(
        "Cleared {} YOLO scope(s); explicit grants are untouched.",
        list.len()
    )
}

/// What a status line says about the writer App's coverage of the grant's repository: nothing
/// when installed; "unknown" — never "not installed" — with the command that checks when the
/// publisher has no fresh check.
fn writer_app_note(view: &GrantView) -> Option<String> {
    let repo = safe(&view.grant.repo);
    match view.writer_app.as_deref()? {
        "not_installed" => Some(format!(
            "writer App: not installed on {repo} (checked); pushes are refused until it is installed there"
        )),
        "unknown" => Some(format!(
            "writer App: unknown (not checked yet, or the check is stale); `{}` checks it",
            Verbs::current().policy(&format!(
                "explain --action push --repo {repo} --ref BRANCH{}",
                match view
                    .grant
                    .owner
                    .as_deref()
                    .and_then(|o| o.strip_prefix("sprite:"))
                {
                    Some(sprite) => format!(" --sprite {sprite}"),
                    None => String::new(),
                }
            ))
        )),
        _ => None,
    }
}

/// One section of `status`: its lines, and how many more the publisher did not send.
fn section<T>(
    out: &mut String,
    title: &str,
    items: &[T],
    total: u64,
    more: &str,
    line: impl Fn(&T) -> String,
    notes: impl Fn(&T) -> Vec<String>,
) {
    let _ = writeln!(out, "{title}:");
    if items.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for item in items {
        let _ = writeln!(out, "  {}", line(item));
        for note in notes(item) {
            let _ = writeln!(out, "    {note}");
        }
    }
    // The publisher shows a bounded number of each; it says how many there are in all.
    let shown = items.len() as u64;
    if total > shown {
        let _ = writeln!(out, "  … and {} more: {more}", total - shown);
    }
}

/// [`section`] for what ended lately, whose count the publisher stops at
/// [`ENDED_COUNT_CAP`](crate::engine::store::ENDED_COUNT_CAP) per owner: past it, "at least".
fn ended_section(out: &mut String, v: &Status, more: &str) {
    let cap = u64::try_from(crate::engine::store::ENDED_COUNT_CAP).unwrap_or(u64::MAX);
    if v.recently_ended_total < cap {
        return section(
            out,
            "Ended in the last 24h",
            &v.recently_ended,
            v.recently_ended_total,
            more,
            grant_line,
            grant_notes,
        );
    }
    section(
        out,
        "Ended in the last 24h",
        &v.recently_ended,
        0,
        more,
        grant_line,
        grant_notes,
    );
    let shown = v.recently_ended.len() as u64;
    let _ = writeln!(
        out,
        "  … and at least {} more: {more}",
        v.recently_ended_total.saturating_sub(shown)
    );
}

fn grant_notes(view: &GrantView) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(warning) = &view.warning {
        notes.push(format!("warning: {}", safe(warning)));
    }
    notes.extend(writer_app_note(view));
    notes
}

/// The agent's `status`.
pub fn status(v: &Status) -> String {
    let verbs = Verbs::current();
    let mut out = String::new();
    section(
        &mut out,
        "Active grants",
        &v.grants,
        v.grants_total,
        &format!(
            "see them all with --json, or revoke with `{}`",
            verbs.github("revoke-push --repo OWNER/NAME")
        ),
        grant_line,
        grant_notes,
    );
    section(
        &mut out,
        "YOLO scopes",
        &v.yolo,
        v.yolo_total,
        &format!("clear them with `{}`", verbs.github("default")),
        yolo_line,
        |_| Vec::new(),
    );
    section(
        &mut out,
        "Pending requests",
        &v.pending,
        v.pending_total,
        &format!("list them all with `{}`", verbs.github("requests")),
        grant_line,
        grant_notes,
    );
    ended_section(
        &mut out,
        v,
        &format!("see `{}`", verbs.github("audit --since 1d")),
    );
    out
}

/// The operator's `status`: the agent's view and how the policy proofs stand.
pub fn operator_status(v: &StatusAnswer) -> String {
    let mut out = status(&v.status);
    if let Some(proofs) = &v.proofs {
        out.push_str(&crate::cli::proofs::status(proofs));
    }
    if let Some(cap) = v.max_request_ttl_seconds {
        let _ = writeln!(
            out,
            "Agent requests: at most {} (max_request_ttl); longer only with your own --ttl on approve",
            duration(cap)
        );
    }
    for sink in &v.audit_sinks {
        let _ = match &sink.last_error {
            Some(error) if sink.failures > 0 => writeln!(
                out,
                "Audit sink {}: FAILING ({} attempts, {} rows waiting): {}",
                safe(&sink.sink),
                sink.failures,
                sink.pending,
                safe(error)
            ),
            _ => writeln!(
                out,
                "Audit sink {}: ok, {} rows waiting",
                safe(&sink.sink),
                sink.pending
            ),
        };
    }
    if !v.audit_heads.is_empty() {
        let heads: Vec<String> = v.audit_heads.iter().map(chain_head).collect();
        let _ = writeln!(
            out,
            "Audit heads (note them; `{}` checks the log): {}",
            Verbs::current().github("audit --verify"),
            heads.join(", ")
        );
    }
    out
}

fn duration(seconds: i64) -> String {
    crate::engine::ttl::format_duration(std::time::Duration::from_secs(seconds.max(0) as u64))
}

fn chain_head(head: &ChainHead) -> String {
    format!(
        "{} #{} {}",
        head.chain.as_str(),
        head.head_seq,
        safe(head.head_link.get(..16).unwrap_or(&head.head_link))
    )
}

/// `audit --verify`: one line per chain, then the rows that belong to none.
pub fn audit_verification(v: &AuditVerification) -> String {
    let mut out = String::new();
    for check in &v.chains {
        let pruned = match check.head.pruned_rows {
            0 => String::new(),
            n => format!(", {n} pruned before #{}", check.head.base_seq + 1),
        };
        let _ = match &check.problem {
            None => writeln!(
                out,
                "ok    {}: {} rows hold from #{} to head #{} {}{pruned}",
                check.head.chain.as_str(),
                check.rows,
                check.head.base_seq + 1,
                check.head.head_seq,
                safe(&check.head.head_link),
            ),
            Some(problem) => writeln!(
                out,
                "FAIL  {}: {} (checked {} rows before it)",
                check.head.chain.as_str(),
                safe(problem),
                check.rows
            ),
        };
    }
    if !v.unlinked_rows.is_empty() {
        let ids: Vec<String> = v.unlinked_rows.iter().map(i64::to_string).collect();
        let _ = writeln!(
            out,
            "FAIL  rows that belong to no chain (inserted by hand): {}",
            ids.join(", ")
        );
    }
    out.push_str(if v.ok {
        "The audit log holds: no row was changed, inserted, reordered or removed since its base.\n"
    } else {
        "The audit log was tampered with at the row named above; the rows after it are unverified.\n"
    });
    out
}

pub fn audit(rows: &[AuditRow]) -> String {
    if rows.is_empty() {
        return "No audit rows match.".to_string();
    }
    let mut out = String::new();
    for r in rows {
        let policies: Vec<Cow<'_, str>> = r.entry.policies.iter().map(|p| safe(p)).collect();
        let _ = write!(
            out,
            "{} {} {} {} {}",
            time(r.at),
            safe(&r.entry.principal),
            safe(&r.entry.action),
            r.entry.repo_key.as_deref().map_or(Cow::Borrowed("-"), safe),
            safe(&r.entry.decision),
        );
        if let Some(reference) = &r.entry.ref_name {
            let _ = write!(out, " {}", safe(reference));
        }
        if !policies.is_empty() {
            let _ = write!(out, " [{}]", policies.join(", "));
        }
        if let Some(outcome) = &r.entry.outcome {
            let _ = write!(out, " -> {}", safe(outcome));
        }
        if let Some(detail) = r.entry.detail.as_ref().filter(|d| !d.is_null()) {
            let _ = write!(out, " {}", safe(&detail.to_string()));
        }
        out.push('\n');
    }
    out
}

pub fn explain(v: &Explanation) -> String {
    let decision = &v.decision;
    let policies: Vec<Cow<'_, str>> = decision.policies.iter().map(|p| safe(p)).collect();
    let mut out = format!(
        "{}: {}",
        if decision.allowed { "ALLOW" } else { "DENY" },
        if policies.is_empty() {
            "no policy permits it".to_string()
        } else {
            policies.join(", ")
        }
    );
    if let Some(repo) = &decision.repository {
        // Coverage not checked (or stale) is "unknown", never "not installed".
        let installed = |flag: bool| {
            if repo.coverage_known {
                flag.to_string()
            } else {
                "unknown".to_string()
            }
        };
        let branch = match &repo.default_branch {
            Some(branch) => safe(branch).into_owned(),
            None => "unknown".to_string(),
        };
        let _ = write!(
            out,
            "\n  repository {}: default branch {branch}, configured target {}, writer installed {}, reader installed {}",
            safe(&repo.key),
            repo.configured_target,
            installed(repo.writer_installed),
            installed(repo.reader_installed),
        );
    }
    for grant in &v.grants {
        let refs = refs_part(&grant.refs);
        let _ = write!(
            out,
            "\n  grant #{}{}{}",
            grant.id,
            if refs.is_empty() {
                ", every ref"
            } else {
                refs.as_str()
            },
            if grant.covers_ref {
                ""
            } else {
                " (does not cover this ref)"
            }
        );
    }
    if let Some(denial) = &v.denial {
        let _ = write!(out, "\n  next: {}", safe(&denial.unblock));
    }
    out
}

/// What `publish-pr` opened (or found already open).
pub fn published(p: &Published) -> String {
    format!(
        "{} pull request #{}{}: {}\n  branch {} → {}",
        if p.reused {
            "Already published:"
        } else {
            "Opened"
        },
        p.number,
        if p.draft { " (draft)" } else { "" },
        safe(&p.url),
        safe(&p.branch),
        safe(&p.base),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Response;
    use serde_json::{Value, json};

    /// A grant as the publisher sends it, with `fields` put over a plain active one.
    fn grant_from(fields: Value) -> Grant {
        let mut grant = json!({
            "id": 1, "repo_key": "demo/app", "repo": "demo/app", "state": "active",
            "created_by": "operator", "reason": null, "ttl_seconds": 1800, "via": "gateway",
            "allow_workflows": false, "created_at": 0, "activated_at": 0, "expires_at": null,
            "approved_by": null, "ended_at": null, "ended_by": null,
        });
        for (key, value) in fields.as_object().unwrap() {
            grant[key] = value.clone();
        }
        serde_json::from_value(grant).unwrap()
    }

    fn view_from(grant: Grant, shown_state: &str, warning: Option<&str>) -> GrantView {
        GrantView {
            grant,
            shown_state: shown_state.into(),
            seconds_left: None,
            warning: warning.map(String::from),
            writer_app: None,
        }
    }

    fn status_of(pending: Vec<GrantView>, pending_total: u64) -> Status {
        Status {
            now: 0,
            grants: vec![],
            grants_total: 0,
            pending,
            pending_total,
            yolo: vec![],
            yolo_total: 0,
            recently_ended: vec![],
            recently_ended_total: 0,
        }
    }

    /// The attack from issue 8: a reason that returns the cursor and rewrites the line.
    #[test]
    fn a_hostile_reason_cannot_rewrite_the_requests_line() {
        let request = grant_from(json!({
            "id": 7, "state": "pending", "ttl_seconds": null,
            "reason": "ok\r\u{1b}[2K#7 demo/other pending, asks for 30m\u{202e}",
        }));
        let text = grants(&[request], "Request", "none");
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
        let grant = grant_from(json!({"repo": evil, "reason": evil, "refs": [evil]}));
        let view = view_from(grant.clone(), evil, Some(evil));
        check(grant_line(&view));
        check(self::grant(&grant, "Approved"));
        check(denied(&grant));
        let scope: YoloScope = serde_json::from_value(json!({
            "id": 2, "repo_key": evil, "repo": evil, "allow_workflows": false, "created_at": 0,
            "expires_at": null, "created_by": evil, "cleared_at": null, "cleared_by": null,
            "refs": [evil],
        }))
        .unwrap();
        let mut status = status_of(vec![view.clone()], 1);
        status.grants = vec![view.clone()];
        status.recently_ended = vec![view];
        status.yolo = vec![YoloView {
            scope: scope.clone(),
            shown_state: evil.into(),
            seconds_left: None,
        }];
        check(self::status(&status));
        check(operator_status(&StatusAnswer {
            status,
            proofs: Some(crate::protocol::answers::ProofStatus {
                summary: evil.into(),
                waived: vec![evil.into()],
            }),
            audit_heads: Vec::new(),
            max_request_ttl_seconds: Some(3600),
            audit_sinks: vec![crate::protocol::answers::SinkCursor {
                sink: evil.into(),
                delivered_id: 1,
                delivered_at: None,
                failures: 3,
                last_error: Some(evil.into()),
                last_attempt: None,
                pending: 2,
            }],
        }));
        check(yolo(&[scope]));
        let row: AuditRow = serde_json::from_value(json!({
            "id": 1, "at": 1, "principal": evil, "action": evil, "repo_key": evil,
            "ref_name": evil, "old_oid": null, "new_oid": null, "bundle_bytes": null,
            "bundle_sha256": null, "decision": evil, "policies": [evil], "token_sha256": null,
            "outcome": evil, "detail": {"error": evil},
        }))
        .unwrap();
        check(audit(&[row]));
        let explanation: Explanation = serde_json::from_value(json!({
            "decision": {"action": "Push", "allowed": false, "policies": [evil], "errors": [],
                         "grant_id": null, "yolo_id": null,
                         "repository": {"key": evil, "default_branch": evil,
                                        "configured_target": true, "writer_installed": true,
                                        "reader_installed": true, "coverage_known": true}},
            "denial": {"action": "Push", "repo": evil, "policies": [], "message": evil,
                       "unblock": evil},
            "grants": [{"id": 3, "expires_at": null, "refs": [evil], "covers_ref": false}],
        }))
        .unwrap();
        check(explain(&explanation));
        check(published(&Published {
            repo: evil.into(),
            number: 4,
            url: evil.into(),
            branch: evil.into(),
            base: evil.into(),
            draft: false,
            reused: false,
        }));
        let response = Response {
            ok: false,
            result: None,
            error: Some(crate::protocol::WireError {
                kind: crate::protocol::ErrorKind::Denied,
                message: evil.into(),
                policies: vec![],
                unblock: Some(evil.into()),
            }),
            next_before: None,
            filtered: None,
        };
        check(super::super::error_text(&response));
    }

    #[test]
    fn status_says_how_many_more_there_are() {
        let pending = view_from(grant_from(json!({"state": "pending"})), "pending", None);
        let text = status(&status_of(vec![pending], 41));
        assert!(
            text.contains("… and 40 more: list them all with `zodex sprite github requests`"),
            "{text}"
        );
    }

    /// A scope just set shows the time it has left, not "no TTL" (its answer carries only
    /// the expiry).
    #[test]
    fn a_fresh_scope_with_an_expiry_shows_time_left() {
        let scope: YoloScope = serde_json::from_value(json!({
            "id": 2, "repo_key": null, "repo": null, "allow_workflows": false, "created_at": 0,
            "expires_at": chrono::Utc::now().timestamp() + 7200, "created_by": "operator",
            "cleared_at": null, "cleared_by": null,
        }))
        .unwrap();
        let text = yolo(&[scope]);
        assert!(
            text.starts_with("Set YOLO #2 on all installed repositories: active, 1h 59m")
                || text.starts_with("Set YOLO #2 on all installed repositories: active, 2h"),
            "{text}"
        );
    }
}
