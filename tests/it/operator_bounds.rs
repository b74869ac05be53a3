//! What a hostile agent can do to the operator, end to end through the real binaries (issue 8):
//! write control sequences into what the operator reads, flood the publisher with requests
//! until its answers outgrow the reply cap, or answer on the admin socket in its place.

use crate::support;

use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::dev::{Dev, PRD};
use support::wait::eventually;

/// The longest reason the publisher accepts.
const MAX_REASON: usize = 1000;

/// A maximum-length reason made of the worst characters for a terminal and for JSON size:
/// ESC (six bytes once JSON-escaped), carriage returns, bidi overrides and C1 controls.
fn hostile_reason(i: usize) -> String {
    let head = format!("#{i} ok\r\u{1b}[2K\u{202e}\u{9b}31m");
    let mut reason = head.clone();
    while reason.chars().count() < MAX_REASON {
        reason.push('\u{1b}');
    }
    reason
}

fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            c != '\n'
                && (c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c) || c == '\u{2066}')
        })
        .collect()
}

/// `dev` restarted with `extra` (top-level keys) added to its configuration.
fn reconfigure(dev: &mut Dev, extra: &str) {
    let dir = dev.dir.to_str().unwrap().to_string();
    dev.zodex(&["dev", "down", "--dir", &dir]).ok();
    // Top-level keys go before the first table.
    let config = std::fs::read_to_string(dev.config()).unwrap();
    std::fs::write(dev.config(), format!("{extra}{config}")).unwrap();
    dev.info = dev
        .zodex(&["dev", "up", "--json", "--dir", &dir])
        .ok()
        .json()["result"]
        .clone();
}

fn request(dev: &Dev, repo: &str, reason: &str) -> support::dev::Run {
    dev.agent(&[
        "github",
        "request-push",
        "--repo",
        repo,
        "--reason",
        reason,
        "--json",
    ])
}

