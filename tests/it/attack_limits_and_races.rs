//! Attacks on the publisher's limits and races by a real agent user on a sprite laid out like a
//! deployment: memory bombs, a default branch other than the configured one, smuggled objects,
//! control characters, request floods, an impersonated admin socket, slow clients and
//! credential races (the harness and the general attack classes are in `attack.rs` and
//! `tests/it/support/sprite.rs`):
//!
//! 1. `a_zip_bomb_publish_is_refused_in_bounded_memory` — a ~2 MB publish_pr bundle whose
//!    pack holds one blob of 2 GiB of zeros: refused, the daemon's peak RSS ≤ 64 MiB;
//! 2. `a_force_push_to_a_trunk_default_branch_is_refused` — GitHub's default branch is
//!    `trunk` (the configuration says `main`);
//! 3. `an_orphan_smuggled_in_a_bundle_never_reaches_github` and
//!    `a_fast_forward_onto_a_foreign_workflow_commit_needs_the_allowance`;
//! 4. `control_characters_in_a_reason_never_reach_the_operator_raw`;
//! 5. `many_long_pending_requests_stay_manageable`;
//! 6. `the_operator_client_refuses_an_impersonated_admin_socket`;
//! 7. `slow_drip_connections_do_not_starve_anyone`;
//! 8. `credential_gets_racing_a_revoke_leave_no_live_write_token`.
//!
//! Every test also checks that nothing else changed at GitHub and that the daemon still
//! answers the operator. Needs root: each test is `#[ignore = "needs root"]` and runs as root in CI.
//!
//! As in `attack.rs`, each attack also runs as `NAME_in_a_fleet` against the sprite enrolled
//! in a fleet (its relay forwarding to a separate service), but for 6: a fleet operator reaches
//! the service over mutual TLS, checking the service's certificate, not a socket path on the
//! sprite the agent could stand in for. In the zip bomb, every daemon (the relay and the
//! service) stays within the memory bound.
//!
//! Run: `cargo test --test it -- --ignored attack_limits_and_races::` (as root).

use crate::support;

use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use support::routines::{Frame, Routine};
use support::sprite::{Sprite, against_both_layouts, chown, refused};
use support::wait::poll;

/// A `/proc/PID/status` field in KiB.
fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Watches a process's resident memory; kills it (SIGKILL, by its id) past `kill_at_kib`, so a
/// daemon that inflates a bomb cannot take the machine down with it.
struct RssGuard {
    stop: Arc<AtomicBool>,
    killed_at: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssGuard {
    fn watch(pid: u32, kill_at_kib: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let killed_at = Arc::new(AtomicU64::new(0));
        let (s, k) = (stop.clone(), killed_at.clone());
        let thread = std::thread::spawn(move || {
            // Until stopped (the watched work is bounded by its own test, far below the hour).
            poll(Duration::from_secs(3600), || {
                if s.load(Ordering::Relaxed) {
                    return true;
                }
                let Some(rss) = proc_kib(pid, "VmRSS:").filter(|rss| *rss > kill_at_kib) else {
                    return false;
                };
                k.store(rss, Ordering::Relaxed);
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                true
            });
        });
        Self {
            stop,
            killed_at,
            thread: Some(thread),
        }
    }

    /// The RSS at which the process was killed, if it was.
    fn finish(mut self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        Some(self.killed_at.load(Ordering::Relaxed)).filter(|k| *k > 0)
    }
}

impl Drop for RssGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A scratch clone of GitHub's `demo/<repo>` made as root (for what is not the agent's doing).
fn scratch_clone(sprite: &Sprite, repo: &str, into: &Path) -> std::path::PathBuf {
    let dir = into.join(repo);
    support::devhub::git_ok(
        into,
        &[
            "clone",
            "--quiet",
            sprite.bare(repo).to_str().unwrap(),
            repo,
        ],
    );
    dir
}

