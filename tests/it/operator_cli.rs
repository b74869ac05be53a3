//! End to end through the real binaries: `zodex dev up`, the operator CLI over the exec
//! transport and admin socket, the agent CLI over the agent socket.

use crate::support;

use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::dev::{Dev, open_path_to};
use support::wait::eventually;

#[test]
fn grant_shows_in_status_on_both_sides_and_expires_by_ttl() {
    let dev = Dev::up();
    let grant = dev.github_json(&["grant-push", "--repo", "Demo/App", "--ttl", "2s"]);
    assert_eq!(grant["ok"], true, "{grant}");
    assert_eq!(grant["result"]["state"], "active");
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["grants"][0]["repo_key"], "demo/app");
    // The agent sees the same through its own socket.
    let agent = dev.agent(&["github", "status", "--json"]).ok().json();
    assert_eq!(agent["result"]["grants"][0]["repo_key"], "demo/app");
    dev.advance(3);
    let status = dev.github_json(&["status"]);
    assert_eq!(
        status["result"]["grants"].as_array().unwrap().len(),
        0,
        "{status}"
    );
    assert_eq!(
        status["result"]["recently_ended"][0]["shown_state"],
        "expired"
    );
    let human = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(
        human.stdout.contains("Active grants:\n  none"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("expired"), "{}", human.stdout);
    // The daemon's sweeper (every second) records the expiry in the audit log.
    let actions = eventually(
        "the sweeper records the expiry",
        Duration::from_secs(10),
        || {
            let audit = dev.github_json(&["audit", "--repo", "demo/app"]);
            let actions: Vec<String> = audit["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["action"].as_str().unwrap().to_string())
                .collect();
            (actions.len() > 1).then_some(actions)
        },
    );
    assert_eq!(actions, vec!["GrantPush", "ExpireGrant"]);
}

#[test]
fn zodex_sprite_names_the_sprite_unless_sprite_is_given() {
    let dev = Dev::up();
    let ghost = dev.zodex_for_sprite("ghost", &["sprite", "github", "status"]);
    assert_ne!(ghost.code, 0);
    assert!(
        ghost.stderr.contains("no sprite named `ghost`"),
        "{}",
        ghost.stderr
    );
    // The flag wins over the environment.
    dev.zodex_for_sprite("ghost", &["sprite", "github", "status", "--sprite", "dev"])
        .ok();
}

#[test]
fn revoke_push_ends_grants_and_explain_reflects_it() {
    let dev = Dev::up();
    dev.zodex(&[
        "sprite",
        "github",
        "grant-push",
        "--repo",
        "demo/app",
        "--no-ttl",
    ])
    .ok();
    // Explain is side-effect free and names the deciding policies.
    let run = dev
        .zodex(&[
            "sprite", "policy", "explain", "--action", "push", "--repo", "demo/app", "--ref",
            "main", "--delete",
        ])
        .code(3);
    assert!(
        run.stdout.contains("protect-default-branch"),
        "{}",
        run.stdout
    );
    let revoked = dev.github_json(&["revoke-push", "--repo", "DEMO/app.git"]);
    assert_eq!(revoked["result"][0]["state"], "revoked");
    let run = dev
        .zodex(&["sprite", "github", "revoke-push", "--repo", "demo/app"])
        .ok();
    assert!(run.stdout.contains("Nothing to revoke"), "{}", run.stdout);
    // No grant any more: nothing permits the push (coverage was checked by the first explain).
    let run = dev
        .zodex(&[
            "sprite",
            "policy",
            "explain",
            "--action",
            "push",
            "--repo",
            "demo/app",
            "--ref",
            "refs/heads/feature",
            "--json",
        ])
        .code(3);
    let explained = run.json();
    assert_eq!(explained["result"]["decision"]["allowed"], false);
    assert_eq!(
        explained["result"]["decision"]["grant_id"],
        serde_json::Value::Null
    );
    // Explain left no decision in the audit log; its one coverage check (read-only, the first
    // time GitHub was asked about demo/app) is there as such.
    let audit = dev.github_json(&["audit", "--repo", "demo/app"]);
    let actions: Vec<&str> = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        vec!["GrantPush", "CheckCoverage", "RevokePush", "RevokePush"]
    );
}

