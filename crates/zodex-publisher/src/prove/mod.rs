//! Proofs over the effective policy set: every property of `engine::properties` is compiled by
//! the Symbolic Cedar Compiler (`cedar-policy-symcc`) into SMT and handed to a solver process
//! (cvc5, else z3), once per request environment the property speaks of.
//!
//! A property holds when, in each of those environments, every request the effective set allows
//! is accepted by the property (or ruled out by its `@assume`). `never-errors` holds when no
//! policy can error on any request its actions receive. A failure comes back as a concrete
//! request that is then re-checked with the ordinary authorizer (`example`), so what the
//! operator reads is a request Zodex really allows, named by the policies that allowed it.
//!
//! Not here: which facts the publisher computes (the default branch, coverage, sizes) — a
//! proof trusts them, and they have tests of their own.

mod analysis;
mod example;

pub use analysis::{PolicyAnalysis, PolicyVerdict};
pub use example::Counterexample;

use cedar_policy::{PolicyId, PolicySet, RequestEnv};
use cedar_policy_symcc::solver::LocalSolver;
use cedar_policy_symcc::{CedarSymCompiler, CompiledPolicy, CompiledPolicySet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zodex_engine::policy::{Policies, PolicyError};
use zodex_engine::properties::{NEVER_ERRORS, Properties, Property, scope_names};

/// The wall-clock budget the solver gets for one query.
const SOLVER_TIME_LIMIT_MS: u32 = 60_000;

#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    #[error(
        "no SMT solver found: install cvc5 (Debian/Ubuntu: `apt-get install cvc5`) or z3 and put it on PATH, then run `zodex-prd policy prove` again"
    )]
    NoSolver,
    #[error("cannot run the solver {}: {source}", path.display())]
    Solver {
        path: PathBuf,
        source: Box<cedar_policy_symcc::err::Error>,
    },
    #[error("cannot start a runtime for the proofs: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(
        "waive_properties names `{0}`, which is no property here (known: {1}); correct the name or remove the waiver"
    )]
    UnknownWaiver(String, String),
}

/// An SMT solver on this machine that speaks SMT-LIB 2 on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SolverCommand {
    Cvc5(PathBuf),
    Z3(PathBuf),
}

impl SolverCommand {
    /// cvc5, else z3, from `PATH`.
    pub fn find() -> Option<Self> {
        let path = std::env::var_os("PATH")?;
        let find = |name: &str| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| is_executable(candidate))
        };
        find("cvc5")
            .map(Self::Cvc5)
            .or_else(|| find("z3").map(Self::Z3))
    }

    pub fn path(&self) -> &Path {
        match self {
            Self::Cvc5(path) | Self::Z3(path) => path,
        }
    }

    fn start(&self) -> Result<LocalSolver, ProveError> {
        let mut command = tokio::process::Command::new(self.path());
        match self {
            Self::Cvc5(_) => command.args([
                "--lang".to_string(),
                "smt".to_string(),
                format!("--tlimit={SOLVER_TIME_LIMIT_MS}"),
            ]),
            Self::Z3(_) => command.args([
                "-in".to_string(),
                "-smt2".to_string(),
                format!("-t:{SOLVER_TIME_LIMIT_MS}"),
            ]),
        };
        command.env_clear().kill_on_drop(true);
        LocalSolver::from_command(&mut command)
            .map_err(|e| solver_error(self.path(), cedar_policy_symcc::err::Error::from(e)))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What one property came to.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    Holds,
    Fails {
        counterexample: Box<Counterexample>,
    },
    /// The solver could not answer (a time-out, `unknown`, or a compilation it refused): the
    /// property is not proven, which counts as failing.
    Unproven {
        reason: String,
    },
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    pub property: String,
    pub outcome: Outcome,
    pub elapsed_ms: u64,
    /// The configuration waives this property: a failure does not refuse start.
    pub waived: bool,
}

impl Verdict {
    pub fn holds(&self) -> bool {
        matches!(self.outcome, Outcome::Holds)
    }
}

/// Every verdict, in the order of [`Properties::ids`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// The solver that answered.
    pub solver: String,
    /// Policies in the effective set.
    pub policies: usize,
    pub verdicts: Vec<Verdict>,
    /// The operator's policies that change no decision at all (a built-in `forbid` overrides
    /// every request such a `permit` would allow, or a `forbid` refuses only what is refused
    /// anyway): not a failure, but not what the operator meant either.
    #[serde(default)]
    pub ineffective: Vec<String>,
    /// Each operator policy's effect on the set: never applies, never changes a decision,
    /// more permissive (with the example), or only restricts.
    #[serde(default)]
    pub analysis: Vec<PolicyAnalysis>,
    pub elapsed_ms: u64,
}

