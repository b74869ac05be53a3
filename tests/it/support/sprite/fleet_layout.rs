//! The sprite enrolled in a fleet: the same users and layout as a single sprite, but its
//! publisher user runs `zodex-prd relay` with the sprite's own key (`fleet/`, 0700; the key
//! 0600, made there by that user) and holds no App key and no state. The service is
//! `support::fleet`'s: a `zodex-prd serve` with `[fleet]`, root's, whose directory (App keys,
//! state, admin socket) and CA directory are 0700 — another host, as far as the agent goes.

use super::super::fleet::{FLEET, Fleet, start_relay};
use super::super::routines::Frame;
use super::super::users::{Users, require_root};
use super::{Publisher, Sprite, as_publisher, chmod, lay_out, mkdir, start_world};
use serde_json::json;
use std::path::PathBuf;
use std::process::Output;

/// The sprite's name in the fleet.
pub const NAME: &str = "sprite";
/// The operator who acts on the fleet with `zodex fleet`.
const OPERATOR: &str = "operator";

impl Sprite {
    /// A two-user sprite enrolled in a fleet, its relay serving the agent socket; fails the
    /// test when not root.
    pub fn deploy_in_a_fleet_as_root() -> Self {
        Self::deploy_in_a_fleet_as_root_with("")
    }

    /// [`Sprite::deploy_in_a_fleet_as_root`] with `extra` top-level settings in the relay's
    /// `zodex.toml` (`@ROOT@` in them stands for the sprite's directory).
    pub fn deploy_in_a_fleet_as_root_with(extra: &str) -> Self {
        require_root();
        let users = Users::create().expect("root can create the sprite's users");
        let layout = lay_out(&users);
        let fleet = Fleet::start_on(start_world());
        // Another host's, as far as the agent goes: the service's directories are root's alone
        // (a temporary directory's mode follows the umask).
        chmod(fleet.service.dir.path(), 0o700);
        chmod(fleet.ca.path(), 0o700);
        let publisher = &users.publisher;
        let root = layout.dir.path().to_path_buf();
        let files = mkdir(&root.join("fleet"), Some(publisher), None, 0o700);
        let prd = || as_publisher(&layout.bin, &layout.publisher_home, publisher);
        fleet.enrol_files(NAME, &[], &files, prd);
        let config = root.join("zodex.toml");
        std::fs::write(
            &config,
            format!(
                "{}\n{}\n\n{}",
                layout.head(&users),
                extra.replace("@ROOT@", &root.display().to_string()),
                fleet.relay_table(&files, &[fleet.url.as_str()])
            ),
        )
        .unwrap();
        chmod(&config, 0o644);
        let mut relay = prd();
        relay.args(["relay", "--config"]).arg(&config);
        let relay = start_relay(relay, &root.join("relay.log"), 0);
        layout.into_sprite(
            users,
            config,
            files,
            Publisher::Relay {
                relay,
                fleet: Box::new(fleet),
            },
        )
    }

    /// What the agent must not read in a fleet: the relay's key and certificate directory, its
    /// state directory, its /proc entries, and on the service its App keys, state, CA key, admin socket and /proc
    /// entries. Each file is checked to exist first (as root), so a refusal is never of nothing.
    pub(super) fn fleet_secrets(&self, fleet: &Fleet, relay: u32) -> Vec<(&'static str, PathBuf)> {
        let service = fleet.service.dir.path();
        let ca = fleet.ca.path();
        let files = [
            self.keys.join("key.pem"),
            service.join("keys/writer.pem"),
            service.join("keys/reader.pem"),
            self.state_db(),
            ca.join("ca/ca.key"),
            service.join("admin.sock"),
        ];
        for file in &files {
            assert!(file.exists(), "{} should exist", file.display());
        }
        let [key, writer, reader, db, ca_key, admin] = files;
        let mut secrets = vec![
            ("read", key),
            ("list", self.keys.clone()),
            ("list", self.state.clone()),
            ("read", writer),
            ("read", reader),
            ("list", service.join("keys")),
            ("list", service.join("state")),
            ("read", db),
            ("read", ca_key),
            ("list", ca.to_path_buf()),
            ("connect", admin),
        ];
        for pid in [relay, fleet.service.prd_pid()] {
            secrets.extend([
                ("read", PathBuf::from(format!("/proc/{pid}/environ"))),
                ("read", PathBuf::from(format!("/proc/{pid}/mem"))),
                ("list", PathBuf::from(format!("/proc/{pid}/fd"))),
            ]);
        }
        secrets
    }

    /// `zodex sprite github VERB ARGS…` as `zodex fleet VERB ARGS…`, by an operator with its own
    /// certificate (enrolled at the first call).
    pub(super) fn zodex_in_fleet(&self, fleet: &Fleet, args: &[&str]) -> Output {
        let Some(rest) = args.strip_prefix(&["sprite", "github"]) else {
            panic!("in a fleet the operator's verbs are `zodex fleet`'s: {args:?}");
        };
        let home = self.root.path().join("operator-home");
        if !home.exists() {
            std::fs::create_dir_all(&home).unwrap();
            fleet.operator(&home, OPERATOR);
        }
        let mut full = vec!["fleet", "--fleet", FLEET];
        full.extend(rest);
        fleet.zodex(&home, &full)
    }

    /// The relay still answers the agent, through to the service: a ping on the agent socket.
    #[track_caller]
    pub(super) fn assert_relay_answers(&self) {
        let answer = self.frames(vec![Frame::request(&json!({"op": "ping"}))]);
        assert_eq!(
            answer[0]["ok"],
            true,
            "the relay no longer answers the agent: {answer:?}\n{}",
            self.log()
        );
    }
}
