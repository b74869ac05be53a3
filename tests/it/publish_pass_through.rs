//! The pass-through push end to end: a devhub, a real `zodex-prd serve`, real git running
//! `git-remote-zodex` and `zodex-agent github publish-pr`. A push or publication whose every
//! update was allowed sends GitHub the pack zodex-prd verified, as it is; one with a refused
//! ref goes through `git push` with the allowed updates only. (The receive-pack client's own
//! rules are tested against devhub in `tests/receive_pack.rs`.)

use crate::support;

use std::path::Path;
use std::time::Duration;
use support::devhub::commit_file;
use support::rig::Rig;

const HOUR: Duration = Duration::from_secs(3600);

fn head(dir: &Path) -> String {
    support::devhub::rev_parse(dir, "HEAD")
}

/// End to end through `git-remote-zodex` and a real `zodex-prd`: a push passes its pack on as
/// it arrives (`tests/publish_streamed.rs` attacks that), a publish-pr passes the verified
/// pack through, and the mirror follows GitHub.
#[test]
fn a_push_and_a_publish_pr_through_zodex_prd_pass_the_pack_through() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "feature.txt", b"hello\n", "feature");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}", rig.log());
    let pushed = head(&app);
    assert_eq!(rig.remote_sha("app", "refs/heads/feature"), Some(pushed));
    let passed = |log: &str| log.matches("the verified pack passed through").count();
    let streamed = |log: &str| log.matches("the pack was passed on as it arrived)").count();
    let repacked = |log: &str| log.matches("pushed with git push").count();
    assert_eq!(streamed(&rig.log()), 1, "{}", rig.log());

    // The next push builds on what the first one pushed: the mirror has it.
    commit_file(&app, "more.txt", b"more\n", "more");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}", rig.log());
    assert_eq!(
        rig.remote_sha("app", "refs/heads/feature"),
        Some(head(&app))
    );
    assert_eq!(streamed(&rig.log()), 2, "{}", rig.log());

    commit_file(&app, "pr.txt", b"pr\n", "for a pull request");
    let publish = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Pass"],
    );
    assert!(publish.status.success(), "{}", rig.log());
    assert_eq!(passed(&rig.log()), 1, "{}", rig.log());
    assert_eq!(repacked(&rig.log()), 0, "{}", rig.log());
    assert_eq!(rig.pulls("app").len(), 1);
}

/// A refused ref whose objects are not in the pack (a deletion) leaves the pack to pass
/// through; one whose own commit is in the pack sends the allowed ref by `git push`, and the
/// refused commit never reaches GitHub.
#[test]
fn a_push_with_a_refused_ref_passes_through_only_when_the_pack_holds_none_of_its_objects() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    let main = support::devhub::rev_parse(&app, "main");
    let passed = |log: &str| log.matches("the verified pack passed through").count();
    let repacked = |log: &str| log.matches("pushed with git push").count();

    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "side"]);
    commit_file(&app, "side.txt", b"side\n", "side");
    let push = rig.agent_git(&app, &["push", "origin", "side", ":main"]);
    assert!(!push.status.success(), "the deletion of main is refused");
    assert_eq!(rig.remote_sha("app", "refs/heads/side"), Some(head(&app)));
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), Some(main.clone()));
    let log = rig.log();
    assert_eq!((passed(&log), repacked(&log)), (1, 0), "{log}");

    // A rewrite of main (refused: the default branch is never force-updated) beside an
    // allowed branch: the pack carries the rewrite's commit.
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "rewrite", "main~1"]);
    commit_file(&app, "rewrite.txt", b"rewrite\n", "rewrite");
    let rewrite = head(&app);
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "side2", "main"]);
    commit_file(&app, "side2.txt", b"side2\n", "side2");
    let push = rig.agent_git(&app, &["push", "origin", "side2", "+rewrite:main"]);
    assert!(!push.status.success(), "the rewrite of main is refused");
    assert_eq!(rig.remote_sha("app", "refs/heads/side2"), Some(head(&app)));
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), Some(main));
    let log = rig.log();
    assert_eq!((passed(&log), repacked(&log)), (1, 1), "{log}");
    let probe = support::devhub::git(&rig.bare("app"), &["cat-file", "-e", &rewrite]);
    assert!(!probe.status.success(), "the refused commit reached GitHub");
}

/// `len` bytes git cannot compress (a fixed pseudo-random sequence).
fn incompressible(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// The mirror is a partial clone without blobs: after someone else pushed a 4 MiB file straight
/// to GitHub, the next push through zodex-prd fetches that commit and its tree — what decisions
/// read — and leaves the blob at GitHub; the mirror stays small.
#[test]
fn the_mirror_leaves_other_peoples_blobs_at_github() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    // Someone else, with plain git and no Zodex, pushes a big file to main.
    let other = work.path().join("other");
    let bare = rig.bare("app");
    support::devhub::git_ok(
        work.path(),
        &["clone", "-q", bare.to_str().unwrap(), "other"],
    );
    let big = incompressible(4 << 20);
    commit_file(&other, "big.bin", &big, "a big file");
    support::devhub::git_ok(&other, &["push", "-q", "origin", "HEAD:main"]);
    let big_commit = head(&other);
    let big_blob = support::devhub::rev_parse(&other, "HEAD:big.bin");

    // The agent pushes a small branch through Zodex.
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "small"]);
    commit_file(&app, "small.txt", b"small\n", "small");
    let push = rig.agent_git(&app, &["push", "origin", "small"]);
    assert!(push.status.success(), "{}", rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/small"), Some(head(&app)));

    let mirror = app_mirror(&rig);
    let has = |oid: &str| mirror_has(&mirror, oid);
    assert!(has(&big_commit), "the mirror follows GitHub's refs");
    assert!(!has(&big_blob), "the 4 MiB blob stays at GitHub");
    let size: u64 = walkdir(&mirror.join("objects"));
    assert!(size < 1 << 20, "the mirror holds {size} bytes of objects");
}

