//! A fleet on loopback: the service (a [`Rig`] whose `zodex-prd serve` has `[fleet]` with a
//! mutual-TLS listener on a free port) and its sprites, each a directory with its own key
//! (made there), the certificate the service signed, a `zodex.toml` with `[relay]` and a real
//! `zodex-prd relay` serving its agent socket.

use super::devhub::Demo;
use super::rig::{PRD, Reach, Rig, agent_command_as, text, with_input};
use super::wait::eventually_with;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub const FLEET: &str = "acme";
/// What `zodex-prd relay` logs once its agent socket is bound.
const RELAY_SERVING: &str = "zodex-prd relay serving";

/// The service and what its members need to reach it.
pub struct Fleet {
    /// The fleet's name ([`FLEET`] unless started with [`Fleet::start_named`]).
    pub name: String,
    pub service: Rig,
    /// The fleet's CA (`ca.pem`, `ca.key`).
    pub ca: tempfile::TempDir,
    /// `https://127.0.0.1:PORT`, the listener.
    pub url: String,
}

/// One enrolled sprite with its relay running; the relay is killed when dropped.
pub struct Sprite {
    pub name: String,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    relay: Child,
}

impl Drop for Sprite {
    fn drop(&mut self) {
        let _ = self.relay.kill();
        let _ = self.relay.wait();
    }
}

/// The operator's `zodex`.
pub const ZODEX: &str = env!("CARGO_BIN_EXE_zodex");

impl Fleet {
    /// `zodex ARGS…` as an operator whose registry is in `home`.
    pub fn zodex(&self, home: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(ZODEX);
        super::devhub::without_git_env(&mut cmd);
        cmd.env("ZODEX_HOME", home)
            .env_remove("ZODEX_SPRITE")
            .env_remove("ZODEX_FLEET")
            .args(args)
            .output()
            .unwrap()
    }

