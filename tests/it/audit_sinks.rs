//! The audit leaves the sprite as it is written (issue 24), through a real `zodex-prd`: a JSON
//! Lines file read back with `jq`, a syslog receiver on TCP, and a webhook receiver that checks
//! every signature and is down for a while — the rows reach it after it comes back, across a
//! restart of the publisher, in order and once each.

use crate::support;
use zodex_store_pg::temp::free_port;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::rig::Rig;
use support::wait::eventually;
use zodex::agent::client::call;
use zodex::protocol::{AgentRequest, Ttl};

const HOUR: Duration = Duration::from_secs(3600);
const SECRET: &str = "a webhook secret";

/// A webhook receiver on a fixed port: it keeps each delivery whose signature holds.
struct Hook {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Clone)]
struct Delivery {
    id: i64,
    event: Value,
    signed: bool,
}

impl Hook {
    fn start(port: u16, got: Arc<Mutex<Vec<Delivery>>>) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                // `stop` wakes this accept with a connection of its own.
                if halt.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(stream) = stream {
                    receive(stream, &got);
                }
            }
        });
        Self {
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// Closes the port (a delivery after this finds nobody listening).
    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        self.thread.take().unwrap().join().unwrap();
    }
}

fn receive(stream: TcpStream, got: &Mutex<Vec<Delivery>>) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut headers = std::collections::HashMap::new();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("POST /zodex "), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(name.trim().to_lowercase(), value.trim().to_string());
    }
    let length: usize = headers["content-length"].parse().unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
    let timestamp = &headers["x-zodex-timestamp"];
    let signed = headers
        .get("x-zodex-signature-256")
        .and_then(|s| s.strip_prefix("sha256="))
        .and_then(|s| hex::decode(s).ok())
        .is_some_and(|tag| {
            let message = [timestamp.as_bytes(), b".", &body].concat();
            ring::hmac::verify(&key, &message, &tag).is_ok()
        });
    let event: Value = serde_json::from_slice(&body).unwrap();
    got.lock().unwrap().push(Delivery {
        id: headers["x-zodex-delivery"].parse().unwrap(),
        event,
        signed,
    });
    let mut stream = reader.into_inner();
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// Octet-counted RFC 5424 frames from one TCP connection at a time.
fn syslog_receiver(frames: Arc<Mutex<Vec<String>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            loop {
                let mut length = Vec::new();
                if reader.read_until(b' ', &mut length).unwrap_or(0) == 0 {
                    break;
                }
                let n: usize = String::from_utf8_lossy(&length).trim().parse().unwrap();
                let mut frame = vec![0; n];
                reader.read_exact(&mut frame).unwrap();
                frames
                    .lock()
                    .unwrap()
                    .push(String::from_utf8(frame).unwrap());
            }
        }
    });
    port
}

/// How long a sink may take to deliver, or to say how it fares.
const WAIT: Duration = Duration::from_secs(30);

