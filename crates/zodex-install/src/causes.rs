//! Which of `doctor`'s failures follow from another. One cause fails many checks: a key file
//! made 0644 stops `zodex-prd serve` from starting, so the service is down, nothing answers on
//! its sockets, no coverage can be asked and the agent's git cannot read. Shown in the order
//! they ran, the first failure said "restart", which cannot help, and the cause came fourth.
//!
//! [`by_cause`] puts the failures that follow from no other first, then each failure that does,
//! marked with the causes it follows from (`Finding::follows_from`), then what holds. It knows
//! only which check depends on which ([`causes_of`]); it runs nothing.

use super::Finding;

/// The checks whose failure makes `check` fail too.
pub fn causes_of(check: &str) -> &'static [&'static str] {
    match check {
        // `serve` refuses to start on any failing ground check or broken property, and cannot
        // start a binary that is not there.
        "zodex-prd-service" => &[
            "zodex-prd-version",
            "reader-key",
            "writer-key",
            "state-dir",
            "socket-dir",
            "github-api",
            "reader-app",
            "writer-app",
            "ground",
            "policy-proofs",
        ],
        "publisher-health" => &["zodex-prd-service"],
        "agent-socket" => &["publisher-health", "socket-dir", "socket-dir-locked"],
        "git-read" => &["agent-socket", "github-api", "reader-app"],
        "zodex-agent-service" => &["zodex-agent-version"],
        "mcp-health" => &["zodex-agent-service"],
        "mcp-tools" => &["mcp-health"],
        check if check.starts_with("coverage ") => {
            &["publisher-health", "github-api", "reader-app", "writer-app"]
        }
        _ => &[],
    }
}

/// `findings` ordered by cause: the failures that follow from no other failure (in the order
/// they ran), then the failures that do — each with `follows_from` naming the first causes
/// the chain leads to — then the checks that hold.
pub fn by_cause(findings: Vec<Finding>) -> Vec<Finding> {
    let failed: Vec<&str> = findings
        .iter()
        .filter(|f| !f.ok)
        .map(|f| f.check.as_ref())
        .collect();
    let roots: Vec<Vec<String>> = findings
        .iter()
        .map(|f| {
            if f.ok {
                Vec::new()
            } else {
                root_causes(&f.check, &failed)
            }
        })
        .collect();
    let (mut causes, mut following, mut holding) = (Vec::new(), Vec::new(), Vec::new());
    for (mut finding, roots) in findings.into_iter().zip(roots) {
        if finding.ok {
            holding.push(finding);
        } else if roots.is_empty() {
            causes.push(finding);
        } else {
            finding.follows_from = roots;
            following.push(finding);
        }
    }
    causes.extend(following);
    causes.extend(holding);
    causes
}

/// The failed checks that `check` follows from and that follow from none themselves.
fn root_causes(check: &str, failed: &[&str]) -> Vec<String> {
    let mut roots = Vec::new();
    let mut seen = vec![check.to_string()];
    let mut next: Vec<&str> = direct(check, failed);
    while let Some(cause) = next.pop() {
        if seen.iter().any(|s| s == cause) {
            continue;
        }
        seen.push(cause.to_string());
        let further = direct(cause, failed);
        if further.is_empty() {
            roots.push(cause.to_string());
        } else {
            next.extend(further);
        }
    }
    // In the order the causes are listed, not the order the walk met them.
    roots.sort_by_key(|r| failed.iter().position(|f| f == r));
    roots
}

/// The failed checks among `check`'s direct causes.
fn direct<'a>(check: &str, failed: &[&'a str]) -> Vec<&'a str> {
    failed
        .iter()
        .copied()
        .filter(|f| *f != check && causes_of(check).contains(f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(check: &'static str) -> Finding {
        Finding::fail(check, format!("{check} failed"))
    }

    /// After a crash caused by a key file's mode: the key first, every other failure marked as
    /// following from it, and the checks that hold last.
    #[test]
    fn a_crash_caused_by_a_key_file_lists_the_key_first_and_marks_the_rest() {
        let ran = vec![
            fail("zodex-prd-service"),
            Finding::ok("zodex-agent-service", "running"),
            fail("publisher-health"),
            Finding::ok("policy-proofs", "hold"),
            Finding::ok("reader-key", "private"),
            fail("writer-key"),
            fail("coverage demo/app"),
            fail("agent-socket"),
            fail("git-read"),
        ];
        let ordered = by_cause(ran);
        let order: Vec<&str> = ordered.iter().map(|f| f.check.as_ref()).collect();
        assert_eq!(
            order,
            [
                "writer-key",
                "zodex-prd-service",
                "publisher-health",
                "coverage demo/app",
                "agent-socket",
                "git-read",
                "zodex-agent-service",
                "policy-proofs",
                "reader-key",
            ]
        );
        assert!(ordered[0].follows_from.is_empty());
        for follower in &ordered[1..6] {
            assert_eq!(follower.follows_from, ["writer-key"], "{follower:?}");
        }
    }

    /// A service stopped on purpose is the cause itself; two causes are both named.
    #[test]
    fn a_stopped_service_is_a_cause_and_a_failure_may_follow_from_two() {
        let ordered = by_cause(vec![
            fail("git-read"),
            fail("publisher-health"),
            fail("zodex-prd-service"),
            fail("reader-app"),
        ]);
        let order: Vec<&str> = ordered.iter().map(|f| f.check.as_ref()).collect();
        assert_eq!(
            order,
            [
                "reader-app",
                "git-read",
                "publisher-health",
                "zodex-prd-service"
            ]
        );
        assert_eq!(ordered[0].follows_from, Vec::<String>::new());
        for follower in &ordered[1..] {
            assert_eq!(follower.follows_from, ["reader-app"], "{follower:?}");
        }
        // Without the App's failure the stopped service is the cause.
        let ordered = by_cause(vec![fail("publisher-health"), fail("zodex-prd-service")]);
        assert_eq!(ordered[0].check, "zodex-prd-service");
        assert_eq!(ordered[1].follows_from, ["zodex-prd-service"]);
    }
}
