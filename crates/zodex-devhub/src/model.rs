//! The on-disk description of a devhub (`<dir>/devhub.json`): Apps (public keys only),
//! installations, repositories and pull requests. Unknown keys are refused so a typo never
//! silently drops an installation.

use super::error::{DescriptionProblem, DevHubError, io};
use super::perms::Permissions;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const DESCRIPTION_FILE: &str = "devhub.json";

/// A GitHub App as devhub knows it: its id, slug and the public half of its key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct App {
    pub id: u64,
    pub slug: String,
    pub name: String,
    /// The account that owns the App.
    pub owner: String,
    /// RS256 verification key: SPKI (`BEGIN PUBLIC KEY`) or PKCS#1 (`BEGIN RSA PUBLIC KEY`).
    pub public_key_pem: String,
    /// The most an installation of this App may hold.
    pub permissions: Permissions,
    pub created_at: DateTime<Utc>,
}

impl App {
    /// The login of the App's bot user, as GitHub shows it in commits and errors.
    pub fn bot_login(&self) -> String {
        format!("{}[bot]", self.slug)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RepositorySelection {
    All,
    Selected,
}

impl RepositorySelection {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Selected => "selected",
        }
    }
}

/// An App installed on an account, for all its repositories or selected ones.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Installation {
    pub id: u64,
    pub app_id: u64,
    pub account: String,
    pub repository_selection: RepositorySelection,
    /// Repository names within `account` (only for `selected`).
    #[serde(default)]
    pub repositories: Vec<String>,
    pub permissions: Permissions,
    pub created_at: DateTime<Utc>,
}

impl Installation {
    /// Whether this installation covers `owner/name`.
    pub fn covers(&self, repo: &Repo) -> bool {
        repo.owner.eq_ignore_ascii_case(&self.account)
            && match self.repository_selection {
                RepositorySelection::All => true,
                RepositorySelection::Selected => self
                    .repositories
                    .iter()
                    .any(|name| name.eq_ignore_ascii_case(&repo.name)),
            }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Repo {
    pub id: u64,
    pub owner: String,
    pub name: String,
    pub default_branch: String,
    pub private: bool,
    pub created_at: DateTime<Utc>,
}

impl Repo {
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    pub fn is(&self, owner: &str, name: &str) -> bool {
        self.owner.eq_ignore_ascii_case(owner) && self.name.eq_ignore_ascii_case(name)
    }

    /// The bare repository's path below the repositories root.
    pub fn relative_path(&self) -> PathBuf {
        PathBuf::from(&self.owner).join(format!("{}.git", self.name))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PullRecord {
    pub id: u64,
    pub repo_id: u64,
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    /// Branch names (without `refs/heads/`).
    pub head: String,
    pub base: String,
    pub head_sha: String,
    pub base_sha: String,
    pub open: bool,
    pub draft: bool,
    /// Login of the author (an App's bot).
    pub user: String,
    pub commits: u64,
    pub additions: u64,
    pub deletions: u64,
    pub changed_files: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub closed_at: Option<DateTime<Utc>>,
}

/// Everything devhub knows that is not inside a git repository.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Description {
    #[serde(default)]
    pub apps: Vec<App>,
    #[serde(default)]
    pub installations: Vec<Installation>,
    #[serde(default)]
    pub repos: Vec<Repo>,
    #[serde(default)]
    pub pulls: Vec<PullRecord>,
    /// One counter for every id, so an App id is never also an installation id.
    pub next_id: u64,
}

impl Default for Description {
    fn default() -> Self {
        Self {
            apps: Vec::new(),
            installations: Vec::new(),
            repos: Vec::new(),
            pulls: Vec::new(),
            next_id: 1001,
        }
    }
}

impl Description {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(DESCRIPTION_FILE)
    }

    /// Reads `<dir>/devhub.json`; a missing file is an empty description.
    pub fn load(dir: &Path) -> Result<Self, DevHubError> {
        let path = Self::path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(io(format!("cannot read {}", path.display()))(e)),
        };
        let description: Self =
            serde_json::from_str(&text).map_err(|e| DevHubError::Description {
                path: path.clone(),
                problem: e.into(),
            })?;
        description
            .validate()
            .map_err(|problem| DevHubError::Description { path, problem })?;
        Ok(description)
    }

    /// Writes atomically (temporary file, then rename).
    pub fn save(&self, dir: &Path) -> Result<(), DevHubError> {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let path = Self::path(dir);
        let text = serde_json::to_string_pretty(self).expect("the description always serialises");
        let tmp = dir.join(format!(".{DESCRIPTION_FILE}.tmp"));
        std::fs::write(&tmp, text).map_err(io(format!("cannot write {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(io(format!("cannot replace {}", path.display())))
    }

    fn validate(&self) -> Result<(), DescriptionProblem> {
        for installation in &self.installations {
            if self.app(installation.app_id).is_none() {
                return Err(DescriptionProblem::UnknownApp {
                    installation: installation.id,
                    app: installation.app_id,
                });
            }
        }
        for pull in &self.pulls {
            if !self.repos.iter().any(|r| r.id == pull.repo_id) {
                return Err(DescriptionProblem::UnknownRepo(pull.id));
            }
        }
        Ok(())
    }

    pub fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn app(&self, id: u64) -> Option<&App> {
        self.apps.iter().find(|a| a.id == id)
    }

    pub fn app_by_slug(&self, slug: &str) -> Option<&App> {
        self.apps.iter().find(|a| a.slug == slug)
    }

    pub fn installation(&self, id: u64) -> Option<&Installation> {
        self.installations.iter().find(|i| i.id == id)
    }

    pub fn repo(&self, owner: &str, name: &str) -> Option<&Repo> {
        self.repos.iter().find(|r| r.is(owner, name))
    }

    pub fn repo_by_id(&self, id: u64) -> Option<&Repo> {
        self.repos.iter().find(|r| r.id == id)
    }

    /// The installation of `app_id` that covers `repo`, if the App is installed there.
    pub fn installation_for(&self, app_id: u64, repo: &Repo) -> Option<&Installation> {
        self.installations
            .iter()
            .find(|i| i.app_id == app_id && i.covers(repo))
    }

    /// Every repository an installation covers, in id order.
    pub fn repos_of(&self, installation: &Installation) -> Vec<&Repo> {
        let mut repos: Vec<&Repo> = self
            .repos
            .iter()
            .filter(|r| installation.covers(r))
            .collect();
        repos.sort_by_key(|r| r.id);
        repos
    }
}
