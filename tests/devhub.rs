//! devhub end to end, over real HTTP and real git: App JWT rules, token scoping and subset
//! rules, revocation and expiry, git fetch/push permissions (workflows included), pull
//! requests, ref deletion, fault injection and the admin endpoint. Each permission has a test
//! that proves it is refused where it should be.

#[path = "it/support/mod.rs"]
mod support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::devhub::{AppKind, Demo, commit_file, git, git_fails, git_ok, keys, sign};
use zodex::devhub::{Fault, FaultScope, TokenFormat};

const NOT_DECODED: &str = "A JSON web token could not be decoded";

#[test]
fn app_jwts_are_checked_like_github() {
    let demo = Demo::start();
    let now = chrono::Utc::now().timestamp();
    let ok = demo.api("GET", "/app", Some(&demo.jwt(AppKind::Writer)), None);
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    assert_eq!(ok.body["slug"], "zodex-writer");
    assert_eq!(ok.body["id"], demo.seed.writer_app_id);
    assert!(ok.header("x-ratelimit-limit").is_some());

    let expired = demo.jwt_with(AppKind::Writer, now - 700, now - 100);
    let reply = demo.api("GET", "/app", Some(&expired), None);
    assert_eq!(reply.status, 401);
    assert!(
        reply
            .message()
            .starts_with("'Expiration time' claim ('exp') must be a numeric value")
    );

    let too_far = demo.jwt_with(AppKind::Writer, now, now + 660);
    let reply = demo.api("GET", "/app", Some(&too_far), None);
    assert_eq!(
        (reply.status, reply.message()),
        (
            401,
            "'Expiration time' claim ('exp') is too far in the future"
        )
    );

    let future = demo.jwt_with(AppKind::Writer, now + 120, now + 500);
    let reply = demo.api("GET", "/app", Some(&future), None);
    assert_eq!(reply.status, 401);
    assert!(
        reply
            .message()
            .starts_with("'Issued at' claim ('iat') must be an Integer")
    );
    // Within the leeway a slightly fast clock is fine.
    let skewed = demo.jwt_with(AppKind::Writer, now + 30, now + 500);
    assert_eq!(demo.api("GET", "/app", Some(&skewed), None).status, 200);

    let wrong_key = sign(
        &keys()[2],
        json!({"iss": demo.seed.writer_app_id.to_string(), "iat": now - 60, "exp": now + 500}),
    );
    let reply = demo.api("GET", "/app", Some(&wrong_key), None);
    assert_eq!((reply.status, reply.message()), (401, NOT_DECODED));
    assert_eq!(
        reply.body["documentation_url"],
        "https://docs.github.com/rest"
    );

    let token = demo.token(AppKind::Writer, "app", json!({"contents": "read"}));
    let reply = demo.api("GET", "/app", Some(&token), None);
    assert_eq!((reply.status, reply.message()), (401, NOT_DECODED));
    let reply = demo.api("GET", "/app", Some("ghs_notatoken"), None);
    assert_eq!((reply.status, reply.message()), (401, "Bad credentials"));
}

#[test]
fn installations_are_found_only_where_the_app_is_installed() {
    let demo = Demo::start();
    let jwt = demo.jwt(AppKind::Writer);
    let list = demo.api("GET", "/app/installations", Some(&jwt), None);
    assert_eq!(list.status, 200);
    assert_eq!(list.body.as_array().unwrap().len(), 1);
    assert_eq!(list.body[0]["id"], demo.seed.writer_installation_id);
    let here = demo.api("GET", "/repos/demo/app/installation", Some(&jwt), None);
    assert_eq!(here.status, 200);
    assert_eq!(here.body["app_slug"], "zodex-writer");
    let there = demo.api("GET", "/repos/demo/other/installation", Some(&jwt), None);
    assert_eq!((there.status, there.message()), (404, "Not Found"));
    let reader = demo.api(
        "GET",
        "/repos/demo/other/installation",
        Some(&demo.jwt(AppKind::Reader)),
        None,
    );
    assert_eq!(reader.body["id"], demo.seed.reader_installation_id);
    // Another App's installation id is not found for this App.
    let path = format!(
        "/app/installations/{}/access_tokens",
        demo.seed.reader_installation_id
    );
    assert_eq!(
        demo.api("POST", &path, Some(&jwt), Some(json!({}))).status,
        404
    );
}