against_both_layouts!(
    publish_a_zip_bomb: a_zip_bomb_publish_is_refused_in_bounded_memory,
    a_zip_bomb_publish_is_refused_in_bounded_memory_in_a_fleet
);

fn publish_a_zip_bomb(sprite: Sprite) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch_clone(&sprite, "app", scratch.path());
    // 2 GiB of zeros (a sparse file: nothing on disk), committed; git deflates it to ~2 MB.
    let big = dir.join("zeros.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    support::devhub::git_ok(&dir, &["add", "zeros.bin"]);
    support::devhub::git_ok(
        &dir,
        &["commit", "--quiet", "-m", "two gigabytes of nothing"],
    );
    std::fs::remove_file(&big).unwrap();
    let head = support::devhub::rev_parse(&dir, "HEAD");
    let bundle = sprite.work.join("bomb.bundle");
    support::devhub::git_ok(
        &dir,
        &[
            "bundle",
            "create",
            bundle.to_str().unwrap(),
            "HEAD",
            "^origin/main",
        ],
    );
    chown(&bundle, Some(&sprite.users.agent), None);
    let size = std::fs::metadata(&bundle).unwrap().len();
    assert!(
        size < 8 << 20,
        "the bomb should be small on the wire: {size} bytes"
    );

    sprite.warm("app");
    let before = sprite.github();
    let daemons = sprite.daemons();
    for (name, pid) in &daemons {
        eprintln!(
            "{name} before the bomb: peak RSS {:?} KiB",
            proc_kib(*pid, "VmHWM:")
        );
    }
    let guards: Vec<_> = daemons
        .iter()
        .map(|(_, pid)| RssGuard::watch(*pid, 512 << 10))
        .collect();
    let request = json!({"op": "publish_pr", "repo": "demo/app", "title": "bomb", "head": head});
    let answer = sprite.frames(vec![Frame::with_bundle(&request, &bundle)]);
    for ((name, pid), guard) in daemons.iter().zip(guards) {
        let killed = guard.finish();
        assert_eq!(
            killed, None,
            "{name} reached {killed:?} KiB resident and was killed"
        );
        let peak = proc_kib(*pid, "VmHWM:").unwrap();
        eprintln!(
            "zip bomb ({size} bytes): {name} peak RSS {peak} KiB; answer {}",
            answer[0]
        );
        assert!(
            peak <= 64 << 10,
            "{name}'s peak RSS was {peak} KiB (limit 64 MiB)"
        );
    }
    assert!(refused(&answer[0]), "the bomb was published: {}", answer[0]);
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    force_a_trunk_default_branch: a_force_push_to_a_trunk_default_branch_is_refused,
    a_force_push_to_a_trunk_default_branch_is_refused_in_a_fleet
);

fn force_a_trunk_default_branch(sprite: Sprite) {
    sprite.grant_push("demo/trunk");
    let trunk = sprite.clone("trunk");
    sprite.agent_git_ok(&trunk, &["reset", "--quiet", "--hard", "HEAD~1"]);
    sprite.agent_commit(&trunk, "rewritten.txt", b"rewritten\n", "rewrite trunk");
    sprite.warm("trunk");
    let before = sprite.github();
    for args in [
        vec!["push", "--force", "origin", "HEAD:trunk"],
        vec!["push", "origin", ":trunk"],
    ] {
        let out = sprite.agent_git(&trunk, &args);
        assert!(
            !out.status.success(),
            "{args:?} went through on GitHub's default branch"
        );
    }
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    smuggle_an_orphan: an_orphan_smuggled_in_a_bundle_never_reaches_github,
    an_orphan_smuggled_in_a_bundle_never_reaches_github_in_a_fleet
);

