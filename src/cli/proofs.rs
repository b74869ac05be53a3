//! Printing a proof report (`zodex-prd policy prove`, `zodex sprite policy prove`, the refusal
//! at start): one line per property — holds or fails, and how long it took — and under each
//! failure the counterexample in the operator's words.

use super::render::safe;
use crate::protocol::answers::ProofStatus;
use crate::publisher::prove::{Outcome, PolicyVerdict, Report};
use std::fmt::Write as _;

/// The whole report; `what` names the policy set that was proven.
pub fn report(report: &Report, what: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Proving {} properties of {} ({} policies) with {}:",
        report.verdicts.len(),
        safe(what),
        report.policies,
        safe(&report.solver)
    );
    let width = report
        .verdicts
        .iter()
        .map(|v| v.property.chars().count())
        .max()
        .unwrap_or(0);
    for verdict in &report.verdicts {
        let state = match (&verdict.outcome, verdict.waived) {
            (Outcome::Holds, false) => "holds",
            (Outcome::Holds, true) => "holds (waived)",
            (Outcome::Fails { .. }, false) => "FAILS",
            (Outcome::Fails { .. }, true) => "fails (waived)",
            (Outcome::Unproven { .. }, false) => "UNPROVEN",
            (Outcome::Unproven { .. }, true) => "unproven (waived)",
        };
        let _ = writeln!(
            out,
            "  {:<width$}  {state:<8}  {} ms",
            safe(&verdict.property),
            verdict.elapsed_ms
        );
        match &verdict.outcome {
            Outcome::Holds => {}
            Outcome::Fails { counterexample } => {
                for line in counterexample.to_string().lines() {
                    let _ = writeln!(out, "{}", safe(line));
                }
            }
            Outcome::Unproven { reason } => {
                let _ = writeln!(out, "    {}", safe(reason));
            }
        }
    }
    if !report.analysis.is_empty() {
        let _ = writeln!(out, "Your policies, each against the set without it:");
    }
    for analysed in &report.analysis {
        let id = safe(&analysed.policy);
        let _ = match &analysed.verdict {
            PolicyVerdict::NeverApplies => writeln!(
                out,
                "  {id}: never applies (no request the schema allows matches it); remove it or fix its condition"
            ),
            PolicyVerdict::NeverChangesADecision => writeln!(
                out,
                "  {id}: changes no decision (a built-in forbid overrides all it would allow, or it refuses only what is refused anyway); remove it or say what you mean differently"
            ),
            PolicyVerdict::OnlyRestricts => {
                writeln!(out, "  {id}: only refuses (more restrictive)")
            }
            PolicyVerdict::MorePermissive { example } => {
                let _ = writeln!(
                    out,
                    "  {id}: MORE PERMISSIVE: it allows what the set without it denies, e.g.:"
                );
                for line in example.to_string().lines() {
                    let _ = writeln!(out, "{}", safe(line));
                }
                Ok(())
            }
        };
    }
    let broken: Vec<&str> = report.broken().map(|v| v.property.as_str()).collect();
    let waived = report.verdicts.iter().filter(|v| v.waived).count();
    if broken.is_empty() {
        let _ = writeln!(
            out,
            "All properties hold{} ({} ms).",
            if waived > 0 {
                format!(" or are waived ({waived} waived in the configuration)")
            } else {
                String::new()
            },
            report.elapsed_ms
        );
    } else {
        let _ = writeln!(
            out,
            "{} of {} properties fail: {}. Change the policy the counterexample names, or, if the \
             policy means it, waive the property in the configuration (waive_properties = [\"{}\"]).",
            broken.len(),
            report.verdicts.len(),
            safe(&broken.join(", ")),
            safe(broken[0])
        );
    }
    out
}

/// The `Policy proofs` section of `status`: the proof at start and every waiver.
pub fn status(proofs: &ProofStatus) -> String {
    let mut out = String::from("Policy proofs:\n");
    let _ = writeln!(out, "  {}", safe(&proofs.summary));
    for waived in &proofs.waived {
        let _ = writeln!(
            out,
            "  waived: {} (waive_properties in the configuration; the policies may break it)",
            safe(waived)
        );
    }
    out
}
