//! `zodex-agent credential` as git's credential helper, end to end: a real `zodex-prd serve`
//! configured with a devhub's URLs and App keys, real `git clone` through the helper, the read
//! token cache (and its 5-minute margin), write-token mode cut to its grant, and the cases the
//! helper must stay silent on.

mod support;

use std::time::{Duration, Instant};
use support::rig::Rig;

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
    // The first get minted the read token and, for the coverage check, a `metadata: read`
    // token to read the default branch (revoked at once).
    assert_eq!(
        minted() - before,
        2,
        "the second get is served from the cache"
    );
    std::thread::sleep(Duration::from_secs(4));
    let (third, _) = rig.get("app");
    assert_ne!(field(&first, "password"), field(&third, "password"));
    assert_eq!(
        minted() - before,
        3,
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

#[test]
fn a_write_token_handed_out_before_a_restart_is_revoked_after_it() {
    let mut rig = Rig::start(Duration::from_secs(3600));
    rig.admin_ok(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"via":"token"}"#);
    let (write, _) = rig.get("app");
    let token = field(&write, "password").unwrap().to_string();
    let works = |rig: &Rig| {
        rig.demo
            .api("GET", "/repos/demo/app", Some(&token), None)
            .status
    };
    assert_eq!(works(&rig), 200);

    // The token is on disk only in the publisher's private state directory, for revocation.
    {
        use std::os::unix::fs::PermissionsExt;
        let state = rig.dir.path().join("state");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&state.join("write-tokens")), 0o600);
    }
    // SIGKILL: nothing is cleaned up, the token was only handed to git.
    rig.kill9();
    assert_eq!(works(&rig), 200, "still valid while zodex-prd is down");
    rig.restart();
    assert_eq!(
        works(&rig),
        401,
        "revoked by the restarted zodex-prd\n{}",
        rig.log()
    );
    assert!(
        rig.log()
            .contains("revoked write tokens left by the previous run")
    );
    // The grant stands: a fresh write token is handed out on the next `get`.
    let (again, _) = rig.get("app");
    let fresh = field(&again, "password").unwrap();
    assert_ne!(fresh, token);
    assert_eq!(
        rig.demo
            .api("GET", "/repos/demo/app", Some(fresh), None)
            .status,
        200
    );
}
