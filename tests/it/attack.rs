//! Attacks by a real agent user on a sprite laid out like a deployment (issue 8, "Proof, in
//! CI, with two real users"). Every attack runs as the agent user against a real `zodex-prd`
//! running as the publisher user; each asserts the refusal, that nothing changed at GitHub
//! (the devhub's refs, pull requests and live tokens), and that the daemon still answers the
//! operator. Needs root: every test is `#[ignore = "needs root"]`, and `scripts/test` runs them
//! as root with `--include-ignored` (run without root, they fail saying so).
//!
//! Each attack runs twice (issue 36, "A fleet"): `NAME` against a single sprite, whose
//! publisher is `zodex-prd serve`, and `NAME_in_a_fleet` against the same sprite enrolled in a
//! fleet, whose publisher is `zodex-prd relay` forwarding to a separate service
//! (`support::sprite`'s two layouts). In a fleet the secrets are the relay's key and the
//! service's App keys, state and CA key, the daemons that must stay answering are the relay and
//! the service, and the operator acts on the service.
//!
//! Attack classes (limits and races are in `attack_limits_and_races.rs`):
//! - secrets: `secrets_are_refused_by_the_kernel` — keys, state database, token file, the
//!   daemon's /proc entries, the admin socket;
//! - sockets: `the_agent_cannot_touch_the_socket_directory` — unlink, rename, replace the agent
//!   socket, create files, directories, links or sockets beside it, change modes;
//! - lying metadata: `lying_frames_are_refused` — declared bundle length vs. actual, a huge
//!   metadata length, bad magic and version, invalid JSON, an admin request on the agent
//!   socket, a bundle on a request that takes none;
//! - hostile names: `hostile_ref_and_repository_names_are_refused` — `..`, `:`, control and
//!   special characters in ref names, `..`, `/`, unicode look-alikes and case tricks in
//!   repository names;
//! - replayed and revoked tokens: `a_read_token_cannot_write_and_a_revoked_write_token_is_dead`;
//! - floods: `a_flood_of_requests_leaves_the_daemon_answering`;
//! - MCP key abuse: `mcp_key_abuse_is_refused_and_the_key_never_logged`;
//! - no grant: `a_push_without_a_grant_is_refused`;
//! - default branch: `the_default_branch_cannot_be_forced_or_deleted`.
//!
//! Run: `cargo test --test it -- --ignored attack::` (as root).

use crate::support;

use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use support::routines::{Frame, Routine};
use support::sprite::{Sprite, against_both_layouts, refused};
use support::wait::{eventually, eventually_with};

const EACCES: &str = "errno:13";
const EPERM: &str = "errno:1";