fn smuggle_an_orphan(sprite: Sprite) {
    sprite.grant_push("demo/app");
    let app = sprite.clone("app");
    sprite.agent_git_ok(&app, &["checkout", "--quiet", "-b", "feature"]);
    let feature = sprite.agent_commit(&app, "feature.txt", b"harmless\n", "harmless");
    sprite.agent_git_ok(&app, &["checkout", "--quiet", "--orphan", "orphan"]);
    sprite.agent_git_ok(&app, &["rm", "-r", "-f", "--quiet", "."]);
    let orphan = sprite.agent_commit(&app, "smuggled.txt", b"never reviewed\n", "orphan");
    sprite.agent_git_ok(&app, &["checkout", "--quiet", "feature"]);
    let bundle = sprite.work.join("smuggle.bundle");
    sprite.agent_git_ok(
        &app,
        &[
            "bundle",
            "create",
            bundle.to_str().unwrap(),
            "refs/heads/feature",
            "refs/heads/orphan",
            "^origin/main",
        ],
    );
    sprite.warm("app");
    let push = json!({"op": "push", "repo": "demo/app",
        "updates": [{"dst": "refs/heads/feature", "new": feature}]});
    let answer = sprite.frames(vec![Frame::with_bundle(&push, &bundle)]);
    eprintln!("the harmless push: {}", answer[0]);
    assert!(
        !sprite.remote_has("app", &orphan),
        "the orphan commit reached GitHub"
    );

    let before = sprite.github();
    let update = json!({"op": "push", "repo": "demo/app",
        "updates": [{"dst": "refs/heads/smuggled", "new": orphan}]});
    let answer = sprite.frames(vec![Frame::request(&update)]);
    assert!(
        refused(&answer[0]),
        "a bundle-less update to the orphan: {}",
        answer[0]
    );
    assert!(
        !sprite.remote_has("app", &orphan),
        "the orphan commit reached GitHub"
    );
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

against_both_layouts!(
    fast_forward_onto_a_foreign_workflow: a_fast_forward_onto_a_foreign_workflow_commit_needs_the_allowance,
    a_fast_forward_onto_a_foreign_workflow_commit_needs_the_allowance_in_a_fleet
);

fn fast_forward_onto_a_foreign_workflow(sprite: Sprite) {
    // Someone else (with `workflows: write`) pushes a workflow change to a branch of theirs.
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch_clone(&sprite, "app", scratch.path());
    support::devhub::commit_file(
        &dir,
        ".github/workflows/ci.yml",
        b"on: push\njobs: {steal: {runs-on: ubuntu-latest, steps: [{run: env}]}}\n",
        "a colleague's workflow",
    );
    let token = sprite.demo().token(
        support::devhub::AppKind::Writer,
        "app",
        json!({"contents": "write", "workflows": "write"}),
    );
    let url = sprite.demo().git_url("app", Some(&token));
    support::devhub::git_ok(
        &dir,
        &["push", "--quiet", &url, "HEAD:refs/heads/colleague"],
    );
    let foreign = support::devhub::rev_parse(&dir, "HEAD");

    sprite.grant_push("demo/app");
    let app = sprite.clone("app");
    sprite.warm("app");
    let before = sprite.github();
    let out = sprite.agent_git(
        &app,
        &["push", "origin", "origin/colleague:refs/heads/main"],
    );
    assert!(
        !out.status.success(),
        "main was fast-forwarded onto a workflow change without an allowance"
    );
    assert_ne!(sprite.remote_sha("app", "refs/heads/main"), Some(foreign));
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

fn has_raw_controls(bytes: &[u8]) -> bool {
    // ESC, CR and BEL as bytes; the C1 CSI as the character (its byte may be part of
    // another character's UTF-8).
    bytes.iter().any(|b| matches!(b, 0x1b | b'\r' | 0x07))
        || String::from_utf8_lossy(bytes).contains('\u{9b}')
}

against_both_layouts!(
    put_control_characters_in_a_reason: control_characters_in_a_reason_never_reach_the_operator_raw,
    control_characters_in_a_reason_never_reach_the_operator_raw_in_a_fleet
);

fn put_control_characters_in_a_reason(sprite: Sprite) {
    let reason = "fix CI\r\u{1b}[2K\u{1b}[1AApproved by the operator\u{1b}]0;owned\u{7}\u{9b}31m";
    // Sent raw: whatever the agent CLI might check is courtesy, the daemon must not rely on it.
    let request = json!({"op": "request_push", "repo": "demo/app", "ttl": {"seconds": 1800}, "reason": reason});
    let answer = sprite.frames(vec![Frame::request(&request)]);
    // Refusing such a reason outright is a fine answer too; keeping it must not print it raw.
    let kept = answer[0]["ok"] == true;
    assert!(
        kept || answer[0]["error"]["kind"] == "usage",
        "{}",
        answer[0]
    );
    for args in [
        vec!["sprite", "github", "requests"],
        vec!["sprite", "github", "status"],
    ] {
        let out = sprite.zodex(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !kept || String::from_utf8_lossy(&out.stdout).contains("demo/app"),
            "{args:?} does not show the request: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            !has_raw_controls(&out.stdout) && !has_raw_controls(&out.stderr),
            "{args:?} printed the agent's control characters raw: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    sprite.assert_operator_answers();
}

against_both_layouts!(
    pile_up_long_requests: many_long_pending_requests_stay_manageable,
    many_long_pending_requests_stay_manageable_in_a_fleet
);

fn pile_up_long_requests(sprite: Sprite) {
    let before = sprite.github();
    // A 4 KB reason is refused outright, saying the limit.
    let too_long = sprite.frames(vec![Frame::request(
        &json!({"op": "request_push", "repo": "demo/app",
            "ttl": {"seconds": 1800}, "reason": "r".repeat(4096)}),
    )]);
    let message = too_long[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        too_long[0]["ok"] != true && message.contains("at most"),
        "a 4 KB reason must be refused with its limit: {}",
        too_long[0]
    );
    // 300 requests with reasons of the greatest accepted length.
    let reason = "r".repeat(1000);
    let requests: Vec<Frame> = (0..300)
        .map(|i| {
            Frame::request(&json!({"op": "request_push", "repo": format!("demo/r{i}"),
                "ttl": {"seconds": 1800}, "reason": reason}))
        })
        .collect();
    let answers = sprite.frames(requests);
    let accepted = answers.iter().filter(|a| a["ok"] == true).count();
    for refusal in answers.iter().filter(|a| a["ok"] != true) {
        let message = refusal["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.to_lowercase().contains("request") && accepted >= 1,
            "a refusal beyond a cap must say so: {refusal}"
        );
    }
    // The operator lists them (through the CLI, as a person would) and denies every one.
    let out = sprite.zodex(&["sprite", "github", "requests", "--json"]);
    assert!(
        out.status.success(),
        "the operator cannot list {accepted} pending requests: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<i64> = listed["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), accepted);
    for id in &ids {
        sprite.admin_ok(json!({"op": "deny", "id": id}));
    }
    let out = sprite.zodex(&["sprite", "github", "requests", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        listed["result"].as_array().map(Vec::len),
        Some(0),
        "{listed}"
    );
    sprite.assert_github_unchanged(&before);
    sprite.assert_operator_answers();
}

/// Single sprites only: a fleet's operator reaches the service over mutual TLS and checks its
/// certificate; there is no socket path on a fleet sprite the operator follows.
#[test]
#[ignore = "needs root"]
fn the_operator_client_refuses_an_impersonated_admin_socket() {
    let sprite = Sprite::deploy_as_root();
    // A socket the agent serves, where a careless configuration (or a stopped daemon's
    // leftover directory) would send the operator.
    let path = sprite.work.join("admin.sock");
    let fake = json!({"ok": true, "result": {"grants": [{"repo_key": "IMPOSTOR/app"}]}});
    let (pid, _out) = sprite.spawn_routine(&Routine::Impostor {
        path: path.clone(),
        answer: fake.to_string(),
    });
    let text = std::fs::read_to_string(&sprite.config).unwrap();
    let config = sprite.root.path().join("impostor.toml");
    let admin = format!("admin_socket = \"{}\"", path.display());
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("admin_socket") {
                admin.as_str()
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&config, text).unwrap();
    let out = support::rig::with_input(
        std::process::Command::new(sprite.bin.join("zodex-prd"))
            .args(["admin", "--config"])
            .arg(&config),
        "{\"op\":\"status\"}\n",
    );
    sprite.stop(pid);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && !stdout.contains("IMPOSTOR"),
        "the operator client believed a socket served by uid {}: {stdout}",
        sprite.users.agent.uid
    );
    sprite.assert_operator_answers();
}

against_both_layouts!(
    drip_slowly: slow_drip_connections_do_not_starve_anyone,
    slow_drip_connections_do_not_starve_anyone_in_a_fleet
);

fn drip_slowly(sprite: Sprite) {
    // Four processes, so the per-process cap alone cannot stop them: 128 slow connections
    // against a limit of 64.
    let drips: Vec<_> = (0..4)
        .map(|_| {
            sprite.spawn_routine(&Routine::Drip {
                socket: sprite.agent_socket(),
                connections: 32,
                interval_ms: 200,
            })
        })
        .collect();
    // Served while the drips go on (they never stop, reconnecting when cut off): a daemon they
    // starved would never answer, which the operator's 20 s and the agent's 20 s fail.
    sprite.assert_operator_answers();
    let mut child = sprite
        .as_agent(sprite.bin.join("zodex-agent"), &sprite.work)
        .args(["github", "status", "--json"])
        .spawn()
        .unwrap();
    let out = poll(Duration::from_secs(20), || child.try_wait().unwrap());
    if out.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    for (pid, _) in drips {
        sprite.stop(pid);
    }
    assert!(
        out.is_some_and(|s| s.success()),
        "a well-behaved agent request behind 128 slow connections: {out:?}"
    );
    sprite.assert_operator_answers();
}

against_both_layouts!(
    race_credential_gets_with_a_revoke: credential_gets_racing_a_revoke_leave_no_live_write_token,
    credential_gets_racing_a_revoke_leave_no_live_write_token_in_a_fleet
);

fn race_credential_gets_with_a_revoke(sprite: Sprite) {
    let before = sprite.github();
    sprite.grant_push_via_token("demo/lib");
    let (_pid, mut out) = sprite.spawn_routine(&Routine::CredentialRace {
        socket: sprite.agent_socket(),
        host: sprite.git_host(),
        path: "demo/lib.git".into(),
        threads: 16,
        rounds: 400,
    });
    sprite.admin_ok(json!({"op": "revoke_push", "repo": "demo/lib"}));
    let result = support::routines::next_result(&mut out);
    let tokens: Vec<String> = result["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert!(!tokens.is_empty(), "the race saw no write token: {result}");
    eprintln!(
        "{} write tokens seen in {}s",
        tokens.len(),
        result["seconds"]
    );
    // The sweeper revokes an ended grant's tokens within its one-second tick.
    let mut alive: Vec<&String> = tokens.iter().collect();
    poll(Duration::from_secs(5), || {
        alive.retain(|t| {
            sprite
                .demo()
                .api("GET", "/repos/demo/lib", Some(t.as_str()), None)
                .status
                != 401
        });
        alive.is_empty()
    });
    assert!(
        alive.is_empty(),
        "{} of {} write tokens still work after the revoke",
        alive.len(),
        tokens.len()
    );
    // Nor did devhub issue one the agent never saw: the only tokens alive beyond those of
    // before are the read tokens the agent was handed after the revoke.
    let reads = result["reads"].as_u64().unwrap() as usize;
    let live = sprite.demo().hub.stats().tokens_live;
    assert!(
        live <= before.tokens_live + reads,
        "{live} live tokens at GitHub: {} before the grant and {reads} read tokens since",
        before.tokens_live
    );
    sprite.assert_operator_answers();
}
