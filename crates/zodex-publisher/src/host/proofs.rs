//! The proofs as the daemon hosts them: proven once at start (a broken, unwaived property
//! refuses start), again on an operator's `policy prove`, and summed up in `status`. Their
//! own owner: the properties, the configuration's waivers and the last summary.

use super::{Failure, HostError};
use crate::prove::{ProveError, Report, SolverCommand, prove};
use std::sync::Mutex;
use zodex_engine::policy::Policies;
use zodex_engine::properties::Properties;
use zodex_protocol::ErrorKind;
use zodex_protocol::answers::ProofStatus;

pub(super) struct Proofs {
    properties: Properties,
    waived: Vec<String>,
    /// One line on the last proof, for `status`.
    summary: Mutex<String>,
}

impl Proofs {
    pub fn new(properties: Properties, waived: Vec<String>) -> Self {
        Self {
            properties,
            waived,
            summary: Mutex::new("not proven yet".to_string()),
        }
    }

    /// Proves the write invariants of `policies` before the daemon serves. Without a solver
    /// the daemon starts, loudly unproven; with one, a property that fails and is not waived
    /// refuses start with its counterexample.
    pub async fn at_start(&self, policies: &Policies) -> Result<Option<Report>, HostError> {
        for waived in &self.waived {
            tracing::warn!(
                property = %waived,
                "this write invariant is waived by the configuration (waive_properties): the policies may break it"
            );
        }
        let Some(solver) = SolverCommand::find() else {
            let summary = "NOT PROVEN: no SMT solver (cvc5 or z3) on zodex-prd's PATH; install cvc5 (`apt-get install cvc5`) and restart";
            tracing::warn!("the policies' write invariants are {summary}");
            self.set_summary(summary.to_string());
            return Ok(None);
        };
        let report = self.prove_with(policies, &solver).await?;
        if !report.all_hold_or_waived() {
            return Err(HostError::PropertiesFail(Box::new(report)));
        }
        tracing::info!(
            properties = report.verdicts.len(),
            waived = self.waived.len(),
            ms = report.elapsed_ms,
            "the policies' write invariants are proven"
        );
        Ok(Some(report))
    }

    /// An operator's `policy prove`: the same proof, answered as a report.
    pub async fn now(&self, policies: &Policies) -> Result<Report, Failure> {
        let solver = SolverCommand::find()
            .ok_or_else(|| Failure::new(ErrorKind::Internal, ProveError::NoSolver.to_string()))?;
        self.prove_with(policies, &solver)
            .await
            .map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))
    }

    /// What `status` shows of the proofs: the summary and every waiver.
    pub fn status(&self) -> ProofStatus {
        let summary = self
            .summary
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        ProofStatus {
            summary,
            waived: self.waived.clone(),
        }
    }

    async fn prove_with(
        &self,
        policies: &Policies,
        solver: &SolverCommand,
    ) -> Result<Report, HostError> {
        let report = prove(policies, &self.properties, &self.waived, solver).await?;
        let holding = report.verdicts.iter().filter(|v| v.holds()).count();
        self.set_summary(format!(
            "{holding} of {} write invariants hold, {} waived (proven with {} in {} ms)",
            report.verdicts.len(),
            self.waived.len(),
            report.solver,
            report.elapsed_ms
        ));
        Ok(report)
    }

    fn set_summary(&self, summary: String) {
        *self.summary.lock().unwrap_or_else(|p| p.into_inner()) = summary;
    }
}
