//! The git side of devhub: running `git` against the bare repositories, the pre-receive hook
//! that enforces the `workflows` permission, and git smart HTTP through `git http-backend`.

mod cgi;
pub mod hook;
pub mod http;

use super::error::DevHubError;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs one `git` binary with a clean, deterministic environment: no system or global
/// configuration, no inherited `GIT_*` variables.
#[derive(Debug, Clone)]
pub struct Git {
    bin: PathBuf,
}

/// The variables a `git` child must not inherit from whoever started devhub.
const INHERITED_GIT_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_QUARANTINE_PATH",
];

impl Git {
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Self { bin: bin.into() }
    }

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// A command in `dir` with the clean environment applied.
    pub fn command(&self, dir: &Path) -> Command {
        let mut command = Command::new(&self.bin);
        command.current_dir(dir);
        for var in INHERITED_GIT_VARS {
            command.env_remove(var);
        }
        command
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0");
        command
    }

    /// Runs `git args…` in `dir`; stdout on success, a [`DevHubError::Git`] otherwise.
    pub fn run<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> Result<String, DevHubError> {
        let mut command = self.command(dir);
        command.args(args).stdin(Stdio::null());
        let output = command.output().map_err(|e| DevHubError::Git {
            command: self.describe(args),
            status: "not started".into(),
            stderr: e.to_string(),
        })?;
        if !output.status.success() {
            return Err(DevHubError::Git {
                command: self.describe(args),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// [`Git::run`] off the async runtime's worker threads.
    pub async fn run_async(&self, dir: PathBuf, args: Vec<String>) -> Result<String, DevHubError> {
        let git = self.clone();
        tokio::task::spawn_blocking(move || git.run(&dir, &args))
            .await
            .unwrap_or_else(|e| Err(DevHubError::Invalid(format!("git task failed: {e}"))))
    }

    fn describe<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let mut text = self.bin.display().to_string();
        for arg in args {
            text.push(' ');
            text.push_str(&arg.as_ref().to_string_lossy());
        }
        text
    }

    /// Creates a bare repository with `default_branch` as HEAD, GitHub-like server settings and
    /// devhub's pre-receive hook.
    pub fn init_bare(&self, path: &Path, default_branch: &str) -> Result<(), DevHubError> {
        std::fs::create_dir_all(path).map_err(super::error::io(format!(
            "cannot create {}",
            path.display()
        )))?;
        self.run(path, &["init", "--quiet", "--bare"])?;
        self.run(
            path,
            &[
                "symbolic-ref",
                "HEAD",
                &format!("refs/heads/{default_branch}"),
            ],
        )?;
        for (key, value) in [
            ("receive.denyDeleteCurrent", "refuse"),
            ("receive.fsckObjects", "true"),
            ("uploadpack.allowFilter", "true"),
            ("uploadpack.allowReachableSHA1InWant", "true"),
            // As GitHub: any object of the repository is served by id — a partial clone's
            // lazy fetch of a tree or blob relies on it (v0's reachability check, which
            // stateless HTTP runs with `rev-list` on commits only, refuses a subtree).
            ("uploadpack.allowAnySHA1InWant", "true"),
            ("core.logAllRefUpdates", "false"),
        ] {
            self.run(path, &["config", key, value])?;
        }
        hook::install(path)
    }

    /// The commit a branch points at, if the branch exists.
    pub fn branch_sha(&self, repo: &Path, branch: &str) -> Option<String> {
        self.run(
            repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}^{{commit}}"),
            ],
        )
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
    }
}
