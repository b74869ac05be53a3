//! The agent's side of a sprite: every process here runs as the agent user.

use super::super::routines::{self, Routine};
use super::super::users::run_as;
use super::{Sprite, chown, search_path};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

// The agent's side: every process here runs as the agent user.
impl Sprite {
    /// A command as the agent: its uid, its groups, its HOME, a clean environment, our `bin/`
    /// first on PATH and this sprite's configuration in `ZODEX_CONFIG`.
    pub fn as_agent(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", search_path(&self.bin))
            .env("HOME", &self.agent_home)
            .env("LANG", "C.UTF-8")
            .env("ZODEX_CONFIG", &self.config)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Agent")
            .env("GIT_AUTHOR_EMAIL", "agent@zodex.invalid")
            .env("GIT_COMMITTER_NAME", "Agent")
            .env("GIT_COMMITTER_EMAIL", "agent@zodex.invalid")
            .stdin(Stdio::null());
        run_as(&mut cmd, &self.users.agent, &[self.users.gid]);
        cmd
    }

    /// git as the agent runs it: the credential helper for reads, pushes rewritten to
    /// `zodex::` so git runs `git-remote-zodex`.
    pub fn agent_git_command(&self, dir: &Path) -> Command {
        let helper = format!(
            "!{} credential --config {}",
            self.bin.join("zodex-agent").display(),
            self.config.display()
        );
        let base = self.demo().hub.git_url();
        let mut cmd = self.as_agent("git", dir);
        cmd.args(["-c", "credential.helper="])
            .args(["-c", &format!("credential.helper={helper}")])
            .args(["-c", "credential.useHttpPath=true"])
            .args(["-c", &format!("url.zodex::{base}/.pushInsteadOf={base}/")]);
        cmd
    }

    pub fn agent_git(&self, dir: &Path, args: &[&str]) -> Output {
        self.agent_git_command(dir).args(args).output().unwrap()
    }

    #[track_caller]
    pub fn agent_git_ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.agent_git(dir, args);
        assert!(
            out.status.success(),
            "agent: git {args:?} failed: {}\nzodex-prd: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Clones `demo/<repo>` as the agent into its work directory.
    pub fn clone(&self, repo: &str) -> PathBuf {
        let url = format!("{}/demo/{repo}.git", self.demo().hub.git_url());
        self.agent_git_ok(&self.work, &["clone", "--quiet", &url, repo]);
        self.work.join(repo)
    }

    /// Writes `path` in the agent's checkout `dir` (owned by the agent) and commits it.
    pub fn agent_commit(&self, dir: &Path, path: &str, content: &[u8], message: &str) -> String {
        let file = dir.join(path);
        let mut missing = Vec::new();
        let mut parent = file.parent();
        while let Some(p) = parent.filter(|p| !p.exists()) {
            missing.push(p.to_path_buf());
            parent = p.parent();
        }
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, content).unwrap();
        for p in missing.iter().chain(std::iter::once(&file)) {
            chown(p, Some(&self.users.agent), None);
        }
        self.agent_git_ok(dir, &["add", path]);
        self.agent_git_ok(dir, &["commit", "--quiet", "-m", message]);
        self.agent_git_ok(dir, &["rev-parse", "HEAD"])
            .trim()
            .to_string()
    }

    /// `zodex-agent ARGS` as the agent (its configuration from `ZODEX_CONFIG`).
    pub fn agent_cli(&self, args: &[&str]) -> Output {
        self.as_agent(self.bin.join("zodex-agent"), &self.work)
            .args(args)
            .output()
            .unwrap()
    }

    /// A file the agent owns in its work directory.
    pub fn agent_file(&self, name: &str, content: &[u8]) -> PathBuf {
        let path = self.work.join(name);
        std::fs::write(&path, content).unwrap();
        chown(&path, Some(&self.users.agent), None);
        path
    }

    /// Sends raw frames on the agent socket as the agent; one answer per frame.
    pub fn frames(&self, frames: Vec<routines::Frame>) -> Vec<Value> {
        let answer = self.routine(&Routine::Frames {
            socket: self.agent_socket(),
            frames,
        });
        answer.as_array().unwrap().clone()
    }

    /// Warms the daemon's own read token and mirror for `demo/<repo>`, so that a later
    /// snapshot of live tokens is stable.
    pub fn warm(&self, repo: &str) {
        let answer = self.frames(vec![routines::Frame::request(
            &json!({"op": "list_refs", "repo": format!("demo/{repo}")}),
        )]);
        assert_eq!(answer[0]["ok"], true, "{answer:?}\n{}", self.log());
    }

    /// Runs `routine` as the agent and returns its result.
    pub fn routine(&self, routine: &Routine) -> Value {
        let out = routines::command(self, routine).output().unwrap();
        routines::result(&out).unwrap_or_else(|| {
            panic!(
                "routine {routine:?} gave no result: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Starts `routine` as the agent in the background and waits until it says it is ready;
    /// it is killed when the sprite goes (or by [`Sprite::stop`]).
    pub fn spawn_routine(
        &self,
        routine: &Routine,
    ) -> (u32, std::io::BufReader<std::process::ChildStdout>) {
        let mut child = routines::command(self, routine)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let pid = self.adopt(child);
        routines::wait_ready(&mut out, routine);
        (pid, out)
    }

    /// Kills one background process this sprite started, by its id.
    pub fn stop(&self, pid: u32) {
        let mut children = self.background.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(child) = children.iter_mut().find(|c| c.id() == pid) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