#[test]
fn bad_input_is_a_usage_error_that_shows_the_accepted_forms() {
    let dev = Dev::up();
    for ttl in ["0", "-5m", "", "5x", "1m1h", "99999999999999999999s"] {
        let run = dev
            .zodex(&[
                "sprite",
                "github",
                "grant-push",
                "--repo",
                "demo/app",
                "--ttl",
                ttl,
            ])
            .code(2);
        assert!(run.stderr.contains("1h30m"), "{ttl}: {}", run.stderr);
    }
    for repo in [
        "demo",
        "demo/app/extra",
        "demo/..",
        "de mo/app",
        "demo/a\u{1}pp",
        "-x/app",
    ] {
        let run = dev
            .zodex(&["sprite", "github", "grant-push", &format!("--repo={repo}")])
            .code(2);
        assert!(run.stderr.contains("OWNER/NAME"), "{repo}: {}", run.stderr);
    }
    dev.zodex(&[
        "sprite",
        "github",
        "grant-push",
        "--repo",
        "demo/app",
        "--ttl",
        "1h",
        "--no-ttl",
    ])
    .code(2);
    dev.agent(&[
        "github",
        "request-push",
        "--repo",
        "demo/app",
        "--ttl",
        "0s",
    ])
    .code(2);
    // Nothing was recorded by any of it.
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["grants"].as_array().unwrap().len(), 0);
}