#[test]
fn tokens_are_at_most_their_installation() {
    let demo = Demo::start();
    let reply = demo.mint_reply(AppKind::Writer, json!({"repositories": ["other"]}));
    assert_eq!(reply.status, 422);
    assert_eq!(
        reply.message(),
        "There is at least one repository that does not exist or is not accessible to the parent installation."
    );
    let reply = demo.mint_reply(
        AppKind::Writer,
        json!({"repository_ids": [demo.seed.other_repo_id]}),
    );
    assert_eq!(reply.status, 422);
    let reply = demo.mint_reply(
        AppKind::Writer,
        json!({"permissions": {"administration": "write"}}),
    );
    assert_eq!(
        (reply.status, reply.message()),
        (
            422,
            "The permissions requested are not granted to this installation."
        )
    );
    let reply = demo.mint_reply(
        AppKind::Reader,
        json!({"permissions": {"contents": "write"}}),
    );
    assert_eq!(reply.status, 422);
    let reply = demo.mint_reply(
        AppKind::Reader,
        json!({"permissions": {"contents": "sideways"}}),
    );
    assert_eq!(reply.status, 422);

    let reply = demo.mint_reply(
        AppKind::Writer,
        json!({"repositories": ["app"], "permissions": {"contents": "read"}}),
    );
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let token = reply.body["token"].as_str().unwrap();
    assert!(token.starts_with("ghs_") && token.len() == 40, "{token}");
    assert_eq!(
        reply.body["permissions"],
        json!({"contents": "read", "metadata": "read"})
    );
    assert_eq!(reply.body["repository_selection"], "selected");
    assert_eq!(reply.body["repositories"][0]["full_name"], "demo/app");
    let expires: chrono::DateTime<chrono::Utc> =
        reply.body["expires_at"].as_str().unwrap().parse().unwrap();
    let left = expires - chrono::Utc::now();
    assert!(left > chrono::Duration::minutes(59) && left <= chrono::Duration::minutes(60));

    // Without a scope the token has the installation's repositories and permissions.
    let reply = demo.mint_reply(AppKind::Reader, json!({}));
    assert_eq!(reply.status, 201);
    assert!(reply.body.get("repositories").is_none());
    assert_eq!(reply.body["permissions"]["contents"], "read");
    assert_eq!(demo.hub.stats().tokens_minted, 2);
}

#[test]
fn tokens_reach_only_their_repository_and_permissions_over_rest() {
    let demo = Demo::start();
    let token = demo.token(AppKind::Reader, "app", json!({"contents": "read"}));
    let repo = demo.api("GET", "/repos/demo/app", Some(&token), None);
    assert_eq!(repo.status, 200, "{:?}", repo.body);
    assert_eq!(repo.body["default_branch"], "main");
    assert_eq!(repo.body["private"], true);
    assert_eq!(repo.body["permissions"]["push"], false);
    let other = demo.api("GET", "/repos/demo/other", Some(&token), None);
    assert_eq!((other.status, other.message()), (404, "Not Found"));
    // Private repositories are hidden from anonymous callers too.
    assert_eq!(demo.api("GET", "/repos/demo/app", None, None).status, 404);

    let pr = demo.api(
        "POST",
        "/repos/demo/app/pulls",
        Some(&token),
        Some(json!({"title": "t", "head": "main", "base": "main"})),
    );
    assert_eq!(pr.status, 403);
    assert_eq!(pr.message(), "Resource not accessible by integration");
    assert_eq!(
        pr.header("x-accepted-github-permissions"),
        Some("pull_requests=write")
    );
    let delete = demo.api(
        "DELETE",
        "/repos/demo/app/git/refs/heads%2Fmain",
        Some(&token),
        None,
    );
    assert_eq!(delete.status, 403);
    assert_eq!(
        delete.header("x-accepted-github-permissions"),
        Some("contents=write")
    );

    // Nor can a write token for demo/app write to demo/other: that repository stays hidden.
    let writer = demo.token(
        AppKind::Writer,
        "app",
        json!({"contents": "write", "pull_requests": "write"}),
    );
    let pr = demo.api(
        "POST",
        "/repos/demo/other/pulls",
        Some(&writer),
        Some(json!({"title": "t", "head": "main", "base": "main"})),
    );
    assert_eq!((pr.status, pr.message()), (404, "Not Found"));
    let delete = demo.api(
        "DELETE",
        "/repos/demo/other/git/refs/heads%2Fmain",
        Some(&writer),
        None,
    );
    assert_eq!(delete.status, 404);

    let listed = demo.api("GET", "/installation/repositories", Some(&token), None);
    assert_eq!(listed.body["total_count"], 1);
    assert_eq!(listed.body["repositories"][0]["full_name"], "demo/app");

    assert_eq!(repo.header("x-ratelimit-limit"), Some("5000"));
    assert_eq!(repo.header("x-ratelimit-resource"), Some("core"));
    let used: u32 = repo.header("x-ratelimit-used").unwrap().parse().unwrap();
    let remaining: u32 = repo
        .header("x-ratelimit-remaining")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(used + remaining, 5000);
    assert!(repo.header("x-ratelimit-reset").is_some());
    assert!(repo.header("x-github-request-id").is_some());
}