impl Report {
    /// Properties that fail and are not waived.
    pub fn broken(&self) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter().filter(|v| !v.holds() && !v.waived)
    }

    pub fn all_hold_or_waived(&self) -> bool {
        self.broken().next().is_none()
    }
}

/// What a proof run needs: the effective set, the properties, the waivers (each one a property
/// that exists).
pub struct Subject {
    pub policies: Policies,
    pub properties: Properties,
    pub waived: Vec<String>,
}

impl Subject {
    /// The built-in policies and properties plus the operator's `policy_dir` (its `*.cedar` and
    /// its `properties/*.cedar`); a waiver that names no property is refused, so a typo never
    /// passes for a waiver.
    pub fn load(policy_dir: Option<&Path>, waived: &[String]) -> Result<Self, ProveError> {
        let policies = Policies::load(policy_dir)?;
        let properties = Properties::load(&policies.schema, policy_dir)?;
        let ids = properties.ids();
        if let Some(unknown) = waived.iter().find(|w| !ids.contains(w)) {
            return Err(ProveError::UnknownWaiver(unknown.clone(), ids.join(", ")));
        }
        Ok(Self {
            policies,
            properties,
            waived: waived.to_vec(),
        })
    }

    /// The subject as it would be once `policy_dir/shadow/` is promoted (its files moved up);
    /// `None` without a shadow file.
    pub fn load_promoted(policy_dir: &Path, waived: &[String]) -> Result<Option<Self>, ProveError> {
        let Some(policies) = Policies::load_promoted(policy_dir)? else {
            return Ok(None);
        };
        let properties = Properties::load(&policies.schema, Some(policy_dir))?;
        Ok(Some(Self {
            policies,
            properties,
            waived: waived.to_vec(),
        }))
    }

    /// Proves every property with `solver`; see [`prove`].
    pub async fn prove(&self, solver: &SolverCommand) -> Result<Report, ProveError> {
        prove(&self.policies, &self.properties, &self.waived, solver).await
    }
}

/// Proves every property against `policies` with `solver` (a solver process the proof talks
/// to while it waits).
pub async fn prove(
    policies: &Policies,
    properties: &Properties,
    waived: &[String],
    solver: &SolverCommand,
) -> Result<Report, ProveError> {
    prove_async(policies, properties, waived, solver).await
}

/// Does the set decide differently without the policy `id`? For a `permit`: is there a request
/// only it allows (a permit no request needs is dead, or shadowed by a `forbid`). For a
/// `forbid`: is there a request only it refuses.
pub async fn changes_decisions(
    policies: &Policies,
    id: &str,
    solver: &SolverCommand,
) -> Result<bool, ProveError> {
    let mut prover = Prover::start(policies, solver)?;
    prover.changes_decisions(id).await
}

async fn prove_async(
    policies: &Policies,
    properties: &Properties,
    waived: &[String],
    solver: &SolverCommand,
) -> Result<Report, ProveError> {
    let started = Instant::now();
    let mut prover = Prover::start(policies, solver)?;
    let mut verdicts = Vec::new();
    let clock = Instant::now();
    let outcome = prover.never_errors().await;
    verdicts.push(Verdict {
        property: NEVER_ERRORS.to_string(),
        outcome,
        elapsed_ms: millis(clock.elapsed()),
        waived: waived.iter().any(|w| w == NEVER_ERRORS),
    });
    for property in &properties.list {
        let clock = Instant::now();
        let outcome = prover.implies(property).await;
        verdicts.push(Verdict {
            property: property.id.clone(),
            outcome,
            elapsed_ms: millis(clock.elapsed()),
            waived: waived.contains(&property.id),
        });
    }
    let mut ineffective = Vec::new();
    let mut analysis = Vec::new();
    for (id, origin) in &policies.origins {
        if origin.starts_with("builtin:") {
            continue;
        }
        let verdict = prover.analyse(id).await?;
        if matches!(
            verdict,
            PolicyVerdict::NeverApplies | PolicyVerdict::NeverChangesADecision
        ) {
            ineffective.push(id.clone());
        }
        analysis.push(PolicyAnalysis {
            policy: id.clone(),
            verdict,
        });
    }
    Ok(Report {
        solver: solver.path().display().to_string(),
        policies: policies.origins.len(),
        verdicts,
        ineffective,
        analysis,
        elapsed_ms: millis(started.elapsed()),
    })
}

fn millis(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

struct Prover<'a> {
    policies: &'a Policies,
    compiler: CedarSymCompiler<LocalSolver>,
    envs: Vec<RequestEnv>,
    /// The effective set compiled once per environment, on first use.
    effective: Vec<Option<CompiledPolicySet>>,
    solver: PathBuf,
}

