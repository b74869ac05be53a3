//! The audit event as it leaves the sprite (schema version 1, docs/audit.md), and its one-line
//! form for chat webhooks.

use serde_json::{Value, json};
use zodex_engine::store::AuditRecord;
use zodex_engine::{Action, Actor, AuditAction, AuditDecision};

/// The version of the event schema; a field's meaning never changes within a version.
pub const SCHEMA_VERSION: u32 = 1;

/// The event of one audit row: every field docs/audit.md lists, with its time in RFC 3339.
pub fn event_json(r: &AuditRecord) -> Value {
    let time = chrono::DateTime::from_timestamp(r.row.at, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    json!({
        "schema": SCHEMA_VERSION,
        "id": r.row.id,
        "time": time,
        "at": r.row.at,
        "principal": r.row.entry.principal,
        "action": r.row.entry.action,
        "repo": r.row.entry.repo_key,
        "ref": r.row.entry.ref_name,
        "old_oid": r.row.entry.old_oid,
        "new_oid": r.row.entry.new_oid,
        "bundle_bytes": r.row.entry.bundle_bytes,
        "bundle_sha256": r.row.entry.bundle_sha256,
        "decision": r.row.entry.decision,
        "policies": r.row.entry.policies,
        "token_sha256": r.row.entry.token_sha256,
        "outcome": r.row.entry.outcome,
        "outcome_of": r.outcome_of,
        "detail": r.row.entry.detail,
        "chain": r.chain,
        "seq": r.seq,
        "link": r.link,
    })
}

/// Slack's three escapes: everything the agent wrote stays text, never a link or a mention.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line saying what happened, e.g. "zodex: the agent asks to push demo/app (30m): reason …".
pub fn slack_text(r: &AuditRecord) -> String {
    let e = &r.row.entry;
    let repo = e.repo_key.as_deref().unwrap_or("-");
    let who = match &e.principal {
        Actor::Agent => "the agent".to_string(),
        Actor::McpClient => "an MCP client".to_string(),
        other => other.to_string(),
    };
    let detail = e.detail.as_ref();
    let text = match (&e.action, &e.decision) {
        (AuditAction::Decided(Action::RequestPush), AuditDecision::Allow) => {
            let reason = detail
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                .map(|reason| format!(": reason {reason}"))
                .unwrap_or_default();
            let id = detail
                .and_then(|d| d.get("grant"))
                .and_then(Value::as_i64)
                .map(|id| match &e.principal {
                    // A fleet sprite's request is approved at the fleet's service.
                    Actor::Sprite(_) => format!(" (request #{id}; `zodex fleet approve {id}`)"),
                    _ => format!(" (request #{id}; `zodex sprite github approve {id}`)"),
                })
                .unwrap_or_default();
            format!("{who} asks to push {repo}{id}{reason}")
        }
        (action, decision) => {
            let mut line = format!("{who} {action} {repo}");
            if let Some(reference) = &e.ref_name {
                line.push_str(&format!(" {reference}"));
            }
            line.push_str(&format!(": {decision}"));
            if !e.policies.is_empty() {
                line.push_str(&format!(" by {}", e.policies.join(", ")));
            }
            if let Some(outcome) = &e.outcome {
                line.push_str(&format!(" → {outcome}"));
            }
            line
        }
    };
    format!("zodex: {}", slack_escape(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(action: &str, decision: &str, detail: Value) -> AuditRecord {
        AuditRecord {
            row: zodex_engine::store::AuditRow {
                id: 7,
                at: 1_800_000_000,
                entry: zodex_engine::store::AuditEntry {
                    principal: Actor::Agent,
                    action: action.parse().unwrap(),
                    repo_key: Some("acme/app".into()),
                    decision: decision.parse().unwrap(),
                    detail: Some(detail),
                    ..Default::default()
                },
            },
            outcome_of: None,
            chain: Some("bulk".into()),
            seq: Some(3),
            link: Some("ab".repeat(32)),
        }
    }

    #[test]
    fn a_request_reads_as_a_sentence_and_its_reason_stays_text() {
        let r = record(
            "RequestPush",
            "allow",
            json!({"grant": 12, "reason": "fix <!channel> & <https://evil|click>"}),
        );
        let text = slack_text(&r);
        assert_eq!(
            text,
            "zodex: the agent asks to push acme/app (request #12; `zodex sprite github approve 12`): \
             reason fix &lt;!channel&gt; &amp; &lt;https://evil|click&gt;"
        );
        let event = event_json(&r);
        assert_eq!(event["schema"], 1);
        assert_eq!(event["time"], "2027-01-15T08:00:00Z");
        assert_eq!(event["repo"], "acme/app");
        assert_eq!(event["seq"], 3);
    }
}
