//! `zodex-agent credential` and the small `git-credential-zodex` as git's credential helper, end
//! to end: a real `zodex-prd serve`
//! configured with a devhub's URLs and App keys, real `git clone` through the helper, the read
//! token cache (and its 5-minute margin), write-token mode cut to its grant (also when gets,
//! erases, an operator's revoke and the TTL race), the cases the helper must stay silent on,
//! and git's own stderr when it refuses.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use support::rig::Rig;
use support::wait::{eventually, eventually_with};

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
    rig.advance(4);
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

    // Denied: no App covers demo/nope. No credential, and git is told to stop (no prompt).
    let (answer, stderr) = rig.get("nope");
    assert_eq!(answer, "quit=1\n");
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
    eventually_with(
        "the write token is revoked",
        Duration::from_secs(30),
        || rig.log(),
        || !live(&token),
    );
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

/// A minted token as zodex-prd recorded it (SHA-256 only).
struct Recorded {
    sha256: String,
    /// `reader` or `writer`.
    app: String,
    grant_id: Option<i64>,
    expires_at: i64,
    revoked_at: Option<i64>,
}

/// The tokens zodex-prd recorded (the test reads its state, read-only).
fn recorded_tokens(rig: &Rig) -> Vec<Recorded> {
    let db = rusqlite::Connection::open_with_flags(
        rig.dir.path().join("state/state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = db
        .prepare("SELECT token_sha256, app, grant_id, expires_at, revoked_at FROM issued_tokens")
        .unwrap();
    stmt.query_map([], |r| {
        Ok(Recorded {
            sha256: r.get(0)?,
            app: r.get(1)?,
            grant_id: r.get(2)?,
            expires_at: r.get(3)?,
            revoked_at: r.get(4)?,
        })
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn sha256_hex(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// One `get` of the race: when it started, and the token it returned.
struct Got {
    started: Instant,
    password: Option<String>,
}

#[test]
fn every_write_token_of_a_grant_dies_with_it_whatever_the_interleaving() {
    let rig = Rig::start(Duration::from_secs(3600));
    let input = format!("protocol=http\nhost={}\npath=demo/app.git\n\n", rig.host());
    let mut handed_out: Vec<(String, Instant, Instant)> = Vec::new();
    let mut grant_ids = Vec::new();
    for round in 0..4 {
        // Even rounds end by an operator's revoke, odd ones by the TTL running out (zodex-prd's
        // clock moved past it).
        let by_ttl = round % 2 == 1;
        let ttl = if by_ttl { 60 } else { 3600 };
        let granted = rig.admin_ok(&format!(
            r#"{{"op":"grant_push","repo":"demo/app","ttl":{{"seconds":{ttl}}},"via":"token"}}"#
        ));
        grant_ids.push(granted["result"]["id"].as_i64().unwrap());
        let stop = AtomicBool::new(false);
        let gets = Mutex::new(Vec::<Got>::new());
        // Told of every `get` that came back, and of the stop.
        let progress = Condvar::new();
        let wait_for = |what: &str, enough: &dyn Fn(&[Got]) -> bool| {
            let gets = gets.lock().unwrap();
            let (gets, waited) = progress
                .wait_timeout_while(gets, Duration::from_secs(60), |g| !enough(g))
                .unwrap();
            drop(gets);
            assert!(!waited.timed_out(), "round {round}: never {what}");
        };
        let mut ended = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..5 {
                scope.spawn(|| {
                    while !stop.load(Ordering::SeqCst) {
                        let started = Instant::now();
                        let (answer, _) = rig.get("app");
                        let password = field(&answer, "password").map(str::to_string);
                        gets.lock().unwrap().push(Got { started, password });
                        progress.notify_all();
                    }
                });
            }
            // `erase` revokes the cached token, once after each `get`: the next `get` mints
            // again, so mints keep racing the end of the grant.
            scope.spawn(|| {
                let mut seen = 0;
                loop {
                    let gets = progress
                        .wait_while(gets.lock().unwrap(), |g| {
                            g.len() == seen && !stop.load(Ordering::SeqCst)
                        })
                        .unwrap();
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    seen = gets.len();
                    drop(gets);
                    assert!(rig.helper("erase", &input).status.success());
                }
            });
            // A different number of gets under the grant each round, so its end falls at
            // another place of the race.
            wait_for("gets under the grant", &|g| g.len() >= 6 + 3 * round);
            if by_ttl {
                rig.advance(ttl + 1);
            } else {
                rig.admin_ok(r#"{"op":"revoke_push","repo":"demo/app"}"#);
            }
            ended = Instant::now();
            wait_for("gets begun after the end", &|g| {
                g.iter().filter(|got| got.started > ended).count() >= 5
            });
            let _gets = gets.lock().unwrap();
            stop.store(true, Ordering::SeqCst);
            progress.notify_all();
        });
        let gets = gets.into_inner().unwrap();
        assert!(gets.len() > 10, "round {round}: only {} gets", gets.len());
        let writers: std::collections::HashSet<String> = recorded_tokens(&rig)
            .into_iter()
            .filter(|t| t.app == "writer")
            .map(|t| t.sha256)
            .collect();
        let mut writes = 0;
        for got in &gets {
            let Some(password) = &got.password else {
                continue;
            };
            if writers.contains(&sha256_hex(password)) {
                writes += 1;
                handed_out.push((password.clone(), got.started, ended));
            }
        }
        assert!(writes > 0, "round {round}: no write token was handed out");
    }

    // No `get` begun after its grant ended returned a write token.
    for (token, started, ended) in &handed_out {
        assert!(
            started < ended,
            "a write token (sha256 {}) was handed out by a get begun {:?} after its grant ended",
            &sha256_hex(token)[..12],
            *started - *ended
        );
    }
    // Every write token minted under these grants — handed out or not — is revoked at GitHub
    // within a few sweeps, and devhub holds no other live token than the read tokens.
    let seen = std::cell::RefCell::new(String::new());
    let detail = || format!("{}\n{}", seen.borrow(), rig.log());
    eventually_with(
        "every write token revoked",
        Duration::from_secs(15),
        detail,
        || {
            let tokens = recorded_tokens(&rig);
            let now = chrono::Utc::now().timestamp();
            let unrevoked: Vec<_> = tokens
                .iter()
                .filter(|t| t.app == "writer" && t.revoked_at.is_none())
                .collect();
            let live_reads = tokens
                .iter()
                // Coverage checks mint reader tokens too (for the default branch) and revoke them at once.
                .filter(|t| t.app == "reader" && t.expires_at > now && t.revoked_at.is_none())
                .count();
            let stats = rig.demo.hub.stats();
            let every_mint_recorded = stats.tokens_minted as usize == tokens.len();
            let writes_of_grants = tokens
                .iter()
                .filter(|t| t.app == "writer")
                .all(|t| t.grant_id.is_some_and(|g| grant_ids.contains(&g)));
            assert!(
                every_mint_recorded,
                "devhub minted {} tokens, zodex-prd recorded {}",
                stats.tokens_minted,
                tokens.len()
            );
            assert!(writes_of_grants);
            *seen.borrow_mut() = format!(
                "{} write tokens not marked revoked, devhub has {} live tokens for {} read tokens",
                unrevoked.len(),
                stats.tokens_live,
                live_reads,
            );
            unrevoked.is_empty() && stats.tokens_live == live_reads
        },
    );
    let mut checked = std::collections::HashSet::new();
    for (token, ..) in &handed_out {
        if checked.insert(token.clone()) {
            let status = rig
                .demo
                .api("GET", "/installation/repositories", Some(token), None)
                .status;
            assert_eq!(status, 401, "a write token handed out still works");
        }
    }
}

fn is_write_token(rig: &Rig, token: &str) -> bool {
    let sha = sha256_hex(token);
    recorded_tokens(rig)
        .iter()
        .any(|t| t.sha256 == sha && t.app == "writer")
}

/// Waits until devhub holds no live token but the read tokens zodex-prd recorded.
fn wait_for_no_live_write_token(rig: &Rig) {
    let seen = std::cell::RefCell::new(String::new());
    let detail = || format!("{}\n{}", seen.borrow(), rig.log());
    eventually_with(
        "no live write token",
        Duration::from_secs(15),
        detail,
        || {
            let now = chrono::Utc::now().timestamp();
            let tokens = recorded_tokens(rig);
            let live_reads = tokens
                .iter()
                // Coverage checks mint reader tokens too (for the default branch) and revoke them at once.
                .filter(|t| t.app == "reader" && t.expires_at > now && t.revoked_at.is_none())
                .count();
            let live = rig.demo.hub.stats().tokens_live;
            *seen.borrow_mut() =
                format!("devhub has {live} live tokens for {live_reads} read tokens");
            live == live_reads
        },
    );
}

#[test]
fn a_get_whose_grant_ends_while_its_token_is_minted_hands_out_no_write_token() {
    let rig = Rig::start(Duration::from_secs(3600));
    // Coverage is checked (and a read token cached) first, so the next API call is the mint.
    let (read, _) = rig.get("app");
    assert!(!is_write_token(&rig, field(&read, "password").unwrap()));
    rig.admin_ok(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"via":"token"}"#);
    rig.demo.hub.inject(zodex::devhub::Fault::delay(2000, 1));
    let minted_before = rig.demo.hub.stats().tokens_minted;
    let requests_before = rig.demo.hub.stats().api_requests;
    std::thread::scope(|scope| {
        let get = scope.spawn(|| rig.get("app"));
        // The grant ends while devhub holds the mint (delayed 2 s).
        eventually("the mint reaches devhub", Duration::from_secs(30), || {
            rig.demo.hub.stats().api_requests > requests_before
        });
        rig.admin_ok(r#"{"op":"revoke_push","repo":"demo/app"}"#);
        let (answer, stderr) = get.join().unwrap();
        let password = field(&answer, "password").expect(&stderr);
        assert!(
            !is_write_token(&rig, password),
            "a write token was handed out after its grant was revoked"
        );
    });
    assert!(
        rig.demo.hub.stats().tokens_minted > minted_before,
        "the write token was minted (and must now be revoked)"
    );
    wait_for_no_live_write_token(&rig);
}

#[test]
fn a_write_token_whose_revocation_failed_is_revoked_when_its_grant_ends() {
    let rig = Rig::start(Duration::from_secs(3600));
    rig.admin_ok(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"via":"token"}"#);
    let (write, _) = rig.get("app");
    let token = field(&write, "password").unwrap().to_string();
    assert!(is_write_token(&rig, &token));
    let works = || {
        rig.demo
            .api("GET", "/installation/repositories", Some(&token), None)
            .status
    };
    // Every attempt of the revocation `erase` makes fails.
    rig.demo.hub.inject(zodex::devhub::Fault::status(503, 4));
    let erase = rig.helper(
        "erase",
        &format!("protocol=http\nhost={}\npath=demo/app.git\n\n", rig.host()),
    );
    assert!(erase.status.success());
    rig.demo.hub.clear_faults();
    assert_eq!(works(), 200, "the revocation was meant to fail");
    // Still known to zodex-prd: revoked at GitHub once the grant ends.
    rig.admin_ok(r#"{"op":"revoke_push","repo":"demo/app"}"#);
    eventually_with(
        "revoked once its grant ended",
        Duration::from_secs(15),
        || rig.log(),
        || works() == 401,
    );
}

/// Under a `--via token` grant the helper tells git the token dies with the grant: the expiry
/// is the earlier of the token's (1 h here) and the grant's end (2 min), on the first `get`
/// and on one served from the cache.
#[test]
fn a_write_tokens_expiry_is_the_grants_end_when_that_comes_first() {
    let rig = Rig::start(Duration::from_secs(3600));
    let before = chrono::Utc::now().timestamp();
    let granted =
        rig.admin(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":120},"via":"token"}"#);
    assert_eq!(granted["ok"], true, "{granted}");
    let grant_end = granted["result"]["expires_at"]
        .as_i64()
        .unwrap_or_else(|| panic!("the grant's expires_at: {granted}"));
    assert!(
        (before + 120..=before + 130).contains(&grant_end),
        "{granted}"
    );
    for attempt in ["minted", "cached"] {
        let (answer, stderr) = rig.get("app");
        let expiry: i64 = field(&answer, "password_expiry_utc")
            .unwrap_or_else(|| panic!("{attempt}: no expiry: {answer}{stderr}"))
            .parse()
            .unwrap();
        assert_eq!(
            expiry, grant_end,
            "{attempt}: the token lives 1 h, the grant ends first"
        );
    }
    // A read token (no grant) keeps the token's own expiry.
    rig.admin(r#"{"op":"revoke_push","repo":"demo/app"}"#);
    let (read, _) = rig.get("app");
    let expiry: i64 = field(&read, "password_expiry_utc")
        .unwrap()
        .parse()
        .unwrap();
    assert!(expiry > before + 3000, "{read}");
}

/// git's stderr from a clone and from a fetch of a repository no App covers: the helper's one
/// line, then git stopping at its word (`quit=1`) instead of asking for a username.
#[test]
fn git_stays_quiet_on_a_repository_no_app_covers() {
    let rig = Rig::start(Duration::from_secs(3600));
    let work = tempfile::tempdir().unwrap();
    let url = format!("{}/demo/nope.git", rig.demo.hub.git_url());
    let clone = rig.git(work.path(), &["clone", "--quiet", &url, "nope"]);
    let init = rig.git(work.path(), &["init", "--quiet", "fetcher"]);
    assert!(init.status.success());
    let fetch = rig.git(&work.path().join("fetcher"), &["fetch", "--quiet", &url]);
    for (what, output) in [("clone", clone), ("fetch", fetch)] {
        assert!(
            !output.status.success(),
            "{what} of an uncovered repository fails"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let helper_lines: Vec<&&str> = lines
            .iter()
            .filter(|l| l.starts_with("zodex-agent credential:"))
            .collect();
        assert_eq!(helper_lines.len(), 1, "{what}: {stderr}");
        assert!(
            helper_lines[0].contains("Read on demo/nope"),
            "{what}: {stderr}"
        );
        assert!(
            !stderr.contains("could not read Username") && !stderr.contains("terminal prompts"),
            "{what}: no prompt noise after the helper's line: {stderr}"
        );
        // At most git's own word that the helper stopped it follows the helper's line.
        let after: Vec<&&str> = lines
            .iter()
            .skip_while(|l| !l.starts_with("zodex-agent credential:"))
            .skip(1)
            .collect();
        assert!(
            after.iter().all(|l| l.contains("told us to quit")) && after.len() <= 1,
            "{what}: {stderr}"
        );
    }
}

/// The small `git-credential-zodex` binary install configures is the same helper: it answers a
/// `get` with the token `zodex-agent credential get` hands out (the cached one), stays silent
/// for a host it does not serve, and its diagnostics carry its own name.
#[test]
fn the_small_helper_binary_is_the_same_helper() {
    use std::process::Command;
    let rig = Rig::start(Duration::from_secs(3600));
    let small = |input: &str| {
        let mut cmd = Command::new(support::rig::CREDENTIAL_HELPER);
        cmd.arg("--config").arg(&rig.config).arg("get");
        support::rig::with_input(&mut cmd, input)
    };
    let (answer, _) = rig.get("app");
    let question = format!("protocol=http\nhost={}\npath=demo/app.git\n\n", rig.host());
    let out = small(&question);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let small_answer = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(field(&small_answer, "password"), field(&answer, "password"));
    assert_eq!(field(&small_answer, "username"), Some("x-access-token"));

    let elsewhere = small("protocol=https\nhost=example.com\npath=demo/app.git\n\n");
    assert!(elsewhere.status.success());
    assert!(elsewhere.stdout.is_empty(), "another host gets no answer");

    let unconfigured = support::rig::with_input(
        Command::new(support::rig::CREDENTIAL_HELPER).args([
            "--config",
            "/nonexistent/zodex.toml",
            "get",
        ]),
        "",
    );
    assert!(unconfigured.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&unconfigured.stderr).starts_with("git-credential-zodex: "),
        "{}",
        String::from_utf8_lossy(&unconfigured.stderr)
    );

    let bad = Command::new(support::rig::CREDENTIAL_HELPER)
        .args(["--config"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("usage: git-credential-zodex"));
}