#[test]
fn denials_exit_3_and_name_the_policy_and_the_unblocking_command() {
    let dev = Dev::up();
    let run = dev
        .zodex(&["sprite", "github", "grant-push", "--repo", "elsewhere/app"])
        .code(3);
    assert!(
        run.stderr.contains("require-configured-target"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("[[targets]]"), "{}", run.stderr);
    let json = dev.github_json(&["grant-push", "--repo", "elsewhere/app"]);
    assert_eq!(json["error"]["kind"], "denied");
    assert_eq!(json["error"]["policies"][0], "require-configured-target");
    // The agent may not read the audit log or set YOLO: those commands do not exist on its side,
    // and its socket's principal is the agent whatever it sends.
    let run = dev
        .agent(&["github", "request-push", "--repo", "elsewhere/app"])
        .code(3);
    assert!(
        run.stderr.contains("require-configured-target"),
        "{}",
        run.stderr
    );
}

#[test]
fn request_push_waits_for_approval_and_denied_requests_end_the_wait() {
    request_push_waits_for_approval_and_denial(&Dev::up());
}

#[test]
fn request_push_waits_for_approval_and_denial_on_postgres() {
    request_push_waits_for_approval_and_denial(&Dev::up_with(&["--postgres"]));
}

fn request_push_waits_for_approval_and_denial(dev: &Dev) {
    let waiter = dev
        .agent_command(&[
            "github",
            "request-push",
            "--repo",
            "demo/app",
            "--reason",
            "fix CI",
            "--wait",
            "--ttl",
            "10m",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_for_pending(dev);
    let approved = dev.github_json(&["approve", &id.to_string(), "--ttl", "5m"]);
    assert_eq!(approved["result"]["state"], "active");
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Approved") && stdout.contains("demo/app"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("approve {id}")), "{stderr}");

    let waiter = dev
        .agent_command(&["github", "request-push", "--repo", "demo/lib", "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_for_pending(dev);
    dev.zodex(&["sprite", "github", "deny", &id.to_string()])
        .ok();
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("was denied"));
    // Approving a denied request is a conflict, not a silent success.
    let run = dev
        .zodex(&["sprite", "github", "approve", &id.to_string()])
        .code(1);
    assert!(run.stderr.contains("not pending"), "{}", run.stderr);
}

/// The model runs `request-push --wait` in its PTY with `TERM=dumb`: stderr is a terminal, but
/// every byte of it is read as output, so the wait shows no spinner redrawn with `\r` — only
/// whole lines.
#[test]
fn request_push_wait_in_the_models_terminal_prints_lines_not_a_spinner() {
    use nix::sys::termios;
    let dev = Dev::up();
    let pty = nix::pty::openpty(None, None).unwrap();
    // Raw, so the terminal adds no `\r` of its own to each newline.
    let mut modes = termios::tcgetattr(&pty.slave).unwrap();
    termios::cfmakeraw(&mut modes);
    termios::tcsetattr(&pty.slave, termios::SetArg::TCSANOW, &modes).unwrap();
    // The waiter reaches the publisher through a socket that counts its requests.
    let real = PathBuf::from(dev.info["agent_socket"].as_str().unwrap());
    let proxy = real.with_file_name("agent-counted.sock");
    let config = dev.dir.join("counted.toml");
    let text = std::fs::read_to_string(dev.config()).unwrap();
    let text = text.replace(real.to_str().unwrap(), proxy.to_str().unwrap());
    assert!(text.contains("agent-counted.sock"), "{text}");
    std::fs::write(&config, text).unwrap();
    let requests = counting_proxy(&proxy, real);
    let waiter = dev
        .agent_command(&["github", "request-push", "--repo", "demo/app", "--wait"])
        .env("ZODEX_CONFIG", &config)
        .env("TERM", "dumb")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::from(pty.slave))
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the waiter (the last holder of the terminal) has exited.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let id = wait_for_pending(&dev);
    // A few polls while pending (the request, then polls every 500 ms): each would have
    // redrawn the spinner, and the later ones said "waiting 1s".
    eventually(
        "the waiter polls a few times",
        Duration::from_secs(30),
        || requests.load(Ordering::SeqCst) >= 5,
    );
    dev.github_json(&["approve", &id.to_string()]);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = reader.join().unwrap();
    assert!(stderr.contains(&format!("approve {id}")), "{stderr:?}");
    assert!(
        !stderr.contains('\r') && !stderr.contains("waiting 1s"),
        "a spinner in the model's output: {stderr:?}"
    );
}

/// A socket at `path` that passes every connection on to `target`, counting them.
fn counting_proxy(path: &Path, target: PathBuf) -> Arc<AtomicUsize> {
    let listener = UnixListener::bind(path).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = UnixStream::connect(&target) else {
                return;
            };
            seen.fetch_add(1, Ordering::SeqCst);
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    count
}

fn wait_for_pending(dev: &Dev) -> i64 {
    eventually("a pending request appears", Duration::from_secs(10), || {
        dev.github_json(&["requests"])["result"][0]["id"].as_i64()
    })
}

#[test]
fn yolo_then_default_clears_scopes_and_keeps_grants() {
    let dev = Dev::up();
    dev.zodex(&["sprite", "github", "grant-push", "--repo", "demo/app"])
        .ok();
    let set = dev.github_json(&["yolo", "--ttl", "1h"]);
    assert_eq!(set["result"][0]["repo_key"], serde_json::Value::Null);
    let set = dev.github_json(&[
        "yolo",
        "--repo",
        "demo/lib",
        "--repo",
        "demo/other",
        "--allow-workflows",
    ]);
    assert_eq!(set["result"].as_array().unwrap().len(), 2);
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["yolo"].as_array().unwrap().len(), 3);
    let run = dev.zodex(&["sprite", "github", "default"]).ok();
    assert!(run.stdout.contains("Cleared 3"), "{}", run.stdout);
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["yolo"].as_array().unwrap().len(), 0);
    assert_eq!(status["result"]["grants"].as_array().unwrap().len(), 1);
}

#[test]
fn concurrent_commands_never_lose_an_update() {
    let dev = Dev::up();
    std::thread::scope(|scope| {
        for i in 0..12 {
            let dev = &dev;
            scope.spawn(move || {
                dev.zodex(&[
                    "sprite",
                    "github",
                    "grant-push",
                    "--repo",
                    &format!("demo/r{i}"),
                ])
                .ok();
            });
        }
    });
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["grants"].as_array().unwrap().len(), 12);
}

#[test]
fn sprite_registry_choice_and_errors() {
    let dev = Dev::up();
    let list = dev.zodex(&["sprite", "list", "--json"]).ok().json();
    assert_eq!(list["result"][0]["name"], "dev");
    dev.zodex(&["sprite", "add", "far", "--exec", "sprite exec -s far --"])
        .ok();
    dev.zodex(&["sprite", "add", "far", "--local"]).code(1);
    let run = dev.zodex(&["sprite", "github", "status"]).code(1);
    assert!(
        run.stderr.contains("dev, far") && run.stderr.contains("--sprite"),
        "{}",
        run.stderr
    );
    dev.zodex(&["sprite", "github", "status", "--sprite", "dev"])
        .ok();
    let run = dev
        .zodex(&["sprite", "github", "status", "--sprite", "far"])
        .code(1);
    assert!(run.stderr.contains("far"), "{}", run.stderr);
    dev.zodex(&["sprite", "remove", "far"]).ok();
    dev.zodex(&["sprite", "github", "status"]).ok();
}

