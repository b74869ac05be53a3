//! A real two-user deployment, end to end, as root: `zodex sprite setup` through an exec
//! transport installs into a temporary prefix with real, uniquely named users (removed after),
//! the services run under the supervisor script, the whole walkthrough runs as the agent user
//! through the MCP endpoint (clone, publish-pr, a denied push, grant, push, revoke, denied
//! again), `doctor` is green; then one thing at a time is broken — a key made 0644, the
//! publisher stopped, a wrong `api_url`, the writer App uninstalled from a target, the socket
//! directory made writable — and `doctor` names each and its fix; a second setup changes
//! nothing; stopping the agent service leaves no process of the agent user behind.

mod support;

use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::dev::{AGENT, PRD, Run, ZODEX};
use support::devhub::{Demo, keys};
use support::mcp_server::{Conn, tool_call};
use support::users::skip_unless_root;
use zodex::devhub::{DevHubConfig, start_in_background};

/// The accounts `install` creates, removed (after the services stop) when dropped.
struct Accounts {
    agent: String,
    publisher: String,
    group: String,
    prefix: PathBuf,
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
        std::thread::sleep(Duration::from_millis(200));
        for user in [&self.agent, &self.publisher] {
            let _ = Command::new("userdel").arg("--force").arg(user).output();
        }
        for group in [&self.group, &self.publisher] {
            let _ = Command::new("groupdel").arg(group).output();
        }
    }
}