#[test]
fn revoked_and_expired_tokens_answer_401_on_rest_and_git() {
    let demo = Demo::start_with(|c| c.with_token_ttl(Duration::from_secs(2)));
    let work = tempfile::tempdir().unwrap();
    let token = demo.token(AppKind::Reader, "app", json!({"contents": "read"}));
    git_ok(
        work.path(),
        &["ls-remote", &demo.git_url("app", Some(&token))],
    );
    assert_eq!(
        demo.api("DELETE", "/installation/token", Some(&token), None)
            .status,
        204
    );
    let reply = demo.api("GET", "/repos/demo/app", Some(&token), None);
    assert_eq!((reply.status, reply.message()), (401, "Bad credentials"));
    let stderr = git_fails(
        work.path(),
        &["ls-remote", &demo.git_url("app", Some(&token))],
    );
    assert!(stderr.contains("Authentication failed"), "{stderr}");
    assert!(stderr.contains("Invalid username or token"), "{stderr}");
    assert_eq!(
        demo.api("DELETE", "/installation/token", Some(&token), None)
            .status,
        401
    );

    let short = demo.token(AppKind::Reader, "app", json!({"contents": "read"}));
    assert_eq!(
        demo.api("GET", "/repos/demo/app", Some(&short), None)
            .status,
        200
    );
    demo.hub.advance_clock(Duration::from_secs(3));
    assert_eq!(
        demo.api("GET", "/repos/demo/app", Some(&short), None)
            .status,
        401
    );
    let stderr = git_fails(
        work.path(),
        &["ls-remote", &demo.git_url("app", Some(&short))],
    );
    assert!(stderr.contains("Authentication failed"), "{stderr}");
}

#[test]
fn git_fetch_and_push_follow_token_scope_and_permissions() {
    let demo = Demo::start_with(|c| c.with_token_format(TokenFormat::Long));
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // No credentials on a private repository: git is asked for some.
    let stderr = git_fails(w, &["ls-remote", &demo.git_url("app", None)]);
    assert!(stderr.contains("could not read Username"), "{stderr}");

    let read = demo.token(AppKind::Reader, "app", json!({"contents": "read"}));
    assert_eq!(read.len(), 520);
    git_ok(
        w,
        &["clone", "--quiet", &demo.git_url("app", Some(&read)), "app"],
    );
    let clone = w.join("app");
    let log = git_ok(&clone, &["log", "--format=%s"]);
    assert_eq!(log.lines().count(), 3, "{log}");
    assert!(clone.join("README.md").is_file());

    // The same token cannot see demo/other: GitHub answers 404 "Repository not found."
    let stderr = git_fails(w, &["ls-remote", &demo.git_url("other", Some(&read))]);
    assert!(stderr.contains("Repository not found."), "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");

    // Push with a read token: 403 naming the App's bot.
    commit_file(&clone, "change.txt", b"change\n", "A change");
    let stderr = git_fails(
        &clone,
        &[
            "push",
            &demo.git_url("app", Some(&read)),
            "HEAD:refs/heads/feature",
        ],
    );
    assert!(
        stderr.contains("Permission to demo/app.git denied to zodex-reader[bot]."),
        "{stderr}"
    );
    assert!(stderr.contains("403"), "{stderr}");

    let write = demo.token(AppKind::Writer, "app", json!({"contents": "write"}));
    git_ok(
        &clone,
        &[
            "push",
            "--quiet",
            &demo.git_url("app", Some(&write)),
            "HEAD:refs/heads/feature",
        ],
    );
    let remote = git_ok(
        w,
        &[
            "ls-remote",
            &demo.git_url("app", Some(&write)),
            "refs/heads/feature",
        ],
    );
    let local = git_ok(&clone, &["rev-parse", "HEAD"]);
    assert!(remote.starts_with(local.trim()), "{remote} vs {local}");
    // A write token for demo/app pushes nowhere else.
    let stderr = git_fails(
        &clone,
        &[
            "push",
            &demo.git_url("other", Some(&write)),
            "HEAD:refs/heads/x",
        ],
    );
    assert!(stderr.contains("Repository not found."), "{stderr}");
    // An App JWT is no git credential.
    let stderr = git_fails(
        w,
        &[
            "ls-remote",
            &demo.git_url("app", Some(&demo.jwt(AppKind::Writer))),
        ],
    );
    assert!(stderr.contains("Authentication failed"), "{stderr}");
}

