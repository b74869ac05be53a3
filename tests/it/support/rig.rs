//! A devhub and a real `zodex-prd serve` configured with its URLs and App keys: the rig the
//! credential-helper and publishing tests share.

use super::devhub::{Demo, keys};
use super::wait::eventually_with;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub const AGENT: &str = env!("CARGO_BIN_EXE_zodex-agent");
pub const PRD: &str = env!("CARGO_BIN_EXE_zodex-prd");
pub const REMOTE_HELPER: &str = env!("CARGO_BIN_EXE_git-remote-zodex");
pub const CREDENTIAL_HELPER: &str = env!("CARGO_BIN_EXE_git-credential-zodex");
/// What zodex-prd logs once both its sockets are bound.
const SERVING: &str = "zodex-prd serving";

/// A devhub and a `zodex-prd` serving it; the daemon is killed when dropped.
pub struct Rig {
    pub demo: Demo,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// Where the publisher and the agent's git reach devhub.
    pub reach: Reach,
    prd: Child,
}

/// Where the publisher and the agent's git reach GitHub: devhub itself, or something in front
/// of it (the far-GitHub benches put a delaying relay and TLS there, `benches/support/`).
#[derive(Debug, Clone)]
pub struct Reach {
    /// `[github] api_url`.
    pub api_url: String,
    /// `[github] git_url`, and the base of the agent's clones.
    pub git_url: String,
    /// Set on zodex-prd and on the agent's git (a CA to trust, say): what a process needs to
    /// reach `api_url` and `git_url`.
    pub env: Vec<(String, std::ffi::OsString)>,
}

impl Reach {
    /// devhub itself, over plain HTTP on loopback.
    pub fn direct(demo: &Demo) -> Self {
        Self {
            api_url: demo.hub.api_url().to_string(),
            git_url: demo.hub.git_url().to_string(),
            env: Vec::new(),
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.prd.kill();
        let _ = self.prd.wait();
    }
}

impl Rig {
    pub fn start(token_ttl: Duration) -> Self {
        Self::start_with(token_ttl, "")
    }

    /// Like [`Rig::start`], with `extra` top-level settings in `zodex.toml` (e.g. a policy_dir).
    pub fn start_with(token_ttl: Duration, extra: &str) -> Self {
        let demo = Demo::start_with(|c| c.with_token_ttl(token_ttl));
        let reach = Reach::direct(&demo);
        Self::start_on(demo, reach, extra)
    }

    /// A `zodex-prd` for `demo` that reaches it as `reach` says, with `extra` top-level
    /// settings in `zodex.toml`.
    pub fn start_on(demo: Demo, reach: Reach, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config_for(&demo, &reach, dir.path(), extra);
        let prd = spawn_prd(dir.path(), &config, &reach);
        let mut rig = Self {
            demo,
            dir,
            config,
            reach,
            prd,
        };
        rig.wait_ready(0);
        rig
    }

    /// Moves zodex-prd's clock `seconds` ahead (a test build reads `test_clock_file` at every
    /// decision): what a TTL test does instead of sleeping through the TTL.
    pub fn advance(&self, seconds: i64) {
        super::clock::advance(&self.dir.path().join("clock-offset"), seconds);
    }

    /// zodex-prd's process id.
    pub fn prd_pid(&self) -> u32 {
        self.prd.id()
    }

    /// Kills zodex-prd with SIGKILL (no clean-up of any kind).
    pub fn kill9(&mut self) {
        let _ = self.prd.kill();
        let _ = self.prd.wait();
    }

    /// Starts zodex-prd again on the same configuration and state.
    pub fn restart(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(self.dir.path().join("agent.sock"));
        let earlier = self.log().matches(SERVING).count();
        self.prd = spawn_prd(self.dir.path(), &self.config, &self.reach);
        self.wait_ready(earlier);
    }

    /// Waits until zodex-prd says it serves (both sockets bound) for the `earlier + 1`th time
    /// in its log; fails at once when it exits instead. Nothing connects to see it: a probe
    /// from this process would hold one of its connection shares for a moment.
    fn wait_ready(&mut self, earlier: usize) {
        let log = self.dir.path().join("prd.log");
        let prd = &mut self.prd;
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        eventually_with("zodex-prd serves", Duration::from_secs(20), read, || {
            if let Ok(Some(status)) = prd.try_wait() {
                panic!("zodex-prd exited ({status}) before serving: {}", read());
            }
            read().matches(SERVING).count() > earlier
        });
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prd.log")).unwrap_or_default()
    }

    pub fn host(&self) -> String {
        let url = &self.reach.git_url;
        url.split_once("://")
            .map_or(url.as_str(), |(_, host)| host)
            .to_string()
    }