impl<'a> Prover<'a> {
    fn start(policies: &'a Policies, solver: &SolverCommand) -> Result<Self, ProveError> {
        let compiler = CedarSymCompiler::new(solver.start()?)
            .map_err(|source| solver_error(solver.path(), source))?;
        let envs: Vec<RequestEnv> = policies.schema.request_envs().collect();
        Ok(Self {
            policies,
            compiler,
            effective: vec![None; envs.len()],
            envs,
            solver: solver.path().to_path_buf(),
        })
    }

    /// See [`changes_decisions`].
    async fn changes_decisions(&mut self, id: &str) -> Result<bool, ProveError> {
        let mut without = self.policies.set.clone();
        if without.remove_static(PolicyId::new(id)).is_err() {
            return Ok(false);
        }
        let path = self.solver.clone();
        let fail = |source: cedar_policy_symcc::err::Error| solver_error(&path, source);
        for index in 0..self.envs.len() {
            let less =
                CompiledPolicySet::compile(&without, &self.envs[index], &self.policies.schema)
                    .map_err(fail)?;
            let full = effective(&mut self.effective, &self.envs, self.policies, index)
                .map_err(|e| solver_error(&path, e))?;
            let same = self
                .compiler
                .check_implies_opt(full, &less)
                .await
                .map_err(fail)?
                && self
                    .compiler
                    .check_implies_opt(&less, full)
                    .await
                    .map_err(fail)?;
            if !same {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn never_errors(&mut self) -> Outcome {
        for policy in self.policies.set.policies() {
            for env in &self.envs {
                // Compiled only where its scope names the action: elsewhere it is false.
                if !scope_names(policy, env.action()) {
                    continue;
                }
                let compiled = match CompiledPolicy::compile(policy, env, &self.policies.schema) {
                    Ok(compiled) => compiled,
                    Err(e) => return unproven(policy.id(), env, &e),
                };
                match self
                    .compiler
                    .check_never_errors_with_counterexample_opt(&compiled)
                    .await
                {
                    Ok(None) => {}
                    Ok(Some(found)) => {
                        return Outcome::Fails {
                            counterexample: Box::new(Counterexample::of_error(
                                found,
                                policy.id().to_string(),
                                self.policies,
                            )),
                        };
                    }
                    Err(e) => return unproven(policy.id(), env, &e),
                }
            }
        }
        Outcome::Holds
    }

    async fn implies(&mut self, property: &Property) -> Outcome {
        let mut accepted = PolicySet::new();
        let mut added = accepted.add(property.policy.clone());
        if let (Ok(()), Some(assumption)) = (&added, property.assumption.clone()) {
            added = accepted.add(assumption);
        }
        if let Err(e) = added {
            return Outcome::Unproven {
                reason: format!("cannot assemble `{}`: {e}", property.id),
            };
        }
        for index in 0..self.envs.len() {
            if !property.covers(self.envs[index].action()) {
                continue;
            }
            let env = &self.envs[index];
            let effective = match effective(&mut self.effective, &self.envs, self.policies, index) {
                Ok(compiled) => compiled,
                Err(e) => return unproven("the effective set", env, &e),
            };
            let property_set =
                match CompiledPolicySet::compile(&accepted, env, &self.policies.schema) {
                    Ok(compiled) => compiled,
                    Err(e) => return unproven(&property.id, env, &e),
                };
            match self
                .compiler
                .check_implies_with_counterexample_opt(effective, &property_set)
                .await
            {
                Ok(None) => {}
                Ok(Some(found)) => {
                    return Outcome::Fails {
                        counterexample: Box::new(Counterexample::of_allow(
                            found,
                            self.policies,
                            &accepted,
                        )),
                    };
                }
                Err(e) => return unproven(&property.id, env, &e),
            }
        }
        Outcome::Holds
    }
}

fn unproven(what: impl std::fmt::Display, env: &RequestEnv, e: &dyn std::fmt::Display) -> Outcome {
    Outcome::Unproven {
        reason: format!(
            "{what}: cannot be proven for {} on {} by {}: {e}",
            env.action(),
            env.resource(),
            env.principal()
        ),
    }
}

fn solver_error(path: &Path, source: impl Into<Box<cedar_policy_symcc::err::Error>>) -> ProveError {
    ProveError::Solver {
        path: path.to_path_buf(),
        source: source.into(),
    }
}

/// The effective set compiled for environment `index`, compiled on first use and kept in
/// `slots` (a free function so that the caller may hold it while it uses the solver).
fn effective<'s>(
    slots: &'s mut [Option<CompiledPolicySet>],
    envs: &[RequestEnv],
    policies: &Policies,
    index: usize,
) -> Result<&'s CompiledPolicySet, Box<cedar_policy_symcc::err::Error>> {
    let slot = &mut slots[index];
    if slot.is_none() {
        *slot = Some(
            CompiledPolicySet::compile(&policies.set, &envs[index], &policies.schema)
                .map_err(Box::new)?,
        );
    }
    Ok(slot.as_ref().expect("compiled just above"))
}
