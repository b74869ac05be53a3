//! `zodex-prd serve` checks its ground before it serves: a key others can read, a symlinked
//! state directory, a group-writable socket directory, an `api_url` that is no GitHub API, an
//! App id that is not its key's, a reader App that can write — each refuses start with one line
//! naming the fix, and no socket appears. With all right, it serves, and `zodex-prd
//! check-ground` says so. A devhub and the real binary.

use crate::support;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::devhub::Demo;
use support::rig::{PRD, Rig, text, write_config};
use support::wait::poll;

/// A devhub and a rig configuration not served yet.
struct Ground {
    demo: Demo,
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Ground {
    fn new() -> Self {
        let demo = Demo::start();
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(&demo, dir.path(), "");
        Self { demo, dir, config }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Rewrites one line of the configuration.
    fn edit(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        assert!(text.contains(from), "{from} not in {text}");
        std::fs::write(&self.config, text.replacen(from, to, 1)).unwrap();
    }

    /// `zodex-prd serve` must exit by itself, refusing; its stderr.
    fn refused(&self) -> String {
        let out = serve(&self.config);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        // Shown with `--nocapture`: what the operator reads.
        println!("--- zodex-prd serve refused:\n{stderr}");
        assert_ne!(out.status.code(), Some(0), "{}", text(&out));
        for socket in ["admin.sock", "agent.sock"] {
            assert!(!self.path(socket).exists(), "{socket} was created");
        }
        assert!(stderr.contains("zodex-prd did not start"), "{}", text(&out));
        stderr
    }

    fn check_ground(&self, json: bool) -> Output {
        let mut command = Command::new(PRD);
        command.args(["check-ground", "--config"]).arg(&self.config);
        if json {
            command.arg("--json");
        }
        command.output().unwrap()
    }
}

/// Runs `zodex-prd serve`; a daemon still running after 30 s is killed and the test fails.
fn serve(config: &Path) -> Output {
    let mut child = Command::new(PRD)
        .args(["serve", "--config"])
        .arg(config)
        .env("ZODEX_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if poll(Duration::from_secs(30), || child.try_wait().unwrap()).is_none() {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!("zodex-prd served on a broken ground: {}", text(&out));
    }
    child.wait_with_output().unwrap()
}

/// The lines of `stderr` that state a failure (not the closing line).
fn failure_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("error: ") && !l.contains("zodex-prd did not start"))
        .collect()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A web server that is not GitHub: every request gets a small HTML page.
fn html_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let body = "<!DOCTYPE html>\n<html><head><title>Welcome</title></head><body>It works!</body></html>\n";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn a_writer_key_others_can_read_refuses_start() {
    let ground = Ground::new();
    let key = ground.path("keys/writer.pem");
    chmod(&key, 0o644);
    let stderr = ground.refused();
    let k = key.display();
    assert_eq!(
        failure_lines(&stderr),
        [format!(
            "error: writer key {k} is readable by others (mode 644): chmod 600 {k}"
        )],
        "{stderr}"
    );
    // The key was not changed, and nothing was created in the state directory's place.
    assert!(!ground.path("state").exists());
}

#[test]
fn a_symlinked_state_directory_refuses_start() {
    let ground = Ground::new();
    let real = ground.path("real-state");
    std::fs::create_dir(&real).unwrap();
    chmod(&real, 0o700);
    std::os::unix::fs::symlink(&real, ground.path("state")).unwrap();
    let stderr = ground.refused();
    assert_eq!(
        failure_lines(&stderr),
        [format!(
            "error: state directory {} is a symbolic link (to {}): set state_dir to the real directory",
            ground.path("state").display(),
            real.display()
        )],
        "{stderr}"
    );
    // Nothing was written through the link.
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
}

#[test]
fn a_group_writable_socket_directory_refuses_start() {
    let ground = Ground::new();
    let run = ground.dir.path();
    chmod(run, 0o770);
    let stderr = ground.refused();
    let d = run.display();
    assert_eq!(
        failure_lines(&stderr),
        [format!(
            "error: the socket directory {d} is writable by its group (mode 770); anyone who can write there can replace the socket: `chmod go-w {d}`, or use a directory only the publisher can write"
        )],
        "{stderr}"
    );
}

#[test]
fn an_api_url_that_is_not_github_says_so() {
    let ground = Ground::new();
    let api = ground.demo.hub.api_url().trim_end_matches('/').to_string();
    // A web server answering HTML.
    let html = html_server();
    ground.edit(
        &format!("api_url = \"{api}\""),
        &format!("api_url = \"{html}\""),
    );
    let stderr = ground.refused();
    let lines = failure_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!("error: `[github] api_url = {html}` is not a GitHub API (GET /app answered HTTP 200 with a text/html body that is not JSON: \"<!DOCTYPE html> <html><head><title>Welcome")),
        "{stderr}"
    );
    assert!(
        lines[0].ends_with(
            "for github.com use https://api.github.com, for GitHub Enterprise Server https://HOST/api/v3"
        ),
        "{stderr}"
    );
    // devhub's git server: a real HTTP server, but not the API.
    let git = ground.demo.hub.git_url().trim_end_matches('/').to_string();
    ground.edit(
        &format!("api_url = \"{html}\""),
        &format!("api_url = \"{git}\""),
    );
    let stderr = ground.refused();
    let lines = failure_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "error: `[github] api_url = {git}` is not a GitHub API (GET /app answered "
        )),
        "{stderr}"
    );
    // A GitHub-shaped 404 (the API root is elsewhere, as on a GHES without `/api/v3`).
    let wrong_root = format!("{api}/v2");
    ground.edit(
        &format!("api_url = \"{git}\""),
        &format!("api_url = \"{wrong_root}\""),
    );
    let stderr = ground.refused();
    let lines = failure_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "error: `[github] api_url = {wrong_root}` is not a GitHub API (GET /app answered 404: "
        )),
        "{stderr}"
    );
    // Nobody listening: said as such, after a bounded retry (its attempts are in the message;
    // `serve` fails a start that never gives up).
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    ground.edit(
        &format!("api_url = \"{wrong_root}\""),
        &format!("api_url = \"{closed}\""),
    );
    let stderr = ground.refused();
    let lines = failure_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "error: `[github] api_url = {closed}` is not a GitHub API (no answer after 4 attempts: "
        )),
        "{stderr}"
    );
}

