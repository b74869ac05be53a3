//! The agent socket's bundle protocol, spoken directly (as a hostile or broken client would):
//! the ceiling on the declared size (refused before the body, whatever its size), short and
//! long bodies, a bundle from another repository's history, an operator policy that lowers the
//! ceiling, the audit trail of a push, a SIGKILL in the middle of a publish, concurrent
//! pushes, and pack bombs (a blob or a delta declaring gigabytes, a lying zlib stream).

use crate::support;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use support::devhub::commit_file;
use support::rig::Rig;
use support::rig::{message, push_of};
use support::wait::finishes_within;
use zodex::agent::bundle;
use zodex::agent::client::{ClientError, call_with_bundle};
use zodex::protocol::{AgentRequest, ErrorKind, Response, agent_roundtrip_with};

const HOUR: Duration = Duration::from_secs(3600);
const CEILING: u64 = 134_217_728;

fn socket(rig: &Rig) -> std::path::PathBuf {
    rig.dir.path().join("agent.sock")
}

/// A push of an id no bundle carries: for what is refused before the body.
fn push_request(repo: &str, dst: &str) -> AgentRequest {
    push_of(repo, dst, "1111111111111111111111111111111111111111")
}

/// Sends the header and metadata declaring `len` bundle bytes, then `body` (then half-closes).
fn send(
    rig: &Rig,
    request: &AgentRequest,
    len: u64,
    body: impl FnOnce(&mut UnixStream) -> std::io::Result<()>,
) -> Response {
    let mut stream = UnixStream::connect(socket(rig)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    agent_roundtrip_with(&mut stream, request, len, |s| {
        body(s)?;
        s.shutdown(std::net::Shutdown::Write)
    })
    .unwrap()
}

/// Sends `metadata` as it is (no bundle) and reads the answer.
fn send_json(rig: &Rig, metadata: &serde_json::Value) -> Response {
    use zodex::protocol::{AGENT_VERSION, AgentHeader, read_response};
    let metadata = serde_json::to_vec(metadata).unwrap();
    let mut stream = UnixStream::connect(socket(rig)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let header = AgentHeader {
        version: AGENT_VERSION,
        metadata_len: metadata.len() as u32,
        bundle_len: 0,
    };
    stream.write_all(&header.encode()).unwrap();
    stream.write_all(&metadata).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    read_response(&mut stream).unwrap()
}

fn sparse(dir: &Path, len: u64) -> std::path::PathBuf {
    let path = dir.join(format!("sparse-{len}"));
    std::fs::File::create(&path).unwrap().set_len(len).unwrap();
    path
}

#[test]
fn the_ceiling_holds_on_the_header_and_in_the_client() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let request = push_request("demo/app", "refs/heads/big");

    // One byte over: refused on the header, before a body byte is read (none is sent: a
    // daemon that read on would find the body cut short and say that instead).
    let refused = send(&rig, &request, CEILING + 1, |_| Ok(()));
    assert!(!refused.ok);
    let error = refused.error.as_ref().unwrap();
    assert!(
        error.policies.contains(&"bundle-ceiling".to_string()),
        "{error:?}"
    );

    // Exactly the ceiling: admitted, the whole body read; it then fails as not a bundle.
    let tmp = tempfile::tempdir().unwrap();
    let exact = sparse(tmp.path(), CEILING);
    let answer =
        call_with_bundle(&socket(&rig), &request, Some((&exact, CEILING)), |_, _| {}).unwrap();
    assert!(!answer.ok);
    assert!(message(&answer).contains("not a git bundle"), "{answer:?}");

    // The client refuses one byte more before connecting.
    let over = sparse(tmp.path(), CEILING + 1);
    let nowhere = tmp.path().join("no.sock");
    match call_with_bundle(&nowhere, &request, Some((&over, CEILING + 1)), |_, _| {}) {
        Err(ClientError::TooLarge(n)) => assert_eq!(n, CEILING + 1),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn short_and_long_bodies_are_refused_and_store_nothing() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let request = push_request("demo/app", "refs/heads/x");
    let short = send(&rig, &request, 1000, |s| s.write_all(&[0u8; 10]));
    assert!(
        message(&short).contains("ended after 10 of the 1000"),
        "{short:?}"
    );
    let long = send(&rig, &request, 10, |s| s.write_all(&[0u8; 20]));
    assert!(message(&long).contains("more than the 10"), "{long:?}");
    let tmp = rig.dir.path().join("state/tmp");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "spool files left in {tmp:?}"
    );
}

#[test]
fn a_bundle_of_another_repositorys_history_is_refused_by_the_server() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/lib");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "x.txt", b"x\n", "work on app");
    let head = support::devhub::rev_parse(&app, "HEAD");
    let haves = vec![support::devhub::rev_parse(&app, "origin/main")];
    let built = bundle::build(&app, &[(head.clone(), "HEAD".into())], &haves, false)
        .unwrap()
        .unwrap();

    // A publish to demo/lib with demo/app's commits: the prerequisites are not in demo/lib.
    let publish = AgentRequest::PublishPr {
        repo: "demo/lib".into(),
        title: "sneak".into(),
        body: String::new(),
        base: None,
        draft: false,
        head: head.clone(),
    };
    let answer = call_with_bundle(
        &socket(&rig),
        &publish,
        Some((built.file.path(), built.len)),
        |_, _| {},
    )
    .unwrap();
    assert!(!answer.ok);
    assert!(message(&answer).contains("does not have"), "{answer:?}");
    assert!(rig.pulls("lib").is_empty());

    // The same as a direct push under a grant on demo/lib.
    let push = push_of("demo/lib", "refs/heads/sneak", &head);
    let answer = call_with_bundle(
        &socket(&rig),
        &push,
        Some((built.file.path(), built.len)),
        |_, _| {},
    )
    .unwrap();
    assert!(!answer.ok, "{answer:?}");
    assert!(message(&answer).contains("does not have"), "{answer:?}");
    assert_eq!(rig.remote_sha("lib", "refs/heads/sneak"), None);
    let mirror_pack = rig
        .dir
        .path()
        .join("state/mirrors/demo/lib.git/objects/pack");
    for entry in std::fs::read_dir(mirror_pack).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with("tmp_"), "temporary pack left: {name}");
    }
}

