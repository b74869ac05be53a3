//! The audit event as it leaves the sprite (schema version 1, docs/audit.md), and its one-line
//! form for chat webhooks.

use crate::engine::store::AuditRecord;
use serde_json::{Value, json};

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
        "principal": r.row.principal,
        "action": r.row.action,
        "repo": r.row.repo_key,
        "ref": r.row.ref_name,
        "old_oid": r.row.old_oid,
        "new_oid": r.row.new_oid,
        "bundle_bytes": r.row.bundle_bytes,
        "bundle_sha256": r.row.bundle_sha256,
        "decision": r.row.decision,
        "policies": r.row.policies,
        "token_sha256": r.row.token_sha256,
        "outcome": r.row.outcome,
        "outcome_of": r.outcome_of,
        "detail": r.row.detail,
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
    let repo = r.row.repo_key.as_deref().unwrap_or("-");
    let who = match r.row.principal.parse::<crate::engine::Actor>() {
        Ok(crate::engine::Actor::Agent) => "the agent".to_string(),
        Ok(crate::engine::Actor::McpClient) => "an MCP client".to_string(),
        _ => r.row.principal.clone(),
    };
    let detail = r.row.detail.as_ref();
    let text = match (r.row.action.as_str(), r.row.decision.as_str()) {
        ("RequestPush", "allow") => {
            let reason = detail
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                .map(|reason| format!(": reason {reason}"))
                .unwrap_or_default();
            let id = detail
                .and_then(|d| d.get("grant"))
                .and_then(Value::as_i64)
                .map(|id| format!(" (request #{id}; `zodex sprite github approve {id}`)"))
                .unwrap_or_default();
            format!("{who} asks to push {repo}{id}{reason}")
        }
        (action, decision) => {
            let mut line = format!("{who} {action} {repo}");
            if let Some(reference) = &r.row.ref_name {
                line.push_str(&format!(" {reference}"));
            }
            line.push_str(&format!(": {decision}"));
            if !r.row.policies.is_empty() {
                line.push_str(&format!(" by {}", r.row.policies.join(", ")));
            }
            if let Some(outcome) = &r.row.outcome {
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
            row: crate::engine::store::AuditRow {
                id: 7,
                at: 1_800_000_000,
                principal: "agent".into(),
                action: action.into(),
                repo_key: Some("acme/app".into()),
                ref_name: None,
                old_oid: None,
                new_oid: None,
                bundle_bytes: None,
                bundle_sha256: None,
                decision: decision.into(),
                policies: vec![],
                token_sha256: None,
                outcome: None,
                detail: Some(detail),
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