/// Runs the `(operation, path)` probes as the agent; returns `path op → result`.
fn probe(sprite: &Sprite, checks: &[(&str, PathBuf)]) -> Vec<(String, String)> {
    let checks = checks
        .iter()
        .map(|(op, path)| (op.to_string(), path.clone()))
        .collect();
    let answer = sprite.routine(&Routine::Access { checks });
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!(
                    "{} {}",
                    r["op"].as_str().unwrap(),
                    r["path"].as_str().unwrap()
                ),
                r["result"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

against_both_layouts!(
    read_secrets: secrets_are_refused_by_the_kernel,
    secrets_are_refused_by_the_kernel_in_a_fleet
);

fn read_secrets(sprite: Sprite) {
    sprite.grant_push_via_token("demo/lib");
    let before = sprite.github();
    let results = probe(&sprite, &sprite.secrets());
    for (what, result) in &results {
        assert_eq!(result, EACCES, "{what}: the kernel should refuse the agent");
    }
    // With the admin socket's mode relaxed, the daemon's peer check still refuses the agent.
    // (A fleet sprite has no admin socket: the service's is behind its 0700 directory,
    // refused above, and on another host in a real fleet.)
    if !sprite.in_a_fleet() {
        support::sprite::chmod(&sprite.admin_socket(), 0o666);
        let answer = sprite.routine(&Routine::Frames {
            socket: sprite.admin_socket(),
            frames: vec![Frame {
                magic: Some(*b"{\"op"),
                ..Frame::request(&json!({"op": "status"}))
            }],
        });
        support::sprite::chmod(&sprite.admin_socket(), 0o600);
        assert_eq!(answer[0]["error"]["kind"], "forbidden", "{answer}");
    }
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    touch_the_socket_directory: the_agent_cannot_touch_the_socket_directory,
    the_agent_cannot_touch_the_socket_directory_in_a_fleet
);

fn touch_the_socket_directory(sprite: Sprite) {
    let before = sprite.github();
    let run = sprite.run.clone();
    let socket = sprite.agent_socket();
    let checks = vec![
        ("unlink", socket.clone()),
        ("rename", socket.clone()),
        ("rename_onto", socket.clone()),
        ("unlink", sprite.admin_socket()),
        ("create", run.join("evil")),
        ("mkdir", run.join("evil.d")),
        ("symlink", run.join("evil.link")),
        ("bind", run.join("evil.sock")),
    ];
    for (what, result) in probe(&sprite, &checks) {
        assert_eq!(result, EACCES, "{what}");
    }
    for (what, result) in probe(
        &sprite,
        &[("chmod", socket.clone()), ("chmod", run.clone())],
    ) {
        assert_eq!(result, EPERM, "{what}");
    }
    let mut names: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        sprite.sockets_in_run(),
        "only the publisher's sockets"
    );
    // The agent socket is still the daemon's.
    let status = sprite.agent_cli(&["github", "status", "--json"]);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    lie_in_frames: lying_frames_are_refused,
    lying_frames_are_refused_in_a_fleet
);

fn lie_in_frames(sprite: Sprite) {
    sprite.grant_push("demo/app");
    sprite.warm("app");
    let before = sprite.github();
    let main = sprite.remote_sha("app", "refs/heads/main").unwrap();
    let push = json!({"op": "push", "repo": "demo/app",
        "updates": [{"dst": "refs/heads/lie", "new": "1111111111111111111111111111111111111111"}]});
    let ping = json!({"op": "ping"});
    let body = sprite.agent_file("ten-bytes", &[0u8; 10]);
    let cases: Vec<(&str, Frame, &str)> = vec![
        (
            "bundle shorter than declared",
            Frame {
                bundle_len: Some(1000),
                ..Frame::with_bundle(&push, &body)
            },
            "ended after 10 of the 1000",
        ),
        (
            "bundle longer than declared",
            Frame {
                bundle_len: Some(5),
                ..Frame::with_bundle(&push, &body)
            },
            "more than the 5",
        ),
        (
            "a bundle length past the ceiling",
            Frame {
                bundle_len: Some(u64::MAX),
                ..Frame::request(&push)
            },
            "",
        ),
        (
            "metadata length of 4 GiB",
            Frame {
                metadata_len: Some(u32::MAX),
                ..Frame::request(&ping)
            },
            "cap",
        ),
        (
            "metadata shorter than declared",
            Frame {
                metadata_len: Some(1 << 20),
                ..Frame::request(&ping)
            },
            "the request ended after",
        ),
        (
            "bad magic",
            Frame {
                magic: Some(*b"GIT\0"),
                ..Frame::request(&ping)
            },
            "magic",
        ),
        (
            "another version",
            Frame {
                version: Some(2),
                ..Frame::request(&ping)
            },
            "version 2",
        ),
        (
            "invalid JSON",
            Frame {
                metadata: "{\"op\":\"ping\"".into(),
                ..Frame::request(&ping)
            },
            "not a valid agent request",
        ),
        (
            "JSON that is not a request",
            Frame {
                metadata: "[1,2,3]".into(),
                ..Frame::request(&ping)
            },
            "not a valid agent request",
        ),
        (
            "an admin request on the agent socket",
            Frame::request(
                &json!({"op": "grant_push", "repo": "demo/lib", "ttl": {"seconds": 60}}),
            ),
            "not a valid agent request",
        ),
        (
            "an approval on the agent socket",
            Frame::request(&json!({"op": "approve", "id": 1})),
            "not a valid agent request",
        ),
        (
            "a bundle on a ping",
            Frame {
                bundle_len: Some(10),
                ..Frame::with_bundle(&ping, &body)
            },
            "carries no bundle",
        ),
        (
            "a lease that lies about GitHub",
            Frame::request(&json!({"op": "push", "repo": "demo/app", "updates": [{
                "dst": "refs/heads/main", "new": main, "lease": "0000000000000000000000000000000000000000"}]})),
            "",
        ),
    ];
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let answers = sprite.frames(cases.iter().map(|c| c.1.clone()).collect());
    for ((name, expected), answer) in names.iter().zip(cases.iter().map(|c| c.2)).zip(&answers) {
        assert!(refused(answer), "{name}: {answer}");
        assert!(answer.to_string().contains(expected), "{name}: {answer}");
    }
    let tmp = sprite.spool_dir();
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "spooled files left in {tmp:?}"
    );
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    use_hostile_names: hostile_ref_and_repository_names_are_refused,
    hostile_ref_and_repository_names_are_refused_in_a_fleet
);

