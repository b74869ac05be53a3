//! A sprite laid out like a real deployment, with two real users (see `users`): the attack
//! suite's harness.
//!
//! - a devhub (started by the test, as root, on loopback) with `demo/app` and `demo/lib`
//!   (default branch `main`) and `demo/trunk` (default branch `trunk`), both Apps installed on
//!   all three;
//! - `bin/` (0755): the four binaries and this test binary, hard-linked (the checkout's
//!   `target/` need not be traversable by other users);
//! - `zodex.toml` (0644, no secret in it), `keys/` (0700) with the App keys (0600), `state/`
//!   (0700) — all owned by the publisher;
//! - `run/` (0750, the publisher's, group = the sprite's group): the agent may reach the agent
//!   socket but create, replace or remove nothing there;
//! - a real `zodex-prd serve` running as the publisher with `agent_uid` = the agent user.
//!
//! Or the same sprite enrolled in a fleet (`fleet`, [`Sprite::deploy_in_a_fleet_as_root`]):
//! the same users and layout, but the publisher runs `zodex-prd relay` with the sprite's own
//! key in `fleet/` (0700, the key 0600) and no App key or state; the service is a separate
//! `zodex-prd serve` with `[fleet]` (`support::fleet`), root's, in its own directory, standing
//! for another host. Operator requests go to the service.
//!
//! Everything the agent does runs as the agent user: its CLI, git with `git-remote-zodex` and
//! the credential helper, and raw socket work through `routines` (this test binary, re-run as
//! the agent). The operator side runs as root.

use super::devhub::{Demo, git_ok, keys};
use super::fleet::Fleet;
use super::routines::{self, Routine};

mod fleet_layout;
use super::users::{SystemUser, Users, run_as};
use super::wait::{eventually_with, poll};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use zodex::devhub::{DemoSeed, DevHubConfig, Level, Permissions, Setup, start_in_background};

const BINARIES: [(&str, &str); 4] = [
    ("zodex", env!("CARGO_BIN_EXE_zodex")),
    ("zodex-agent", env!("CARGO_BIN_EXE_zodex-agent")),
    ("zodex-prd", env!("CARGO_BIN_EXE_zodex-prd")),
    ("git-remote-zodex", env!("CARGO_BIN_EXE_git-remote-zodex")),
];

/// A deployed sprite. Field order matters: processes die in `drop`, then the service and the
/// devhub stop, the directory goes, and the users are removed last.
pub struct Sprite {
    publisher: Publisher,
    pub root: tempfile::TempDir,
    pub bin: PathBuf,
    /// The agent's configuration (`ZODEX_CONFIG`): `zodex-prd serve`'s or the relay's.
    pub config: PathBuf,
    pub run: PathBuf,
    /// The publisher's state directory on the sprite (a relay keeps nothing there).
    pub state: PathBuf,
    /// The publisher's keys on the sprite: the App keys, or the relay's key and certificate.
    pub keys: PathBuf,
    pub agent_home: PathBuf,
    /// The agent's own directory for checkouts and files.
    pub work: PathBuf,
    background: Mutex<Vec<Child>>,
    pub users: Users,
}

/// What serves the agent socket as the publisher user, and the GitHub it reaches.
enum Publisher {
    /// `zodex-prd serve` with the App keys and the state; the devhub.
    Serve { prd: Child, demo: Demo },
    /// `zodex-prd relay` with the sprite's key only; the fleet's service (which owns the devhub).
    Relay { relay: Child, fleet: Fleet },
}

impl Publisher {
    fn child(&mut self) -> &mut Child {
        match self {
            Publisher::Serve { prd, .. } => prd,
            Publisher::Relay { relay, .. } => relay,
        }
    }
}

/// The sprite's directories and binaries, the same in both layouts.
struct Layout {
    dir: tempfile::TempDir,
    bin: PathBuf,
    state: PathBuf,
    run: PathBuf,
    publisher_home: PathBuf,
    agent_home: PathBuf,
    work: PathBuf,
}