fn ids(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

/// 300 pending requests with maximum-length reasons, made through the agent socket, are far
/// over the 1 MiB reply cap in one answer: the operator still lists every one (pages) and
/// denies every one.
#[test]
fn three_hundred_maximum_requests_can_be_listed_and_denied() {
    let mut dev = Dev::up();
    reconfigure(&mut dev, "max_pending_requests = 300\n");
    let mut made = Vec::new();
    for i in 0..300 {
        let run = request(&dev, &format!("demo/r{i}"), &hostile_reason(i)).ok();
        made.push(run.json()["result"]["id"].as_i64().unwrap());
    }
    // One over the limit is refused by the publisher, whatever the agent CLI would allow.
    let long = "x".repeat(MAX_REASON + 1);
    let run = request(&dev, "demo/long", &long).code(2);
    assert!(run.stdout.contains("at most 1000"), "{}", run.stdout);

    // One page, asked for directly, fits the cap and points at the next.
    let page = admin(&dev, r#"{"op":"requests"}"#);
    assert!(page.line.len() < 1024 * 1024, "{} bytes", page.line.len());
    // 100 rows asked (the default), fewer given: the page is cut at half the cap in bytes.
    let rows = page.json["result"].as_array().unwrap().len();
    assert!((50..100).contains(&rows), "{rows} rows");
    assert!(page.json["next_before"].as_i64().is_some(), "{}", page.line);

    // The CLI follows the pages: all 300, oldest first.
    let all = dev.github_json(&["requests"]);
    assert_eq!(ids(&all["result"]), made, "{}", all["error"]);
    assert_eq!(all["result"][7]["reason"], hostile_reason(7));
    let human = dev.zodex(&["sprite", "github", "requests"]).ok();
    assert_eq!(human.stdout.lines().count(), 300, "{}", human.stderr);
    assert!(raw_controls(&human.stdout).is_empty());
    assert!(
        human
            .stdout
            .contains("reason: #7 ok\\r\\x1b[2K\\u{202e}\\x9b31m\\x1b")
    );
    // --limit / --before walk it by hand.
    let first = dev
        .zodex(&["sprite", "github", "requests", "--limit", "10"])
        .ok();
    let hint = first.stdout.lines().last().unwrap().to_string();
    assert!(hint.contains("--before"), "{}", first.stdout);
    let cursor = hint.split("--before ").nth(1).unwrap();
    let cursor: String = cursor.chars().take_while(char::is_ascii_digit).collect();
    let next = dev.github_json(&["requests", "--limit", "10", "--before", &cursor]);
    assert_eq!(ids(&next["result"]), made[280..290].to_vec());

    // Status stays within the cap and says how many there are.
    let status = dev.github_json(&["status"]);
    assert_eq!(status["result"]["pending_total"], 300);
    assert!(status["result"]["pending"].as_array().unwrap().len() <= 50);
    let human = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(
        human
            .stdout
            .contains("more: list them all with `zodex sprite github requests`"),
        "{}",
        human.stdout
    );

    for id in &made {
        dev.zodex(&["sprite", "github", "deny", &id.to_string()])
            .ok();
    }
    let run = dev.zodex(&["sprite", "github", "requests"]).ok();
    assert_eq!(run.stdout.trim(), "No pending requests.");
    // The audit shows every request and every denial, a page at a time.
    let audit = dev.github_json(&["audit"]);
    let actions: Vec<&str> = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions.iter().filter(|a| **a == "DenyRequest").count(), 300);
    assert_eq!(actions.iter().filter(|a| **a == "RequestPush").count(), 300);
}

/// The default cap: 20 pending requests; the 21st repository is refused with what the
/// operator can do, a second request for the same repository replaces the first.
#[test]
fn pending_requests_are_capped_and_a_new_request_replaces_the_old() {
    let dev = Dev::up();
    let mut made = Vec::new();
    for i in 0..20 {
        let run = request(&dev, &format!("demo/r{i}"), "work").ok();
        made.push(run.json()["result"]["id"].as_i64().unwrap());
    }
    let run = request(&dev, "demo/r20", "one more").code(1);
    let refusal = run.json();
    let message = refusal["error"]["message"].as_str().unwrap();
    for part in [
        "20",
        "zodex sprite github requests",
        "zodex sprite github deny ID",
    ] {
        assert!(message.contains(part), "{message}");
    }
    // Asking again for a repository that has a pending request replaces it, at the cap too.
    let again = request(&dev, "demo/r3", "a better reason").ok().json();
    let new_id = again["result"]["id"].as_i64().unwrap();
    let pending = dev.github_json(&["requests"]);
    let now: Vec<i64> = ids(&pending["result"]);
    assert_eq!(now.len(), 20);
    assert!(!now.contains(&made[3]) && now.contains(&new_id));
    let old = dev.agent(&["github", "status", "--json"]).ok().json();
    let ended = &old["result"]["recently_ended"][0];
    assert_eq!(ended["id"], made[3]);
    assert_eq!(ended["ended_by"], "agent:replaced");
    // Both are in the audit: the refusal and the replacement.
    let audit = dev.github_json(&["audit", "--limit", "2"]);
    let rows = audit["result"].as_array().unwrap();
    assert_eq!(rows[0]["decision"], "deny");
    assert_eq!(rows[0]["detail"]["refused"], "pending-request-cap");
    assert_eq!(rows[1]["detail"]["replaced"][0], made[3]);
    // The operator clears one; the agent can ask for another repository again.
    dev.zodex(&["sprite", "github", "deny", &made[0].to_string()])
        .ok();
    request(&dev, "demo/r20", "one more").ok();
}

/// Issue 8's rewrite of the `requests` line: every rendering shows the agent's text escaped,
/// `--json` carries the same value without raw controls.
#[test]
fn agent_text_reaches_the_operator_escaped() {
    let dev = Dev::up();
    let reason = "fix CI\r\u{1b}[2K#1 demo/other pending, asks for 30m\u{202e}\u{2066}\u{85}";
    request(&dev, "demo/app", reason).ok();
    for command in [&["requests"][..], &["status"], &["requests", "--json"]] {
        let mut args = vec!["sprite", "github"];
        args.extend_from_slice(command);
        let run = dev.zodex(&args).ok();
        assert!(
            raw_controls(&run.stdout).is_empty(),
            "{command:?}: {:?}",
            run.stdout
        );
        assert!(!run.stdout.contains('\u{2066}'), "{command:?}");
    }
    let human = dev.zodex(&["sprite", "github", "requests"]).ok();
    assert!(
        human.stdout.contains(
            "reason: fix CI\\r\\x1b[2K#1 demo/other pending, asks for 30m\\u{202e}\\u{2066}\\x85"
        ),
        "{}",
        human.stdout
    );
    assert_eq!(human.stdout.lines().count(), 1);
    let json = dev.github_json(&["requests"]);
    assert_eq!(json["result"][0]["reason"], reason);
}

/// A page of `zodex-prd admin`'s stdout, as one line and parsed.
struct Answer {
    line: String,
    json: Value,
    code: i32,
}

fn admin_with(config: &std::path::Path, request: &str) -> Answer {
    let out = support::rig::with_input(
        Command::new(PRD)
            .args(["admin", "--config"])
            .arg(config)
            .env_remove("ZODEX_CONFIG"),
        &format!("{request}\n"),
    );
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    Answer {
        json: serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")),
        line,
        code: out.status.code().unwrap_or(-1),
    }
}

fn admin(dev: &Dev, request: &str) -> Answer {
    admin_with(&dev.config(), request)
}

/// The child entry of the fake admin server (`support::child`).
const FAKE_CHILD: &str = "operator_bounds::child_fake_admin_server";
/// Set in the environment of the fake server this file runs as another uid.
const FAKE_SOCKET_ENV: &str = "OPERATOR_BOUNDS_FAKE_ADMIN_SOCKET";
const FAKE_LOG_ENV: &str = "OPERATOR_BOUNDS_FAKE_ADMIN_LOG";

/// The child entry of the fake admin server that
/// [`zodex_prd_admin_refuses_a_server_of_another_uid`] runs as another uid. It serves two
/// connections, logs how many request bytes each sent, and answers like a publisher would.
#[test]
#[ignore = "child process entry: started by its parent test"]
fn child_fake_admin_server() {
    support::child::enter(FAKE_CHILD);
    let socket = std::env::var_os(FAKE_SOCKET_ENV).expect("the socket path");
    let log = std::env::var_os(FAKE_LOG_ENV).expect("the log path");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::write(format!("{}.ready", log.to_string_lossy()), "").unwrap();
    let mut record = String::new();
    for _ in 0..2 {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if got.ends_with(b"\n") {
                break;
            }
        }
        record.push_str(&format!("{}\n", got.len()));
        std::fs::write(&log, &record).unwrap();
        let _ = stream.write_all(b"{\"ok\":true,\"result\":{\"version\":\"fake\"}}\n");
    }
}