fn use_hostile_names(sprite: Sprite) {
    sprite.grant_push("demo/app");
    sprite.warm("app");
    let before = sprite.github();
    let main = sprite.remote_sha("app", "refs/heads/main").unwrap();
    let push = |repo: &str, dst: &str| {
        Frame::request(&json!({"op": "push", "repo": repo,
            "updates": [{"dst": dst, "new": main, "force": true}]}))
    };
    let refs = [
        "refs/heads/../x",
        "refs/heads/x:refs/heads/main",
        "refs/heads/x/../../main",
        "refs/heads/x/../main",
        "refs/heads/.hidden",
        "refs/heads/x.lock",
        "refs/heads/x y",
        "refs/heads/x\ty",
        "refs/heads/x\u{1b}[2Jy",
        "refs/heads/x\u{0}y",
        "refs/heads/@{1}",
        "refs/heads/x~1",
        "refs/heads/x^",
        "refs/heads/x?",
        "refs/heads/*",
        "refs/heads/x\\y",
        "refs/heads//x",
        "refs/heads/x/",
        "refs/heads/",
        "+refs/heads/x",
        "HEAD",
        "main",
        "refs/remotes/origin/x",
        "refs/pull/1/head",
    ];
    let answers = sprite.frames(refs.iter().map(|r| push("demo/app", r)).collect());
    for (name, answer) in refs.iter().zip(&answers) {
        assert!(refused(answer), "ref {name:?}: {answer}");
    }
    // `demo/trunk` has no grant: no spelling of it (nor of a look-alike) gets one.
    let repos = [
        "Demo/Trunk",
        "DEMO/TRUNK",
        "demo/TRUNK",
        "demo/../trunk",
        "demo/trunk/..",
        "../demo/trunk",
        "demo/trunk/x",
        "demo//trunk",
        "/demo/trunk",
        "demo/trunk/",
        "demo/.",
        "demo/..",
        "demo/trunk\u{0}",
        "demo/tr\u{0443}nk",
        "demo/\u{0442}runk",
        "demo/ｔｒｕｎｋ",
        "demo/trunk\u{200b}",
        "ｄemo/trunk",
        "demo\\trunk",
        "demo/trunk?x=1",
        "demo/trunk#main",
        "",
    ];
    let answers = sprite.frames(repos.iter().map(|r| push(r, "refs/heads/attack")).collect());
    for (name, answer) in repos.iter().zip(&answers) {
        assert!(refused(answer), "repository {name:?}: {answer}");
    }
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

/// The credential helper's answer as `key=value` lines.
fn helper_get(sprite: &Sprite, repo: &str) -> String {
    let input = format!(
        "capability[]=authtype\nprotocol=http\nhost={}\npath=demo/{repo}.git\n\n",
        sprite.git_host()
    );
    let out = support::rig::with_input(
        sprite
            .as_agent(sprite.bin.join("zodex-agent"), &sprite.work)
            .args(["credential", "get"]),
        &input,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn password(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| l.strip_prefix("password="))
        .unwrap_or_else(|| panic!("no password in {answer:?}"))
        .to_string()
}

/// A direct `git push` to devhub with `token`, as the agent (no zodex in the way).
fn push_with_token(sprite: &Sprite, checkout: &std::path::Path, repo: &str, token: &str) -> String {
    let url = sprite.demo().git_url(repo, Some(token));
    let out = sprite
        .as_agent("git", checkout)
        .args([
            "-c",
            "credential.helper=",
            "push",
            &url,
            "HEAD:refs/heads/stolen",
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the push with a stolen token went through"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

against_both_layouts!(
    replay_tokens: a_read_token_cannot_write_and_a_revoked_write_token_is_dead,
    a_read_token_cannot_write_and_a_revoked_write_token_is_dead_in_a_fleet
);

fn replay_tokens(sprite: Sprite) {
    let app = sprite.clone("app");
    sprite.agent_commit(&app, "x.txt", b"x\n", "x");
    let lib = sprite.clone("lib");
    sprite.agent_commit(&lib, "y.txt", b"y\n", "y");
    let main = sprite.remote_sha("app", "refs/heads/main").unwrap();

    // A read token from the credential helper, replayed straight at GitHub to write.
    let read = password(&helper_get(&sprite, "app"));
    let before = sprite.github();
    let stderr = push_with_token(&sprite, &app, "app", &read);
    assert!(stderr.contains("403"), "{stderr}");
    let rest = sprite.demo().api(
        "POST",
        "/repos/demo/app/git/refs",
        Some(&read),
        Some(json!({"ref": "refs/heads/stolen", "sha": main})),
    );
    assert_eq!(rest.status, 403, "{:?}", rest.body);
    sprite.assert_github_unchanged(&before);

    // A write token under a `--via token` grant, kept by the agent past the revoke.
    sprite.grant_push_via_token("demo/lib");
    let answer = helper_get(&sprite, "lib");
    let write = password(&answer);
    assert_ne!(write, read);
    let alive = sprite
        .demo()
        .api("GET", "/repos/demo/lib", Some(&write), None);
    assert_eq!(
        alive.status, 200,
        "the write token should work before the revoke"
    );
    sprite.admin_ok(json!({"op": "revoke_push", "repo": "demo/lib"}));
    eventually(
        "the write token stops working after the revoke",
        Duration::from_secs(10),
        || {
            sprite
                .demo()
                .api("GET", "/repos/demo/lib", Some(&write), None)
                .status
                == 401
        },
    );
    let before = sprite.github();
    let stderr = push_with_token(&sprite, &lib, "lib", &write);
    assert!(
        stderr.contains("401") || stderr.contains("Authentication failed"),
        "{stderr}"
    );
    let rest = sprite.demo().api(
        "POST",
        "/repos/demo/lib/git/refs",
        Some(&write),
        Some(json!({"ref": "refs/heads/stolen", "sha": main})),
    );
    assert_eq!(rest.status, 401, "{:?}", rest.body);
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    flood: a_flood_of_requests_leaves_the_daemon_answering,
    a_flood_of_requests_leaves_the_daemon_answering_in_a_fleet
);

fn flood(sprite: Sprite) {
    let before = sprite.github();
    let total = 1500;
    let answer = sprite.routine(&Routine::Flood {
        socket: sprite.agent_socket(),
        total,
        threads: 48,
    });
    assert_eq!(
        answer["answered"], total,
        "every request gets an answer: {answer}"
    );
    sprite.assert_operator_answers();
    let status = sprite.agent_cli(&["github", "status", "--json"]);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    sprite.assert_github_unchanged(&before);
}

against_both_layouts!(
    abuse_the_mcp_key: mcp_key_abuse_is_refused_and_the_key_never_logged,
    mcp_key_abuse_is_refused_and_the_key_never_logged_in_a_fleet
);

fn abuse_the_mcp_key(sprite: Sprite) {
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).unwrap();
    let key = hex::encode(raw);
    let hash = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(key.as_bytes()))
    };
    let hash_file = sprite.root.path().join("mcp-key.sha256");
    std::fs::write(&hash_file, format!("{hash}\n")).unwrap();
    let log_path = sprite.root.path().join("mcp.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = sprite
        .as_agent(sprite.bin.join("zodex-agent"), &sprite.work)
        .args(["serve", "--listen", "127.0.0.1:0", "--key-hash-file"])
        .arg(&hash_file)
        .env("RUST_LOG", "trace")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    sprite.adopt(child);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let addr = eventually_with(
        "zodex-agent serve starts",
        Duration::from_secs(30),
        log,
        || {
            let text = log();
            let rest = &text[text.find("addr=127.0.0.1:")? + 5..];
            let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
            Some(rest[..end].to_string())
        },
    );
    use support::mcp_server::Conn;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    // The key with its last digit changed (to another digit, whatever the last one was).
    let last = if key.ends_with('0') { '1' } else { '0' };
    let wrong = format!("{}{last}", &key[..key.len() - 1]);
    assert_ne!(wrong, key);
    for path in [
        "/mcp".to_string(),
        "/mcp?key=".to_string(),
        format!("/mcp?key={wrong}"),
        format!("/mcp?key={}", &key[..32]),
        format!("/mcp?key={key}x"),
        format!("/mcp?token={key}"),
        format!("/mcp?KEY={key}"),
        format!("/mcp?key%00={key}"),
    ] {
        let r = Conn::new(&addr).post_json(&path, &list, &[]);
        assert_eq!(r.status, 401, "{path}");
    }
    let bearer = format!("Bearer {wrong}");
    let r = Conn::new(&addr).post_json("/mcp", &list, &[("Authorization", &bearer)]);
    assert_eq!(r.status, 401, "a wrong bearer");
    // The key on another path opens nothing for a keyless /mcp on the same connection.
    let mut conn = Conn::new(&addr);
    let health = conn.get(&format!("/health?key={key}"));
    assert_eq!(health.status, 200);
    let r = conn.post_json("/mcp", &list, &[]);
    assert_eq!(
        r.status, 401,
        "a keyless /mcp after the key was shown on /health"
    );
    for path in [format!("/mcp/../health?key={key}"), format!("/x?key={key}")] {
        let r = Conn::new(&addr).post_json(&path, &list, &[]);
        assert_ne!(r.status, 200, "{path}");
    }
    // The right key works (the refusals above are not a dead server).
    let ok = Conn::new(&addr).post_json(&format!("/mcp?key={key}"), &list, &[]);
    assert_eq!(ok.status, 200);
    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(!text.contains(&key[..16]), "the key reached the log");
    sprite.assert_operator_answers();
}

against_both_layouts!(
    push_without_a_grant: a_push_without_a_grant_is_refused,
    a_push_without_a_grant_is_refused_in_a_fleet
);

fn push_without_a_grant(sprite: Sprite) {
    let app = sprite.clone("app");
    sprite.agent_commit(&app, "x.txt", b"x\n", "work");
    sprite.warm("app");
    let before = sprite.github();
    for refspec in ["HEAD:refs/heads/feature", "HEAD:main", "HEAD:refs/tags/v1"] {
        let out = sprite.agent_git(&app, &["push", "origin", refspec]);
        assert!(!out.status.success(), "{refspec} went through");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("request-push"), "{refspec}: {stderr}");
    }
    let out = sprite.agent_cli(&[
        "github",
        "publish-pr",
        "--repo",
        "demo/other",
        "--title",
        "t",
        "--workdir",
        app.to_str().unwrap(),
    ]);
    assert!(
        !out.status.success(),
        "publishing to an uncovered repository"
    );
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    force_the_default_branch: the_default_branch_cannot_be_forced_or_deleted,
    the_default_branch_cannot_be_forced_or_deleted_in_a_fleet
);

fn force_the_default_branch(sprite: Sprite) {
    sprite.grant_push("demo/app");
    let app = sprite.clone("app");
    sprite.agent_git_ok(&app, &["reset", "--quiet", "--hard", "HEAD~1"]);
    sprite.agent_commit(&app, "rewritten.txt", b"history rewritten\n", "rewrite");
    sprite.warm("app");
    let before = sprite.github();
    for args in [
        vec!["push", "--force", "origin", "HEAD:main"],
        vec!["push", "--force-with-lease", "origin", "HEAD:main"],
        vec!["push", "origin", "+HEAD:refs/heads/main"],
        vec!["push", "origin", ":main"],
        vec!["push", "origin", "--delete", "main"],
    ] {
        let out = sprite.agent_git(&app, &args);
        assert!(!out.status.success(), "{args:?} went through");
    }
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}