impl Drop for Sprite {
    fn drop(&mut self) {
        for child in self
            .background
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
            .chain(std::iter::once(self.publisher.child()))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn chown(path: &Path, user: Option<&SystemUser>, gid: Option<u32>) {
    nix::unistd::chown(
        path,
        user.map(|u| nix::unistd::Uid::from_raw(u.uid)),
        gid.or(user.map(|u| u.gid)).map(nix::unistd::Gid::from_raw),
    )
    .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mkdir(path: &Path, owner: Option<&SystemUser>, gid: Option<u32>, mode: u32) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    chown(path, owner, gid);
    chmod(path, mode);
    path.to_path_buf()
}

/// The demo world plus `demo/trunk`, whose default branch on GitHub is `trunk`.
pub fn world(dir: &Path) -> DemoSeed {
    let [reader, writer, _] = keys();
    let mut setup = Setup::open(dir).unwrap();
    let read = || Permissions::new().with("contents", Level::Read);
    let write = || {
        Permissions::new()
            .with("contents", Level::Write)
            .with("pull_requests", Level::Write)
            .with("workflows", Level::Write)
    };
    let reader_app_id = setup
        .add_app("zodex-reader", &reader.public_pem, read())
        .unwrap();
    let writer_app_id = setup
        .add_app("zodex-writer", &writer.public_pem, write())
        .unwrap();
    let app_repo_id = setup.add_repo("demo", "app", "main", true).unwrap();
    let lib_repo_id = setup.add_repo("demo", "lib", "main", true).unwrap();
    setup.add_repo("demo", "trunk", "trunk", true).unwrap();
    let other_repo_id = setup.add_repo("demo", "other", "main", true).unwrap();
    for (name, branch) in [("app", "main"), ("lib", "main"), ("trunk", "trunk")] {
        let scratch = tempfile::tempdir().unwrap();
        let work = scratch.path();
        git_ok(work, &["init", "--quiet", "-b", branch]);
        super::devhub::commit_file(
            work,
            "README.md",
            format!("# demo/{name}\n").as_bytes(),
            "Initial commit",
        );
        super::devhub::commit_file(work, "src/hello.txt", b"hello\n", "Add a greeting");
        let bare = setup.repo_path("demo", name);
        git_ok(
            work,
            &[
                "push",
                "--quiet",
                bare.to_str().unwrap(),
                &format!("{branch}:refs/heads/{branch}"),
            ],
        );
    }
    let covered = ["app", "lib", "trunk"];
    let reader_installation_id = setup
        .install(
            reader_app_id,
            "demo",
            Some(&["app", "lib", "trunk", "other"]),
            read(),
        )
        .unwrap();
    let writer_installation_id = setup
        .install(writer_app_id, "demo", Some(&covered), write())
        .unwrap();
    setup.save().unwrap();
    DemoSeed {
        reader_app_id,
        writer_app_id,
        reader_installation_id,
        writer_installation_id,
        app_repo_id,
        other_repo_id,
        lib_repo_id,
    }
}

/// Links (or, across file systems, copies) `from` to `to`.
fn link(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
    chmod(to, 0o755);
}

/// The devhub of [`world`], started on loopback.
fn start_world() -> Demo {
    let seed_dir = tempfile::tempdir().unwrap();
    let seed = world(seed_dir.path());
    let hub = start_in_background(DevHubConfig::new(seed_dir.path())).unwrap();
    Demo {
        hub,
        seed,
        dir: seed_dir,
        client: reqwest::blocking::Client::builder().build().unwrap(),
    }
}

/// The sprite's directory with `bin/`, `state/`, `run/` and the two users' homes.
fn lay_out(users: &Users) -> Layout {
    let dir = tempfile::Builder::new()
        .prefix("zx-sprite-")
        .tempdir()
        .unwrap();
    let root = dir.path().to_path_buf();
    chmod(&root, 0o755);
    let bin = mkdir(&root.join("bin"), None, None, 0o755);
    for (name, path) in BINARIES {
        link(Path::new(path), &bin.join(name));
    }
    link(
        &std::env::current_exe().unwrap(),
        &bin.join(routines::BINARY),
    );
    let publisher = &users.publisher;
    Layout {
        bin,
        state: mkdir(&root.join("state"), Some(publisher), None, 0o700),
        run: mkdir(&root.join("run"), Some(publisher), Some(users.gid), 0o750),
        publisher_home: mkdir(&root.join("publisher-home"), Some(publisher), None, 0o700),
        agent_home: mkdir(&root.join("agent-home"), Some(&users.agent), None, 0o700),
        work: mkdir(&root.join("work"), Some(&users.agent), None, 0o700),
        dir,
    }
}

impl Layout {
    /// The top of the sprite's `zodex.toml`: state, sockets and the two users.
    fn head(&self, users: &Users) -> String {
        format!(
            r#"state_dir = "{state}"
admin_socket = "{run}/admin.sock"
agent_socket = "{run}/agent.sock"
agent_uid = {agent_uid}
publisher_uid = {publisher_uid}"#,
            state = self.state.display(),
            run = self.run.display(),
            agent_uid = users.agent.uid,
            publisher_uid = users.publisher.uid,
        )
    }

    fn into_sprite(
        self,
        users: Users,
        config: PathBuf,
        keys: PathBuf,
        publisher: Publisher,
    ) -> Sprite {
        Sprite {
            publisher,
            root: self.dir,
            bin: self.bin,
            config,
            run: self.run,
            state: self.state,
            keys,
            agent_home: self.agent_home,
            work: self.work,
            background: Mutex::new(Vec::new()),
            users,
        }
    }
}

impl Sprite {
    /// Deploys a sprite; `None` when not root (the caller prints the skip line).
    pub fn deploy() -> Option<Self> {
        Self::deploy_with("")
    }

    /// [`Sprite::deploy`] with `extra` top-level settings in its `zodex.toml` (`@ROOT@` in
    /// them stands for the sprite's directory).
    pub fn deploy_with(extra: &str) -> Option<Self> {
        let users = Users::create()?;
        let layout = lay_out(&users);
        let demo = start_world();
        let root = layout.dir.path().to_path_buf();
        let extra = extra.replace("@ROOT@", &root.display().to_string());
        let publisher = &users.publisher;
        let keys_dir = mkdir(&root.join("keys"), Some(publisher), None, 0o700);
        let [reader, writer, _] = keys();
        for (name, pair) in [("reader", reader), ("writer", writer)] {
            let path = keys_dir.join(format!("{name}.pem"));
            std::fs::write(&path, &pair.private_pem).unwrap();
            chown(&path, Some(publisher), None);
            chmod(&path, 0o600);
        }
        let config = root.join("zodex.toml");
        std::fs::write(
            &config,
            format!(
                r#"{head}
{extra}

[[targets]]
owner = "demo"
default_branch = "main"

[github]
api_url = "{api}"
git_url = "{git}"

[github.reader]
app_id = {reader_id}
private_key_file = "{keys}/reader.pem"

[github.writer]
app_id = {writer_id}
private_key_file = "{keys}/writer.pem"
"#,
                head = layout.head(&users),
                api = demo.hub.api_url(),
                git = demo.hub.git_url(),
                reader_id = demo.seed.reader_app_id,
                writer_id = demo.seed.writer_app_id,
                keys = keys_dir.display(),
            ),
        )
        .unwrap();
        chmod(&config, 0o644);

        let prd = spawn_prd(
            &root,
            &layout.bin,
            &config,
            &layout.publisher_home,
            publisher,
        );
        let sprite = layout.into_sprite(users, config, keys_dir, Publisher::Serve { prd, demo });
        sprite.wait_ready();
        Some(sprite)
    }

    /// Kills zodex-prd (SIGKILL) and starts it again on the same state, as its user.
    pub fn restart_publisher(&mut self) {
        let root = self.root.path().to_path_buf();
        let home = root.join("publisher-home");
        let Publisher::Serve { prd, .. } = &mut self.publisher else {
            panic!("restart_publisher: a fleet sprite's publisher is its relay");
        };
        let _ = prd.kill();
        let _ = prd.wait();
        *prd = spawn_prd(&root, &self.bin, &self.config, &home, &self.users.publisher);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        eventually_with(
            "zodex-prd starts",
            Duration::from_secs(30),
            || self.log(),
            || {
                self.try_admin(&json!({"op": "ping"}))
                    .is_ok_and(|answer| answer["ok"] == true)
                    && self.run.join("agent.sock").exists()
            },
        );
    }

    /// The publisher's log: `zodex-prd serve`'s, or the relay's and the service's.
    pub fn log(&self) -> String {
        let own = std::fs::read_to_string(self.root.path().join("prd.log")).unwrap_or_default();
        match &self.publisher {
            Publisher::Serve { .. } => own,
            Publisher::Relay { fleet, .. } => format!(
                "relay: {}\nservice: {}",
                std::fs::read_to_string(self.root.path().join("relay.log")).unwrap_or_default(),
                fleet.service.log()
            ),
        }
    }

    /// The devhub: the GitHub the publisher (or the fleet's service) writes to.
    pub fn demo(&self) -> &Demo {
        match &self.publisher {
            Publisher::Serve { demo, .. } => demo,
            Publisher::Relay { fleet, .. } => &fleet.service.demo,
        }
    }

    /// Whether this sprite is enrolled in a fleet (its publisher a relay).
    pub fn in_a_fleet(&self) -> bool {
        matches!(self.publisher, Publisher::Relay { .. })
    }

    /// The daemons that must stay answering, named, with their process ids: `zodex-prd serve`,
    /// or the relay and the service.
    pub fn daemons(&self) -> Vec<(&'static str, u32)> {
        match &self.publisher {
            Publisher::Serve { prd, .. } => vec![("zodex-prd", prd.id())],
            Publisher::Relay { relay, fleet } => vec![
                ("zodex-prd relay", relay.id()),
                ("the fleet's service", fleet.service.prd_pid()),
            ],
        }
    }

    pub fn agent_socket(&self) -> PathBuf {
        self.run.join("agent.sock")
    }

    /// The admin socket the operator uses: the sprite's, or the service's (in its own
    /// directory: another host's).
    pub fn admin_socket(&self) -> PathBuf {
        match &self.publisher {
            Publisher::Serve { .. } => self.run.join("admin.sock"),
            Publisher::Relay { fleet, .. } => fleet.service.dir.path().join("admin.sock"),
        }
    }

    /// The sockets the publisher binds in `run/`: a relay binds no admin socket.
    pub fn sockets_in_run(&self) -> Vec<&'static str> {
        match &self.publisher {
            Publisher::Serve { .. } => vec!["admin.sock", "agent.sock"],
            Publisher::Relay { .. } => vec!["agent.sock"],
        }
    }

    /// What the agent must not read or reach: the App keys, state, token file, the daemon's
    /// /proc entries and the admin socket; in a fleet, the relay's and the service's.
    pub fn secrets(&self) -> Vec<(&'static str, PathBuf)> {
        let (prd, state) = match &self.publisher {
            Publisher::Serve { prd, .. } => (prd.id(), self.state.clone()),
            Publisher::Relay { relay, fleet } => return self.fleet_secrets(fleet, relay.id()),
        };
        vec![
            ("read", self.keys.join("writer.pem")),
            ("read", self.keys.join("reader.pem")),
            ("list", self.keys.clone()),
            ("list", state.clone()),
            ("read", self.state_db()),
            ("read", state.join("state.db-wal")),
            ("read", state.join("write-tokens")),
            ("list", state.join("mirrors")),
            ("read", PathBuf::from(format!("/proc/{prd}/environ"))),
            ("read", PathBuf::from(format!("/proc/{prd}/mem"))),
            ("list", PathBuf::from(format!("/proc/{prd}/fd"))),
            ("connect", self.admin_socket()),
        ]
    }

    /// Where the publisher spools a request's bundle: in its state, or the service's.
    pub fn spool_dir(&self) -> PathBuf {
        match &self.publisher {
            Publisher::Serve { .. } => self.state.join("tmp"),
            Publisher::Relay { fleet, .. } => fleet.service.dir.path().join("state/tmp"),
        }
    }

    /// The publisher's state database: the sprite's, or the service's.
    pub fn state_db(&self) -> PathBuf {
        match &self.publisher {
            Publisher::Serve { .. } => self.state.join("state.db"),
            Publisher::Relay { fleet, .. } => fleet.service.dir.path().join("state/state.db"),
        }
    }

    /// `request` (an `mcp_…` admin request) for this sprite's MCP endpoint: in a fleet the
    /// service answers it as the sprite's authorization server (`fleet_mcp`).
    pub fn for_the_endpoint(&self, request: Value) -> Value {
        match self.in_a_fleet() {
            true => json!({"op": "fleet_mcp", "sprite": fleet_layout::NAME, "request": request}),
            false => request,
        }
    }

    /// Serves OAuth for the MCP endpoint at `url` (the `[mcp] public_url` of the sprite's
    /// configuration) and waits until the public file `oauth_file` is written: a single sprite's
    /// publisher does both at start; in a fleet the operator sets the URL on the service and
    /// the relay fetches the public half.
    pub fn serve_mcp_oauth(&self, url: &str, oauth_file: &Path) {
        if self.in_a_fleet() {
            self.admin_ok(
                json!({"op": "fleet_mcp_public_url", "sprite": fleet_layout::NAME, "url": url}),
            );
        }
        eventually_with(
            "the MCP endpoint's public OAuth file is written",
            Duration::from_secs(20),
            || self.log(),
            || oauth_file.exists(),
        );
    }

    /// The configuration `zodex-prd admin` reads: the sprite's, or the service's.
    fn operator_config(&self) -> &Path {
        match &self.publisher {
            Publisher::Serve { .. } => &self.config,
            Publisher::Relay { fleet, .. } => &fleet.service.config,
        }
    }

    /// `request` (a grant, YOLO scope or revoke) made for this sprite's agent: in a fleet it
    /// names the sprite (`"sprite"`), which a single sprite's rows never do.
    pub fn owned(&self, mut request: Value) -> Value {
        if self.in_a_fleet() {
            request["sprite"] = json!(fleet_layout::NAME);
        }
        request
    }

    /// `host` as git and the credential helper name devhub's git side.
    pub fn git_host(&self) -> String {
        self.demo()
            .hub
            .git_url()
            .trim_start_matches("http://")
            .to_string()
    }

    /// Keeps `child` to be killed when the sprite goes.
    pub fn adopt(&self, child: Child) -> u32 {
        let pid = child.id();
        self.background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(child);
        pid
    }
}

/// `zodex-prd` from our `bin/` as the publisher user, in its home, with a clean environment.
fn as_publisher(bin: &Path, home: &Path, publisher: &SystemUser) -> Command {
    let mut prd = Command::new(bin.join("zodex-prd"));
    prd.env_clear()
        .env("PATH", search_path(bin))
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .current_dir(home);
    run_as(&mut prd, publisher, &[]);
    prd
}

/// `zodex-prd serve` as the publisher user, its log appended to `ROOT/prd.log`.
fn spawn_prd(root: &Path, bin: &Path, config: &Path, home: &Path, publisher: &SystemUser) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join("prd.log"))
        .unwrap();
    as_publisher(bin, home, publisher)
        .args(["serve", "--config"])
        .arg(config)
        .env("ZODEX_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Our `bin/` first, then this process's search path (the same git the devhub runs).
fn search_path(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
    )
}