#[test]
fn app_ids_that_are_not_the_keys_apps_refuse_start() {
    let ground = Ground::new();
    let (reader, writer) = (
        ground.demo.seed.reader_app_id,
        ground.demo.seed.writer_app_id,
    );
    ground.edit(
        &format!("app_id = {reader}\n"),
        &format!("app_id = {writer}\n"),
    );
    let stderr = ground.refused();
    let lines = failure_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    let key = ground.path("keys/reader.pem");
    assert!(
        lines[0].starts_with(&format!(
            "error: GitHub refused the reader key {} as App {writer} (401: ",
            key.display()
        )),
        "{stderr}"
    );
    assert!(
        lines[0].contains(&format!("the key does not belong to App {writer}; download a new private key from App {writer}'s settings, or correct app_id in [github.reader]")),
        "{stderr}"
    );
}

#[test]
fn a_reader_app_that_can_write_refuses_start() {
    use zodex::devhub::{Description, Level};
    let ground = Ground::new();
    let reader = ground.demo.seed.reader_app_id;
    let mut description = Description::load(ground.demo.dir.path()).unwrap();
    let app = description
        .apps
        .iter_mut()
        .find(|a| a.id == reader)
        .unwrap();
    app.permissions.0.insert("contents".into(), Level::Write);
    app.permissions.0.insert("issues".into(), Level::Admin);
    let slug = app.slug.clone();
    description.save(ground.demo.dir.path()).unwrap();
    ground.demo.hub.reload().unwrap();
    let stderr = ground.refused();
    let lines = failure_lines(&stderr);
    let expected = |permission: &str, level: &str| {
        format!(
            "error: the reader App {reader} ({slug}) holds `{permission}: {level}`, but the reader App must be read-only: set `{permission}` to read-only (or remove it) in the App's settings (Permissions) and accept the change on its installations"
        )
    };
    assert_eq!(
        lines,
        [expected("contents", "write"), expected("issues", "admin")],
        "{stderr}"
    );
    // check-ground says the same, one line per check, and exits 1.
    let out = ground.check_ground(false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&expected("contents", "write").replace("error: ", "FAIL reader-app: ")),
        "{stdout}"
    );
    assert!(stdout.contains("ok   writer-app: "), "{stdout}");
}

#[test]
fn on_good_ground_it_serves_and_check_ground_agrees() {
    let ground = Ground::new();
    let out = ground.check_ground(false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in [
        "reader-key",
        "writer-key",
        "state-dir",
        "socket-dir",
        "github-api",
        "reader-app",
        "writer-app",
    ] {
        assert!(
            stdout.contains(&format!("ok   {check}: ")),
            "{check}: {stdout}"
        );
    }
    assert!(!stdout.contains("FAIL"), "{stdout}");
    let out = ground.check_ground(true);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let envelope: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["ok"], true);
    assert_eq!(envelope["result"]["all_ok"], true);
    assert!(envelope["result"]["findings"].as_array().unwrap().len() >= 7);
    // A broken ground in JSON: all_ok false, the failing finding named, exit 1.
    chmod(&ground.path("keys/reader.pem"), 0o640);
    let out = ground.check_ground(true);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let envelope: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["result"]["all_ok"], false);
    let failed: Vec<_> = envelope["result"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["ok"] == false)
        .map(|f| f["check"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(failed, ["reader-key"]);
    drop(ground);
    // The rig serves on the same kind of ground (it waits for the agent socket).
    let rig = Rig::start(Duration::from_secs(3600));
    assert!(rig.dir.path().join("admin.sock").exists());
    let state = std::fs::metadata(rig.dir.path().join("state")).unwrap();
    assert_eq!(state.permissions().mode() & 0o777, 0o700);
}
