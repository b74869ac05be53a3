//! A fleet on loopback: the service (a [`Rig`] whose `zodex-prd serve` has `[fleet]` with a
//! mutual-TLS listener on a free port) and its sprites, each a directory with its own key
//! (made there), the certificate the service signed, a `zodex.toml` with `[relay]` and a real
//! `zodex-prd relay` serving its agent socket.

use super::rig::{PRD, Rig, agent_command_as, text, with_input};
use super::wait::eventually_with;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub const FLEET: &str = "acme";
/// What `zodex-prd relay` logs once its agent socket is bound.
const RELAY_SERVING: &str = "zodex-prd relay serving";

/// The service and what its members need to reach it.
pub struct Fleet {
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

    /// A fleet's CA made by `zodex-prd fleet init`, and the service serving it on SQLite.
    pub fn start() -> Fleet {
        let ca = tempfile::tempdir().unwrap();
        let ca_dir = ca.path().join("ca");
        let init = Command::new(PRD)
            .args(["fleet", "init", "--name", FLEET, "--dir"])
            .arg(&ca_dir)
            .output()
            .unwrap();
        assert!(init.status.success(), "{}", text(&init));
        let extra = format!(
            "[fleet]\nname = \"{FLEET}\"\nca_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n",
            ca_dir.display()
        );
        let service = Rig::start_with(Duration::from_secs(3600), &extra);
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
        let files = dir.path().join("fleet");
        let request = Command::new(PRD)
            .args([
                "fleet", "request", "--fleet", FLEET, "--sprite", name, "--dir",
            ])
            .arg(&files)
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
            Command::new(PRD)
                .args(["fleet", "install", "--dir"])
                .arg(&files),
            &answer.to_string(),
        );
        assert!(installed.status.success(), "{}", text(&installed));
        self.sprite_on(name, dir, &[self.url.as_str()])
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

[relay]
services = {services:?}
dir = "{d}/fleet"
git_url = "{git}"
"#,
                git = self.service.demo.hub.git_url(),
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
    let log = dir.join("relay.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let mut relay = Command::new(PRD)
        .args(["relay", "--config"])
        .arg(config)
        .env("ZODEX_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
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
        let _ = self.relay.kill();
        let _ = self.relay.wait();
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