    /// Runs `zodex-agent credential OP` with `input` on stdin.
    pub fn helper(&self, op: &str, input: &str) -> Output {
        let mut cmd = Command::new(AGENT);
        cmd.args(["credential", "--config"])
            .arg(&self.config)
            .arg(op);
        with_input(&mut cmd, input)
    }

    /// `get` for `demo/<repo>`; returns (stdout, stderr).
    pub fn get(&self, repo: &str) -> (String, String) {
        let output = self.helper(
            "get",
            &format!(
                "capability[]=authtype\nprotocol=http\nhost={}\npath=demo/{repo}.git\n\n",
                self.host()
            ),
        );
        assert!(output.status.success());
        (
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }

    pub fn admin(&self, request: &str) -> serde_json::Value {
        let mut child = Command::new(PRD)
            .args(["admin", "--config"])
            .arg(&self.config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{request}\n").as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// git with only this helper, useHttpPath, and no prompt.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let helper = format!("!{AGENT} credential --config {}", self.config.display());
        super::devhub::git_command(dir)
            .envs(self.reach.env.iter().map(|(k, v)| (k, v)))
            .args(["-c", "credential.helper="])
            .args(["-c", &format!("credential.helper={helper}")])
            .args(["-c", "credential.useHttpPath=true"])
            .args(args)
            .output()
            .unwrap()
    }
}

impl Rig {
    /// git as the agent user runs it: the credential helper for fetches, pushes rewritten to
    /// `zodex::` (so git runs `git-remote-zodex`), the publisher's configuration in the
    /// environment.
    pub fn agent_git(&self, dir: &Path, args: &[&str]) -> Output {
        self.agent_git_command(dir).args(args).output().unwrap()
    }

    pub fn agent_git_command(&self, dir: &Path) -> Command {
        self.agent_git_command_as(dir, &self.config)
    }

    /// git as the agent runs it on a sprite whose configuration is `config` (a fleet sprite's,
    /// whose agent socket is its relay's), against this rig's GitHub.
    pub fn agent_git_command_as(&self, dir: &Path, config: &Path) -> Command {
        // As install sets it up: the small helper binary.
        let helper = format!("!{CREDENTIAL_HELPER} --config {}", config.display());
        let base = &self.reach.git_url;
        let bin = Path::new(REMOTE_HELPER).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = super::devhub::git_command(dir);
        cmd.env("PATH", path)
            .envs(self.reach.env.iter().map(|(k, v)| (k, v)))
            .env("ZODEX_CONFIG", config)
            .args(["-c", "credential.helper="])
            .args(["-c", &format!("credential.helper={helper}")])
            .args(["-c", "credential.useHttpPath=true"])
            .args(["-c", &format!("url.zodex::{base}/.pushInsteadOf={base}/")]);
        cmd
    }

    /// Clones `demo/<repo>` as the agent into `parent/<repo>`; returns the checkout.
    pub fn clone(&self, parent: &Path, repo: &str) -> PathBuf {
        let url = format!("{}/demo/{repo}.git", self.reach.git_url);
        let out = self.agent_git(parent, &["clone", "--quiet", &url, repo]);
        assert!(
            out.status.success(),
            "clone failed: {}\nzodex-prd: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        parent.join(repo)
    }

    /// `zodex-agent github …` with this rig's configuration.
    pub fn agent(&self, dir: &Path, args: &[&str]) -> Output {
        self.agent_command(dir, args).output().unwrap()
    }

    /// `zodex-agent github …` started in the background, its output captured.
    pub fn spawn_agent(&self, dir: &Path, args: &[&str]) -> Child {
        self.agent_command(dir, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn agent_command(&self, dir: &Path, args: &[&str]) -> Command {
        agent_command_as(dir, &self.config, args)
    }

    /// Waits (up to 60 s) until zodex-prd's log contains `needle`.
    pub fn wait_for_log(&self, needle: &str) {
        let what = format!("{needle:?} in the log");
        eventually_with(
            &what,
            Duration::from_secs(60),
            || self.log(),
            || self.log().contains(needle),
        );
    }

    /// A one-hour explicit grant on `repo`.
    pub fn grant_push(&self, repo: &str) {
        self.admin_ok(&format!(
            r#"{{"op":"grant_push","repo":"{repo}","ttl":{{"seconds":3600}}}}"#
        ));
    }

    /// devhub's bare repository `demo/<repo>`.
    pub fn bare(&self, repo: &str) -> PathBuf {
        self.demo
            .hub
            .dir()
            .join("repos/demo")
            .join(format!("{repo}.git"))
    }

    /// The branches of `demo/<repo>` at devhub, one full name per line.
    pub fn branches(&self, repo: &str) -> String {
        super::devhub::git_ok(
            &self.bare(repo),
            &["for-each-ref", "--format=%(refname)", "refs/heads"],
        )
        .trim()
        .to_string()
    }

    /// An admin request that must succeed.
    pub fn admin_ok(&self, request: &str) -> serde_json::Value {
        let answer = self.admin(request);
        assert_eq!(answer["ok"], true, "{request}: {answer}");
        answer
    }

    /// The SHA of `branch` at devhub (`None` when it does not exist).
    pub fn remote_sha(&self, repo: &str, refname: &str) -> Option<String> {
        let bare = self
            .demo
            .hub
            .dir()
            .join("repos/demo")
            .join(format!("{repo}.git"));
        let out = super::devhub::git_command(&bare)
            .args(["rev-parse", "--verify", "--quiet", refname])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Rig {
    /// The pull requests of `demo/<repo>` as devhub lists them (read with a writer token).
    pub fn pulls(&self, repo: &str) -> Vec<serde_json::Value> {
        let token = self.demo.token(
            super::devhub::AppKind::Writer,
            repo,
            serde_json::json!({"pull_requests": "write"}),
        );
        let reply = self.demo.api(
            "GET",
            &format!("/repos/demo/{repo}/pulls?state=all"),
            Some(&token),
            None,
        );
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        reply.body.as_array().cloned().unwrap_or_default()
    }
}

/// Writes the rig's `zodex.toml` into `dir` (with its App keys in `dir/keys`, mode 0600; state
/// in `dir/state`; both sockets in `dir`) for `demo`, with `extra` top-level settings; returns
/// its path. [`Rig::start_with`] serves it; a test of start-up can break its ground first.
pub fn write_config(demo: &Demo, dir: &Path, extra: &str) -> PathBuf {
    write_config_for(demo, &Reach::direct(demo), dir, extra)
}

/// [`write_config`] with the `[github]` URLs of `reach`.
fn write_config_for(demo: &Demo, reach: &Reach, dir: &Path, extra: &str) -> PathBuf {
    let [reader, writer, _] = keys();
    let reader_key = reader.write(&dir.join("keys"), "reader").unwrap();
    let writer_key = writer.write(&dir.join("keys"), "writer").unwrap();
    let uid = nix::unistd::getuid().as_raw();
    let d = dir.display();
    let config = dir.join("zodex.toml");
    std::fs::write(
        &config,
        format!(
            r#"state_dir = "{d}/state"
admin_socket = "{d}/admin.sock"
agent_socket = "{d}/agent.sock"
agent_uid = {uid}
operator_uids = [{uid}]
{clock}
{extra}

[[targets]]
owner = "demo"
default_branch = "main"

[github]
api_url = "{api}"
git_url = "{git}"

[github.reader]
app_id = {reader_id}
private_key_file = "{reader_key}"

[github.writer]
app_id = {writer_id}
private_key_file = "{writer_key}"
"#,
            // The benches run release builds, which refuse a test clock; nothing there moves it.
            clock = match cfg!(debug_assertions) {
                true => format!("test_clock_file = \"{d}/clock-offset\""),
                false => String::new(),
            },
            api = reach.api_url,
            git = reach.git_url,
            reader_id = demo.seed.reader_app_id,
            writer_id = demo.seed.writer_app_id,
            reader_key = reader_key.display(),
            writer_key = writer_key.display(),
        ),
    )
    .unwrap();
    config
}

fn spawn_prd(dir: &Path, config: &Path, reach: &Reach) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("prd.log"))
        .unwrap();
    Command::new(PRD)
        .args(["serve", "--config"])
        .arg(config)
        .env("ZODEX_LOG", "info")
        .envs(reach.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// `zodex-agent github …` on the sprite whose configuration is `config`.
pub fn agent_command_as(dir: &Path, config: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(AGENT);
    super::devhub::without_git_env(&mut cmd);
    cmd.current_dir(dir)
        .arg("github")
        .args(args)
        .arg("--config")
        .arg(config);
    cmd
}

/// A finished command as a person reads it: exit status, stdout and stderr.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A finished command's stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The error message of a daemon's answer (empty when it succeeded).
pub fn message(response: &zodex::protocol::Response) -> String {
    response
        .error
        .as_ref()
        .map(|e| e.message.clone())
        .unwrap_or_default()
}

/// Runs `cmd` with `input` on its stdin (then closed) and collects its output.
pub fn with_input(cmd: &mut Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A push of `new` to `dst` in `repo` (no force, no lease), as the agent socket takes it.
pub fn push_of(repo: &str, dst: &str, new: &str) -> zodex::protocol::AgentRequest {
    zodex::protocol::AgentRequest::Push {
        repo: repo.into(),
        updates: vec![zodex::protocol::PushUpdate {
            dst: dst.parse().unwrap(),
            new: Some(new.parse().unwrap()),
            force: false,
            lease: None,
        }],
        atomic: false,
        dry_run: false,
    }
}