#[test]
fn dev_up_is_idempotent_and_down_stops_the_daemon() {
    dev_up_is_idempotent_and_down_stops_it(&Dev::up());
}

/// On PostgreSQL `dev up` again reuses the cluster, and `dev down` stops the server too.
#[test]
fn dev_up_postgres_is_idempotent_and_down_stops_the_server() {
    let dev = Dev::up_with(&["--postgres"]);
    let cluster = PathBuf::from(dev.info["postgres_dir"].as_str().unwrap());
    let pid_file = cluster.join("data/postmaster.pid");
    assert!(pid_file.exists(), "{}", dev.info);
    let server_pid = std::fs::read_to_string(&pid_file).unwrap();
    let again = dev
        .zodex(&[
            "dev",
            "up",
            "--postgres",
            "--json",
            "--dir",
            dev.dir.to_str().unwrap(),
        ])
        .ok()
        .json();
    assert_eq!(again["result"]["postgres_dir"], dev.info["postgres_dir"]);
    assert_eq!(again["result"]["store_url"], dev.info["store_url"]);
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap(),
        server_pid,
        "the same server"
    );
    dev_up_is_idempotent_and_down_stops_it(&dev);
    assert!(
        !pid_file.exists(),
        "dev down leaves PostgreSQL running: {server_pid}"
    );
    let pid: i32 = server_pid.lines().next().unwrap().trim().parse().unwrap();
    // pg_ctl returns once the pid file is gone; the server's last moments (and its reaping by
    // whoever adopted it) may follow by a few milliseconds. A zombie no longer runs.
    crate::support::wait::eventually(
        &format!("postgres {pid} exits after dev down"),
        std::time::Duration::from_secs(10),
        || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
        },
    );
}

