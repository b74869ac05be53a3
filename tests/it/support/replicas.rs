//! Publishers sharing one PostgreSQL database: a `zodex dev up` installation's configuration
//! copied per replica (its own state directory and sockets) with `[store]` naming the
//! database, each replica a real `zodex-prd serve`.

use super::dev::{AGENT, Dev, PRD, Run};
use super::wait::eventually_with;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A new database on the test process's own PostgreSQL server, prepared by `zodex-prd store
/// init` (as the server's owner); returns the URL publishers connect with: the publisher role.
pub fn prepared_database() -> String {
    prepared_database_and_owner().0
}

/// [`prepared_database`]'s publisher URL, and its owner's (the maintenance role's).
pub fn prepared_database_and_owner() -> (String, String) {
    let owner_url = zodex_store_pg::temp::fresh_database();
    let run = Run::from(
        Command::new(PRD)
            .args(["store", "init", "--url", &owner_url, "--json"])
            .output()
            .unwrap(),
    )
    .ok();
    assert_eq!(run.json()["result"]["publisher_role"], "zodex_publisher");
    (as_role(&owner_url, "zodex_publisher"), owner_url)
}

/// `url` with its user replaced by `role`.
pub fn as_role(url: &str, role: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (_, rest) = rest.split_once('@').unwrap();
    format!("{scheme}://{role}@{rest}")
}

/// One `zodex-prd serve` on the shared database, killed when dropped.
pub struct Replica {
    pub name: String,
    pub config: PathBuf,
    pub admin_socket: PathBuf,
    child: Child,
    log: PathBuf,
}

impl Replica {
    pub fn start(dev: &Dev, name: &str, url: &str) -> Replica {
        Self::start_with(dev, name, url, "")
    }

    /// [`Replica::start`] with `extra` (tables such as `[[audit_sinks]]`) at the end of its
    /// configuration.
    pub fn start_with(dev: &Dev, name: &str, url: &str, extra: &str) -> Replica {
        let (config, admin_socket) = dev.second_config(name, "");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!("\n[store]\nurl = \"{url}\"\n{extra}\n"));
        std::fs::write(&config, text).unwrap();
        let log = dev.dir.join(format!("{name}.log"));
        let child = Command::new(PRD)
            .args(["serve", "--config", config.to_str().unwrap()])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut replica = Replica {
            name: name.into(),
            config,
            admin_socket,
            child,
            log,
        };
        // Both sockets: the agent's is bound after the admin's.
        let agent_socket = replica
            .admin_socket
            .with_file_name(format!("agent-{name}.sock"));
        let admin_socket = replica.admin_socket.clone();
        let log = replica.log.clone();
        eventually_with(
            &format!("replica {name} listens"),
            Duration::from_secs(60),
            || std::fs::read_to_string(&log).unwrap_or_default(),
            || {
                if let Ok(Some(status)) = replica.child.try_wait() {
                    panic!(
                        "replica {name} exited ({status}): {}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                admin_socket.exists() && agent_socket.exists()
            },
        );
        replica
    }

    /// One admin request (JSON) through `zodex-prd admin`; the response.
    pub fn admin(&self, request: &str) -> Value {
        let mut child = Command::new(PRD)
            .args(["admin", "--config", self.config.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "replica {}: not JSON ({e}): {}{}",
                self.name,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// One admin request through the admin socket from this process (no `zodex-prd admin`
    /// process per call): for tests that send thousands.
    pub fn admin_in_process(&self, request: &str) -> Value {
        let answer = zodex::publisher::sockets::admin_call(&self.admin_socket, None, request)
            .unwrap_or_else(|e| panic!("replica {}: {e}", self.name));
        serde_json::to_value(answer).unwrap()
    }

    /// `zodex-agent ARGS` talking to this replica's agent socket.
    pub fn agent(&self, dev: &Dev, args: &[&str]) -> Run {
        let mut command = dev.agent_command(args);
        command.env("ZODEX_CONFIG", &self.config);
        let _ = AGENT;
        Run::from(command.output().unwrap())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the process at once, as a crash would (SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The ids of the events in a JSON Lines sink file, in file order.
pub fn ids_in(path: &std::path::Path) -> Vec<i64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect()
}

/// The file of a JSON Lines audit sink `siem` in `dev`'s directory, and the configuration
/// that adds it.
pub fn jsonl_sink(dev: &Dev) -> (std::path::PathBuf, String) {
    let file = dev.dir.join("siem.jsonl");
    let sink = format!(
        "[[audit_sinks]]\nkind = \"jsonl\"\nname = \"siem\"\npath = \"{}\"\n",
        file.display()
    );
    (file, sink)
}
