//! The footer a pull request the publisher opens carries (issue "Policy as product",
//! traceability): who asked, which policy allowed it, the grant or YOLO scope and the operator
//! who approved it, the request's reason — so a reviewer on GitHub sees why a machine opened
//! it without asking anyone. `pr_footer = false` turns it off.
//!
//! Everything in it that someone else wrote (a reason, a policy id, an operator's name) is
//! escaped for GitHub's Markdown: no mention (`@team`), issue link (`#1`), HTML, link or
//! formatting can come through, and it stays on one bounded line.

/// The longest a reason is shown, in characters (the rest is cut with an ellipsis).
const REASON_CHARS: usize = 300;

/// What allowed a publication, as read when it was decided.
#[derive(Debug, Clone, Default)]
pub(super) struct Trace {
    /// The principal as the audit names it (`agent`, `sprite:NAME`).
    pub principal: String,
    pub audit_id: i64,
    pub policies: Vec<String>,
    pub grant: Option<GrantTrace>,
    /// A YOLO scope's id and who set it.
    pub yolo: Option<(i64, String)>,
}

/// The grant that allowed it: its id, who approved it, and the agent's reason.
#[derive(Debug, Clone, Default)]
pub(super) struct GrantTrace {
    pub id: i64,
    pub approved_by: Option<String>,
    pub reason: Option<String>,
}

impl From<&zodex_engine::store::Grant> for GrantTrace {
    fn from(grant: &zodex_engine::store::Grant) -> Self {
        Self {
            id: grant.id,
            approved_by: grant.approved_by.clone(),
            reason: grant.reason.clone(),
        }
    }
}

/// The footer to append to the body the agent wrote.
pub(super) fn footer(trace: &Trace) -> String {
    let mut parts = vec![format!(
        "Opened by Zodex for {} (audit row {})",
        escape(&trace.principal),
        trace.audit_id
    )];
    if !trace.policies.is_empty() {
        let policies: Vec<String> = trace.policies.iter().map(|p| escape(p)).collect();
        parts.push(format!("allowed by policy {}", policies.join(", ")));
    }
    if let Some(grant) = &trace.grant {
        let approved = grant
            .approved_by
            .as_deref()
            .map(|by| format!(", approved by {}", escape(by)))
            .unwrap_or_default();
        parts.push(format!("under grant {}{approved}", grant.id));
        if let Some(reason) = grant.reason.as_deref().filter(|r| !r.trim().is_empty()) {
            parts.push(format!("reason: {}", escape(&cut(reason))));
        }
    }
    if let Some((id, by)) = &trace.yolo {
        parts.push(format!("under YOLO scope {id} set by {}", escape(by)));
    }
    format!("\n\n---\n<sub>{}</sub>\n", parts.join("; "))
}

/// `body` with the footer, when there is one.
pub(super) fn with_footer(body: &str, trace: Option<&Trace>) -> String {
    match trace {
        Some(trace) => format!("{}{}", body.trim_end(), footer(trace)),
        None => body.to_string(),
    }
}

fn cut(text: &str) -> String {
    let mut chars = text.chars();
    let kept: String = chars.by_ref().take(REASON_CHARS).collect();
    if chars.next().is_some() {
        format!("{kept}…")
    } else {
        kept
    }
}

/// Text made inert in GitHub's Markdown: every ASCII punctuation character backslash-escaped
/// (CommonMark's rule: an escaped character is always literal), `<`, `>` and `&` as entities
/// (inside the `<sub>` HTML block), control characters and line breaks as spaces.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => out.push(' '),
            c if c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_someone_wrote_comes_through_as_markdown() {
        let hostile =
            "@acme/security see #1 <img src=x onerror=alert(1)> [x](http://e) **b**\n# h\r\u{7}";
        let escaped = escape(hostile);
        for live in ["<img", "](", "**", "\n", "\r", "\u{7}"] {
            assert!(!escaped.contains(live), "{live:?} in {escaped}");
        }
        // Every punctuation character that is left is escaped (entities aside).
        let chars: Vec<char> = escaped.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            if c.is_ascii_punctuation() && !matches!(c, '\\' | '&' | ';') {
                assert_eq!(
                    chars.get(i.wrapping_sub(1)),
                    Some(&'\\'),
                    "{c:?} at {i} in {escaped}"
                );
            }
        }
        assert!(escaped.contains("\\@acme"), "{escaped}");
        assert!(escaped.contains("&lt;img"), "{escaped}");
    }

    #[test]
    fn the_footer_names_principal_policy_grant_approver_and_reason() {
        let trace = Trace {
            principal: "sprite:s1".into(),
            audit_id: 42,
            policies: vec!["publish-pr".into()],
            grant: Some(GrantTrace {
                id: 7,
                approved_by: Some("operator:alice".into()),
                reason: Some(format!("fix the build {}", "x".repeat(400))),
            }),
            yolo: None,
        };
        let text = with_footer("Body.\n\n", Some(&trace));
        assert!(text.starts_with("Body.\n\n---\n<sub>"), "{text}");
        for part in [
            "sprite\\:s1",
            "audit row 42",
            "publish\\-pr",
            "grant 7",
            "operator\\:alice",
            "fix the build",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        assert!(text.contains('…'), "a long reason is cut: {text}");
        assert_eq!(with_footer("Body.", None), "Body.");
    }
}
