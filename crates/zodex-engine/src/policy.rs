//! The Cedar side of the engine: the embedded schema and built-in policies, the operator's own
//! policy directory, validation, and renaming every policy after its `@id` so decisions read
//! `explicit-grant-push`, `bundle-ceiling`, `protect-default-branch`, …
//!
//! Loading fails closed: a file that does not parse or validate refuses start, with the
//! validator's message and the file, line and column it points at.

use cedar_policy::{
    ActionConstraint, EntityUid, Policy, PolicyId, PolicySet, Schema, ValidationMode, Validator,
};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The schema, embedded at build time.
pub const SCHEMA_SOURCE: &str = include_str!("../../../policies/zodex.cedarschema");

/// The built-in policy files, embedded at build time.
pub const BUILTIN_POLICIES: &[(&str, &str)] = &[
    ("admin.cedar", include_str!("../../../policies/admin.cedar")),
    (
        "ceiling.cedar",
        include_str!("../../../policies/ceiling.cedar"),
    ),
    (
        "coverage.cedar",
        include_str!("../../../policies/coverage.cedar"),
    ),
    (
        "publish.cedar",
        include_str!("../../../policies/publish.cedar"),
    ),
    ("push.cedar", include_str!("../../../policies/push.cedar")),
    ("refs.cedar", include_str!("../../../policies/refs.cedar")),
];

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "cannot read policy directory {path}: {source}; fix `policies.dir` in the configuration"
    )]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What is wrong with one policy file: every problem found, rendered `file:line:col: message`,
/// one a line (the caller lists them under one "refusing to start" verdict).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyFileProblems(pub String);

/// The schema and the complete, validated policy set the engine decides with.
pub struct Policies {
    pub schema: Schema,
    pub set: PolicySet,
    /// Where each policy came from (`@id` → file name), for `policy check` and explanations.
    pub origins: Vec<(String, String)>,
}

/// The subdirectory of `policy_dir` whose policies run in shadow: evaluated with every decision
/// beside the enforced set and recorded in its audit row, never enforced. Promoting one is
/// moving its file up into `policy_dir`.
pub const SHADOW_DIR: &str = "shadow";

impl Policies {
    /// The built-in policies only.
    pub fn builtin() -> Result<Self, PolicyError> {
        Self::load(None)
    }

    /// The built-in policies plus every `*.cedar` file in the operator's directory.
    pub fn load(operator_dir: Option<&Path>) -> Result<Self, PolicyError> {
        let mut files = builtin_files();
        if let Some(dir) = operator_dir {
            files.extend(read_operator_dir(dir)?);
        }
        Self::from_files(&files)
    }

    /// The set as it would be once `operator_dir/shadow/*.cedar` is promoted (the enforced set
    /// plus the shadow files); `None` when there is no shadow file.
    pub fn load_promoted(operator_dir: &Path) -> Result<Option<Self>, PolicyError> {
        let shadow_dir = operator_dir.join(SHADOW_DIR);
        if !shadow_dir.is_dir() {
            return Ok(None);
        }
        let shadow = read_operator_dir(&shadow_dir)?;
        if shadow.is_empty() {
            return Ok(None);
        }
        let mut files = builtin_files();
        files.extend(read_operator_dir(operator_dir)?);
        files.extend(shadow);
        Self::from_files(&files).map(Some)
    }

    fn from_files(files: &[(String, String)]) -> Result<Self, PolicyError> {
        let schema = load_schema()?;
        let mut set = PolicySet::new();
        let mut origins = Vec::new();
        let mut problems = String::new();
        for (file, text) in files {
            match parse_file(&schema, file, text) {
                Ok(policies) => {
                    for policy in policies.policies() {
                        let id = policy.id().to_string();
                        if let Some((_, first)) = origins.iter().find(|(seen, _)| *seen == id) {
                            let _ = writeln!(
                                problems,
                                "{file}: policy id `{id}` is already used in {first}; give each policy its own @id"
                            );
                            continue;
                        }
                        origins.push((id, file.clone()));
                        set.add(policy.clone())
                            .map_err(|e| PolicyError::Invalid(format!("{file}: {e}")))?;
                    }
                }
                Err(file_problems) => problems.push_str(&file_problems.0),
            }
        }
        if !problems.is_empty() {
            return Err(PolicyError::Invalid(format!(
                "{}refusing to start: fix the policies above (check them with `zodex-prd policy check`)",
                problems
            )));
        }
        Ok(Self {
            schema,
            set,
            origins,
        })
    }
}