fn dev_up_is_idempotent_and_down_stops_it(dev: &Dev) {
    let again = dev
        .zodex(&["dev", "up", "--dir", dev.dir.to_str().unwrap()])
        .ok();
    assert!(again.stdout.contains("already running"), "{}", again.stdout);
    assert!(
        std::fs::read_to_string(dev.dir.join("env.sh"))
            .unwrap()
            .contains("ZODEX_CONFIG")
    );
    let down = dev
        .zodex(&["dev", "down", "--dir", dev.dir.to_str().unwrap()])
        .ok();
    assert!(down.stdout.contains("Stopped"), "{}", down.stdout);
    let run = dev.agent(&["github", "status"]).code(1);
    assert!(
        run.stderr.contains("cannot reach zodex-prd"),
        "{}",
        run.stderr
    );
    let run = dev.zodex(&["sprite", "github", "status"]).code(1);
    assert!(
        run.stderr.contains("no sprite")
            || run.stderr.contains("No sprites")
            || run.stderr.contains("Add one"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_invalid_operator_policy_refuses_start_with_its_location() {
    let dev = Dev::up();
    let policies = dev.dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("mine.cedar"),
        "@id(\"mine\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen { context.bundle_size > 5 };\n",
    )
    .unwrap();
    let run = dev
        .prd(&["policy", "check", "--dir", policies.to_str().unwrap()])
        .code(1);
    assert!(run.stderr.contains("mine.cedar:3:"), "{}", run.stderr);
    let (broken, admin) = dev.second_config(
        "broken",
        &format!("policy_dir = \"{}\"", policies.display()),
    );
    let run = dev
        .prd(&["serve", "--config", broken.to_str().unwrap()])
        .code(1);
    assert!(
        run.stderr.contains("mine.cedar:3:") && run.stderr.contains("refusing to start"),
        "{}",
        run.stderr
    );
    assert!(!admin.exists());
    let ok = dev.prd(&["policy", "check"]).ok();
    assert!(ok.stdout.contains("explicit-grant-push"), "{}", ok.stdout);
}

#[test]
fn a_database_newer_than_the_binary_refuses_start() {
    let dev = Dev::up();
    dev.zodex(&["dev", "down", "--dir", dev.dir.to_str().unwrap()])
        .ok();
    let db = dev.dir.join("state/state.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 42).unwrap();
    drop(conn);
    let run = dev.prd(&["serve"]).code(1);
    assert!(
        run.stderr.contains("schema version 42") && run.stderr.contains("newer"),
        "{}",
        run.stderr
    );
}

/// The kernel's peer credentials decide who may talk: another uid is refused on the agent
/// socket, and on the admin socket even when its file mode would let it connect.
#[test]
#[ignore = "needs root"]
fn sockets_refuse_other_uids_before_reading_a_request() {
    support::users::require_root();
    let dev = Dev::up();
    let agent_socket = std::path::PathBuf::from(dev.info["agent_socket"].as_str().unwrap());
    let admin_socket = std::path::PathBuf::from(dev.info["admin_socket"].as_str().unwrap());
    open_path_to(&agent_socket);
    open_path_to(&dev.config());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dev.config(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = dev
        .agent_command(&["github", "status", "--json"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"forbidden\"") && stdout.contains("uid 65534"),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Relax the admin socket's mode: SO_PEERCRED still refuses.
    std::fs::set_permissions(&admin_socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = std::process::Command::new(support::dev::PRD)
        .args(["admin", "--config", dev.config().to_str().unwrap()])
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"{\"op\":\"status\"}\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"forbidden\"") && stdout.contains("admin"),
        "{stdout}"
    );
    assert!(dev.log().contains("refused a peer"), "{}", dev.log());
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[test]
fn dev_up_serves_mcp_and_connect_stores_only_the_hash_on_the_sprite() {
    use std::os::unix::fs::PermissionsExt;
    let dev = Dev::up();
    let url = dev.info["mcp_url"].as_str().unwrap().to_string();
    let key = url.split("key=").nth(1).unwrap().to_string();
    assert!(key.len() >= 22, "at least 128 bits: {url}");
    let hash_file = dev.dir.join("mcp-key.sha256");
    assert_eq!(
        std::fs::read_to_string(&hash_file).unwrap().trim(),
        sha256_hex(&key)
    );
    let url_file = dev.dir.join("mcp-url");
    assert_eq!(
        std::fs::metadata(&url_file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let run = dev
        .zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "dev",
            "--host",
            "sprite.example.test",
        ])
        .ok();
    let connected = run.stdout.trim().to_string();
    assert!(
        connected.starts_with("https://sprite.example.test/mcp?key="),
        "{connected}"
    );
    let new_key = connected.split("key=").nth(1).unwrap();
    assert_ne!(new_key, key);
    // Only the hash reached the sprite; the key is nowhere in its files or logs.
    assert_eq!(
        std::fs::read_to_string(&hash_file).unwrap().trim(),
        sha256_hex(new_key)
    );
    for entry in walk(&dev.dir) {
        let text = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(new_key),
            "the key leaked into {}",
            entry.display()
        );
    }
    let stored = dev.home.path().join("sprites/dev/mcp-url");
    assert_eq!(
        std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Same host without --rotate: the same URL; another host needs --rotate.
    let again = dev
        .zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "dev",
            "--host",
            "sprite.example.test",
        ])
        .ok();
    assert_eq!(again.stdout.trim(), connected);
    let run = dev
        .zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "dev",
            "--host",
            "other.example.test",
        ])
        .code(1);
    assert!(run.stderr.contains("--rotate"), "{}", run.stderr);
    let rotated = dev
        .zodex(&[
            "sprite",
            "connect",
            "--sprite",
            "dev",
            "--host",
            "sprite.example.test",
            "--rotate",
        ])
        .ok();
    assert_ne!(rotated.stdout.trim(), connected);
    dev.zodex(&[
        "sprite",
        "connect",
        "--sprite",
        "dev",
        "--host",
        "https://x/y",
    ])
    .code(1);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.is_file() {
            out.push(path);
        }
    }
    out
}