// The operator's side (root).
impl Sprite {
    fn try_admin(&self, request: &Value) -> std::io::Result<Value> {
        let mut stream = std::os::unix::net::UnixStream::connect(self.admin_socket())?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream.write_all(format!("{request}\n").as_bytes())?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        serde_json::from_str(&text).map_err(std::io::Error::other)
    }

    /// One admin request straight on the admin socket, as root.
    pub fn admin(&self, request: Value) -> Value {
        self.try_admin(&request)
            .unwrap_or_else(|e| panic!("{request}: {e}\nzodex-prd: {}", self.log()))
    }

    #[track_caller]
    pub fn admin_ok(&self, request: Value) -> Value {
        let answer = self.admin(request.clone());
        assert_eq!(answer["ok"], true, "{request}: {answer}");
        answer
    }

    /// A one-hour grant on `repo` for this sprite's agent.
    pub fn grant_push(&self, repo: &str) {
        self.admin_ok(
            self.owned(json!({"op": "grant_push", "repo": repo, "ttl": {"seconds": 3600}})),
        );
    }

    /// A one-hour `--via token` grant on `repo` for this sprite's agent: the credential helper
    /// hands it write tokens.
    pub fn grant_push_via_token(&self, repo: &str) {
        self.admin_ok(self.owned(
            json!({"op": "grant_push", "repo": repo, "ttl": {"seconds": 3600}, "via": "token"}),
        ));
    }