#[test]
fn workflow_changes_need_the_workflows_permission() {
    let demo = Demo::start();
    let work = tempfile::tempdir().unwrap();
    let full = demo.token(
        AppKind::Writer,
        "app",
        json!({"contents": "write", "workflows": "write"}),
    );
    git_ok(
        work.path(),
        &["clone", "--quiet", &demo.git_url("app", Some(&full)), "app"],
    );
    let clone = work.path().join("app");
    commit_file(&clone, ".github/workflows/ci.yml", b"on: push\n", "Add CI");

    let contents_only = demo.token(AppKind::Writer, "app", json!({"contents": "write"}));
    let stderr = git_fails(
        &clone,
        &[
            "push",
            &demo.git_url("app", Some(&contents_only)),
            "HEAD:refs/heads/ci",
        ],
    );
    assert!(
        stderr.contains("refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission"),
        "{stderr}"
    );
    // A change elsewhere on top is refused too: the new commits include the workflow.
    commit_file(&clone, "notes.txt", b"n\n", "Notes");
    git_fails(
        &clone,
        &[
            "push",
            &demo.git_url("app", Some(&contents_only)),
            "HEAD:refs/heads/ci",
        ],
    );

    git_ok(
        &clone,
        &[
            "push",
            "--quiet",
            &demo.git_url("app", Some(&full)),
            "HEAD:refs/heads/ci",
        ],
    );
    // Once the workflow is on the server, pushing commits that do not touch it needs no more.
    commit_file(&clone, "more.txt", b"m\n", "More");
    git_ok(
        &clone,
        &[
            "push",
            "--quiet",
            &demo.git_url("app", Some(&contents_only)),
            "HEAD:refs/heads/ci",
        ],
    );
}

