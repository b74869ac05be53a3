//! A two-user deployment under a temporary prefix, for the deployment suites (`deploy`,
//! `setup_safety`): real, uniquely named users (removed after), a devhub seeded with the
//! sprite world, the operator's copies of the App keys, and `zodex` run as the operator with
//! its own home. `zodex sprite setup` reaches the "sprite" through the `env` transport.

use super::dev::{PRD, Run, ZODEX};
use super::devhub::{Demo, keys};
use super::mcp_server::{Conn, tool_call};
use super::wait::poll;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use zodex::devhub::{DevHubConfig, start_in_background};

/// The accounts `install` creates, removed (after the services stop) when dropped.
pub struct Accounts {
    pub agent: String,
    pub publisher: String,
    pub group: String,
    pub prefix: PathBuf,
}

impl Accounts {
    /// Names no other test uses, for an install under `prefix` (nothing is created yet).
    pub fn unique(prefix: &Path) -> Self {
        let mut id = [0u8; 4];
        getrandom::fill(&mut id).unwrap();
        let id = hex::encode(id);
        Accounts {
            agent: format!("zxda-{id}"),
            publisher: format!("zxdp-{id}"),
            group: format!("zxdg-{id}"),
            prefix: prefix.to_path_buf(),
        }
    }

    /// `zodex-prd install`'s options naming these accounts.
    pub fn install_args(&self) -> Vec<String> {
        [
            "--prefix",
            &self.prefix.display().to_string(),
            "--agent-user",
            &self.agent,
            "--publisher-user",
            &self.publisher,
            "--group",
            &self.group,
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// `program ARGS` as the agent user, in its home, with a login's plain environment.
    pub fn as_agent(&self, program: &str, args: &[&str]) -> std::process::Output {
        let home = self.prefix.join("home").join(&self.agent);
        let path = format!(
            "PATH={}:/usr/local/bin:/usr/bin:/bin",
            self.prefix.join("usr/local/bin").display()
        );
        Command::new("runuser")
            .args(["-u", &self.agent, "--", "env", "-i"])
            .arg(format!("HOME={}", home.display()))
            .arg(path)
            .arg(format!(
                "ZODEX_CONFIG={}",
                self.prefix.join("etc/zodex/zodex.toml").display()
            ))
            .arg(program)
            .args(args)
            .current_dir(&home)
            .output()
            .unwrap()
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        let script = self.prefix.join("usr/local/lib/zodex/zodex-supervise");
        if script.exists() {
            let _ = Command::new("/bin/sh").arg(&script).arg("stop").output();
        }
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.agent])
            .output();
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.publisher])
            .output();
        // userdel refuses a user with a process left: until the killed ones are gone.
        let gone = |user: &str| {
            Command::new("pgrep")
                .args(["-u", user])
                .output()
                .is_ok_and(|out| out.stdout.is_empty())
        };
        poll(Duration::from_secs(5), || {
            gone(&self.agent) && gone(&self.publisher)
        });
        for user in [&self.agent, &self.publisher] {
            let _ = Command::new("userdel").arg("--force").arg(user).output();
        }
        for group in [&self.group, &self.publisher] {
            let _ = Command::new("groupdel").arg(group).output();
        }
    }
}

pub struct World {
    pub demo: Demo,
    pub home: tempfile::TempDir,
    /// The operator's copies of the App keys.
    pub keys: tempfile::TempDir,
    pub prefix: PathBuf,
    pub listen: String,
    pub accounts: Accounts,
    _root: tempfile::TempDir,
}