/// The walkthrough's clone: in the agent shell `env.sh` sets up, an ordinary GitHub URL reaches
/// the local GitHub through the credential helper; a repository without the reader App is
/// refused with one clear line.
#[test]
fn dev_up_env_clones_github_urls_from_the_local_github() {
    let dev = Dev::up();
    assert!(
        dev.info["devhub_git_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    let work = dev.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let script = format!(
        "source '{}' && cd '{}' && git clone -q https://github.com/demo/app && git -C app log --oneline | wc -l",
        dev.info["env_file"].as_str().unwrap(),
        work.display()
    );
    let out = support::devhub::without_git_env(
        std::process::Command::new("bash")
            .args(["-c", &script])
            .env("HOME", dev.home.path()),
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "3", "the seeded history");
    assert!(work.join("app/README.md").exists());
    // Tokens are logged as hashes only.
    assert!(dev.log().contains("token_sha256"), "{}", dev.log());
    assert!(!dev.log().contains("ghs_"), "a token leaked into the log");
}

/// The walkthrough `zodex dev up` prints, step by step: clone, publish a PR, grant, push,
/// revoke, push denied.
#[test]
fn the_dev_up_walkthrough_works_end_to_end() {
    the_dev_up_walkthrough(&Dev::up());
}

/// The same walk on `zodex dev up --postgres`: a read token for the clone, a pull request, a
/// push under a grant, and the push refused once the grant is revoked.
#[test]
fn the_dev_up_walkthrough_works_end_to_end_on_postgres() {
    the_dev_up_walkthrough(&Dev::up_with(&["--postgres"]));
}

fn the_dev_up_walkthrough(dev: &Dev) {
    let agent = agent_shell(dev);
    let (ok, out) = agent("git clone -q https://github.com/demo/app");
    assert!(ok, "{out}");
    let (ok, out) =
        agent("cd app && echo hi > hi.txt && git add hi.txt && git commit -q -m 'Say hi'");
    assert!(ok, "{out}");
    let (ok, out) =
        agent("cd app && zodex-agent github publish-pr --repo demo/app --title 'Say hi'");
    assert!(ok, "{out}\n{}", dev.log());
    assert!(out.contains("Opened pull request #"), "{out}");
    assert!(out.contains("branch zodex/"), "{out}");

    dev.zodex(&[
        "sprite",
        "github",
        "grant-push",
        "--repo",
        "demo/app",
        "--ttl",
        "30m",
    ])
    .ok();
    let (ok, out) = agent("cd app && git push origin HEAD:refs/heads/hi");
    assert!(ok, "{out}\n{}", dev.log());
    assert!(out.contains("[new branch]"), "{out}");

    dev.zodex(&["sprite", "github", "revoke-push", "--repo", "demo/app"])
        .ok();
    let (ok, out) = agent("cd app && git push origin HEAD:refs/heads/hi-again");
    assert!(!ok, "{out}");
    assert!(out.contains("request-push"), "{out}");
}

/// A fresh `zodex dev up`, nothing has touched GitHub yet: `policy explain` checks which Apps
/// are installed (read-only calls, audited as a coverage check) instead of calling "not
/// checked yet" "not installed", and shows GitHub's default branch. When GitHub fails that
/// check, it says so (exit 1, never 3) with the command to try again.
#[test]
fn explain_on_a_fresh_rig_checks_coverage_instead_of_saying_not_installed() {
    let dev = Dev::up();
    let explain = |repo: &str| {
        dev.zodex(&[
            "sprite", "policy", "explain", "--action", "push", "--repo", repo, "--ref", "feature",
        ])
    };
    let run = explain("demo/app").code(3);
    assert!(!run.stdout.contains("not installed"), "{}", run.stdout);
    assert!(
        run.stdout.contains("default branch main") && run.stdout.contains("writer installed true"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("grant-push --repo demo/app"),
        "{}",
        run.stdout
    );
    let audit = dev.github_json(&["audit", "--repo", "demo/app"]);
    let checks: Vec<&serde_json::Value> = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "CheckCoverage")
        .collect();
    assert_eq!(checks.len(), 1, "{audit:#}");
    assert_eq!(checks[0]["decision"], "event");

    // GitHub failing the check: GitHub's failure, worded as such, with what to run again.
    let hub = zodex::devhub::RunInfo::load(&dev.dir.join("devhub")).unwrap();
    let injected = reqwest::blocking::Client::new()
        .post(format!("{}/_devhub/faults", hub.api_url))
        .header(zodex::devhub::ADMIN_KEY_HEADER, &hub.admin_key)
        .json(&serde_json::json!({"kind": "status", "status": 502, "times": 1000}))
        .send()
        .unwrap();
    assert_eq!(injected.status().as_u16(), 204);
    let run = explain("demo/lib").code(1);
    for words in [
        "GitHub answered 502",
        "demo/lib",
        "unknown",
        "try again",
        "zodex sprite policy explain",
    ] {
        assert!(
            run.stderr.contains(words),
            "should say {words:?}: {}",
            run.stderr
        );
    }
    for words in ["not installed", "denied", "policy refused"] {
        assert!(!run.stderr.contains(words), "{}", run.stderr);
    }
    let json = dev
        .zodex(&[
            "sprite", "policy", "explain", "--action", "push", "--repo", "demo/lib", "--ref",
            "feature", "--json",
        ])
        .code(1)
        .json();
    assert_eq!(json["error"]["kind"], "upstream");
}

/// `status` says, per active or pending grant, whether the writer App covers its repository —
/// and "unknown" with the command that checks, never "not installed", before anything has
/// asked GitHub.
#[test]
fn status_says_unknown_coverage_is_unknown_with_the_command_that_checks() {
    let dev = Dev::up();
    dev.zodex(&["sprite", "github", "grant-push", "--repo", "demo/app"])
        .ok();
    let run = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(!run.stdout.contains("not installed"), "{}", run.stdout);
    assert!(
        run.stdout.contains("writer App: unknown")
            && run
                .stdout
                .contains("zodex sprite policy explain --action push --repo demo/app"),
        "{}",
        run.stdout
    );
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["grants"][0]["writer_app"], "unknown");

    // Checked (explain checks): now it is known, on both sides.
    dev.zodex(&[
        "sprite", "policy", "explain", "--action", "push", "--repo", "demo/app", "--ref", "feature",
    ])
    .ok();
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["grants"][0]["writer_app"], "installed");
    let run = dev.agent(&["github", "status"]).ok();
    assert!(!run.stdout.contains("unknown"), "{}", run.stdout);
}