#[test]
fn pull_requests_and_ref_deletion() {
    let demo = Demo::start();
    let work = tempfile::tempdir().unwrap();
    let token = demo.token(
        AppKind::Writer,
        "app",
        json!({"contents": "write", "pull_requests": "write"}),
    );
    git_ok(
        work.path(),
        &[
            "clone",
            "--quiet",
            &demo.git_url("app", Some(&token)),
            "app",
        ],
    );
    let clone = work.path().join("app");
    git_ok(
        &clone,
        &["push", "--quiet", "origin", "HEAD:refs/heads/same"],
    );
    commit_file(&clone, "feature.txt", b"one\ntwo\n", "Feature");
    git_ok(
        &clone,
        &["push", "--quiet", "origin", "HEAD:refs/heads/feature"],
    );

    let create = |head: &str| {
        demo.api(
            "POST",
            "/repos/demo/app/pulls",
            Some(&token),
            Some(json!({"title": "Feature", "head": head, "base": "main", "body": "Please", "draft": true})),
        )
    };
    let pr = create("feature");
    assert_eq!(pr.status, 201, "{:?}", pr.body);
    assert_eq!(pr.body["number"], 1);
    assert_eq!(pr.body["state"], "open");
    assert_eq!(pr.body["draft"], true);
    assert_eq!(pr.body["head"]["ref"], "feature");
    assert_eq!(pr.body["commits"], 1);
    assert_eq!(pr.body["additions"], 2);
    assert_eq!(pr.body["user"]["login"], "zodex-writer[bot]");
    assert!(
        pr.header("location")
            .unwrap()
            .ends_with("/repos/demo/app/pulls/1")
    );

    let duplicate = create("demo:feature");
    assert_eq!(duplicate.status, 422);
    assert_eq!(
        duplicate.body["errors"][0]["message"],
        "A pull request already exists for demo:feature."
    );
    let nothing = create("same");
    assert_eq!(
        nothing.body["errors"][0]["message"],
        "No commits between main and same"
    );
    let missing = create("nope");
    assert_eq!(missing.status, 422);
    assert_eq!(missing.body["errors"][0]["field"], "head");

    let list = |query: &str| {
        demo.api(
            "GET",
            &format!("/repos/demo/app/pulls{query}"),
            Some(&token),
            None,
        )
    };
    assert_eq!(list("").body.as_array().unwrap().len(), 1);
    assert_eq!(list("?head=demo:feature&base=main").body[0]["number"], 1);
    assert_eq!(list("?head=demo:other").body.as_array().unwrap().len(), 0);
    assert_eq!(list("?state=closed").body.as_array().unwrap().len(), 0);

    let gone = demo.api(
        "DELETE",
        "/repos/demo/app/git/refs/heads%2Ffeature",
        Some(&token),
        None,
    );
    assert_eq!(gone.status, 204, "{:?}", gone.body);
    let again = demo.api(
        "DELETE",
        "/repos/demo/app/git/refs/heads/feature",
        Some(&token),
        None,
    );
    assert_eq!(
        (again.status, again.message()),
        (422, "Reference does not exist")
    );
    assert!(git_ok(&clone, &["ls-remote", "origin", "refs/heads/feature"]).is_empty());
    // Deleting the head branch closed the pull request.
    assert_eq!(list("?state=closed").body[0]["number"], 1);
    assert_eq!(list("").body.as_array().unwrap().len(), 0);

    let read = demo.api(
        "GET",
        "/repos/demo/app/git/ref/heads%2Fmain",
        Some(&token),
        None,
    );
    assert_eq!(read.status, 200);
    assert_eq!(read.body["ref"], "refs/heads/main");
}