    /// `zodex-prd admin` as the operator runs it (root), with one request line.
    pub fn operator_prd(&self, request: &str) -> Output {
        self.spawn_operator_prd(request).wait_with_output().unwrap()
    }

    /// [`Sprite::operator_prd`], started.
    fn spawn_operator_prd(&self, request: &str) -> std::process::Child {
        let mut child = Command::new(self.bin.join("zodex-prd"))
            .args(["admin", "--config"])
            .arg(self.operator_config())
            .env_remove("ZODEX_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{request}\n").as_bytes());
        child
    }

    /// The daemon still answers the operator: an admin `status` through `zodex-prd admin`
    /// (as root). Its 20 s fail a daemon that no longer answers; they say nothing of its speed.
    #[track_caller]
    pub fn assert_operator_answers(&self) {
        let mut child = self.spawn_operator_prd(r#"{"op":"status"}"#);
        let answered = poll(Duration::from_secs(20), || child.try_wait().unwrap());
        if answered.is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            answered.is_some(),
            "the operator's status got no answer within 20 s\nzodex-prd: {}",
            self.log()
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("\"ok\":true"),
            "the operator's status failed: {stdout} {}\nzodex-prd: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        for (name, pid) in self.daemons() {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            assert!(
                nix::sys::signal::kill(pid, None).is_ok(),
                "{name} is gone: {}",
                self.log()
            );
        }
        if self.in_a_fleet() {
            self.assert_relay_answers();
        }
    }

    /// `zodex` (the operator CLI) with its own registry holding this sprite as `s` (local);
    /// in a fleet, `zodex sprite github VERB …` is `zodex fleet VERB …` with an operator's
    /// certificate.
    pub fn zodex(&self, args: &[&str]) -> Output {
        if let Publisher::Relay { fleet, .. } = &self.publisher {
            return self.zodex_in_fleet(fleet, args);
        }
        let home = self.root.path().join("operator-home");
        let registered = home.join(".registered");
        let run = |args: &[&str]| {
            Command::new(self.bin.join("zodex"))
                .args(args)
                .env("ZODEX_HOME", &home)
                .env("HOME", &home)
                .env_remove("ZODEX_SPRITE")
                .env_remove("ZODEX_CONFIG")
                .stdin(Stdio::null())
                .output()
                .unwrap()
        };
        if !registered.exists() {
            std::fs::create_dir_all(&home).unwrap();
            let config = self.config.to_str().unwrap();
            let out = run(&["sprite", "add", "s", "--local", "--config", config]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::write(&registered, "").unwrap();
        }
        let mut full: Vec<&str> = args.to_vec();
        full.extend(["--sprite", "s"]);
        run(&full)
    }
}