#[test]
fn a_corrupted_or_truncated_pack_is_refused() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "x.txt", &vec![b'x'; 4096], "x");
    let head = support::devhub::rev_parse(&app, "HEAD");
    let haves = vec![support::devhub::rev_parse(&app, "origin/main")];
    let built = bundle::build(
        &app,
        &[(head.clone(), "refs/heads/x".into())],
        &haves,
        false,
    )
    .unwrap()
    .unwrap();
    let bytes = std::fs::read(built.file.path()).unwrap();
    let push = push_of("demo/app", "refs/heads/x", &head);
    let truncated = &bytes[..bytes.len() - 30];
    let mut corrupted = bytes.clone();
    let n = corrupted.len();
    corrupted[n - 40] ^= 0xff;
    for bad in [truncated.to_vec(), corrupted] {
        let file = work.path().join("bad.bundle");
        std::fs::write(&file, &bad).unwrap();
        let answer = call_with_bundle(
            &socket(&rig),
            &push,
            Some((&file, bad.len() as u64)),
            |_, _| {},
        )
        .unwrap();
        assert!(!answer.ok);
        assert!(
            message(&answer).contains("damaged or truncated"),
            "{answer:?}"
        );
    }
    assert_eq!(rig.remote_sha("app", "refs/heads/x"), None);
    // The good bundle still goes through: nothing half-stored got in the way.
    let answer = call_with_bundle(
        &socket(&rig),
        &push,
        Some((built.file.path(), built.len)),
        |_, _| {},
    )
    .unwrap();
    assert!(answer.ok, "{answer:?}");
    assert!(
        answer.result.unwrap()["results"][0]["ok"]
            .as_bool()
            .unwrap()
    );
}

