//! What the shadow policies would have changed, as an operator reads it.

/// `zodex sprite policy shadow`'s report.
pub fn report(report: &crate::protocol::answers::ShadowReport) -> String {
    if report.decisions == 0 {
        return "No decision recorded a shadow verdict in the period: no shadow policy is loaded (put one in policy_dir/shadow/ and restart zodex-prd), or nothing was decided.".into();
    }
    let mut lines = vec![format!(
        "{} of {} decisions would have been decided otherwise by the shadow policies.",
        report.differences, report.decisions
    )];
    for group in &report.groups {
        lines.push(format!(
            "  {} {} on {}: {} time(s), by {}",
            group.would,
            group.action,
            group.repo.as_deref().unwrap_or("-"),
            group.count,
            if group.policies.is_empty() {
                "no policy (nothing permits it)".to_string()
            } else {
                group.policies.join(", ")
            }
        ));
        for row in &group.first {
            lines.push(format!(
                "    #{} {} {} {}",
                row.id,
                super::time(row.at),
                super::safe(&row.entry.principal),
                super::safe(row.entry.ref_name.as_deref().unwrap_or("")),
            ));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::answers::{ShadowGroup, ShadowReport};

    #[test]
    fn the_report_names_what_would_change_and_says_when_nothing_is_loaded() {
        let empty = ShadowReport {
            since: 0,
            decisions: 0,
            differences: 0,
            groups: Vec::new(),
        };
        assert!(report(&empty).contains("no shadow policy is loaded"));
        let one = ShadowReport {
            since: 0,
            decisions: 5,
            differences: 2,
            groups: vec![ShadowGroup {
                action: "Push".into(),
                repo: Some("demo/app".into()),
                would: "deny".into(),
                policies: vec!["app-frozen".into()],
                count: 2,
                first: Vec::new(),
            }],
        };
        let text = report(&one);
        assert!(text.starts_with("2 of 5 decisions"), "{text}");
        assert!(
            text.contains("deny Push on demo/app: 2 time(s), by app-frozen"),
            "{text}"
        );
    }
}
