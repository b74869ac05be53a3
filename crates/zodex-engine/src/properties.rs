//! The write invariants Zodex proves of its effective policy set, as Cedar: the built-in
//! properties (`policies/properties/`, embedded at build time) and the operator's own
//! (`<policy_dir>/properties/*.cedar`).
//!
//! A property is a `permit` policy that describes the requests it accepts. It *holds* when every
//! request the effective policy set allows, among the actions the property's scope names, is one
//! it accepts. `@assume("EXPR")` states what the publisher guarantees of the values it sends:
//! a request where EXPR is false is accepted without looking, so a counterexample never rests
//! on a value that cannot happen. Proving is the publisher's job (`publisher::prove`, which runs
//! a solver); this module only reads and validates the files, so it needs no process.

pub use super::policy::scope_names;
use super::policy::{PolicyError, PolicyFileProblems, parse_file, read_operator_dir};
use cedar_policy::{ActionConstraint, Effect, EntityUid, Policy, PolicyId, Schema};
use std::fmt::Write as _;
use std::path::Path;

/// The built-in property files, embedded at build time.
pub const BUILTIN_PROPERTIES: &[(&str, &str)] = &[
    (
        "authority.cedar",
        include_str!("../../../policies/properties/authority.cedar"),
    ),
    (
        "branches.cedar",
        include_str!("../../../policies/properties/branches.cedar"),
    ),
    (
        "coverage.cedar",
        include_str!("../../../policies/properties/coverage.cedar"),
    ),
    (
        "sizes.cedar",
        include_str!("../../../policies/properties/sizes.cedar"),
    ),
];

/// The property that is not written in Cedar: no policy of the effective set errors on any
/// request its actions can receive (an error is a deny in Zodex, but an erroring `forbid`
/// protects nothing).
pub const NEVER_ERRORS: &str = "never-errors";

/// The subdirectory of the operator's policy directory that holds their own properties.
pub const OPERATOR_SUBDIR: &str = "properties";

/// Why one policy of a property file is not a property (each message ends its line).
#[derive(Debug, thiserror::Error)]
enum PropertyError {
    #[error(
        "{file}: property `{id}` is a forbid; write a property as a `permit` of the requests it accepts\n"
    )]
    Forbid { file: String, id: String },
    #[error(transparent)]
    Assumption(#[from] PolicyFileProblems),
    #[error("{file}: the @assume of `{id}` did not parse as one condition\n")]
    AssumptionNotOneCondition { file: String, id: String },
}

/// One property: what it accepts, and what it assumes.
#[derive(Debug, Clone)]
pub struct Property {
    pub id: String,
    /// `builtin:NAME.cedar` or the operator's file.
    pub origin: String,
    /// The `permit` whose scope names the actions the property speaks of.
    pub policy: Policy,
    /// `permit (principal, <the same actions>, resource) unless { ASSUMPTION }`: accepts every
    /// request the assumption rules out.
    pub assumption: Option<Policy>,
}

impl Property {
    /// Does this property speak of `action`?
    pub fn covers(&self, action: &EntityUid) -> bool {
        scope_names(&self.policy, action)
    }
}

/// Every property to prove: built-in first, then the operator's.
#[derive(Debug, Clone)]
pub struct Properties {
    pub list: Vec<Property>,
}

impl Properties {
    /// The built-in properties only.
    pub fn builtin(schema: &Schema) -> Result<Self, PolicyError> {
        Self::load(schema, None)
    }

    /// The built-in properties plus `<policy_dir>/properties/*.cedar` when that directory exists.
    pub fn load(schema: &Schema, policy_dir: Option<&Path>) -> Result<Self, PolicyError> {
        let mut files: Vec<(String, String)> = BUILTIN_PROPERTIES
            .iter()
            .map(|(name, text)| (format!("builtin:properties/{name}"), text.to_string()))
            .collect();
        if let Some(dir) = policy_dir.map(|d| d.join(OPERATOR_SUBDIR))
            && dir.is_dir()
        {
            files.extend(read_operator_dir(&dir)?);
        }
        let mut list: Vec<Property> = Vec::new();
        let mut problems = String::new();
        for (file, text) in &files {
            let set = match parse_file(schema, file, text) {
                Ok(set) => set,
                Err(file_problems) => {
                    problems.push_str(&file_problems.0);
                    continue;
                }
            };
            let mut policies: Vec<Policy> = set.policies().cloned().collect();
            policies.sort_by_key(|p| p.id().to_string());
            for policy in policies {
                let id = policy.id().to_string();
                if id == NEVER_ERRORS || list.iter().any(|p| p.id == id) {
                    let _ = writeln!(
                        problems,
                        "{file}: property id `{id}` is already used; give each property its own @id"
                    );
                    continue;
                }
                match property(schema, file, policy) {
                    Ok(property) => list.push(property),
                    Err(error) => problems.push_str(&error.to_string()),
                }
            }
        }
        if !problems.is_empty() {
            return Err(PolicyError::Invalid(format!(
                "{problems}refusing to start: fix the properties above (check them with `zodex-prd policy prove`)"
            )));
        }
        Ok(Self { list })
    }

