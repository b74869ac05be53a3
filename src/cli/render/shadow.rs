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