struct World {
    demo: Demo,
    home: tempfile::TempDir,
    /// The operator's copies of the App keys.
    keys: tempfile::TempDir,
    prefix: PathBuf,
    listen: String,
    accounts: Accounts,
    _root: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl World {
    fn new() -> Self {
        let seed_dir = tempfile::tempdir().unwrap();
        let seed = support::sprite::world(seed_dir.path());
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
        let mut id = [0u8; 4];
        getrandom::fill(&mut id).unwrap();
        let id = hex::encode(id);
        let keys_dir = tempfile::tempdir().unwrap();
        let [reader, writer, _] = keys();
        std::fs::write(keys_dir.path().join("reader.pem"), &reader.private_pem).unwrap();
        std::fs::write(keys_dir.path().join("writer.pem"), &writer.private_pem).unwrap();
        let prefix = root.path().join("sprite");
        World {
            demo,
            home: tempfile::tempdir().unwrap(),
            keys: keys_dir,
            listen: format!("127.0.0.1:{}", free_port()),
            accounts: Accounts {
                agent: format!("zxda-{id}"),
                publisher: format!("zxdp-{id}"),
                group: format!("zxdg-{id}"),
                prefix: prefix.clone(),
            },
            prefix,
            _root: root,
        }
    }

    /// `zodex ARGS` as the operator (a clean environment but for its own home).
    fn zodex(&self, args: &[&str]) -> Run {
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
    fn setup(&self) -> Run {
        self.setup_with(true)
    }

    fn setup_with(&self, accounts: bool) -> Run {
        let writer_id = self.demo.seed.writer_app_id.to_string();
        let reader_id = self.demo.seed.reader_app_id.to_string();
        let key = |name: &str| self.keys.path().join(name).display().to_string();
        let (writer_key, reader_key) = (key("writer.pem"), key("reader.pem"));
        let api = self.demo.hub.api_url().trim_end_matches('/').to_string();
        let git = self.demo.hub.git_url().trim_end_matches('/').to_string();
        let prefix = self.prefix.display().to_string();
        let binaries = Path::new(PRD).parent().unwrap().display().to_string();
        let mut args = vec![
            "sprite",
            "setup",
            "--sprite",
            "box",
            "--writer-app-id",
            &writer_id,
            "--writer-key",
            &writer_key,
            "--reader-app-id",
            &reader_id,
            "--reader-key",
            &reader_key,
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
            &prefix,
        ];
        if accounts {
            args.extend([
                "--agent-user",
                &self.accounts.agent,
                "--publisher-user",
                &self.accounts.publisher,
                "--group",
                &self.accounts.group,
                "--mcp-listen",
                &self.listen,
            ]);
        }
        self.zodex(&args)
    }

    fn config(&self) -> PathBuf {
        self.prefix.join("etc/zodex/zodex.toml")
    }

    /// `zodex sprite doctor` and its lines that fail.
    fn doctor(&self) -> (i32, Vec<String>, String) {
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
    fn doctor_green(&self) {
        let (code, failed, all) = self.doctor();
        assert!(
            code == 0 && failed.is_empty(),
            "doctor is not green:\n{all}"
        );
    }

    /// Doctor fails, and one of its failing lines contains every one of `words`.
    #[track_caller]
    fn doctor_names(&self, words: &[&str]) -> String {
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
    fn exec(&self, cmd: &str) -> (i64, String) {
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

    fn sprite_prd(&self, args: &[&str]) -> Run {
        let prd = self.prefix.join("usr/local/bin/zodex-prd");
        let mut command = Command::new(prd);
        command.args(args).arg("--config").arg(self.config());
        Run::from(command.output().unwrap())
    }

    fn agent_processes(&self) -> usize {
        let out = Command::new("pgrep")
            .args(["-u", &self.accounts.agent])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    }

    fn edit_config(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(self.config()).unwrap();
        assert!(text.contains(from), "{from} not in the configuration");
        std::fs::write(self.config(), text.replace(from, to)).unwrap();
    }
}

/// The HTTP status of a `tools/list` with `key`, as if a proxy forwarded `host` in `Host`.
fn tools_list_status(listen: &str, key: &str, host: &str) -> u16 {
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

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_two_user_sprite_is_set_up_walked_through_broken_and_repaired() {
    if skip_unless_root() {
        return;
    }
    let world = World::new();
    world.zodex(&["sprite", "add", "box", "--exec", "env"]).ok();

    // A setup that cannot go on says where it stopped and changes nothing on the sprite.
    let writer_key = world.keys.path().join("writer.pem");
    std::fs::write(&writer_key, "not a key").unwrap();
    let stopped = world.setup().code(1);
    assert!(
        stopped
            .stderr
            .contains("setup stopped at step 1 (read the App keys)")
            && stopped
                .stderr
                .contains("run the same `zodex sprite setup` again"),
        "{}",
        stopped.stderr
    );
    assert!(
        !world.prefix.exists(),
        "nothing may be installed before the keys are read"
    );
    std::fs::write(&writer_key, &keys()[1].private_pem).unwrap();

    // Setup through the transport: keys over stdin, services up, the self-check as the agent.
    let setup = world.setup().ok();
    assert!(setup.stdout.contains("is set up"), "{}", setup.stdout);
    assert!(
        setup
            .stdout
            .contains("the agent cannot read the writer App key")
            && setup.stdout.contains("the agent's git reads demo/app")
            && setup.stdout.contains("both Apps are installed on demo/app"),
        "{}",
        setup.stdout
    );
    assert!(setup.stdout.contains("Next: zodex sprite connect"));
    // The units are checked where systemd's own checker exists (CI has no running systemd).
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        assert!(
            setup.stdout.contains("systemd-analyze verify: ok"),
            "{}",
            setup.stdout
        );
    }
    // The operator CLI is not on the sprite; the keys are the publisher's alone.
    let bin = world.prefix.join("usr/local/bin");
    assert!(!bin.join("zodex").exists());
    for name in ["zodex-agent", "zodex-prd", "git-remote-zodex"] {
        assert!(bin.join(name).is_file(), "{name} missing");
    }
    let key_mode = std::fs::metadata(world.prefix.join("etc/zodex/keys/writer.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(key_mode & 0o777, 0o600);
    let units = world.prefix.join("etc/systemd/system");
    let unit = std::fs::read_to_string(units.join("zodex-agent.service")).unwrap();
    for line in ["KillMode=control-group", "MemoryMax=", "TasksMax="] {
        assert!(unit.contains(line), "the agent unit lacks {line}");
    }
    let unit = std::fs::read_to_string(units.join("zodex-prd.service")).unwrap();
    for line in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=",
        "PrivateTmp=yes",
    ] {
        assert!(unit.contains(line), "the publisher unit lacks {line}");
    }
    // The registry now reaches the installed zodex-prd with its configuration.
    let list = world.zodex(&["sprite", "list"]).ok();
    assert!(
        list.stdout
            .contains(&format!("admin --config {}", world.config().display())),
        "{}",
        list.stdout
    );

    // Connect (the running agent service picks the new key up), then doctor is green.
    let url = world
        .zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "box",
            "--host",
            "sprite.example.com",
        ])
        .ok();
    assert!(
        url.stdout
            .starts_with("https://sprite.example.com/mcp?key=")
    );
    assert!(!url.stderr.contains("warning"), "{}", url.stderr);
    // What the HTTPS proxy forwards is accepted: the connector works as printed.
    let key = url.stdout.trim().split("key=").nth(1).unwrap().to_string();
    assert_eq!(
        tools_list_status(&world.listen, &key, "sprite.example.com"),
        200
    );
    assert_ne!(
        tools_list_status(&world.listen, &key, "evil.example.com"),
        200
    );
    world.doctor_green();
    let status = world.zodex(&["sprite", "status", "--sprite", "box"]).ok();
    assert!(
        status
            .stdout
            .contains(&format!("zodex-agent: running as {}", world.accounts.agent))
            && status.stdout.contains(&format!(
                "zodex-prd: running as {}",
                world.accounts.publisher
            )),
        "{}",
        status.stdout
    );

    // The walkthrough, as the agent user, through the MCP endpoint.
    let git = world.demo.hub.git_url().trim_end_matches('/').to_string();
    let (code, out) = world.exec(&format!(
        "id -un && git clone -q {git}/demo/app.git ~/app && cd ~/app && git checkout -q -b feature \
         && echo hello > greeting.txt && git add greeting.txt && git commit -q -m 'Add a greeting' \
         && zodex-agent github publish-pr --repo demo/app --title 'Add a greeting'"
    ));
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&world.accounts.agent), "{out}");
    assert!(out.contains("/pull/"), "{out}");
    let (code, out) = world.exec("cd ~/app && git push origin HEAD:refs/heads/direct 2>&1");
    assert_ne!(code, 0, "a push without a grant must fail: {out}");
    world
        .zodex(&[
            "sprite",
            "github",
            "grant-push",
            "--sprite",
            "box",
            "--repo",
            "demo/app",
            "--ttl",
            "10m",
        ])
        .ok();
    let (code, out) = world.exec("cd ~/app && git push origin HEAD:refs/heads/direct 2>&1");
    assert_eq!(code, 0, "{out}");
    world
        .zodex(&[
            "sprite",
            "github",
            "revoke-push",
            "--sprite",
            "box",
            "--repo",
            "demo/app",
        ])
        .ok();
    let (code, out) = world.exec(
        "cd ~/app && echo more >> greeting.txt && git commit -qam more && git push origin HEAD:refs/heads/direct 2>&1",
    );
    assert_ne!(code, 0, "a push after the revocation must fail: {out}");

    // Break one thing at a time; doctor names it and its fix; the fix makes it green again.
    let key = world.prefix.join("etc/zodex/keys/writer.pem");
    chmod(&key, 0o644);
    world.doctor_names(&["writer", "chmod 600"]);
    chmod(&key, 0o600);
    world.doctor_green();

    world
        .sprite_prd(&["service", "stop", "--service", "zodex-prd"])
        .ok();
    world.doctor_names(&["zodex-prd is not running", "zodex sprite restart"]);
    world.zodex(&["sprite", "restart", "--sprite", "box"]).ok();
    world.doctor_green();

    let api = world.demo.hub.api_url().trim_end_matches('/').to_string();
    world.edit_config(
        &format!("api_url = \"{api}\""),
        &format!("api_url = \"{git}\""),
    );
    let restart = world.zodex(&["sprite", "restart", "--sprite", "box"]);
    assert_ne!(restart.code, 0, "zodex-prd must refuse a wrong api_url");
    world.doctor_names(&["not a GitHub API"]);
    world.edit_config(
        &format!("api_url = \"{git}\""),
        &format!("api_url = \"{api}\""),
    );
    world.zodex(&["sprite", "restart", "--sprite", "box"]).ok();
    world.doctor_green();

    let description = world.demo.dir.path().join("devhub.json");
    let original = std::fs::read_to_string(&description).unwrap();
    let mut hub: Value = serde_json::from_str(&original).unwrap();
    let writer_id = world.demo.seed.writer_app_id;
    for installation in hub["installations"].as_array_mut().unwrap() {
        if installation["app_id"] == writer_id {
            installation["repositories"] = json!(["lib", "trunk"]);
        }
    }
    std::fs::write(&description, hub.to_string()).unwrap();
    world.demo.hub.reload().unwrap();
    world.doctor_names(&["writer App is not installed on demo/app"]);
    std::fs::write(&description, original).unwrap();
    world.demo.hub.reload().unwrap();
    world.doctor_green();

    let sockets = world.prefix.join("var/lib/zodex-sockets");
    chmod(&sockets, 0o770);
    world.doctor_names(&["socket", "750"]);
    chmod(&sockets, 0o750);
    world.doctor_green();

    // A second setup changes nothing, even without the accounts and address: install keeps
    // what it installed unless told otherwise.
    let again = world.setup_with(false).ok();
    assert!(
        again
            .stdout
            .contains("binaries already installed; 0 steps changed"),
        "{}",
        again.stdout
    );

    // Stopping the agent service ends every process of the agent, detached ones included.
    let (code, out) = world.exec(
        "nohup sh -c 'trap \"\" HUP TERM; while :; do sleep 300 & sleep 0.2; done' >/dev/null 2>&1 & \
         setsid sh -c 'trap \"\" HUP TERM; sleep 300' >/dev/null 2>&1 & echo started",
    );
    assert_eq!(code, 0, "{out}");
    assert!(world.agent_processes() >= 3);
    world
        .sprite_prd(&["service", "stop", "--service", "zodex-agent"])
        .ok();
    let start = Instant::now();
    while world.agent_processes() > 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        world.agent_processes(),
        0,
        "processes of the agent survived its service"
    );
    world.zodex(&["sprite", "restart", "--sprite", "box"]).ok();
    world.doctor_green();

    // An upgrade replaces the binaries, restarts both services and checks the version.
    let binaries = Path::new(PRD).parent().unwrap().display().to_string();
    let upgraded = world
        .zodex(&[
            "sprite",
            "upgrade",
            "--sprite",
            "box",
            "--binaries",
            &binaries,
        ])
        .ok();
    assert!(
        upgraded.stdout.contains("zodex-prd: running")
            && upgraded.stdout.contains("zodex-agent: running"),
        "{}",
        upgraded.stdout
    );
    world.doctor_green();

    // A service that dies is started again by its supervisor.
    let status = world
        .sprite_prd(&["service", "status", "--json"])
        .ok()
        .json();
    let pid_of = |status: &Value| {
        status["result"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["service"] == "zodex-prd")
            .and_then(|s| s["pid"].as_i64())
    };
    let killed = pid_of(&status).expect("zodex-prd runs");
    Command::new("kill")
        .args(["-KILL", &killed.to_string()])
        .status()
        .unwrap();
    let start = Instant::now();
    loop {
        let now = world.sprite_prd(&["service", "status", "--json"]).json();
        if pid_of(&now).is_some_and(|pid| pid != killed)
            && world
                .zodex(&["sprite", "github", "status", "--sprite", "box"])
                .code
                == 0
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "zodex-prd was not restarted after it died"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    world.doctor_green();

    // The logs are there for the operator.
    let logs = world
        .zodex(&[
            "sprite",
            "logs",
            "--sprite",
            "box",
            "--service",
            "zodex-prd",
            "--lines",
            "300",
        ])
        .ok();
    assert!(
        logs.stdout.contains("restarting in 2s") && !logs.stdout.contains("\\x1b"),
        "the supervisor's restart is in the log:\n{}",
        logs.stdout
    );
    let _ = AGENT;
}

/// A publisher that crashes at every start (its writer key made 0644) leads the operator to
/// the cause: the failed restart says the cause first, once `error:`, and the fix they can run
/// from their machine; `status` says "restarting", not "stopped", with the last error; `doctor`
/// lists the key first and marks what follows from it.
#[test]
fn a_publisher_in_a_crash_loop_leads_the_operator_to_its_cause() {
    if skip_unless_root() {
        return;
    }
    let world = World::new();
    world.zodex(&["sprite", "add", "box", "--exec", "env"]).ok();
    world.setup().ok();
    let key = world.prefix.join("etc/zodex/keys/writer.pem");
    chmod(&key, 0o644);

    let restart = world
        .zodex(&["sprite", "restart", "--sprite", "box"])
        .code(1);
    // Shown with `--nocapture`: what the operator reads.
    println!("--- zodex sprite restart:\n{}", restart.stderr);
    let lines: Vec<&str> = restart.stderr.lines().collect();
    assert!(
        lines[0].starts_with("error: writer key ")
            && lines[0].contains("readable by others (mode 644): chmod 600"),
        "the cause must come first:\n{}",
        restart.stderr
    );
    assert!(
        !restart.stderr.contains("error: error:") && !restart.stderr.contains("\\n"),
        "{}",
        restart.stderr
    );
    assert!(
        restart
            .stderr
            .contains("zodex-prd did not come up within 20 s"),
        "{}",
        restart.stderr
    );
    let next = lines
        .iter()
        .find(|l| l.trim_start().starts_with("next: "))
        .unwrap_or_else(|| panic!("no fix:\n{}", restart.stderr));
    assert!(
        next.contains("`zodex sprite logs --service zodex-prd`")
            && next.contains("`zodex sprite doctor`"),
        "{next}"
    );
    assert!(
        !restart.stderr.contains("zodex-prd check-ground") && !restart.stderr.contains(" INFO "),
        "only what the operator can act on:\n{}",
        restart.stderr
    );

    let status = world
        .zodex(&["sprite", "status", "--sprite", "box"])
        .code(1);
    println!("--- zodex sprite status:\n{}", status.stdout);
    let prd = status
        .stdout
        .lines()
        .find(|l| l.starts_with("zodex-prd: "))
        .unwrap();
    assert!(
        prd.starts_with("zodex-prd: restarting (")
            && prd.contains(" times in the last minute)")
            && prd.contains("last error: writer key ")
            && prd.contains("chmod 600"),
        "{}",
        status.stdout
    );
    let json = world
        .zodex(&["sprite", "status", "--sprite", "box", "--json"])
        .json();
    let restarts = json["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["service"] == "zodex-prd")
        .unwrap()["restarts"]["last_minute"]
        .as_u64()
        .unwrap();
    assert!(restarts >= 2, "{json}");

    let (code, failed, all) = world.doctor();
    println!("--- zodex sprite doctor:\n{all}");
    assert_eq!(code, 1, "{all}");
    assert!(
        failed[0].contains("writer key ") && failed[0].contains("chmod 600"),
        "the cause must be the first failure:\n{all}"
    );
    for check in ["zodex-prd keeps exiting", "zodex-prd does not answer"] {
        let line = failed
            .iter()
            .find(|l| l.contains(check))
            .unwrap_or_else(|| panic!("no `{check}`:\n{all}"));
        assert!(line.contains("[follows from: writer-key]"), "{line}");
    }

    chmod(&key, 0o600);
    let restart = world.zodex(&["sprite", "restart", "--sprite", "box"]).ok();
    assert!(
        restart.stdout.contains("zodex-prd: running as"),
        "{}",
        restart.stdout
    );
}

/// `zodex local start --public-url`: behind a tunnel or reverse proxy, the printed URL is the
/// public one and the public host is accepted; another host still is not.
#[test]
fn a_local_server_behind_a_tunnel_prints_and_accepts_its_public_url() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let local = |args: &[&str]| {
        let mut command = Command::new(ZODEX);
        command
            .arg("local")
            .args(args)
            .env("ZODEX_HOME", home.path())
            .env("HOME", home.path())
            .current_dir(project.path())
            .stdin(std::process::Stdio::null());
        Run::from(command.output().unwrap())
    };
    let refused = local(&["start", "--public-url", "http://tunnel.example.com"]).code(2);
    assert!(refused.stderr.contains("HTTPS"), "{}", refused.stderr);
    let listen = format!("127.0.0.1:{}", free_port());
    let started = local(&[
        "start",
        "--listen",
        &listen,
        "--ttl",
        "10m",
        "--public-url",
        "https://tunnel.example.com/",
        "--json",
    ])
    .ok();
    let url = started.json()["result"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        url.starts_with("https://tunnel.example.com/mcp?key="),
        "{url}"
    );
    let key = url.split("key=").nth(1).unwrap();
    let status = |host: &str| tools_list_status(&listen, key, host);
    assert_eq!(status("tunnel.example.com"), 200);
    assert_ne!(status("evil.example.com"), 200);
    local(&["stop"]).ok();
}