/// The policies that can apply to each action of the schema, so a decision evaluates only
/// those. Cedar itself walks every policy of the set for every request, and building each
/// policy's condition is most of its cost; a policy whose action scope excludes the request's
/// action evaluates to false (never to an error: the scope is checked before `when`), so
/// leaving it out changes no decision, no reason and no error. A policy with an unscoped
/// action (`action`) is in every subset. Within a subset the action scope is dropped
/// ([`without_action_scope`]): it holds for every request the subset is used for.
pub struct ActionIndex {
    subsets: HashMap<EntityUid, PolicySet>,
}

impl ActionIndex {
    /// Splits `policies.set` by the schema's actions (an `action in [group]` scope covers the
    /// group's members).
    pub fn build(policies: &Policies) -> Self {
        let hierarchy = policies.schema.action_entities().ok();
        let mut subsets = HashMap::new();
        for action in policies.schema.actions() {
            let mut covering: Vec<&EntityUid> = vec![action];
            if let Some(ancestors) = hierarchy.as_ref().and_then(|h| h.ancestors(action)) {
                covering.extend(ancestors);
            }
            let mut subset = PolicySet::new();
            for policy in policies.set.policies() {
                if covering.iter().any(|uid| scope_names(policy, uid)) {
                    subset
                        .add(without_action_scope(policy))
                        .expect("a policy of a valid set is valid in a subset of it");
                }
            }
            subsets.insert(action.clone(), subset);
        }
        Self { subsets }
    }

    /// The policies that can apply to `action`; `None` for an action the schema does not
    /// declare (the caller then uses the whole set).
    pub fn for_action(&self, action: &EntityUid) -> Option<&PolicySet> {
        self.subsets.get(action)
    }
}

/// `policy` with its action scope dropped, for the subset of an action it names: there the
/// scope is known to hold, and Cedar would build the set of an `action in [...]` scope anew at
/// every evaluation. Same id, annotations, principal, resource and conditions; kept as it was
/// if the round trip through Cedar's JSON form fails.
fn without_action_scope(policy: &Policy) -> Policy {
    let rewritten = policy.to_json().ok().and_then(|mut json| {
        json["action"] = serde_json::json!({ "op": "All" });
        Policy::from_json(Some(policy.id().clone()), json).ok()
    });
    rewritten.unwrap_or_else(|| policy.clone())
}

/// Does `policy`'s scope name `action`? A policy over any action names every one.
pub fn scope_names(policy: &Policy, action: &EntityUid) -> bool {
    match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(one) => &one == action,
        ActionConstraint::In(many) => many.contains(action),
    }
}

fn load_schema() -> Result<Schema, PolicyError> {
    Schema::from_cedarschema_str(SCHEMA_SOURCE)
        .map(|(schema, _warnings)| schema)
        .map_err(|e| PolicyError::Invalid(render("builtin:zodex.cedarschema", SCHEMA_SOURCE, &e)))
}

fn builtin_files() -> Vec<(String, String)> {
    BUILTIN_POLICIES
        .iter()
        .map(|(name, text)| (format!("builtin:{name}"), text.to_string()))
        .collect()
}

pub(crate) fn read_operator_dir(dir: &Path) -> Result<Vec<(String, String)>, PolicyError> {
    let io = |source| PolicyError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "cedar"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(io)?;
            Ok((path.display().to_string(), text))
        })
        .collect()
}