    /// Every property id, `never-errors` first.
    pub fn ids(&self) -> Vec<String> {
        std::iter::once(NEVER_ERRORS.to_string())
            .chain(self.list.iter().map(|p| p.id.clone()))
            .collect()
    }
}

fn property(schema: &Schema, file: &str, policy: Policy) -> Result<Property, PropertyError> {
    let id = policy.id().to_string();
    if policy.effect() != Effect::Permit {
        return Err(PropertyError::Forbid {
            file: file.to_string(),
            id,
        });
    }
    let assumption = match policy.annotation("assume") {
        None => None,
        Some(expr) => Some(assumption(schema, file, &id, &policy, expr)?),
    };
    Ok(Property {
        id,
        origin: file.to_string(),
        policy,
        assumption,
    })
}

/// The policy that accepts every request `expr` rules out, over the property's own actions (so
/// that the context fields it names exist), validated like any other policy.
fn assumption(
    schema: &Schema,
    file: &str,
    id: &str,
    policy: &Policy,
    expr: &str,
) -> Result<Policy, PropertyError> {
    let action = match policy.action_constraint() {
        ActionConstraint::Any => "action".to_string(),
        ActionConstraint::Eq(one) => format!("action == {one}"),
        ActionConstraint::In(many) => format!(
            "action in [{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let text = format!(
        "@id(\"{id}/assume\")\npermit (principal, {action}, resource) unless {{ {expr} }};\n"
    );
    let set = parse_file(schema, &format!("{file} (@assume of `{id}`)"), &text)?;
    set.policy(&PolicyId::new(format!("{id}/assume")))
        .cloned()
        .ok_or_else(|| PropertyError::AssumptionNotOneCondition {
            file: file.to_string(),
            id: id.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policies;

    #[test]
    fn builtin_properties_validate_and_name_their_actions() {
        let schema = Policies::builtin().unwrap().schema;
        let properties = Properties::builtin(&schema).expect("built-in properties validate");
        let push: EntityUid = r#"Zodex::Action::"Push""#.parse().unwrap();
        let read: EntityUid = r#"Zodex::Action::"Read""#.parse().unwrap();
        let ids = properties.ids();
        assert_eq!(ids[0], NEVER_ERRORS);
        for id in [
            "default-branch-never-forced-or-deleted",
            "push-needs-live-grant-or-yolo",
            "nothing-over-the-ceiling",
            "tags-never-moved-or-deleted",
            "writes-only-to-configured-targets",
            "writes-need-the-writer-app",
            "workflow-changes-need-an-allowance",
            "reads-need-the-reader-app",
            "agent-never-grants-itself",
        ] {
            assert!(ids.iter().any(|i| i == id), "missing {id}: {ids:?}");
        }
        let ceiling = properties
            .list
            .iter()
            .find(|p| p.id == "nothing-over-the-ceiling")
            .unwrap();
        assert!(ceiling.covers(&push));
        assert!(!ceiling.covers(&read));
    }

    #[test]
    fn operator_properties_are_read_from_the_subdirectory_with_their_assumption() {
        let schema = Policies::builtin().unwrap().schema;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(OPERATOR_SUBDIR)).unwrap();
        std::fs::write(
            dir.path().join(OPERATOR_SUBDIR).join("mine.cedar"),
            "// Small pushes only.\n@id(\"small\")\n@assume(\"context.bundle_bytes >= 0\")\npermit (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes <= 1024 };\n",
        )
        .unwrap();
        let properties = Properties::load(&schema, Some(dir.path())).unwrap();
        let mine = properties.list.last().unwrap();
        assert_eq!(mine.id, "small");
        assert!(mine.origin.ends_with("mine.cedar"), "{}", mine.origin);
        let assumption = mine.assumption.as_ref().expect("the @assume is kept");
        assert!(
            assumption.to_string().contains("bundle_bytes"),
            "{assumption}"
        );
    }

    #[test]
    fn a_forbid_a_bad_assumption_or_a_reused_id_is_refused() {
        let schema = Policies::builtin().unwrap().schema;
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join(OPERATOR_SUBDIR);
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(
            sub.join("a.cedar"),
            "@id(\"no-forbid\")\nforbid (principal, action == Zodex::Action::\"Push\", resource);\n",
        )
        .unwrap();
        std::fs::write(
            sub.join("b.cedar"),
            "@id(\"typo\")\n@assume(\"context.bundle_byts >= 0\")\npermit (principal, action == Zodex::Action::\"Push\", resource);\n",
        )
        .unwrap();
        std::fs::write(
            sub.join("c.cedar"),
            "@id(\"nothing-over-the-ceiling\")\npermit (principal, action == Zodex::Action::\"Push\", resource);\n",
        )
        .unwrap();
        let text = Properties::load(&schema, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(text.contains("`no-forbid` is a forbid"), "{text}");
        assert!(text.contains("bundle_byts"), "{text}");
        assert!(text.contains("@assume of `typo`"), "{text}");
        assert!(
            text.contains("`nothing-over-the-ceiling` is already used"),
            "{text}"
        );
    }
}