/// Someone else answers on the admin socket path: `zodex-prd admin` asks the kernel who, and
/// refuses before sending a byte; the same server configured as the publisher is talked to.
#[test]
#[ignore = "needs root"]
fn zodex_prd_admin_refuses_a_server_of_another_uid() {
    support::users::require_root();
    use std::os::unix::fs::PermissionsExt;
    const OTHER: u32 = 65534;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::chown(&run, Some(OTHER), Some(OTHER)).unwrap();
    let socket = run.join("admin.sock");
    let log = run.join("fake.log");
    let mut fake = support::child::command(FAKE_CHILD)
        .env(FAKE_SOCKET_ENV, &socket)
        .env(FAKE_LOG_ENV, &log)
        .uid(OTHER)
        .gid(OTHER)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let ready = run.join("fake.log.ready");
    eventually("the fake server starts", Duration::from_secs(5), || {
        ready.exists()
    });
    let config = dir.path().join("zodex.toml");
    let base = format!(
        "state_dir = \"{d}/state\"\nadmin_socket = \"{s}\"\nagent_socket = \"{d}/agent.sock\"\nagent_uid = 0\n",
        d = dir.path().display(),
        s = socket.display()
    );
    std::fs::write(&config, &base).unwrap();
    let request = r#"{"op":"grant_push","repo":"demo/app","ttl":"no_ttl"}"#;
    let refused = admin_with(&config, request);
    assert_eq!(refused.code, 1);
    assert_eq!(refused.json["error"]["kind"], "forbidden");
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("served by uid {OTHER}"))
            && message.contains("impersonating zodex-prd")
            && message.contains(&socket.display().to_string()),
        "{message}"
    );
    // Configured as the publisher's uid, the same server is trusted: the check is what
    // stopped the first request.
    std::fs::write(&config, format!("{base}publisher_uid = {OTHER}\n")).unwrap();
    let trusted = admin_with(&config, request);
    assert_eq!(trusted.code, 0, "{}", trusted.line);
    assert_eq!(trusted.json["result"]["version"], "fake");
    let status = fake.wait().unwrap();
    assert!(status.success());
    let counts = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        counts,
        format!("0\n{}\n", request.len() + 1),
        "the refused client sent bytes"
    );
}

/// `zodex-prd serve` refuses a socket directory others can write to, before serving.
#[test]
fn serve_refuses_a_socket_directory_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
    let uid = nix::unistd::geteuid().as_raw();
    let config = dir.path().join("zodex.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{d}/state\"\nadmin_socket = \"{d}/run/admin.sock\"\nagent_socket = \"{d}/run/agent.sock\"\nagent_uid = {uid}\n",
            d = dir.path().display()
        ),
    )
    .unwrap();
    let mut child = Command::new(PRD)
        .args(["serve", "--config"])
        .arg(&config)
        .env_remove("ZODEX_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("writable by everyone") && stderr.contains("chmod go-w"),
        "{stderr}"
    );
    assert!(!run.join("admin.sock").exists());
}

/// An agent's request cannot end in a grant past `max_request_ttl` (4h by default): a longer
/// or unlimited request is refused with the way out, and the operator's own terms decide
/// past it.
#[test]
fn a_request_past_max_request_ttl_is_refused_and_the_operator_grants_longer() {
    let dev = Dev::up();
    for ttl in [&["--ttl", "5h"][..], &["--no-ttl"][..]] {
        let mut args = vec!["github", "request-push", "--repo", "demo/app"];
        args.extend_from_slice(ttl);
        let refused = dev.agent(&args).code(3);
        assert!(
            refused
                .stderr
                .contains("agent-terms-within-max-request-ttl")
                && refused.stderr.contains("ask for at most 4h"),
            "{}",
            refused.stderr
        );
    }
    let asked = dev.agent(&[
        "github",
        "request-push",
        "--repo",
        "demo/app",
        "--ttl",
        "4h",
        "--json",
    ]);
    let id = asked.ok().json()["result"]["id"].as_i64().unwrap();
    let approved = dev.github_json(&["approve", &id.to_string(), "--ttl", "8h"]);
    assert_eq!(approved["result"]["ttl_seconds"], 8 * 3600, "{approved}");
    let status = dev.zodex(&["sprite", "github", "status"]).ok();
    assert!(
        status.stdout.contains("at most 4h (max_request_ttl)"),
        "{}",
        status.stdout
    );
}