/// The `id`s of the JSON Lines file, as `jq` reads them.
fn jq_ids(file: &Path) -> Vec<i64> {
    let out = std::process::Command::new("jq")
        .args(["-r", ".id"])
        .arg(file)
        .output()
        .expect("jq (Debian's jq package) reads the JSON Lines sink back in this test");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn sink_state(rig: &Rig, name: &str) -> Value {
    let status = rig.admin(r#"{"op":"status"}"#);
    status["result"]["audit_sinks"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["sink"] == name).cloned())
        .unwrap_or_else(|| panic!("no sink {name} in status: {status}"))
}

#[test]
fn every_row_reaches_each_sink_in_order_and_once_though_the_webhook_was_down() {
    let out = tempfile::tempdir().unwrap();
    let jsonl = out.path().join("audit.jsonl");
    let secret = out.path().join("hook.secret");
    std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
    let hook_port = free_port().unwrap();
    let frames = Arc::new(Mutex::new(Vec::new()));
    let syslog_port = syslog_receiver(frames.clone());
    let extra = format!(
        r#"
[[audit_sinks]]
name = "file"
kind = "jsonl"
path = "{jsonl}"

[[audit_sinks]]
name = "hook"
kind = "webhook"
url = "http://127.0.0.1:{hook_port}/zodex"
secret_file = "{secret}"

[[audit_sinks]]
name = "siem"
kind = "syslog"
address = "tcp:127.0.0.1:{syslog_port}"
"#,
        jsonl = jsonl.display(),
        secret = secret.display(),
    );
    let mut rig = Rig::start_with(HOUR, &extra);
    let socket = rig.dir.path().join("agent.sock");
    let ask = |repo: &str, reason: &str| {
        call(
            &socket,
            &AgentRequest::RequestPush {
                repo: repo.into(),
                ttl: Ttl::Seconds(1800),
                reason: Some(reason.into()),
            },
        )
        .unwrap()
    };

    // The webhook receiver is down: its sink fails and says so; the others deliver.
    rig.grant_push("demo/app");
    assert!(ask("demo/lib", "ship the <fix> & more").ok);
    assert!(!ask("zeta/x", "not a target").ok);
    eventually("the file has the three rows", WAIT, || {
        jsonl.exists() && jq_ids(&jsonl).len() >= 3
    });
    eventually("status shows the webhook failing", WAIT, || {
        sink_state(&rig, "hook")["failures"].as_i64() > Some(0)
    });
    let failing = sink_state(&rig, "hook");
    assert!(failing["pending"].as_i64() >= Some(3), "{failing}");
    let error = failing["last_error"].as_str().unwrap();
    assert!(
        error.contains(&format!("http://127.0.0.1:{hook_port}")),
        "{error}"
    );
    assert!(
        !error.contains("/zodex"),
        "the URL's path stays out: {error}"
    );

    // It comes back: what waited arrives, in order, once each, signed.
    let got = Arc::new(Mutex::new(Vec::new()));
    let hook = Hook::start(hook_port, got.clone());
    let written = jq_ids(&jsonl);
    eventually("the webhook has every row", WAIT, || {
        got.lock().unwrap().len() >= written.len()
    });
    hook.stop();
    // Down again, across a restart of the publisher: nothing pending is lost.
    rig.admin(r#"{"op":"revoke_push","repo":"demo/app"}"#);
    rig.restart();
    assert!(!ask("zeta/y", "after the restart").ok);
    eventually(
        "the file has the refusal made after the restart",
        WAIT,
        || std::fs::read_to_string(&jsonl).is_ok_and(|t| t.contains("\"zeta/y\"")),
    );
    let hook = Hook::start(hook_port, got.clone());
    let written = jq_ids(&jsonl);
    eventually(
        "the webhook has the rows written while it was down",
        WAIT,
        || got.lock().unwrap().len() >= written.len(),
    );
    hook.stop();
    let written = jq_ids(&jsonl);
    let delivered = got.lock().unwrap().clone();
    let ids: Vec<i64> = delivered.iter().map(|d| d.id).collect();
    assert_eq!(ids, written, "every row, in order, once each");
    assert!(
        delivered.iter().all(|d| d.signed),
        "every delivery is signed"
    );
    assert!(
        delivered
            .iter()
            .all(|d| d.event["schema"] == 1 && d.event["id"].as_i64() == Some(d.id))
    );
    let request = delivered
        .iter()
        .find(|d| d.event["action"] == "RequestPush" && d.event["decision"] == "allow")
        .expect("the agent's request");
    assert_eq!(request.event["detail"]["reason"], "ship the <fix> & more");
    assert_eq!(request.event["repo"], "demo/lib");
    assert!(
        delivered
            .iter()
            .any(|d| d.event["decision"] == "deny" && d.event["repo"] == "zeta/y"),
        "the refusal made after the restart"
    );
    eventually("the hook's sink is healthy again", WAIT, || {
        sink_state(&rig, "hook")["failures"] == 0
    });

    // syslog got the same rows, each an RFC 5424 message naming its row.
    eventually("syslog has every row", WAIT, || {
        frames.lock().unwrap().len() >= written.len()
    });
    let frames = frames.lock().unwrap().clone();
    for (frame, id) in frames.iter().zip(&written) {
        assert!(frame.starts_with('<') && frame.contains(">1 "), "{frame}");
        assert!(
            frame.contains(&format!("[zodex@32473 id=\"{id}\" ")),
            "{frame}"
        );
    }
    assert_eq!(frames.len(), written.len(), "once each");
}

#[test]
fn with_audit_required_no_write_is_made_while_no_sink_can_take_its_record() {
    let out = tempfile::tempdir().unwrap();
    let secret = out.path().join("hook.secret");
    std::fs::write(&secret, SECRET).unwrap();
    let hook_port = free_port().unwrap();
    let extra = format!(
        r#"audit_required = true

[[audit_sinks]]
name = "hook"
kind = "webhook"
url = "http://127.0.0.1:{hook_port}/zodex"
secret_file = "{secret}"
"#,
        secret = secret.display(),
    );
    let rig = Rig::start_with(HOUR, &extra);
    rig.grant_push("demo/app");
    eventually("the webhook's sink is failing", WAIT, || {
        sink_state(&rig, "hook")["failures"].as_i64() > Some(0)
    });
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    support::devhub::commit_file(&app, "r.txt", b"recorded\n", "recorded");
    let refused = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/recorded"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("audit_required is on and no audit sink can take the record"),
        "{stderr}"
    );
    assert_eq!(
        rig.remote_sha("app", "refs/heads/recorded"),
        None,
        "nothing reached GitHub"
    );

    // The receiver is back: the sink catches up, and the same push goes through.
    let got = Arc::new(Mutex::new(Vec::new()));
    let hook = Hook::start(hook_port, got.clone());
    eventually("the webhook's sink is healthy", WAIT, || {
        sink_state(&rig, "hook")["failures"] == 0
    });
    let pushed = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/recorded"]);
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    eventually("the push's record reached the webhook", WAIT, || {
        got.lock()
            .unwrap()
            .iter()
            .any(|d| d.event["ref"] == "refs/heads/recorded" && d.event["decision"] == "allow")
    });
    hook.stop();
}

/// rsyslogd (Debian's rsyslog) listening on TCP, writing what it parsed of each message.
struct Rsyslog {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Rsyslog {
    fn start(dir: &Path, port: u16) -> Self {
        let log = dir.join("zodex.log");
        let conf = dir.join("rsyslog.conf");
        std::fs::write(
            &conf,
            format!(
                r#"global(workDirectory="{dir}")
module(load="imtcp")
template(name="parsed" type="string" string="%syslogfacility-text%.%syslogseverity-text% %app-name% %msgid% %structured-data% %msg%\n")
ruleset(name="zodex") {{ action(type="omfile" file="{log}" template="parsed") }}
input(type="imtcp" address="127.0.0.1" port="{port}" ruleset="zodex")
"#,
                dir = dir.display(),
                log = log.display(),
            ),
        )
        .unwrap();
        let child = std::process::Command::new("/usr/sbin/rsyslogd")
            .args(["-n", "-i"])
            .arg(dir.join("rsyslogd.pid"))
            .arg("-f")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("rsyslogd (Debian's rsyslog package) receives the syslog sink in this test");
        eventually("rsyslogd listens", WAIT, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Self { child, log }
    }
}

#[test]
fn rsyslog_parses_every_row_as_rfc_5424_with_its_structured_data() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().unwrap();
    let rsyslog = Rsyslog::start(dir.path(), port);
    let extra = format!(
        "\n[[audit_sinks]]\nname = \"siem\"\nkind = \"syslog\"\naddress = \"tcp:127.0.0.1:{port}\"\n"
    );
    let rig = Rig::start_with(HOUR, &extra);
    rig.grant_push("demo/app");
    let socket = rig.dir.path().join("agent.sock");
    let refused = call(
        &socket,
        &AgentRequest::RequestPush {
            repo: "zeta/x".into(),
            ttl: Ttl::Seconds(600),
            reason: None,
        },
    )
    .unwrap();
    assert!(!refused.ok);
    let lines = || std::fs::read_to_string(&rsyslog.log).unwrap_or_default();
    eventually("rsyslog wrote the grant and the refusal", WAIT, || {
        let text = lines();
        text.contains(" GrantPush ") && text.contains(" RequestPush ")
    });
    let text = lines();
    let grant = text.lines().find(|l| l.contains(" GrantPush ")).unwrap();
    assert!(
        grant.starts_with("authpriv.notice zodex-prd GrantPush [zodex@32473 id=\""),
        "{grant}"
    );
    let denial = text.lines().find(|l| l.contains(" RequestPush ")).unwrap();
    assert!(
        denial.starts_with("authpriv.warning zodex-prd RequestPush "),
        "{denial}"
    );
    let json = &denial[denial.find('{').unwrap()..];
    let event: Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        (event["decision"].as_str(), event["repo"].as_str()),
        (Some("deny"), Some("zeta/x"))
    );
}

/// A store restored from an older backup (or left behind by a failover that lost commits)
/// under a sink that already shipped newer rows: the publisher says so at start — an
/// `AuditBehindSink` row and `audit --verify` failing with the rows to restore — instead of
/// going on as if the chain had never held them.
#[test]
fn a_store_restored_from_an_older_backup_under_a_sink_is_named_with_the_rows_to_restore() {
    let out = tempfile::tempdir().unwrap();
    let jsonl = out.path().join("audit.jsonl");
    let extra = format!(
        "\n[[audit_sinks]]\nname = \"file\"\nkind = \"jsonl\"\npath = \"{}\"\n",
        jsonl.display()
    );
    let mut rig = Rig::start_with(HOUR, &extra);
    let socket = rig.dir.path().join("agent.sock");
    let ask = |repo: &str| {
        let asked = AgentRequest::RequestPush {
            repo: repo.into(),
            ttl: Ttl::Seconds(1800),
            reason: None,
        };
        assert!(call(&socket, &asked).unwrap().ok);
    };
    let state = rig.dir.path().join("state");
    let files = ["state.db", "state.db-wal", "state.db-shm"];
    ask("demo/app");
    eventually("the sink shipped the first request", WAIT, || {
        jsonl.exists() && !jq_ids(&jsonl).is_empty()
    });
    // The backup: the store's files while the publisher is stopped.
    rig.kill9();
    let backup = tempfile::tempdir().unwrap();
    for file in files {
        let _ = std::fs::copy(state.join(file), backup.path().join(file));
    }
    rig.restart();
    ask("demo/lib");
    ask("demo/app");
    let shipped = eventually("the sink shipped the newer requests", WAIT, || {
        let ids = jq_ids(&jsonl);
        (ids.len() >= 3).then_some(ids.len())
    });
    // The older backup is restored under the sink.
    rig.kill9();
    for file in files {
        let _ = std::fs::remove_file(state.join(file));
        let _ = std::fs::copy(backup.path().join(file), state.join(file));
    }
    rig.restart();
    let verified = eventually("audit --verify names the lost rows", WAIT, || {
        let verified = rig.admin_ok(r#"{"op":"audit_verify"}"#);
        (verified["result"]["ok"] == false).then_some(verified)
    });
    let problems: Vec<&str> = verified["result"]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["problem"].as_str())
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("sink file shipped chain") && p.contains("were lost")),
        "{problems:?} ({shipped} rows shipped)"
    );
    let audit = rig.admin_ok(r#"{"op":"audit","limit":50}"#);
    let recorded = audit["result"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["action"] == "AuditBehindSink");
    assert!(recorded, "an AuditBehindSink row: {audit}");
}
