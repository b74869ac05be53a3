//! Set analysis beyond the invariants (issue "Policy as product"): for each of the operator's
//! policies, whether it can never apply (its scope and condition match no request the schema
//! allows), whether it never changes a decision (the rest of the set decides every request
//! the same without it), and whether the set with it allows something the set without it
//! denies (more permissive) — then with the solver's request as the example, re-decided by the
//! ordinary authorizer.

use super::{Counterexample, ProveError, Prover, solver_error};
use cedar_policy::PolicyId;
use cedar_policy_symcc::{CompiledPolicy, CompiledPolicySet};
use zodex_engine::properties::scope_names;

/// What one operator policy does to the set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum PolicyVerdict {
    /// No request the schema allows matches it: unsatisfiable, dead text.
    NeverApplies,
    /// It matches requests, but the set decides every one of them the same without it.
    NeverChangesADecision,
    /// The set with it allows a request the set without it denies: the example.
    MorePermissive { example: Box<Counterexample> },
    /// It only refuses what the set without it would allow (a working `forbid`).
    OnlyRestricts,
}

/// One operator policy's verdict.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyAnalysis {
    pub policy: String,
    #[serde(flatten)]
    pub verdict: PolicyVerdict,
}

impl Prover<'_> {
    /// The verdict on policy `id` of the set.
    pub(super) async fn analyse(&mut self, id: &str) -> Result<PolicyVerdict, ProveError> {
        let path = self.solver.clone();
        let fail = |source: cedar_policy_symcc::err::Error| solver_error(&path, source);
        let Some(policy) = self.policies.set.policy(&PolicyId::new(id)).cloned() else {
            return Ok(PolicyVerdict::NeverApplies);
        };
        let mut applies = false;
        for env in &self.envs {
            if !scope_names(&policy, env.action()) {
                continue;
            }
            let compiled =
                CompiledPolicy::compile(&policy, env, &self.policies.schema).map_err(fail)?;
            if !self
                .compiler
                .check_never_matches_opt(&compiled)
                .await
                .map_err(fail)?
            {
                applies = true;
                break;
            }
        }
        if !applies {
            return Ok(PolicyVerdict::NeverApplies);
        }
        let mut without = self.policies.set.clone();
        let _ = without.remove_static(PolicyId::new(id));
        let mut restricts = false;
        for index in 0..self.envs.len() {
            let less =
                CompiledPolicySet::compile(&without, &self.envs[index], &self.policies.schema)
                    .map_err(fail)?;
            let full = super::effective(&mut self.effective, &self.envs, self.policies, index)
                .map_err(|e| solver_error(&path, e))?;
            if let Some(found) = self
                .compiler
                .check_implies_with_counterexample_opt(full, &less)
                .await
                .map_err(fail)?
            {
                return Ok(PolicyVerdict::MorePermissive {
                    example: Box::new(Counterexample::of_allow(found, self.policies, &without)),
                });
            }
            if !restricts
                && !self
                    .compiler
                    .check_implies_opt(&less, full)
                    .await
                    .map_err(fail)?
            {
                restricts = true;
            }
        }
        Ok(if restricts {
            PolicyVerdict::OnlyRestricts
        } else {
            PolicyVerdict::NeverChangesADecision
        })
    }
}
