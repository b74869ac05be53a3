//! Configured targets: the repositories (or whole owners) this sprite may ever write to. Half of
//! write coverage; the other half is the writer App's installation, which the publisher checks
//! at GitHub. The default branch is never configured here: it is GitHub's (see `decide.rs`).

use super::repo::{RepoName, RepoNameError, validate_owner};
use serde::{Deserialize, Serialize};

/// One `[[targets]]` entry of the configuration: exactly one of `repo` or `owner`.
// Serde for `zodex.toml`, not the wire: `zodex-config` reads it, the installer and `zodex dev` write it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Accepted so that existing configurations load, and ignored: the default branch is
    /// GitHub's, learnt with coverage, for decisions and pull request bases alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// A lower-cased `owner/name`.
    Repo(String),
    /// A lower-cased owner: every repository of theirs.
    Owner(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pattern: Pattern,
}

/// Why a `[[targets]]` entry of the configuration was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("[[targets]] repo: {0}")]
    Repo(#[from] RepoNameError),
    #[error("[[targets]] owner `{owner}`: {reason}")]
    Owner { owner: String, reason: &'static str },
    #[error(
        "each [[targets]] entry needs exactly one of `repo = \"owner/name\"` or `owner = \"owner\"`"
    )]
    RepoOrOwner,
}

/// The validated list of targets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets(Vec<Target>);

impl Targets {
    pub fn from_specs(specs: &[TargetSpec]) -> Result<Self, TargetError> {
        specs
            .iter()
            .map(|spec| {
                let pattern = match (&spec.repo, &spec.owner) {
                    (Some(repo), None) => Pattern::Repo(RepoName::parse(repo)?.key()),
                    (None, Some(owner)) => {
                        validate_owner(owner).map_err(|reason| TargetError::Owner {
                            owner: owner.clone(),
                            reason,
                        })?;
                        Pattern::Owner(owner.to_ascii_lowercase())
                    }
                    _ => return Err(TargetError::RepoOrOwner),
                };
                Ok(Target { pattern })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// The target covering `repo`: an entry naming the repository wins over one naming its owner.
    pub fn lookup(&self, repo: &RepoName) -> Option<&Target> {
        let key = repo.key();
        let owner = repo.owner().to_ascii_lowercase();
        self.0
            .iter()
            .find(|t| t.pattern == Pattern::Repo(key.clone()))
            .or_else(|| {
                self.0
                    .iter()
                    .find(|t| t.pattern == Pattern::Owner(owner.clone()))
            })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(repo: Option<&str>, owner: Option<&str>, branch: Option<&str>) -> TargetSpec {
        TargetSpec {
            repo: repo.map(Into::into),
            owner: owner.map(Into::into),
            default_branch: branch.map(Into::into),
        }
    }

    #[test]
    fn repo_entry_wins_over_owner_and_case_is_folded() {
        let targets = Targets::from_specs(&[
            spec(None, Some("Acme"), Some("main")),
            spec(Some("acme/legacy"), None, Some("master")),
        ])
        .unwrap();
        let legacy = RepoName::parse("ACME/Legacy").unwrap();
        assert_eq!(
            targets.lookup(&legacy).unwrap().pattern,
            Pattern::Repo("acme/legacy".into())
        );
        let other = RepoName::parse("acme/x").unwrap();
        assert_eq!(
            targets.lookup(&other).unwrap().pattern,
            Pattern::Owner("acme".into())
        );
        assert!(
            targets
                .lookup(&RepoName::parse("evil/x").unwrap())
                .is_none()
        );
    }

    #[test]
    fn malformed_entries_are_refused() {
        assert!(Targets::from_specs(&[spec(None, None, None)]).is_err());
        assert!(Targets::from_specs(&[spec(Some("a/b"), Some("a"), None)]).is_err());
        assert!(Targets::from_specs(&[spec(Some("a/b/c"), None, None)]).is_err());
        assert!(Targets::from_specs(&[spec(None, Some("-bad"), None)]).is_err());
    }
}
