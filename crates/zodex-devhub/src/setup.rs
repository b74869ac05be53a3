//! Describing a devhub on disk before (or while) it runs: Apps with their public keys,
//! repositories (real bare repositories with devhub's hook), and installations. Every change is
//! checked the way GitHub would check it (an installation holds at most its App's permissions).

use super::error::DevHubError;
use super::git::Git;
use super::model::{App, Description, Installation, Repo, RepositorySelection};
use super::perms::{Level, Permissions};
use std::path::{Path, PathBuf};

/// An open description of a devhub directory; [`Setup::save`] writes it back.
pub struct Setup {
    dir: PathBuf,
    git: Git,
    description: Description,
}

impl Setup {
    /// Opens `dir` (creating it), reading `devhub.json` if present, with `git` from `PATH`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, DevHubError> {
        Self::open_with_git(dir, "git")
    }

    pub fn open_with_git(
        dir: impl Into<PathBuf>,
        git: impl Into<PathBuf>,
    ) -> Result<Self, DevHubError> {
        let dir = dir.into();
        std::fs::create_dir_all(dir.join("repos"))
            .map_err(super::error::io(format!("cannot create {}", dir.display())))?;
        let description = Description::load(&dir)?;
        Ok(Self {
            dir,
            git: Git::new(git),
            description,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn description(&self) -> &Description {
        &self.description
    }

    /// The bare repository of `owner/name`.
    pub fn repo_path(&self, owner: &str, name: &str) -> PathBuf {
        repo_path(&self.dir, owner, name)
    }

    /// Registers an App by its public key; returns its id. Its permissions are the most any of
    /// its installations may hold (`metadata: read` is always added, as on GitHub).
    pub fn add_app(
        &mut self,
        slug: &str,
        public_key_pem: &str,
        permissions: Permissions,
    ) -> Result<u64, DevHubError> {
        check_name(slug, "App slug")?;
        if self.description.app_by_slug(slug).is_some() {
            return Err(DevHubError::Invalid(format!(
                "an App with slug `{slug}` already exists; choose another slug"
            )));
        }
        jsonwebtoken::DecodingKey::from_rsa_pem(public_key_pem.as_bytes()).map_err(|e| {
            DevHubError::Invalid(format!(
                "the public key of App `{slug}` is not an RSA PEM ({e}); pass the `public_pem` of keys::generate_key_pair"
            ))
        })?;
        let id = self.description.take_id();
        self.description.apps.push(App {
            id,
            slug: slug.to_string(),
            name: slug.to_string(),
            owner: "zodex".to_string(),
            public_key_pem: public_key_pem.to_string(),
            permissions: with_metadata(permissions),
            created_at: chrono::Utc::now(),
        });
        Ok(id)
    }

    /// Creates `owner/name` as a bare repository (HEAD → `default_branch`, no commits yet).
    pub fn add_repo(
        &mut self,
        owner: &str,
        name: &str,
        default_branch: &str,
        private: bool,
    ) -> Result<u64, DevHubError> {
        check_name(owner, "owner")?;
        check_name(name, "repository name")?;
        if self.description.repo(owner, name).is_some() {
            return Err(DevHubError::Invalid(format!(
                "repository {owner}/{name} already exists"
            )));
        }
        self.git
            .init_bare(&self.repo_path(owner, name), default_branch)?;
        let id = self.description.take_id();
        self.description.repos.push(Repo {
            id,
            owner: owner.to_string(),
            name: name.to_string(),
            default_branch: default_branch.to_string(),
            private,
            created_at: chrono::Utc::now(),
        });
        Ok(id)
    }

    /// Installs an App on `account`: on the named repositories, or on all of the account's
    /// (`repositories: None`). Returns the installation id.
    pub fn install(
        &mut self,
        app_id: u64,
        account: &str,
        repositories: Option<&[&str]>,
        permissions: Permissions,
    ) -> Result<u64, DevHubError> {
        let app = self.description.app(app_id).ok_or_else(|| {
            DevHubError::Invalid(format!(
                "no App with id {app_id}; add it with Setup::add_app"
            ))
        })?;
        let permissions = with_metadata(permissions);
        if !permissions.is_subset_of(&app.permissions) {
            return Err(DevHubError::Invalid(format!(
                "App `{}` does not request all of {:?}; an installation holds at most its App's permissions",
                app.slug, permissions.0
            )));
        }
        if self
            .description
            .installations
            .iter()
            .any(|i| i.app_id == app_id && i.account.eq_ignore_ascii_case(account))
        {
            return Err(DevHubError::Invalid(format!(
                "App `{}` is already installed on `{account}`",
                app.slug
            )));
        }
        let (selection, names) = match repositories {
            None => (RepositorySelection::All, Vec::new()),
            Some(names) => {
                for name in names {
                    if self.description.repo(account, name).is_none() {
                        return Err(DevHubError::Invalid(format!(
                            "repository {account}/{name} does not exist; add it with Setup::add_repo first"
                        )));
                    }
                }
                (
                    RepositorySelection::Selected,
                    names.iter().map(|n| n.to_string()).collect(),
                )
            }
        };
        let id = self.description.take_id();
        self.description.installations.push(Installation {
            id,
            app_id,
            account: account.to_string(),
            repository_selection: selection,
            repositories: names,
            permissions,
            created_at: chrono::Utc::now(),
        });
        Ok(id)
    }

    pub fn save(&self) -> Result<(), DevHubError> {
        self.description.save(&self.dir)
    }
}

pub(crate) fn repo_path(dir: &Path, owner: &str, name: &str) -> PathBuf {
    dir.join("repos").join(owner).join(format!("{name}.git"))
}

fn with_metadata(mut permissions: Permissions) -> Permissions {
    permissions
        .0
        .entry("metadata".to_string())
        .or_insert(Level::Read);
    permissions
}

/// GitHub's names: letters, digits, `-`, `_`, `.`; not `.`/`..`; no `.git` suffix.
fn check_name(name: &str, what: &str) -> Result<(), DevHubError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name != "."
        && name != ".."
        && !name.ends_with(".git")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(DevHubError::Invalid(format!(
            "invalid {what} `{name}`: use letters, digits, `-`, `_` or `.` (at most 100, no `.git` suffix)"
        )))
    }
}