/// A shell as the agent of `dev`'s sprite (its `env.sh` sourced) in a work directory: runs a
/// script and answers whether it succeeded, with its stdout and stderr.
fn agent_shell(dev: &Dev) -> impl Fn(&str) -> (bool, String) + '_ {
    let env_file = dev.info["env_file"].as_str().unwrap().to_string();
    let work = dev.home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    move |script: &str| {
        let out = support::devhub::without_git_env(
            std::process::Command::new("bash")
                .args([
                    "-c",
                    &format!("source '{env_file}' && cd '{}' && {script}", work.display()),
                ])
                .env("HOME", dev.home.path()),
        )
        .output()
        .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

#[test]
fn a_grant_limited_to_ref_patterns_lets_the_agent_push_only_there() {
    let dev = Dev::up();
    let agent = agent_shell(&dev);
    let (ok, out) = agent(
        "git clone -q https://github.com/demo/app && cd app && echo x > x.txt && git add x.txt && git commit -q -m x",
    );
    assert!(ok, "{out}");
    let grant = dev.github_json(&[
        "grant-push",
        "--repo",
        "demo/app",
        "--ref",
        "feature/*",
        "--ref",
        "refs/tags/v1",
    ]);
    assert_eq!(
        grant["result"]["refs"],
        serde_json::json!(["refs/heads/feature/*", "refs/tags/v1"]),
        "{grant}"
    );
    let (ok, out) = agent("cd app && git push origin HEAD:refs/heads/feature/one");
    assert!(ok, "{out}\n{}", dev.log());
    let (ok, out) = agent("cd app && git push origin HEAD:refs/heads/other");
    assert!(!ok, "{out}");
    assert!(out.contains("refs/heads/other"), "{out}");

    // Status, explain and the audit show the limit.
    let status = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(
        status
            .stdout
            .contains("refs: refs/heads/feature/*, refs/tags/v1"),
        "{}",
        status.stdout
    );
    let explain = dev
        .zodex(&[
            "sprite", "policy", "explain", "--action", "push", "--repo", "demo/app", "--ref",
            "other",
        ])
        .code(3);
    assert!(
        explain
            .stdout
            .contains("refs: refs/heads/feature/*, refs/tags/v1 (does not cover this ref)"),
        "{}",
        explain.stdout
    );
    let audit = dev.github_json(&["audit", "--repo", "demo/app"]);
    assert!(
        audit["result"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["detail"]["refs"][0] == "refs/heads/feature/*"),
        "{audit}"
    );

    // A bad pattern is a usage error that shows the grammar; a token grant cannot be limited.
    let bad = dev
        .zodex(&[
            "sprite",
            "github",
            "grant-push",
            "--repo",
            "demo/app",
            "--ref",
            "feat*",
        ])
        .code(2);
    assert!(
        bad.stderr.contains("prefix ending in `/*`"),
        "{}",
        bad.stderr
    );
    let token = dev
        .zodex(&[
            "sprite",
            "github",
            "grant-push",
            "--repo",
            "demo/app",
            "--ref",
            "main",
            "--via",
            "token",
        ])
        .code(3);
    assert!(
        token.stderr.contains("ref-limited-grants-use-the-gateway"),
        "{}",
        token.stderr
    );

    // YOLO scopes take the same limits.
    dev.zodex(&["sprite", "github", "revoke-push", "--repo", "demo/app"])
        .ok();
    dev.zodex(&[
        "sprite", "github", "yolo", "--repo", "demo/app", "--ref", "bot/*",
    ])
    .ok();
    let (ok, out) = agent("cd app && git push origin HEAD:refs/heads/bot/1");
    assert!(ok, "{out}\n{}", dev.log());
    let (ok, out) = agent("cd app && git push origin HEAD:refs/heads/feature/two");
    assert!(!ok, "{out}");
}

/// An exec-reached sprite whose configuration is not at the default path: the registry keeps the
/// remote path and every admin request passes it.
#[test]
fn an_exec_sprites_own_config_path_reaches_every_admin_request() {
    let dev = Dev::up();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_zodex-prd"))
        .parent()
        .unwrap();
    // The "remote" shell knows nothing of this test's $ZODEX_CONFIG.
    let exec = format!("env -u ZODEX_CONFIG PATH={}:/usr/bin:/bin", bin.display());
    let config = dev.config();
    dev.zodex(&[
        "sprite",
        "add",
        "viaexec",
        "--exec",
        &exec,
        "--config",
        config.to_str().unwrap(),
    ])
    .ok();
    let status = dev.zodex_for_sprite("viaexec", &["sprite", "github", "status", "--json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert_eq!(status.json()["ok"], true);
    // Without --config the sprite's default path is asked for, and the error names it.
    dev.zodex(&["sprite", "add", "noconfig", "--exec", &exec])
        .ok();
    let run = dev.zodex_for_sprite("noconfig", &["sprite", "github", "status"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("/etc/zodex/zodex.toml")
            || run.stdout.contains("/etc/zodex/zodex.toml"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

/// `zodex sprite doctor` on `zodex dev up`'s sprite checks what a one-user trial has (no
/// install record, no services, no second user) and passes while it is healthy, with the key
/// URL on and, once OAuth is the only way in, off.
#[test]
fn doctor_checks_a_dev_sprite_as_what_it_is_with_the_key_url_on_and_off() {
    let dev = Dev::up();
    let doctor = || dev.zodex(&["sprite", "doctor", "--sprite", "dev"]);
    let run = doctor();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("a `zodex dev up` installation")
            && run.stdout.contains("lists exactly the three tools"),
        "{}",
        run.stdout
    );
    dev.zodex(&["sprite", "mcp", "key", "off", "--sprite", "dev"])
        .ok();
    let run = doctor();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("OAuth-only (key URL off)"),
        "{}",
        run.stdout
    );
}

/// The MCP endpoint's port is chosen free and kept across restarts, but `zodex-agent serve`
/// binds it only when it starts: taken by another process meanwhile, `dev up` moves the
/// endpoint to a free port instead of failing, and it answers there.
#[test]
fn dev_up_moves_the_mcp_endpoint_off_a_taken_port() {
    let dev = Dev::up();
    let before = dev.info["mcp_url"].as_str().unwrap().to_string();
    let address = |url: &str| {
        let rest = url.trim_start_matches("http://");
        rest[..rest.find('/').unwrap()].to_string()
    };
    let dir = dev.dir.to_str().unwrap();
    dev.zodex(&["dev", "down", "--dir", dir]).ok();
    let _squatter = std::net::TcpListener::bind(address(&before)).unwrap();
    let up = dev.zodex(&["dev", "up", "--json", "--dir", dir]).ok();
    let after = up.json()["result"]["mcp_url"].as_str().unwrap().to_string();
    assert_ne!(address(&after), address(&before), "{}", up.stdout);
    let health = reqwest::blocking::get(format!("http://{}/health", address(&after))).unwrap();
    assert_eq!(health.status(), 200);
}