#[test]
fn faults_are_injected_by_api_and_admin_endpoint() {
    let demo = Demo::start();
    let jwt = demo.jwt(AppKind::Reader);
    demo.hub.inject(Fault::status(500, 1));
    assert_eq!(demo.api("GET", "/app", Some(&jwt), None).status, 500);
    assert_eq!(demo.api("GET", "/app", Some(&jwt), None).status, 200);

    demo.hub.inject(Fault::secondary_rate_limit(3, 1));
    let limited = demo.api("GET", "/app", Some(&jwt), None);
    assert_eq!(limited.status, 403);
    assert_eq!(limited.header("retry-after"), Some("3"));
    assert!(
        limited
            .message()
            .starts_with("You have exceeded a secondary rate limit.")
    );

    demo.hub.inject(Fault::primary_rate_limit(30, 1));
    let exhausted = demo.api("GET", "/app", Some(&jwt), None);
    assert_eq!(exhausted.status, 403);
    assert_eq!(exhausted.header("x-ratelimit-remaining"), Some("0"));
    let reset: i64 = exhausted
        .header("x-ratelimit-reset")
        .unwrap()
        .parse()
        .unwrap();
    assert!((reset - chrono::Utc::now().timestamp() - 30).abs() <= 2);

    demo.hub.inject(Fault::delay(300, 1));
    let started = Instant::now();
    assert_eq!(demo.api("GET", "/app", Some(&jwt), None).status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Git faults are separate from API faults.
    demo.hub.inject(Fault::status(502, 1).on(FaultScope::Git));
    let token = demo.token(AppKind::Reader, "app", json!({"contents": "read"}));
    let work = tempfile::tempdir().unwrap();
    let stderr = git_fails(
        work.path(),
        &["ls-remote", &demo.git_url("app", Some(&token))],
    );
    assert!(stderr.contains("502"), "{stderr}");
    git_ok(
        work.path(),
        &["ls-remote", &demo.git_url("app", Some(&token))],
    );

    // The admin endpoint needs its key; GitHub credentials do not reach it.
    let admin = format!("{}/_devhub/faults", demo.hub.api_url());
    let fault = json!({"kind": "status", "status": 503, "times": 1});
    let without = demo.client.post(&admin).json(&fault).send().unwrap();
    assert_eq!(without.status().as_u16(), 404);
    let with_token = demo
        .client
        .post(&admin)
        .bearer_auth(&token)
        .json(&fault)
        .send()
        .unwrap();
    assert_eq!(with_token.status().as_u16(), 404);
    let with_key = demo
        .client
        .post(&admin)
        .header("x-devhub-admin-key", demo.hub.admin_key())
        .json(&fault)
        .send()
        .unwrap();
    assert_eq!(with_key.status().as_u16(), 204);
    assert_eq!(demo.api("GET", "/app", Some(&jwt), None).status, 503);
    let bad = demo
        .client
        .post(&admin)
        .header("x-devhub-admin-key", demo.hub.admin_key())
        .json(&json!({"kind": "status", "status": 200}))
        .send()
        .unwrap();
    assert_eq!(bad.status().as_u16(), 422);
}

/// Peak resident memory of this process (devhub runs in it; git runs as children).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_120_mib_push_streams_through() {
    let demo = Demo::start();
    let work = tempfile::tempdir().unwrap();
    let token = demo.token(AppKind::Writer, "app", json!({"contents": "write"}));
    git_ok(
        work.path(),
        &[
            "clone",
            "--quiet",
            &demo.git_url("app", Some(&token)),
            "app",
        ],
    );
    let clone = work.path().join("app");
    // Incompressible content, so the pack really is ~120 MiB; written in 1 MiB pieces so this
    // process's peak memory measures devhub, not the test.
    {
        use std::io::Write;
        let mut file =
            std::io::BufWriter::new(std::fs::File::create(clone.join("big.bin")).unwrap());
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut piece = vec![0u8; 1024 * 1024];
        for _ in 0..120 {
            for chunk in piece.chunks_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                chunk.copy_from_slice(&state.to_le_bytes());
            }
            file.write_all(&piece).unwrap();
        }
    }
    git_ok(&clone, &["add", "big.bin"]);
    git_ok(&clone, &["commit", "--quiet", "-m", "Big"]);
    let before = peak_rss_kib();
    let output = git(
        &clone,
        &[
            "-c",
            "core.compression=0",
            "push",
            "--quiet",
            "origin",
            "HEAD:refs/heads/big",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "devhub's peak memory grew by {grown_mib} MiB during a 120 MiB push"
    );
    assert!(!git_ok(&clone, &["ls-remote", "origin", "refs/heads/big"]).is_empty());
}

#[test]
fn public_repositories_are_readable_by_anyone_but_writable_only_with_access() {
    let demo = Demo::start();
    let mut setup = zodex::devhub::Setup::open(demo.dir.path()).unwrap();
    setup.add_repo("demo", "open", "main", false).unwrap();
    let bare = setup.repo_path("demo", "open");
    setup.save().unwrap();
    demo.hub.reload().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    git_ok(w, &["init", "--quiet", "-b", "main", "seed"]);
    commit_file(&w.join("seed"), "README.md", b"open\n", "Open");
    git_ok(
        &w.join("seed"),
        &["push", "--quiet", bare.to_str().unwrap(), "main"],
    );

    // Anyone may read a public repository, over git and REST.
    git_ok(w, &["ls-remote", &demo.git_url("open", None)]);
    let anonymous = demo.api("GET", "/repos/demo/open", None, None);
    assert_eq!(anonymous.status, 200);
    assert_eq!(anonymous.header("x-ratelimit-limit"), Some("60"));
    let token = demo.token(
        AppKind::Writer,
        "app",
        json!({"contents": "write", "pull_requests": "write"}),
    );
    git_ok(
        w,
        &[
            "clone",
            "--quiet",
            &demo.git_url("open", Some(&token)),
            "open",
        ],
    );
    assert_eq!(
        demo.api("GET", "/repos/demo/open", Some(&token), None)
            .status,
        200
    );

    // Writing needs the installation to reach the repository.
    let clone = w.join("open");
    commit_file(&clone, "x.txt", b"x\n", "X");
    let stderr = git_fails(
        &clone,
        &[
            "push",
            &demo.git_url("open", Some(&token)),
            "HEAD:refs/heads/x",
        ],
    );
    assert!(
        stderr.contains("Permission to demo/open.git denied to zodex-writer[bot]."),
        "{stderr}"
    );
    let stderr = git_fails(
        &clone,
        &["push", &demo.git_url("open", None), "HEAD:refs/heads/x"],
    );
    assert!(stderr.contains("could not read Username"), "{stderr}");
    let pr = demo.api(
        "POST",
        "/repos/demo/open/pulls",
        Some(&token),
        Some(json!({"title": "t", "head": "main", "base": "main"})),
    );
    assert_eq!(
        (pr.status, pr.message()),
        (403, "Resource not accessible by integration")
    );
    let anonymous_pr = demo.api("POST", "/repos/demo/open/pulls", None, Some(json!({})));
    assert_eq!(
        (anonymous_pr.status, anonymous_pr.message()),
        (401, "Requires authentication")
    );
}