/// What GitHub (the devhub) holds: every ref of every repository, the pull requests, and the
/// number of live installation tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubSide {
    pub refs: String,
    pub pulls: usize,
    pub tokens_live: usize,
}

impl Sprite {
    pub fn bare(&self, repo: &str) -> PathBuf {
        self.demo()
            .hub
            .dir()
            .join("repos/demo")
            .join(format!("{repo}.git"))
    }

    pub fn github(&self) -> GithubSide {
        let demo = self.demo();
        let mut refs = String::new();
        for repo in ["app", "lib", "trunk", "other"] {
            refs.push_str(&format!("[{repo}]\n"));
            refs.push_str(&git_ok(
                &self.bare(repo),
                &["for-each-ref", "--format=%(refname) %(objectname)"],
            ));
        }
        GithubSide {
            refs,
            pulls: demo.hub.description().pulls.len(),
            tokens_live: demo.hub.stats().tokens_live,
        }
    }

    /// Nothing changed at GitHub since `before`: the same refs and pull requests, and no token
    /// more alive than then.
    #[track_caller]
    pub fn assert_github_unchanged(&self, before: &GithubSide) {
        let now = self.github();
        assert_eq!(
            now.refs,
            before.refs,
            "refs changed at GitHub\nzodex-prd: {}",
            self.log()
        );
        assert_eq!(now.pulls, before.pulls, "a pull request appeared");
        assert!(
            now.tokens_live <= before.tokens_live,
            "{} live tokens now, {} before",
            now.tokens_live,
            before.tokens_live
        );
    }