/// The mirror is treeless and keeps no blob: after someone else pushed a deep directory and a
/// big file, and the agent pushed a big file of its own through Zodex, the mirror holds both
/// commits, the agent's trees (the next decision on that branch reads them), neither blob and
/// none of the other person's subtrees — no decision read them. The next push builds on it.
#[test]
fn the_mirror_keeps_no_blob_and_only_the_trees_decisions_read() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    let other = work.path().join("other");
    let bare = rig.bare("app");
    support::devhub::git_ok(
        work.path(),
        &["clone", "-q", bare.to_str().unwrap(), "other"],
    );
    commit_file(&other, "deep/er/notes.txt", b"notes\n", "a deep directory");
    commit_file(
        &other,
        "theirs.bin",
        &incompressible(1 << 20),
        "their big file",
    );
    support::devhub::git_ok(&other, &["push", "-q", "origin", "HEAD:main"]);
    let their_deep = support::devhub::rev_parse(&other, "HEAD:deep");
    let their_blob = support::devhub::rev_parse(&other, "HEAD:theirs.bin");

    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "own"]);
    commit_file(
        &app,
        "src/big/own.bin",
        &incompressible(2 << 20),
        "our big file",
    );
    let push = rig.agent_git(&app, &["push", "origin", "own"]);
    assert!(push.status.success(), "{}", rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/own"), Some(head(&app)));

    let mirror = app_mirror(&rig);
    let has = |oid: &str| mirror_has(&mirror, oid);
    let ours = |rev: &str| support::devhub::rev_parse(&app, rev);
    assert!(has(&ours("HEAD")), "the pushed commit is kept");
    assert!(has(&ours("HEAD:src/big")), "the pushed trees are kept");
    assert!(
        !has(&ours("HEAD:src/big/own.bin")),
        "the pushed blob is not"
    );
    assert!(!has(&their_blob), "their blob stays at GitHub");
    assert!(!has(&their_deep), "their subtree stays at GitHub");
    let size = walkdir(&mirror.join("objects"));
    assert!(size < 256 << 10, "the mirror holds {size} bytes of objects");

    // The next push on the branch decides on what the mirror kept.
    commit_file(&app, "src/big/more.txt", b"more\n", "more");
    let push = rig.agent_git(&app, &["push", "origin", "own"]);
    assert!(push.status.success(), "{}", rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/own"), Some(head(&app)));
}

/// Every fetch and kept push adds a pack to the mirror; once there are more than a few dozen,
/// zodex-prd puts them into one after the push, and the next push decides on it as before.
#[test]
fn a_mirror_of_many_packs_is_repacked_after_a_push() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "many"]);
    commit_file(&app, "one.txt", b"one\n", "one");
    let push = rig.agent_git(&app, &["push", "origin", "many"]);
    assert!(push.status.success(), "{}", rig.log());
    let mirror = app_mirror(&rig);
    let packs = || {
        std::fs::read_dir(mirror.join("objects/pack"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "pack")
            })
            .count()
    };
    // Fifty more packs, one commit object each (as fifty fetches would leave them).
    let tree = support::devhub::rev_parse(&app, "HEAD^{tree}");
    for i in 0..50 {
        let commit = support::devhub::git_ok(
            &mirror,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "commit-tree",
                &tree,
                "-m",
                &format!("pack {i}"),
            ],
        );
        let mut pack = std::process::Command::new("git")
            .args([
                "-C",
                mirror.to_str().unwrap(),
                "pack-objects",
                "-q",
                "objects/pack/pack",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        pack.stdin
            .take()
            .unwrap()
            .write_all(commit.as_bytes())
            .unwrap();
        assert!(pack.wait().unwrap().success());
    }
    for dir in std::fs::read_dir(mirror.join("objects")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.file_name().unwrap().len() == 2 {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
    assert!(packs() > 50);

    commit_file(&app, "two.txt", b"two\n", "two");
    let push = rig.agent_git(&app, &["push", "origin", "many"]);
    assert!(push.status.success(), "{}", rig.log());
    rig.wait_for_log("the mirror was repacked into one pack");
    assert_eq!(packs(), 1);

    commit_file(&app, "three.txt", b"three\n", "three");
    let push = rig.agent_git(&app, &["push", "origin", "many"]);
    assert!(push.status.success(), "{}", rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/many"), Some(head(&app)));
}

/// zodex-prd's mirror of demo/app.
fn app_mirror(rig: &Rig) -> std::path::PathBuf {
    rig.dir.path().join("state/mirrors/demo/app.git")
}

/// Whether `mirror` holds `oid` (asked without fetching anything).
fn mirror_has(mirror: &Path, oid: &str) -> bool {
    std::process::Command::new("git")
        .args(["-C", mirror.to_str().unwrap(), "cat-file", "-e", oid])
        .env("GIT_NO_LAZY_FETCH", "1")
        .status()
        .unwrap()
        .success()
}

/// Bytes of the files under `dir`.
fn walkdir(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| match e.file_type().unwrap().is_dir() {
            true => walkdir(&e.path()),
            false => e.metadata().unwrap().len(),
        })
        .sum()
}
