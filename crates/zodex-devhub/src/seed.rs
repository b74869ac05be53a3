//! The demo world for `zodex dev up` and tests: `demo/app` (default branch `main`, a README and
//! three commits made with real git), `demo/lib` and `demo/other`, all private; a reader App
//! installed on all three with `contents: read`, and a writer App installed on `demo/app` and
//! `demo/lib` (not `demo/other`) with `contents`, `pull_requests` and `workflows` write. Commit dates are fixed, so the demo's
//! commit ids are the same on every machine.

use super::error::{DevHubError, io};
use super::git::Git;
use super::perms::{Level, Permissions};
use super::server::DevHub;
use super::setup::Setup;
use std::path::Path;

pub const DEMO_OWNER: &str = "demo";
pub const DEMO_REPO: &str = "app";
pub const DEMO_OTHER: &str = "other";
pub const DEMO_LIB: &str = "lib";
pub const READER_SLUG: &str = "zodex-reader";
pub const WRITER_SLUG: &str = "zodex-writer";

/// The ids `seed_demo` created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DemoSeed {
    pub reader_app_id: u64,
    pub writer_app_id: u64,
    pub reader_installation_id: u64,
    pub writer_installation_id: u64,
    pub app_repo_id: u64,
    pub other_repo_id: u64,
    #[serde(default)]
    pub lib_repo_id: u64,
}

impl DevHub {
    /// Seeds a fresh devhub directory with the demo world (see the module doc). Refuses a
    /// directory that already has `demo/app`.
    pub fn seed_demo(
        dir: &Path,
        reader_app_pubkey: &str,
        writer_app_pubkey: &str,
    ) -> Result<DemoSeed, DevHubError> {
        Self::seed_demo_with_git(dir, reader_app_pubkey, writer_app_pubkey, "git")
    }

    pub fn seed_demo_with_git(
        dir: &Path,
        reader_app_pubkey: &str,
        writer_app_pubkey: &str,
        git: &str,
    ) -> Result<DemoSeed, DevHubError> {
        let mut setup = Setup::open_with_git(dir, git)?;
        if setup.description().repo(DEMO_OWNER, DEMO_REPO).is_some() {
            return Err(DevHubError::Invalid(format!(
                "{} is already seeded; remove it to start again",
                dir.display()
            )));
        }
        let reader_app_id = setup.add_app(
            READER_SLUG,
            reader_app_pubkey,
            Permissions::new().with("contents", Level::Read),
        )?;
        let writer_app_id = setup.add_app(
            WRITER_SLUG,
            writer_app_pubkey,
            Permissions::new()
                .with("contents", Level::Write)
                .with("pull_requests", Level::Write)
                .with("workflows", Level::Write),
        )?;
        let app_repo_id = setup.add_repo(DEMO_OWNER, DEMO_REPO, "main", true)?;
        let other_repo_id = setup.add_repo(DEMO_OWNER, DEMO_OTHER, "main", true)?;
        let lib_repo_id = setup.add_repo(DEMO_OWNER, DEMO_LIB, "main", true)?;
        let git = Git::new(git);
        write_history(
            &git,
            &setup.repo_path(DEMO_OWNER, DEMO_REPO),
            &[
                (
                    "README.md",
                    "# demo/app\n\nA repository to try Zodex on.\n",
                    "Initial commit",
                ),
                ("src/hello.txt", "hello\n", "Add a greeting"),
                (
                    "README.md",
                    "# demo/app\n\nA repository to try Zodex on.\n\nClone it, change it, publish a pull request.\n",
                    "Explain what to try",
                ),
            ],
        )?;
        write_history(
            &git,
            &setup.repo_path(DEMO_OWNER, DEMO_OTHER),
            &[(
                "README.md",
                "# demo/other\n\nThe writer App is not installed here.\n",
                "Initial commit",
            )],
        )?;
        let reader_installation_id = setup.install(
            reader_app_id,
            DEMO_OWNER,
            Some(&[DEMO_REPO, DEMO_OTHER, DEMO_LIB]),
            Permissions::new().with("contents", Level::Read),
        )?;
        let writer_installation_id = setup.install(
            writer_app_id,
            DEMO_OWNER,
            Some(&[DEMO_REPO, DEMO_LIB]),
            Permissions::new()
                .with("contents", Level::Write)
                .with("pull_requests", Level::Write)
                .with("workflows", Level::Write),
        )?;
        setup.save()?;
        Ok(DemoSeed {
            reader_app_id,
            writer_app_id,
            reader_installation_id,
            writer_installation_id,
            app_repo_id,
            other_repo_id,
            lib_repo_id,
        })
    }
}

/// Makes one commit per `(path, content, message)` in a scratch clone and pushes `main` to the
/// bare repository.
fn write_history(
    git: &Git,
    bare: &Path,
    commits: &[(&str, &str, &str)],
) -> Result<(), DevHubError> {
    let work = tempfile::tempdir().map_err(io("cannot create a scratch directory"))?;
    let dir = work.path();
    git.run(dir, &["init", "--quiet", "-b", "main"])?;
    for (n, (path, content, message)) in commits.iter().enumerate() {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
        }
        std::fs::write(&file, content).map_err(io(format!("cannot write {}", file.display())))?;
        git.run(dir, &["add", path])?;
        let date = format!("2026-01-01T{:02}:00:00Z", 9 + n);
        let mut command = git.command(dir);
        command
            .args(["commit", "--quiet", "-m", message])
            .env("GIT_AUTHOR_NAME", "Zodex Demo")
            .env("GIT_AUTHOR_EMAIL", "demo@zodex.invalid")
            .env("GIT_COMMITTER_NAME", "Zodex Demo")
            .env("GIT_COMMITTER_EMAIL", "demo@zodex.invalid")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date);
        let output = command.output().map_err(io("cannot run git commit"))?;
        if !output.status.success() {
            return Err(DevHubError::Git {
                command: "git commit".into(),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
    }
    let bare = bare.display().to_string();
    git.run(dir, &["push", "--quiet", &bare, "main:refs/heads/main"])?;
    Ok(())
}