#[test]
fn the_primary_rate_limit_is_counted_per_installation() {
    let demo = Demo::start_with(|c| c.with_rate_limit(3));
    let token = demo.token(AppKind::Reader, "app", json!({"contents": "read"}));
    for remaining in ["2", "1", "0"] {
        let reply = demo.api("GET", "/repos/demo/app", Some(&token), None);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("x-ratelimit-remaining"), Some(remaining));
    }
    let limited = demo.api("GET", "/repos/demo/app", Some(&token), None);
    assert_eq!(limited.status, 403);
    assert_eq!(
        limited.message(),
        format!(
            "API rate limit exceeded for installation ID {}.",
            demo.seed.reader_installation_id
        )
    );
    assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
    // Another installation has its own window.
    let other = demo.token(AppKind::Writer, "app", json!({"contents": "read"}));
    assert_eq!(
        demo.api("GET", "/repos/demo/app", Some(&other), None)
            .status,
        200
    );
    let stats = demo.hub.stats();
    assert!(
        stats.api_requests >= 6 && stats.tokens_minted == 2,
        "{stats:?}"
    );
}

#[test]
fn an_unknown_or_repeated_api_version_is_refused_like_github() {
    let demo = Demo::start();
    let send = |versions: &[&str]| {
        let mut request = demo
            .client
            .get(format!("{}/app", demo.hub.api_url()))
            .header("accept", "application/vnd.github+json")
            .header("user-agent", "zodex-devhub-tests")
            .header(
                "authorization",
                format!("Bearer {}", demo.jwt(AppKind::Reader)),
            );
        for v in versions {
            request = request.header("x-github-api-version", *v);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().unwrap();
        (
            status,
            body["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(send(&["2022-11-28"]).0, 200);
    assert_eq!(send(&[]).0, 200);
    let (status, message) = send(&["2021-01-01"]);
    assert_eq!(
        (status, message.as_str()),
        (400, "API version 2021-01-01 is not supported.")
    );
    let (status, message) = send(&["2022-11-28", "2022-11-28"]);
    assert_eq!(status, 400, "{message}");
    assert_eq!(
        message,
        "API version 2022-11-28, 2022-11-28 is not supported."
    );
}

#[test]
fn a_repeated_user_agent_is_refused_naming_both() {
    let demo = Demo::start();
    let send = |agents: &[&str]| {
        let mut request = demo
            .client
            .get(format!("{}/app", demo.hub.api_url()))
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .header(
                "authorization",
                format!("Bearer {}", demo.jwt(AppKind::Reader)),
            );
        for agent in agents {
            request = request.header("user-agent", *agent);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().unwrap();
        (
            status,
            body["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(send(&["zodex-prd/1"]).0, 200);
    let (status, message) = send(&["zodex-prd/1", "octocrab"]);
    assert_eq!(status, 400, "{message}");
    assert_eq!(
        message,
        "User-Agent sent 2 times (zodex-prd/1, octocrab); send exactly one."
    );
}
