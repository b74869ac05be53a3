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
//! Or the same sprite enrolled in a fleet (`fleet_layout`, [`Sprite::deploy_in_a_fleet_as_root`]):
//! the same users and layout, but the publisher runs `zodex-prd relay` with the sprite's own
//! key in `fleet/` (0700, the key 0600) and no App key or state; the service is a separate
//! `zodex-prd serve` with `[fleet]` (`support::fleet`), root's, in its own directory, standing
//! for another host. Operator requests go to the service.
//!
//! Everything the agent does runs as the agent user: its CLI, git with `git-remote-zodex` and
//! the credential helper, and raw socket work through `routines` (this test binary, re-run as
//! the agent). The operator side runs as root.
//!
//! Its files: this one (the layouts, what differs between them), `agent` (the agent's side),
//! `operator` (the operator's), `github_side` (what GitHub holds), `world` (the devhub's repos
//! and Apps) and `fleet_layout` (the fleet sprite).

mod agent;
mod fleet_layout;
pub mod github_side;
mod operator;
mod world;

use super::devhub::{Demo, keys};
use super::fleet::Fleet;
use super::routines;
use super::users::{SystemUser, Users, run_as};
use super::wait::eventually_with;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;
use world::start_world;
pub use world::world;

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
    Relay { relay: Child, fleet: Box<Fleet> },
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

/// Links (or, across file systems, copies) `from` to `to`.
fn link(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
    chmod(to, 0o755);
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

    /// A deployed sprite; fails the test when not root (see `users::require_root`).
    pub fn deploy_as_root() -> Self {
        Self::deploy_as_root_with("")
    }

    /// [`Sprite::deploy_as_root`] with `extra` top-level settings in its `zodex.toml`.
    pub fn deploy_as_root_with(extra: &str) -> Self {
        super::users::require_root();
        Self::deploy_with(extra).expect("root can create the sprite's users")
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

/// Whether the daemon refused an agent request: an error, or every ref of a push refused.
pub fn refused(answer: &Value) -> bool {
    answer["ok"] != true
        || answer["result"]["results"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r["ok"] == false))
}

/// Two root tests of one attack: `$single` runs `$attack` (a function of a [`Sprite`]) against
/// a single sprite, `$fleet` against a sprite enrolled in a fleet.
// Used by the attack suites only; `tests/receive_pack.rs` and `tests/devhub.rs` compile this
// harness too.
#[allow(unused_macros)]
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
#[allow(unused_imports)]
pub(crate) use against_both_layouts;
