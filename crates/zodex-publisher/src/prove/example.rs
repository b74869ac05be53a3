//! A counterexample in the operator's words: who asks, what for, which repository with which
//! facts, the request's context, and the policies that decided it — after the ordinary
//! authorizer has re-decided the solver's request, so nothing shown rests on the solver alone.

use cedar_policy::{Authorizer, Decision, EntityUid, PolicySet};
use cedar_policy_symcc::Env;
use std::fmt;
use zodex_engine::policy::Policies;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counterexample {
    /// "the agent", "an operator".
    pub principal: String,
    /// The action's name: `Push`, `PublishPr`, …
    pub action: String,
    /// `repository "owner/name"` or `the sprite`.
    pub resource: String,
    /// The repository's facts (`configured_target = true`, …), sorted.
    pub facts: Vec<(String, String)>,
    /// The request's context (`ref_name = "refs/heads/main"`, …), sorted.
    pub context: Vec<(String, String)>,
    /// What the ordinary authorizer decided: `Allow` for a request a property should have
    /// ruled out; for `never-errors`, the decision after the error.
    pub decision: String,
    /// The policies the ordinary authorizer named as deciding.
    pub decided_by: Vec<String>,
    /// For `never-errors`: the policy that errors on this request.
    pub erroring_policy: Option<String>,
    /// The ordinary authorizer agreed with the solver (allowed it, or reported the error).
    pub reproduced: bool,
}

impl Counterexample {
    /// A request the effective set allows and the property (with its assumption) does not.
    pub(super) fn of_allow(found: Env, policies: &Policies, accepted: &PolicySet) -> Self {
        let authorizer = Authorizer::new();
        let answer = authorizer.is_authorized(&found.request, &policies.set, &found.entities);
        let property = authorizer.is_authorized(&found.request, accepted, &found.entities);
        let reproduced =
            answer.decision() == Decision::Allow && property.decision() == Decision::Deny;
        let decided_by = answer
            .diagnostics()
            .reason()
            .map(ToString::to_string)
            .collect();
        Self::describe(found, answer.decision(), decided_by, None, reproduced)
    }

    /// A request on which `policy` errors.
    pub(super) fn of_error(found: Env, policy: String, policies: &Policies) -> Self {
        let answer =
            Authorizer::new().is_authorized(&found.request, &policies.set, &found.entities);
        let reproduced = answer.diagnostics().errors().any(|e| match e {
            cedar_policy::AuthorizationError::PolicyEvaluationError(e) => {
                e.policy_id().to_string() == policy
            }
        });
        let decided_by = answer
            .diagnostics()
            .reason()
            .map(ToString::to_string)
            .collect();
        Self::describe(
            found,
            answer.decision(),
            decided_by,
            Some(policy),
            reproduced,
        )
    }

    fn describe(
        found: Env,
        decision: Decision,
        decided_by: Vec<String>,
        erroring_policy: Option<String>,
        reproduced: bool,
    ) -> Self {
        let request = &found.request;
        let principal = request.principal().map_or_else(
            || "someone".to_string(),
            |p| match p.type_name().basename() {
                "Agent" => "the agent".to_string(),
                "Operator" => "an operator".to_string(),
                _ => p.to_string(),
            },
        );
        let action = request
            .action()
            .map_or_else(|| "?".to_string(), |a| a.id().unescaped().to_string());
        let (resource, facts) = match request.resource() {
            Some(uid) => {
                let facts = facts(&found, uid);
                (resource_name(uid, &facts), facts)
            }
            None => ("?".to_string(), Vec::new()),
        };
        let mut context: Vec<(String, String)> = request
            .context()
            .map(|c| {
                c.clone()
                    .into_iter()
                    .map(|(k, _)| {
                        let v = c.get(&k).map_or_else(|| "?".to_string(), |v| v.to_string());
                        (k, v)
                    })
                    .collect()
            })
            .unwrap_or_default();
        context.sort();
        Self {
            principal,
            action,
            resource,
            facts,
            context,
            decision: format!("{decision:?}"),
            decided_by,
            erroring_policy,
            reproduced,
        }
    }
}

/// A repository by its `owner/name` attributes (the solver picks any entity id; the names are
/// what the operator knows it by).
fn resource_name(uid: &EntityUid, facts: &[(String, String)]) -> String {
    let fact = |name: &str| {
        facts
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim_matches('"').to_string())
    };
    match uid.type_name().basename() {
        "Repository" => match (fact("owner"), fact("name")) {
            (Some(owner), Some(name)) => format!("repository \"{owner}/{name}\""),
            _ => format!("repository {:?}", uid.id().unescaped()),
        },
        "Sprite" => "the sprite".to_string(),
        _ => uid.to_string(),
    }
}

fn facts(found: &Env, uid: &EntityUid) -> Vec<(String, String)> {
    let mut facts: Vec<(String, String)> = found
        .entities
        .get(uid)
        .map(|entity| {
            entity
                .attrs()
                .map(|(name, value)| {
                    let value = value.map_or_else(|_| "?".to_string(), |v| v.to_string());
                    (name.to_string(), value)
                })
                .collect()
        })
        .unwrap_or_default();
    facts.sort();
    facts
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs = |pairs: &[(String, String)]| {
            pairs
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match &self.erroring_policy {
            Some(policy) => writeln!(
                f,
                "    policy `{policy}` errors when {} asks {} on {}",
                self.principal, self.action, self.resource
            )?,
            None => writeln!(
                f,
                "    {} may {} on {}",
                self.principal, self.action, self.resource
            )?,
        }
        if !self.facts.is_empty() {
            writeln!(f, "      where the repository has {}", pairs(&self.facts))?;
        }
        if !self.context.is_empty() {
            writeln!(f, "      with {}", pairs(&self.context))?;
        }
        let by = if self.decided_by.is_empty() {
            "no policy".to_string()
        } else {
            self.decided_by.join(", ")
        };
        if self.reproduced {
            write!(
                f,
                "      decided {} by {by} (re-checked with the ordinary authorizer)",
                self.decision
            )
        } else {
            write!(
                f,
                "      the ordinary authorizer decided {} by {by}, which disagrees with the solver: report this request as a bug in the prover",
                self.decision
            )
        }
    }
}