    /// The id `rev` names at GitHub in `demo/<repo>` (`None`: no such ref).
    pub fn remote_sha(&self, repo: &str, rev: &str) -> Option<String> {
        let out = super::devhub::git(&self.bare(repo), &["rev-parse", "--verify", "--quiet", rev]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Whether GitHub's `demo/<repo>` holds object `oid` at all.
    pub fn remote_has(&self, repo: &str, oid: &str) -> bool {
        super::devhub::git(&self.bare(repo), &["cat-file", "-e", oid])
            .status
            .success()
    }
}

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

    /// A deployed sprite; fails the test when not root (see `users::require_root`).
    pub fn deploy_as_root() -> Self {
        Self::deploy_as_root_with("")
    }

    /// [`Sprite::deploy_as_root`] with `extra` top-level settings in its `zodex.toml`.
    pub fn deploy_as_root_with(extra: &str) -> Self {
        super::users::require_root();
        Self::deploy_with(extra).expect("root can create the sprite's users")
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

/// Whether the daemon refused an agent request: an error, or every ref of a push refused.
pub fn refused(answer: &Value) -> bool {
    answer["ok"] != true
        || answer["result"]["results"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r["ok"] == false))
}

/// Two root tests of one attack: `$single` runs `$attack` (a function of a [`Sprite`]) against
/// a single sprite, `$fleet` against a sprite enrolled in a fleet.
macro_rules! against_both_layouts {
    ($attack:ident: $single:ident, $fleet:ident) => {
        #[test]
        #[ignore = "needs root"]
        fn $single() {
            $attack($crate::support::sprite::Sprite::deploy_as_root());
        }

        #[test]
        #[ignore = "needs root"]
        fn $fleet() {
            $attack($crate::support::sprite::Sprite::deploy_in_a_fleet_as_root());
        }
    };
}
pub(crate) use against_both_layouts;