impl World {
    pub fn new() -> Self {
        let seed_dir = tempfile::tempdir().unwrap();
        let seed = super::sprite::world(seed_dir.path());
        let hub = start_in_background(DevHubConfig::new(seed_dir.path())).unwrap();
        let demo = Demo {
            hub,
            seed,
            dir: seed_dir,
            client: reqwest::blocking::Client::builder().build().unwrap(),
        };
        let root = tempfile::Builder::new()
            .prefix("zx-deploy-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let keys_dir = tempfile::tempdir().unwrap();
        let [reader, writer, _] = keys();
        std::fs::write(keys_dir.path().join("reader.pem"), &reader.private_pem).unwrap();
        std::fs::write(keys_dir.path().join("writer.pem"), &writer.private_pem).unwrap();
        let prefix = root.path().join("sprite");
        World {
            demo,
            home: tempfile::tempdir().unwrap(),
            keys: keys_dir,
            listen: format!("127.0.0.1:{}", zodex_store_pg::temp::free_port().unwrap()),
            accounts: Accounts::unique(&prefix),
            prefix,
            _root: root,
        }
    }

    /// A world whose sprite `box` is registered, set up and connected (its MCP key made).
    pub fn set_up_and_connected() -> Self {
        let world = World::new();
        world.zodex(&["sprite", "add", "box", "--exec", "env"]).ok();
        world.setup().ok();
        world.connect();
        world
    }

    /// `zodex ARGS` as the operator (a clean environment but for its own home).
    pub fn zodex(&self, args: &[&str]) -> Run {
        let mut command = Command::new(ZODEX);
        command.args(args).env("ZODEX_HOME", self.home.path());
        for (key, _) in std::env::vars() {
            if key.starts_with("ZODEX_") && key != "ZODEX_HOME" || key.starts_with("GIT_") {
                command.env_remove(key);
            }
        }
        Run::from(command.output().unwrap())
    }

    /// `zodex sprite setup`; `accounts` also names the accounts and the MCP address (a rerun
    /// without them keeps what was installed).
    pub fn setup(&self) -> Run {
        self.setup_with(true)
    }

    pub fn setup_with(&self, accounts: bool) -> Run {
        self.run_setup(&self.setup_args(accounts))
    }

    /// The arguments of `zodex sprite setup` with the operator's keys, both App ids, devhub's
    /// URLs and the target demo/app; a test may change any of them before [`Self::run_setup`].
    pub fn setup_args(&self, accounts: bool) -> Vec<String> {
        let key = |name: &str| self.keys.path().join(name).display().to_string();
        let api = self.demo.hub.api_url().trim_end_matches('/').to_string();
        let git = self.demo.hub.git_url().trim_end_matches('/').to_string();
        let binaries = Path::new(PRD).parent().unwrap().display().to_string();
        let mut args: Vec<String> = [
            "sprite",
            "setup",
            "--sprite",
            "box",
            "--writer-app-id",
            &self.demo.seed.writer_app_id.to_string(),
            "--writer-key",
            &key("writer.pem"),
            "--reader-app-id",
            &self.demo.seed.reader_app_id.to_string(),
            "--reader-key",
            &key("reader.pem"),
            "--github-url",
            &git,
            "--api-url",
            &api,
            "--target",
            "demo/app",
            "--binaries",
            &binaries,
            "--",
            "--prefix",
            &self.prefix.display().to_string(),
        ]
        .map(str::to_string)
        .to_vec();
        if accounts {
            args.extend(
                [
                    "--agent-user",
                    &self.accounts.agent,
                    "--publisher-user",
                    &self.accounts.publisher,
                    "--group",
                    &self.accounts.group,
                    "--mcp-listen",
                    &self.listen,
                ]
                .map(str::to_string),
            );
        }
        args
    }

    /// The value following `flag` in `args` set to `value`.
    pub fn set_arg(args: &mut [String], flag: &str, value: &str) {
        let at = args.iter().position(|a| a == flag).unwrap() + 1;
        args[at] = value.to_string();
    }

    pub fn run_setup(&self, args: &[String]) -> Run {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.zodex(&args)
    }

    /// `zodex sprite connect`: the operator's MCP key, which doctor's last check needs.
    pub fn connect(&self) {
        self.zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "box",
            "--host",
            "sprite.example.com",
        ])
        .ok();
    }

    pub fn config(&self) -> PathBuf {
        self.prefix.join("etc/zodex/zodex.toml")
    }

    /// `zodex sprite doctor` and its lines that fail.
    pub fn doctor(&self) -> (i32, Vec<String>, String) {
        let run = self.zodex(&["sprite", "doctor", "--sprite", "box"]);
        let failed = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .map(str::to_string)
            .collect();
        (run.code, failed, format!("{}{}", run.stdout, run.stderr))
    }

    #[track_caller]
    pub fn doctor_green(&self) {
        let (code, failed, all) = self.doctor();
        assert!(
            code == 0 && failed.is_empty(),
            "doctor is not green:\n{all}"
        );
    }

    /// Doctor fails, and one of its failing lines contains every one of `words`.
    #[track_caller]
    pub fn doctor_names(&self, words: &[&str]) -> String {
        let (code, failed, all) = self.doctor();
        assert_eq!(code, 1, "doctor must fail:\n{all}");
        failed
            .iter()
            .find(|l| words.iter().all(|w| l.contains(w)))
            .unwrap_or_else(|| panic!("no failing line names {words:?}:\n{all}"))
            .clone()
    }

    /// One command through the MCP endpoint, as the model would run it: exit code and output.
    /// A login shell's PATH holds /usr/local/bin, not the prefix's: the command adds it, as a
    /// `/` install needs not.
    pub fn exec(&self, cmd: &str) -> (i64, String) {
        let cmd = format!(
            "export PATH={}:$PATH; {cmd}",
            self.prefix.join("usr/local/bin").display()
        );
        let key = std::fs::read_to_string(self.home.path().join("sprites/box/mcp-url")).unwrap();
        let key = key.trim().split("key=").nth(1).unwrap().to_string();
        let mut conn = Conn::new(&self.listen);
        let reply = conn.post_json(
            &format!("/mcp?key={key}"),
            &tool_call(
                1,
                "exec_command",
                json!({"cmd": cmd, "workdir": "/", "yield_time_ms": 60000, "timeout_ms": 120000}),
            ),
            &[],
        );
        let result: Value = reply.json()["result"]["structuredContent"].clone();
        (
            result["exit_code"].as_i64().unwrap_or(-1),
            result["output"].as_str().unwrap_or_default().to_string(),
        )
    }

    pub fn sprite_prd(&self, args: &[&str]) -> Run {
        let prd = self.prefix.join("usr/local/bin/zodex-prd");
        let mut command = Command::new(prd);
        command.args(args).arg("--config").arg(self.config());
        Run::from(command.output().unwrap())
    }

    pub fn agent_processes(&self) -> usize {
        let out = Command::new("pgrep")
            .args(["-u", &self.accounts.agent])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    }

    pub fn edit_config(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(self.config()).unwrap();
        assert!(text.contains(from), "{from} not in the configuration");
        std::fs::write(self.config(), text.replace(from, to)).unwrap();
    }
}

/// The HTTP status of a `tools/list` with `key`, as if a proxy forwarded `host` in `Host`.
pub fn tools_list_status(listen: &str, key: &str, host: &str) -> u16 {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    reqwest::blocking::Client::new()
        .post(format!("http://{listen}/mcp?key={key}"))
        .header("Host", host)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(list.to_string())
        .send()
        .unwrap()
        .status()
        .as_u16()
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