#[test]
fn an_operator_policy_lowers_the_ceiling_without_a_rebuild() {
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(
        policies.path().join("small.cedar"),
        "@id(\"small-pushes\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen { context.bundle_bytes > 1000 };\n",
    )
    .unwrap();
    let rig = Rig::start_with(
        HOUR,
        &format!("policy_dir = \"{}\"", policies.path().display()),
    );
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(
        &app,
        "noise.bin",
        &(0..20_000u32)
            .flat_map(|i| i.wrapping_mul(2654435761).to_le_bytes())
            .collect::<Vec<u8>>(),
        "big",
    );
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/big"]);
    assert!(!push.status.success());
    assert!(
        String::from_utf8_lossy(&push.stderr).contains("small-pushes"),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
}

#[test]
fn a_push_leaves_audit_rows_with_refs_bundle_token_and_outcome() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "a.txt", b"a\n", "a");
    let push = rig.agent_git(
        &app,
        &[
            "push",
            "origin",
            "HEAD:refs/heads/audited",
            "+HEAD~2:refs/heads/main",
        ],
    );
    assert!(!push.status.success(), "the forced main must fail");
    let head = support::devhub::rev_parse(&app, "HEAD");

    let audit = rig.admin_ok(r#"{"op":"audit","repo":"demo/app"}"#);
    let rows = audit["result"].as_array().cloned().unwrap_or_default();
    let pushes: Vec<_> = rows.iter().filter(|r| r["action"] == "Push").collect();
    let allowed = pushes
        .iter()
        .find(|r| r["ref_name"] == "refs/heads/audited")
        .expect("a row for the pushed ref");
    assert_eq!(allowed["decision"], "allow");
    assert_eq!(allowed["new_oid"], head.as_str());
    assert!(allowed["old_oid"].is_null());
    assert!(allowed["bundle_bytes"].as_i64().unwrap() > 0);
    assert_eq!(allowed["bundle_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(allowed["token_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(allowed["outcome"], "pushed");
    assert!(
        allowed["policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "explicit-grant-push"),
        "{allowed}"
    );
    let denied = pushes
        .iter()
        .find(|r| r["ref_name"] == "refs/heads/main" && r["decision"] == "deny")
        .expect("a deny row for main");
    assert!(
        denied["policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "protect-default-branch"),
        "{denied}"
    );
    assert!(denied["old_oid"].is_string());
}

#[test]
fn pushes_to_one_repository_are_serialised_and_others_run_alongside() {
    let rig = Rig::start(HOUR);
    rig.admin_ok(r#"{"op":"yolo","ttl":{"seconds":3600}}"#);
    let work = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (repo, dir, branch) in [
        ("app", "app1", "one"),
        ("app", "app2", "two"),
        ("lib", "lib1", "three"),
    ] {
        let parent = work.path().join(dir);
        std::fs::create_dir_all(&parent).unwrap();
        let checkout = rig.clone(&parent, repo);
        commit_file(
            &checkout,
            &format!("{branch}.txt"),
            branch.as_bytes(),
            branch,
        );
        jobs.push((repo, checkout, branch));
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(repo, checkout, branch)| {
                let rig = &rig;
                scope.spawn(move || {
                    let out = rig.agent_git(
                        checkout,
                        &["push", "origin", &format!("HEAD:refs/heads/{branch}")],
                    );
                    assert!(
                        out.status.success(),
                        "{repo}/{branch}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    for (repo, checkout, branch) in &jobs {
        let head = support::devhub::rev_parse(checkout, "HEAD");
        assert_eq!(
            rig.remote_sha(repo, &format!("refs/heads/{branch}")),
            Some(head)
        );
    }
}

#[test]
fn a_thin_bundle_made_by_git_bundle_create_is_accepted() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    // A small edit of an existing file: git deltifies it against the blob GitHub has.
    let mut readme = std::fs::read(app.join("README.md")).unwrap();
    readme.extend_from_slice(b"\nOne more line.\n");
    commit_file(&app, "README.md", &readme, "edit the readme");
    let head = support::devhub::rev_parse(&app, "HEAD");
    support::devhub::git_ok(
        &app,
        &["bundle", "create", "-q", "thin.bundle", "origin/main..HEAD"],
    );
    let path = app.join("thin.bundle");
    let len = std::fs::metadata(&path).unwrap().len();
    let push = push_of("demo/app", "refs/heads/thin", &head);
    let answer = call_with_bundle(&socket(&rig), &push, Some((&path, len)), |_, _| {}).unwrap();
    assert!(answer.ok, "{answer:?}\n{}", rig.log());
    assert!(
        answer.result.unwrap()["results"][0]["ok"]
            .as_bool()
            .unwrap()
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/thin"), Some(head));
}

#[test]
fn ref_names_git_would_not_accept_are_refused_before_any_decision() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let main_before = rig.remote_sha("app", "refs/heads/main");
    for dst in [
        "refs/heads/../main",
        "refs/heads/x:refs/heads/main",
        "refs/heads/a b",
        "HEAD",
    ] {
        // No typed client can write this request: it goes as the JSON a hostile one sends.
        let answer = send_json(
            &rig,
            &serde_json::json!({"op": "push", "repo": "demo/app", "updates": [
                {"dst": dst, "new": "1111111111111111111111111111111111111111"}]}),
        );
        assert!(!answer.ok, "{dst}: {answer:?}");
        assert!(
            message(&answer).contains("not a valid full ref name"),
            "{dst}: {answer:?}"
        );
    }
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), main_before);
}

/// A `kB` field of /proc/PID/status (VmHWM: the peak resident set, file-backed pages included).
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// zodex-prd's peak memory may not pass this, whatever a pack declares (the daemon itself
/// starts near 32 MiB; the pack is indexed in a child process).
const PRD_PEAK_BOUND_KIB: u64 = 64 * 1024;

#[test]
fn pack_bombs_are_refused_before_they_are_inflated_and_the_daemon_stays_small() {
    let rig = Rig::start(HOUR);
    rig.grant_push("demo/app");
    let main = rig.remote_sha("app", "refs/heads/main").unwrap();
    let branches_before = rig.branches("app");
    // The tip the bundles claim; refused before anyone could look for it.
    let tip = "2222222222222222222222222222222222222222";
    let work = tempfile::tempdir().unwrap();
    let bombs = [
        (
            "a blob declared and compressed as 2 GiB of zeros",
            support::packs::zero_blob_bomb(2 << 30),
            "over GitHub's 100 MiB file limit",
        ),
        (
            "a delta of 160 KiB whose result is 2 GiB",
            support::packs::delta_bomb(2 << 30),
            "over GitHub's 100 MiB file limit",
        ),
        (
            "a zlib stream that declares 10 bytes and inflates to 8 MiB",
            support::packs::lying_blob(10, 8 << 20),
            "inflates past the 10 bytes it declares",
        ),
    ];
    for (what, pack, expected) in &bombs {
        let bytes = support::packs::bundle(&main, tip, "refs/heads/bomb", pack);
        assert!(bytes.len() < 4 << 20, "{what}: {} bytes", bytes.len());
        let path = work.path().join("bomb.bundle");
        std::fs::write(&path, &bytes).unwrap();
        let publish = AgentRequest::PublishPr {
            repo: "demo/app".into(),
            title: "bomb".into(),
            body: String::new(),
            base: None,
            draft: false,
            head: tip.into(),
        };
        for request in [publish, push_of("demo/app", "refs/heads/bomb", tip)] {
            // That the walk refuses a bomb from what it declares, without inflating it, is
            // packscan's unit tests'; here the 60 s fail a daemon that would never answer.
            let (socket, path, len) = (socket(&rig), path.clone(), bytes.len() as u64);
            let answer = finishes_within(what, Duration::from_secs(60), move || {
                call_with_bundle(&socket, &request, Some((&path, len)), |_, _| {}).unwrap()
            });
            assert!(!answer.ok, "{what}: {answer:?}");
            assert!(
                message(&answer).contains(expected),
                "{what}: {answer:?}\n{}",
                rig.log()
            );
        }
    }
    let peak = status_kib(rig.prd_pid(), "VmHWM:");
    assert!(
        peak < PRD_PEAK_BOUND_KIB,
        "zodex-prd peaked at {peak} KiB after the bombs"
    );
    // Nothing reached devhub, and nothing was left behind.
    assert_eq!(rig.branches("app"), branches_before);
    assert!(rig.pulls("app").is_empty());
    let tmp = rig.dir.path().join("state/tmp");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "files left in {tmp:?}"
    );
    // The daemon still answers: an ordinary push goes through.
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "after.txt", b"after the bombs\n", "after");
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/after"]);
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    assert_eq!(
        rig.remote_sha("app", "refs/heads/after"),
        Some(support::devhub::rev_parse(&app, "HEAD"))
    );
}

#[test]
fn the_server_refuses_an_empty_title_whatever_the_client_checked() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "x.txt", b"x\n", "work on app");
    let head = support::devhub::rev_parse(&app, "HEAD");
    let haves = vec![support::devhub::rev_parse(&app, "origin/main")];
    let built = bundle::build(&app, &[(head.clone(), "HEAD".into())], &haves, false)
        .unwrap()
        .unwrap();
    let publish = AgentRequest::PublishPr {
        repo: "demo/app".into(),
        title: " \t ".into(),
        body: String::new(),
        base: None,
        draft: false,
        head,
    };
    let answer = call_with_bundle(
        &socket(&rig),
        &publish,
        Some((built.file.path(), built.len)),
        |_, _| {},
    )
    .unwrap();
    assert!(!answer.ok, "{answer:?}");
    assert_eq!(
        answer.error.as_ref().unwrap().kind,
        ErrorKind::Usage,
        "{answer:?}"
    );
    assert!(message(&answer).contains("title is empty"), "{answer:?}");
    assert!(rig.pulls("app").is_empty());
}