/// Parses one file, renames its policies after their `@id`, and validates them against the
/// schema. Errors are rendered `file:line:col: message`.
pub(crate) fn parse_file(
    schema: &Schema,
    file: &str,
    text: &str,
) -> Result<PolicySet, PolicyFileProblems> {
    let parsed: PolicySet = text
        .parse()
        .map_err(|e| PolicyFileProblems(render(file, text, &e)))?;
    let mut renamed = PolicySet::new();
    let mut problems = String::new();
    // The parser numbers policies `policy0`, `policy1`, … in file order.
    let mut policies: Vec<_> = parsed.policies().collect();
    policies.sort_by_key(|p| {
        p.id()
            .to_string()
            .trim_start_matches("policy")
            .parse::<usize>()
            .unwrap_or(usize::MAX)
    });
    for (index, policy) in policies.into_iter().enumerate() {
        let Some(id) = policy.annotation("id") else {
            let head: String = policy.to_string().chars().take(60).collect();
            let _ = writeln!(
                problems,
                "{file}: policy {} (`{}…`) has no @id; add @id(\"a-name\") above it so decisions can name it",
                index + 1,
                head.replace('\n', " ")
            );
            continue;
        };
        let policy = policy.new_id(PolicyId::new(id));
        if let Err(e) = renamed.add(policy) {
            let _ = writeln!(problems, "{file}: {e}; give each policy its own @id");
        }
    }
    if !problems.is_empty() {
        return Err(PolicyFileProblems(problems));
    }
    let result = Validator::new(schema.clone()).validate(&renamed, ValidationMode::Strict);
    for error in result.validation_errors() {
        problems.push_str(&render(file, text, error));
    }
    if problems.is_empty() {
        Ok(renamed)
    } else {
        Err(PolicyFileProblems(problems))
    }
}

/// Renders a Cedar diagnostic with the file, line and column of each labelled span.
fn render(file: &str, text: &str, diagnostic: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    let mut located = false;
    let mut help = diagnostic
        .help()
        .map(|h| format!(" (help: {h})"))
        .unwrap_or_default();
    if let Some(labels) = diagnostic.labels() {
        for label in labels {
            located = true;
            let _ = writeln!(
                out,
                "{file}{}: {diagnostic}{}{help}",
                line_col(text, label.offset()),
                label.label().map(|l| format!(" [{l}]")).unwrap_or_default()
            );
            help.clear();
        }
    }
    if let Some(related) = diagnostic.related() {
        for inner in related {
            located = true;
            out.push_str(&render(file, text, inner));
        }
    }
    if !located {
        let _ = writeln!(out, "{file}: {diagnostic}{help}");
    }
    out
}

fn line_col(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!(":{line}:{col}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_validate_and_are_named_by_their_id() {
        let policies = Policies::builtin().expect("built-in policies must validate");
        for id in [
            "explicit-grant-push",
            "yolo-push",
            "bundle-ceiling",
            "protect-default-branch",
            "immutable-tags",
            "only-branches-and-tags",
            "workflow-allowance",
            "require-configured-target",
            "require-writer-installed",
            "token-grant-write-token",
        ] {
            assert!(
                policies.set.policy(&PolicyId::new(id)).is_some(),
                "missing {id}"
            );
        }
    }

    #[test]
    fn operator_policy_that_fails_validation_refuses_with_location() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mine.cedar"),
            "// mine\n@id(\"typo\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen { context.bundle_byts > 10 };\n",
        )
        .unwrap();
        let err = Policies::load(Some(dir.path())).err().expect("must refuse");
        let text = err.to_string();
        assert!(text.contains("mine.cedar:4:"), "{text}");
        assert!(text.contains("bundle_byts"), "{text}");
        assert!(text.contains("refusing to start"), "{text}");
    }

    #[test]
    fn operator_policy_that_does_not_parse_or_lacks_id_refuses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.cedar"),
            "permit (principal, action, resource);\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.cedar"),
            "@id(\"x\")\npermit (principal, action resource);\n",
        )
        .unwrap();
        let text = Policies::load(Some(dir.path())).err().unwrap().to_string();
        assert!(text.contains("a.cedar: policy 1 (`permit"), "{text}");
        assert!(text.contains("has no @id"), "{text}");
        assert!(text.contains("b.cedar:2:"), "{text}");
    }

    #[test]
    fn duplicate_ids_refuse() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dup.cedar"),
            "@id(\"bundle-ceiling\")\nforbid (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes > 1 };\n",
        )
        .unwrap();
        let text = Policies::load(Some(dir.path())).err().unwrap().to_string();
        assert!(
            text.contains("already used in builtin:ceiling.cedar"),
            "{text}"
        );
    }

    #[test]
    fn a_valid_operator_policy_is_added() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ceiling.cedar"),
            "@id(\"small-bundles\")\nforbid (principal, action == Zodex::Action::\"Push\", resource) when { context.bundle_bytes > 1048576 };\n",
        )
        .unwrap();
        let policies = Policies::load(Some(dir.path())).unwrap();
        assert!(
            policies
                .set
                .policy(&PolicyId::new("small-bundles"))
                .is_some()
        );
    }
}