    /// `zodex ARGS…` as the operator of `home`, which must succeed; its stdout.
    pub fn zodex_ok(&self, home: &Path, args: &[&str]) -> String {
        let out = self.zodex(home, args);
        assert!(out.status.success(), "zodex {args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Makes operator `name` in `home` as the first operator does (its key made there, signed
    /// through the service host's own admin command) and registers the fleet there.
    pub fn operator(&self, home: &Path, name: &str) {
        self.first_operator(home, name, "service");
    }

    /// [`Fleet::operator`], the service host's admin command registered in `home` as `via`.
    pub fn first_operator(&self, home: &Path, name: &str, via: &str) {
        let config = self.service.config.display().to_string();
        self.zodex_ok(
            home,
            &["sprite", "add", via, "--local", "--config", &config],
        );
        self.zodex_ok(
            home,
            &[
                "fleet",
                "--fleet",
                &self.name,
                "operator",
                "add",
                name,
                "--service",
                &self.url,
                "--via",
                via,
            ],
        );
    }

    /// A fleet's CA made by `zodex-prd fleet init`, and the service serving it on SQLite.
    pub fn start() -> Fleet {
        Self::start_on(Demo::start_with(|c| {
            c.with_token_ttl(Duration::from_secs(3600))
        }))
    }

    /// [`Fleet::start`] for a fleet called `name`.
    pub fn start_named(name: &str) -> Fleet {
        Self::start_on_named(
            Demo::start_with(|c| c.with_token_ttl(Duration::from_secs(3600))),
            name,
        )
    }

    /// [`Fleet::start`], the service writing to `demo`'s GitHub.
    pub fn start_on(demo: Demo) -> Fleet {
        Self::start_on_named(demo, FLEET)
    }

    fn start_on_named(demo: Demo, name: &str) -> Fleet {
        let ca = tempfile::tempdir().unwrap();
        let ca_dir = ca.path().join("ca");
        let init = Command::new(PRD)
            .args(["fleet", "init", "--name", name, "--dir"])
            .arg(&ca_dir)
            .output()
            .unwrap();
        assert!(init.status.success(), "{}", text(&init));
        let extra = format!(
            "[fleet]\nname = \"{name}\"\nca_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n",
            ca_dir.display()
        );
        let reach = Reach::direct(&demo);
        let service = Rig::start_on(demo, reach, &extra);
        service.wait_for_log("fleet listener serving");
        let log = service.log();
        let at = log
            .find("listen=")
            .expect("the listener's address in the log")
            + 7;
        let address: String = log[at..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .collect();
        Fleet {
            name: name.to_string(),
            service,
            ca,
            url: format!("https://{address}"),
        }
    }

    /// Enrols sprite `name` with `labels` as an operator does: the sprite makes its key and
    /// request, the service signs it (admin request `fleet_enroll`), the sprite installs the
    /// certificate; then its relay starts.
    pub fn enrol(&self, name: &str, labels: &[&str]) -> Sprite {
        let dir = tempfile::tempdir().unwrap();
        self.enrol_files(name, labels, &dir.path().join("fleet"), || {
            Command::new(PRD)
        });
        self.sprite_on(name, dir, &[self.url.as_str()])
    }

    /// The enrolment of [`Fleet::enrol`] for a relay whose files are `files`: `prd()` is
    /// `zodex-prd` as the sprite runs it (as the user its relay runs as), so the key is made
    /// there, by that user, and never leaves.
    pub fn enrol_files(
        &self,
        name: &str,
        labels: &[&str],
        files: &Path,
        prd: impl Fn() -> Command,
    ) {
        let request = prd()
            .args([
                "fleet", "request", "--fleet", &self.name, "--sprite", name, "--dir",
            ])
            .arg(files)
            .output()
            .unwrap();
        assert!(request.status.success(), "{}", text(&request));
        let request_pem = String::from_utf8(request.stdout).unwrap();
        let answer = self.service.admin_ok(
            &serde_json::json!({
                "op": "fleet_enroll",
                "role": "sprite",
                "name": name,
                "labels": labels,
                "request_pem": request_pem,
            })
            .to_string(),
        );
        let installed = with_input(
            prd().args(["fleet", "install", "--dir"]).arg(files),
            &answer.to_string(),
        );
        assert!(installed.status.success(), "{}", text(&installed));
    }

    /// The `[relay]` table of a sprite of this fleet whose relay keeps its files in `files`,
    /// reaching the replicas `services`.
    pub fn relay_table(&self, files: &Path, services: &[&str]) -> String {
        format!(
            r#"[relay]
services = {services:?}
dir = "{files}"
git_url = "{git}"
"#,
            files = files.display(),
            git = self.service.demo.hub.git_url(),
        )
    }

    /// A new certificate for `sprite`'s own key (read from its files), issued by the fleet's CA
    /// for `ttl`, written over its `cert.pem`; returns it.
    pub fn reissue(&self, sprite: &Sprite, ttl: Duration) -> String {
        let files = sprite.dir.path().join("fleet");
        self.reissue_files(&files, (zodex_fleet::Role::Sprite, &sprite.name), ttl, 0)
    }

    /// A new certificate for the member `role`/`name` whose key is in `files`, issued by the
    /// fleet's CA `age` seconds ago for `ttl`, written over `files/cert.pem`; returns it.
    pub fn reissue_files(
        &self,
        files: &Path,
        (role, name): (zodex_fleet::Role, &str),
        ttl: Duration,
        age: i64,
    ) -> String {
        let fleet = zodex_fleet::Name::parse(&self.name).unwrap();
        let ca_dir = self.ca.path().join("ca");
        let ca = zodex_fleet::FleetCa::load(
            &fleet,
            &std::fs::read_to_string(ca_dir.join("ca.pem")).unwrap(),
            &std::fs::read_to_string(ca_dir.join("ca.key")).unwrap(),
        )
        .unwrap();
        let identity =
            zodex_fleet::Identity::new(&fleet, role, &zodex_fleet::Name::parse(name).unwrap());
        let key_pem = std::fs::read_to_string(files.join("key.pem")).unwrap();
        let key = zodex_fleet::MemberKey::from_pem(&key_pem).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let issued = i64::try_from(now).unwrap() - age;
        let cert = ca
            .issue_as_of(&key.request_pem(&identity).unwrap(), &identity, issued, ttl)
            .unwrap();
        std::fs::write(files.join("cert.pem"), &cert).unwrap();
        cert
    }

    /// Starts the relay of sprite `name` whose fleet files are in `dir/fleet`, configured with
    /// `services`.
    pub fn sprite_on(&self, name: &str, dir: tempfile::TempDir, services: &[&str]) -> Sprite {
        let d = dir.path().display();
        let config = dir.path().join("zodex.toml");
        let uid = nix::unistd::getuid().as_raw();
        std::fs::write(
            &config,
            format!(
                r#"state_dir = "{d}/state"
admin_socket = "{d}/admin.sock"
agent_socket = "{d}/agent.sock"
agent_uid = {uid}

{relay}"#,
                relay = self.relay_table(&dir.path().join("fleet"), services),
            ),
        )
        .unwrap();
        let relay = spawn_relay(dir.path(), &config, 0);
        Sprite {
            name: name.to_string(),
            dir,
            config,
            relay,
        }
    }
}

/// Starts `zodex-prd relay` on `config` (in `dir`, logging to `dir/relay.log`) and waits until
/// it says it serves for the `earlier + 1`th time.
fn spawn_relay(dir: &Path, config: &Path, earlier: usize) -> Child {
    let mut relay = Command::new(PRD);
    relay.args(["relay", "--config"]).arg(config);
    start_relay(relay, &dir.join("relay.log"), earlier)
}

/// Starts `relay` (a `zodex-prd relay` command, run as whoever it says), its stderr appended
/// to `log`, and waits until it says it serves for the `earlier + 1`th time.
pub fn start_relay(mut relay: Command, log: &Path, earlier: usize) -> Child {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut relay = relay
        .env("ZODEX_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(log).unwrap_or_default();
    eventually_with("the relay serves", Duration::from_secs(20), read, || {
        if let Ok(Some(status)) = relay.try_wait() {
            panic!("zodex-prd relay exited ({status}): {}", read());
        }
        read().matches(RELAY_SERVING).count() > earlier
    });
    relay
}

impl Sprite {
    /// Stops the relay (SIGKILL) and starts it again on the same files.
    pub fn restart_relay(&mut self) {
        self.restart_relay_after(|_| {});
    }

    /// [`Sprite::restart_relay`], doing `between` while no relay runs: a certificate written
    /// there is the one the relay starts with (a running relay may renew the one it finds).
    pub fn restart_relay_after(&mut self, between: impl FnOnce(&Sprite)) {
        let _ = self.relay.kill();
        let _ = self.relay.wait();
        between(self);
        let earlier = self.relay_log().matches(RELAY_SERVING).count();
        self.relay = spawn_relay(self.dir.path(), &self.config, earlier);
    }

    /// `zodex-agent github …` on this sprite (through its relay).
    pub fn agent(&self, args: &[&str]) -> Output {
        agent_command_as(self.dir.path(), &self.config, args)
            .output()
            .unwrap()
    }

    /// git as this sprite's agent runs it, against `fleet`'s GitHub.
    pub fn git(&self, fleet: &Fleet, dir: &Path, args: &[&str]) -> Output {
        fleet
            .service
            .agent_git_command_as(dir, &self.config)
            .args(args)
            .output()
            .unwrap()
    }

    pub fn relay_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("relay.log")).unwrap_or_default()
    }
}

/// A fleet started by `zodex dev fleet up --json` in a fresh `ZODEX_HOME` (stopped with
/// `zodex dev fleet down` when dropped): `info` is its answer's `result`.
pub struct DevFleet {
    pub home: tempfile::TempDir,
    pub dir: PathBuf,
    pub info: serde_json::Value,
}

impl Drop for DevFleet {
    fn drop(&mut self) {
        let dir = self.dir.to_str().unwrap().to_string();
        let _ = self.zodex_output(&["dev", "fleet", "down", "--dir", &dir]);
    }
}

impl DevFleet {
    pub fn up(replicas: u32, sprites: u32) -> DevFleet {
        Self::up_with(replicas, sprites, &[])
    }

    /// [`DevFleet::up`] with its store in a Patroni cluster (`--ha`).
    pub fn up_ha(replicas: u32, sprites: u32) -> DevFleet {
        Self::up_with(replicas, sprites, &["--ha"])
    }

    fn up_with(replicas: u32, sprites: u32, extra: &[&str]) -> DevFleet {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("dev-fleet");
        if super::dev::is_root() {
            // As root the server runs as `postgres`, which must reach `dir/postgres` (or,
            // with `--ha`, `dir/patroni`).
            std::fs::create_dir_all(&dir).unwrap();
            super::dev::open_path_to(&dir.join("postgres"));
            super::dev::open_path_to(&dir.join("patroni"));
        }
        let mut fleet = DevFleet {
            home,
            dir: dir.clone(),
            info: serde_json::Value::Null,
        };
        let (replicas, sprites) = (replicas.to_string(), sprites.to_string());
        let up = fleet.zodex(
            &[
                "dev",
                "fleet",
                "up",
                "--json",
                "--dir",
                dir.to_str().unwrap(),
                "--replicas",
                &replicas,
                "--sprites",
                &sprites,
            ]
            .into_iter()
            .chain(extra.iter().copied())
            .collect::<Vec<_>>(),
        );
        fleet.info = serde_json::from_str::<serde_json::Value>(&up).unwrap()["result"].clone();
        fleet
    }

    fn zodex_output(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(ZODEX);
        super::devhub::without_git_env(&mut cmd);
        cmd.env("ZODEX_HOME", self.home.path())
            .env("HOME", self.home.path())
            .env_remove("ZODEX_SPRITE")
            .env_remove("ZODEX_FLEET")
            .args(args)
            .output()
            .unwrap()
    }

    /// `zodex ARGS…` as the fleet's operator; must succeed; its stdout.
    pub fn zodex(&self, args: &[&str]) -> String {
        let out = self.zodex_output(args);
        assert!(out.status.success(), "zodex {args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `zodex ARGS…` as the operator, whatever its outcome.
    pub fn zodex_any(&self, args: &[&str]) -> Output {
        self.zodex_output(args)
    }

    /// Registers `name` in the operator's registry as the fleet reached through replica
    /// `index` (0-based) only: a request sent there is served by that replica.
    pub fn register_replica(&self, name: &str, index: usize) {
        let url = self.info["replicas"][index]["url"].as_str().unwrap();
        let operator = self.info["operator_dir"].as_str().unwrap();
        let registry = self.home.path().join("sprites.toml");
        let mut text = std::fs::read_to_string(&registry).unwrap();
        text.push_str(&format!(
            "\n[[sprites]]\nname = \"{name}\"\n\n[sprites.fleet]\nservices = [\"{url}\"]\ndir = \"{operator}\"\n"
        ));
        std::fs::write(&registry, text).unwrap();
    }

    /// A command as sprite `n`'s agent side runs it (what its `env.sh` sets).
    pub fn agent_side(&self, n: u32, program: &str) -> Command {
        let bin = Path::new(ZODEX).parent().unwrap();
        let mut cmd = Command::new(program);
        super::devhub::without_git_env(&mut cmd);
        cmd.env(
            "ZODEX_CONFIG",
            self.dir.join(format!("sprites/sprite-{n}/zodex.toml")),
        )
        .env("GIT_CONFIG_GLOBAL", self.dir.join("agent.gitconfig"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
        cmd
    }

    /// git as sprite `n`'s agent, in `cwd`.
    pub fn git(&self, n: u32, cwd: &Path, args: &[&str]) -> Output {
        self.agent_side(n, "git")
            .current_dir(cwd)
            .args(args)
            .output()
            .unwrap()
    }

    /// `zodex-agent github ARGS…` as sprite `n`'s agent.
    pub fn agent(&self, n: u32, args: &[&str]) -> Output {
        self.agent_side(n, super::rig::AGENT)
            .arg("github")
            .args(args)
            .output()
            .unwrap()
    }

    /// Clones `demo/app` as sprite `n` into `parent/app-N` and commits a file on `branch`.
    pub fn work_on(&self, n: u32, parent: &Path, branch: &str) -> PathBuf {
        let name = format!("app-{n}");
        let out = self.git(
            n,
            parent,
            &["clone", "--quiet", "https://github.com/demo/app", &name],
        );
        assert!(out.status.success(), "clone as sprite-{n}: {}", text(&out));
        let app = parent.join(name);
        super::devhub::git_ok(&app, &["checkout", "--quiet", "-b", branch]);
        super::devhub::commit_file(&app, &format!("{branch}.txt"), b"hello", branch);
        app
    }

    /// The replica's pid (0-based index).
    pub fn replica_pid(&self, index: usize) -> i32 {
        self.info["replicas"][index]["pid"].as_i64().unwrap() as i32
    }
}
