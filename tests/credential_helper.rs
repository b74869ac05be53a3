//! `zodex-agent credential` as git's credential helper, end to end: a real `zodex-prd serve`
//! configured with a devhub's URLs and App keys, real `git clone` through the helper, the read
//! token cache (and its 5-minute margin), write-token mode cut to its grant, and the cases the
//! helper must stay silent on.

mod devhub_support;

use devhub_support::{Demo, keys};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const AGENT: &str = env!("CARGO_BIN_EXE_zodex-agent");
const PRD: &str = env!("CARGO_BIN_EXE_zodex-prd");

/// A devhub and a `zodex-prd` serving it; the daemon is killed when dropped.
struct Rig {
    demo: Demo,
    dir: tempfile::TempDir,
    config: PathBuf,
    prd: Child,
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.prd.kill();
        let _ = self.prd.wait();
    }
}

impl Rig {
    fn start(token_ttl: Duration) -> Self {
        let demo = Demo::start_with(|c| c.with_token_ttl(token_ttl));
        let dir = tempfile::tempdir().unwrap();
        let [reader, writer, _] = keys();
        let reader_key = reader.write(&dir.path().join("keys"), "reader").unwrap();
        let writer_key = writer.write(&dir.path().join("keys"), "writer").unwrap();
        let uid = nix::unistd::getuid().as_raw();
        let d = dir.path().display();
        let config = dir.path().join("zodex.toml");
        std::fs::write(
            &config,
            format!(
                r#"state_dir = "{d}/state"
admin_socket = "{d}/admin.sock"
agent_socket = "{d}/agent.sock"
agent_uid = {uid}
operator_uids = [{uid}]

[[targets]]
owner = "demo"
default_branch = "main"

[github]
api_url = "{api}"
git_url = "{git}"

[github.reader]
app_id = {reader_id}
private_key_file = "{reader_key}"

[github.writer]
app_id = {writer_id}
private_key_file = "{writer_key}"
"#,
                api = demo.hub.api_url(),
                git = demo.hub.git_url(),
                reader_id = demo.seed.reader_app_id,
                writer_id = demo.seed.writer_app_id,
                reader_key = reader_key.display(),
                writer_key = writer_key.display(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("prd.log")).unwrap();
        let prd = Command::new(PRD)
            .args(["serve", "--config"])
            .arg(&config)
            .env("ZODEX_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let rig = Self {
            demo,
            dir,
            config,
            prd,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !rig.dir.path().join("agent.sock").exists() {
            assert!(
                Instant::now() < deadline,
                "zodex-prd did not start: {}",
                rig.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        rig
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prd.log")).unwrap_or_default()
    }

    fn host(&self) -> String {
        self.demo
            .hub
            .git_url()
            .trim_start_matches("http://")
            .to_string()
    }

    /// Runs `zodex-agent credential OP` with `input` on stdin.
    fn helper(&self, op: &str, input: &str) -> Output {
        let mut child = Command::new(AGENT)
            .args(["credential", "--config"])
            .arg(&self.config)
            .arg(op)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `get` for `demo/<repo>`; returns (stdout, stderr).
    fn get(&self, repo: &str) -> (String, String) {
        let output = self.helper(
            "get",
            &format!(
                "capability[]=authtype\nprotocol=http\nhost={}\npath=demo/{repo}.git\n\n",
                self.host()
            ),
        );
        assert!(output.status.success());
        (
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }

    fn admin(&self, request: &str) -> serde_json::Value {
        let mut child = Command::new(PRD)
            .args(["admin", "--config"])
            .arg(&self.config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{request}\n").as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// git with only this helper, useHttpPath, and no prompt.
    fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let helper = format!("!{AGENT} credential --config {}", self.config.display());
        devhub_support::git_command(dir)
            .args(["-c", "credential.helper="])
            .args(["-c", &format!("credential.helper={helper}")])
            .args(["-c", "credential.useHttpPath=true"])
            .args(args)
            .output()
            .unwrap()
    }
}

fn field<'a>(answer: &'a str, key: &str) -> Option<&'a str> {
    answer
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
}

#[test]
fn git_clones_through_the_helper() {
    let rig = Rig::start(Duration::from_secs(3600));
    let work = tempfile::tempdir().unwrap();
    let url = format!("{}/demo/app.git", rig.demo.hub.git_url());
    let output = rig.git(work.path(), &["clone", "--quiet", &url, "app"]);
    assert!(
        output.status.success(),
        "{}\nzodex-prd: {}",
        String::from_utf8_lossy(&output.stderr),
        rig.log()
    );
    assert!(work.path().join("app/README.md").exists());
    // The log carries hashes, never tokens.
    let (answer, _) = rig.get("app");
    let password = field(&answer, "password").unwrap();
    assert!(!rig.log().contains(password));
    assert!(rig.log().contains("token_sha256"));
}

#[test]
fn read_tokens_are_cached_until_the_margin() {
    // devhub tokens live 303 s: 3 s of that is before the 5-minute margin.
    let rig = Rig::start(Duration::from_secs(303));
    let minted = || rig.demo.hub.stats().tokens_minted;
    let before = minted();
    let (first, stderr) = rig.get("app");
    assert_eq!(
        field(&first, "username"),
        Some("x-access-token"),
        "{stderr}"
    );
    let expiry: i64 = field(&first, "password_expiry_utc")
        .unwrap()
        .parse()
        .unwrap();
    assert!(expiry > chrono::Utc::now().timestamp());
    let (second, _) = rig.get("app");
    assert_eq!(field(&first, "password"), field(&second, "password"));
    assert_eq!(
        minted() - before,
        1,
        "the second get is served from the cache"
    );
    std::thread::sleep(Duration::from_secs(4));
    let (third, _) = rig.get("app");
    assert_ne!(field(&first, "password"), field(&third, "password"));
    assert_eq!(
        minted() - before,
        2,
        "past the margin a new token is minted"
    );
}

#[test]
fn silent_where_it_does_not_serve() {
    let rig = Rig::start(Duration::from_secs(3600));
    let other_host = rig.helper(
        "get",
        "protocol=https\nhost=gitlab.example\npath=demo/app.git\n\n",
    );
    assert!(other_host.status.success());
    assert!(other_host.stdout.is_empty() && other_host.stderr.is_empty());

    let no_path = rig.helper("get", &format!("protocol=http\nhost={}\n\n", rig.host()));
    assert!(no_path.stdout.is_empty());
    let hint = String::from_utf8(no_path.stderr).unwrap();
    assert!(hint.contains("credential.useHttpPath"), "{hint}");
    assert_eq!(hint.lines().count(), 1);

    let store = rig.helper(
        "store",
        &format!(
            "protocol=http\nhost={}\npath=demo/app.git\nusername=x\npassword=y\n\n",
            rig.host()
        ),
    );
    assert!(store.status.success() && store.stdout.is_empty());

    // Denied: no App covers demo/nope.
    let (answer, stderr) = rig.get("nope");
    assert!(answer.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("Read on demo/nope"), "{stderr}");
}

#[test]
fn write_token_mode_ends_with_its_grant() {
    let rig = Rig::start(Duration::from_secs(3600));
    let (read, _) = rig.get("app");
    let granted =
        rig.admin(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"via":"token"}"#);
    assert_eq!(granted["ok"], true, "{granted}");
    let (write, stderr) = rig.get("app");
    let token = field(&write, "password").unwrap().to_string();
    assert_ne!(field(&read, "password").unwrap(), token, "{stderr}");

    // The write token pushes.
    let work = tempfile::tempdir().unwrap();
    let url = format!("{}/demo/app.git", rig.demo.hub.git_url());
    assert!(
        rig.git(work.path(), &["clone", "--quiet", &url, "app"])
            .status
            .success()
    );
    let app = work.path().join("app");
    std::fs::write(app.join("new.txt"), "new\n").unwrap();
    assert!(rig.git(&app, &["add", "new.txt"]).status.success());
    assert!(
        rig.git(&app, &["commit", "--quiet", "-m", "new"])
            .status
            .success()
    );
    let push = rig.git(
        &app,
        &["push", "--quiet", "origin", "HEAD:refs/heads/topic"],
    );
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );

    let live = |token: &str| {
        rig.demo
            .api("GET", "/installation/repositories", Some(token), None)
            .status
            == 200
    };
    assert!(live(&token));
    let revoked = rig.admin(r#"{"op":"revoke_push","repo":"demo/app"}"#);
    assert_eq!(revoked["ok"], true, "{revoked}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while live(&token) {
        assert!(
            Instant::now() < deadline,
            "not revoked within 30 s: {}",
            rig.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Back to read tokens.
    let (after, _) = rig.get("app");
    assert_ne!(field(&after, "password").unwrap(), token);
}

#[test]
fn erase_revokes_a_write_token() {
    let rig = Rig::start(Duration::from_secs(3600));
    let granted =
        rig.admin(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"via":"token"}"#);
    assert_eq!(granted["ok"], true, "{granted}");
    let (write, _) = rig.get("app");
    let token = field(&write, "password").unwrap().to_string();
    let erase = rig.helper(
        "erase",
        &format!("protocol=http\nhost={}\npath=demo/app.git\n\n", rig.host()),
    );
    assert!(erase.status.success() && erase.stdout.is_empty());
    let status = rig
        .demo
        .api("GET", "/installation/repositories", Some(&token), None)
        .status;
    assert_eq!(status, 401);
}
