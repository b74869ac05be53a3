//! The operator's side of a sprite (root): admin requests, `zodex-prd admin` and `zodex`, on the
//! sprite's own publisher or, in a fleet, on the service.

use super::super::wait::poll;
use super::{Publisher, Sprite};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

// The operator's side (root).
impl Sprite {
    pub(super) fn try_admin(&self, request: &Value) -> std::io::Result<Value> {
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
