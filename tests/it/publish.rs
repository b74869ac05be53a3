//! Publishing and pushing end to end: a devhub, a real `zodex-prd serve`, real git running
//! `git-remote-zodex` (pushes) and `zodex-agent github publish-pr` (pull requests), real Unix
//! sockets. Every push travels as a bundle that zodex-prd verifies, decides per ref, and pushes
//! with a one-repository token it revokes afterwards.

use crate::support;

use std::path::Path;
use std::time::Duration;
use support::devhub::commit_file;
use support::rig::Rig;
use support::rig::{stderr, text};

const HOUR: Duration = Duration::from_secs(3600);

fn head(dir: &Path) -> String {
    support::devhub::rev_parse(dir, "HEAD")
}

#[test]
fn a_feature_branch_is_pushed_under_a_grant() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "feature.txt", b"hello\n", "add a feature");
    rig.grant_push("demo/app");

    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(
        rig.remote_sha("app", "refs/heads/feature"),
        Some(head(&app))
    );
    let stderr = String::from_utf8_lossy(&push.stderr);
    assert!(stderr.contains("* [new branch]"), "{stderr}");
}

#[test]
fn a_push_without_grant_or_yolo_is_denied_and_names_request_push() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "feature.txt", b"hello\n", "add a feature");

    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(!push.status.success(), "{}", text(&push));
    let stderr = String::from_utf8_lossy(&push.stderr);
    assert!(stderr.contains("request-push"), "{stderr}");
    assert_eq!(rig.remote_sha("app", "refs/heads/feature"), None);
}

#[test]
fn a_pull_request_is_opened_once_even_when_retried() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "fix.txt", b"fixed\n", "fix the thing");
    let args = [
        "publish-pr",
        "--repo",
        "demo/app",
        "--title",
        "Fix the thing",
        "--json",
    ];

    let first = rig.agent(&app, &args);
    assert!(first.status.success(), "{}\n{}", text(&first), rig.log());
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let branch = first["result"]["branch"].as_str().unwrap().to_string();
    assert!(branch.starts_with("zodex/"), "{branch}");
    assert!(branch.contains("-fix-the-thing-"), "{branch}");
    assert_eq!(
        rig.remote_sha("app", &format!("refs/heads/{branch}")),
        Some(head(&app))
    );

    let again = rig.agent(&app, &args);
    assert!(again.status.success(), "{}", text(&again));
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["result"]["number"], first["result"]["number"]);
    assert_eq!(again["result"]["reused"], true);
    let pulls = rig.pulls("app");
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["head"]["ref"], branch.as_str());
    assert_eq!(pulls[0]["base"]["ref"], "main");
    assert_eq!(pulls[0]["title"], "Fix the thing");
}

/// A checkout of `demo/app` with a feature commit, under a one-hour grant.
fn granted_checkout(rig: &Rig, work: &Path) -> std::path::PathBuf {
    let app = rig.clone(work, "app");
    rig.grant_push("demo/app");
    app
}

#[test]
fn the_default_branch_is_never_force_updated_or_deleted() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    let before = rig.remote_sha("app", "refs/heads/main").unwrap();
    support::devhub::git_ok(&app, &["reset", "-q", "--hard", "HEAD~1"]);
    commit_file(&app, "rewrite.txt", b"x\n", "rewrite history");

    let force = rig.agent_git(&app, &["push", "--force", "origin", "main"]);
    assert!(!force.status.success(), "{}", text(&force));
    assert!(
        stderr(&force).contains("protect-default-branch"),
        "{}",
        stderr(&force)
    );
    let delete = rig.agent_git(&app, &["push", "origin", ":main"]);
    assert!(!delete.status.success(), "{}", text(&delete));
    assert!(
        stderr(&delete).contains("protect-default-branch"),
        "{}",
        stderr(&delete)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), Some(before));

    // A fast-forward of the default branch is an ordinary push.
    support::devhub::git_ok(&app, &["reset", "-q", "--hard", "origin/main"]);
    commit_file(&app, "ff.txt", b"y\n", "fast-forward");
    let ff = rig.agent_git(&app, &["push", "origin", "main"]);
    assert!(ff.status.success(), "{}", text(&ff));
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), Some(head(&app)));
}

#[test]
fn revoked_and_expired_grants_deny() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    commit_file(&app, "a.txt", b"a\n", "a");
    rig.admin_ok(r#"{"op":"revoke_push","repo":"demo/app"}"#);
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/a"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(stderr(&push).contains("request-push"), "{}", stderr(&push));

    rig.admin_ok(r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":2}}"#);
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/a"]);
    assert!(push.status.success(), "{}", text(&push));
    rig.advance(3);
    commit_file(&app, "b.txt", b"b\n", "b");
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/b"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert_eq!(rig.remote_sha("app", "refs/heads/b"), None);
}

#[test]
fn yolo_over_every_installed_repository_pushes_where_the_writer_is_installed() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    rig.admin_ok(r#"{"op":"yolo","ttl":{"seconds":3}}"#);
    for repo in ["app", "lib"] {
        let dir = rig.clone(work.path(), repo);
        commit_file(&dir, "yolo.txt", b"y\n", "yolo");
        let push = rig.agent_git(&dir, &["push", "origin", "HEAD:refs/heads/yolo"]);
        assert!(
            push.status.success(),
            "{repo}: {}\n{}",
            text(&push),
            rig.log()
        );
        assert_eq!(rig.remote_sha(repo, "refs/heads/yolo"), Some(head(&dir)));
    }
    let other = rig.clone(work.path(), "other");
    commit_file(&other, "yolo.txt", b"y\n", "yolo");
    let push = rig.agent_git(&other, &["push", "origin", "HEAD:refs/heads/yolo"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("require-writer-installed"),
        "{}",
        stderr(&push)
    );

    // The scope ends after its TTL.
    rig.advance(4);
    let app = work.path().join("app");
    commit_file(&app, "late.txt", b"l\n", "late");
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/late"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert_eq!(rig.remote_sha("app", "refs/heads/late"), None);
}

#[test]
fn a_workflow_change_needs_the_allowance() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    commit_file(&app, ".github/workflows/ci.yml", b"on: push\n", "add CI");
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/ci"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("workflow-allowance"),
        "{}",
        stderr(&push)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/ci"), None);

    rig.admin_ok(
        r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"allow_workflows":true}"#,
    );
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/ci"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/ci"), Some(head(&app)));
}

#[test]
fn tags_are_created_but_never_moved() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    // A lightweight tag on a commit GitHub has needs no bundle.
    support::devhub::git_ok(&app, &["tag", "v1", "origin/main"]);
    let push = rig.agent_git(&app, &["push", "origin", "v1"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    let v1 = rig.remote_sha("app", "refs/tags/v1");
    assert!(v1.is_some());

    commit_file(&app, "next.txt", b"n\n", "next");
    support::devhub::git_ok(&app, &["tag", "-f", "v1"]);
    let moved = rig.agent_git(&app, &["push", "--force", "origin", "v1"]);
    assert!(!moved.status.success(), "{}", text(&moved));
    assert!(
        stderr(&moved).contains("immutable-tags"),
        "{}",
        stderr(&moved)
    );
    assert_eq!(rig.remote_sha("app", "refs/tags/v1"), v1);

    // An annotated tag on a new commit travels in the bundle.
    support::devhub::git_ok(&app, &["tag", "-a", "-m", "two", "v2"]);
    let push = rig.agent_git(&app, &["push", "origin", "v2"]);
    assert!(push.status.success(), "{}", text(&push));
    assert!(rig.remote_sha("app", "refs/tags/v2").is_some());
}

#[test]
fn a_stale_lease_is_rejected() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    commit_file(&app, "f.txt", b"1\n", "one");
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/topic"]);
    assert!(push.status.success(), "{}", text(&push));
    let pushed = head(&app);

    // Someone else moves the branch; our lease (the old value) is stale.
    let other = tempfile::tempdir().unwrap();
    let theirs = rig.clone(other.path(), "app");
    support::devhub::git_ok(&theirs, &["checkout", "-q", "topic"]);
    commit_file(&theirs, "g.txt", b"2\n", "theirs");
    let push = rig.agent_git(&theirs, &["push", "origin", "topic"]);
    assert!(push.status.success(), "{}", text(&push));
    let theirs_head = head(&theirs);

    support::devhub::git_ok(&app, &["commit", "-q", "--amend", "-m", "one, amended"]);
    let lease = format!("--force-with-lease=refs/heads/topic:{pushed}");
    let push = rig.agent_git(&app, &["push", &lease, "origin", "HEAD:refs/heads/topic"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(stderr(&push).contains("stale info"), "{}", stderr(&push));
    assert_eq!(
        rig.remote_sha("app", "refs/heads/topic"),
        Some(theirs_head.clone())
    );

    // With the current value as lease, the forced update goes through.
    let lease = format!("--force-with-lease=refs/heads/topic:{theirs_head}");
    let push = rig.agent_git(&app, &["push", &lease, "origin", "HEAD:refs/heads/topic"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/topic"), Some(head(&app)));
}

#[test]
fn publish_pr_refuses_a_dirty_tree_nothing_to_publish_and_another_origin() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    let publish = |repo: &str| rig.agent(&app, &["publish-pr", "--repo", repo, "--title", "T"]);
    let nothing = publish("demo/app");
    assert_eq!(nothing.status.code(), Some(2), "{}", text(&nothing));
    assert!(
        stderr(&nothing).contains("nothing to publish"),
        "{}",
        stderr(&nothing)
    );

    std::fs::write(app.join("untracked.txt"), "u").unwrap();
    let dirty = publish("demo/app");
    assert_eq!(dirty.status.code(), Some(2), "{}", text(&dirty));
    assert!(stderr(&dirty).contains("uncommitted"), "{}", stderr(&dirty));
    std::fs::remove_file(app.join("untracked.txt")).unwrap();

    commit_file(&app, "c.txt", b"c\n", "change");
    let wrong = publish("demo/lib");
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    assert!(
        stderr(&wrong).contains("`origin` is demo/app"),
        "{}",
        stderr(&wrong)
    );
    assert!(rig.pulls("app").is_empty());
}

#[test]
fn a_publish_killed_before_its_push_is_retried_into_one_pull_request() {
    use zodex::devhub::{Fault, FaultKind, FaultScope};
    let mut rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "crash.txt", b"c\n", "survive a crash");
    let args = [
        "publish-pr",
        "--repo",
        "demo/app",
        "--title",
        "Survive a crash",
        "--json",
    ];

    // Every git request to GitHub is slow: zodex-prd is killed after it recorded the
    // publication and imported the bundle, while its push waits.
    rig.demo.hub.inject(Fault {
        kind: FaultKind::Delay { ms: 1500 },
        times: 50,
        scope: FaultScope::Git,
        request: None,
    });
    let first = rig.spawn_agent(&app, &args);
    rig.wait_for_log("publication recorded");
    rig.kill9();
    let first = first.wait_with_output().unwrap();
    assert!(!first.status.success(), "{}", text(&first));
    rig.demo.hub.clear_faults();

    rig.restart();
    let tmp = rig.dir.path().join("state/tmp");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "leftovers in {tmp:?}"
    );
    let retry = rig.agent(&app, &args);
    assert!(retry.status.success(), "{}\n{}", text(&retry), rig.log());
    let retry: serde_json::Value = serde_json::from_slice(&retry.stdout).unwrap();
    let branch = retry["result"]["branch"].as_str().unwrap();
    let recorded: Vec<String> = rig
        .log()
        .lines()
        .filter(|l| l.contains("publication recorded"))
        .map(str::to_string)
        .collect();
    assert!(
        recorded.len() >= 2 && recorded.iter().all(|l| l.contains(branch)),
        "the retry reuses the recorded branch {branch}: {recorded:?}"
    );
    assert_eq!(rig.pulls("app").len(), 1);
    let again = rig.agent(&app, &args);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(rig.pulls("app").len(), 1);
}

#[test]
fn a_pull_request_changing_workflows_is_refused_and_nothing_is_pushed() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(
        &app,
        ".github/workflows/leak.yml",
        b"on: push\n",
        "add a workflow",
    );
    let out = rig.agent(&app, &["publish-pr", "--repo", "demo/app", "--title", "CI"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        stderr(&out).contains("pr-workflow-change"),
        "{}",
        stderr(&out)
    );
    assert!(rig.pulls("app").is_empty());
    assert_eq!(
        rig.branches("app"),
        "refs/heads/main",
        "no branch was left behind"
    );
}

#[test]
fn a_pull_request_github_refuses_leaves_no_branch_and_says_why() {
    use zodex::devhub::{Fault, FaultKind, FaultScope};
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    // A base branch that disappears while zodex-prd pushes: GitHub then refuses the PR (422).
    let bare = rig.bare("app");
    support::devhub::git_ok(&bare, &["branch", "side", "main"]);
    commit_file(&app, "side.txt", b"s\n", "for the side branch");
    rig.demo.hub.inject(Fault {
        kind: FaultKind::Delay { ms: 1500 },
        times: 50,
        scope: FaultScope::Git,
        request: None,
    });
    let publish = rig.spawn_agent(
        &app,
        &[
            "publish-pr",
            "--repo",
            "demo/app",
            "--title",
            "Side",
            "--base",
            "side",
        ],
    );
    rig.wait_for_log("publication recorded");
    support::devhub::git_ok(&bare, &["branch", "-D", "side"]);
    let out = publish.wait_with_output().unwrap();
    rig.demo.hub.clear_faults();
    assert!(!out.status.success(), "{}", text(&out));
    let said = stderr(&out);
    assert!(said.contains("did not open the pull request"), "{said}");
    assert!(said.contains("was deleted again"), "{said}");
    assert!(rig.pulls("app").is_empty());
    assert_eq!(
        rig.branches("app"),
        "refs/heads/main",
        "no branch was left behind"
    );
}

#[test]
fn an_atomic_push_with_one_refused_ref_pushes_nothing() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    commit_file(&app, "atomic.txt", b"a\n", "atomic");
    let before = rig.remote_sha("app", "refs/heads/main");
    let push = rig.agent_git(
        &app,
        &[
            "push",
            "--atomic",
            "origin",
            "HEAD:refs/heads/atomic",
            "+HEAD~2:refs/heads/main",
        ],
    );
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("protect-default-branch"),
        "{}",
        stderr(&push)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/atomic"), None);
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), before);
    // Without --atomic the allowed ref goes through on its own.
    let push = rig.agent_git(
        &app,
        &[
            "push",
            "origin",
            "HEAD:refs/heads/atomic",
            "+HEAD~2:refs/heads/main",
        ],
    );
    assert!(!push.status.success());
    assert_eq!(rig.remote_sha("app", "refs/heads/atomic"), Some(head(&app)));
}

#[test]
fn a_dry_run_decides_every_ref_and_pushes_nothing() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "dry.txt", b"d\n", "dry");
    let denied = rig.agent_git(
        &app,
        &["push", "--dry-run", "origin", "HEAD:refs/heads/dry"],
    );
    assert!(!denied.status.success(), "{}", text(&denied));
    assert!(
        stderr(&denied).contains("request-push"),
        "{}",
        stderr(&denied)
    );

    rig.grant_push("demo/app");
    let dry = rig.agent_git(
        &app,
        &["push", "--dry-run", "origin", "HEAD:refs/heads/dry"],
    );
    assert!(dry.status.success(), "{}\n{}", text(&dry), rig.log());
    assert!(stderr(&dry).contains("[new branch]"), "{}", stderr(&dry));
    assert_eq!(
        rig.remote_sha("app", "refs/heads/dry"),
        None,
        "a dry run pushes nothing"
    );
    let audit = rig.admin_ok(r#"{"op":"audit","repo":"demo/app"}"#);
    let rows = audit["result"].as_array().cloned().unwrap_or_default();
    assert!(
        rows.iter()
            .any(|r| r["ref_name"] == "refs/heads/dry" && r["outcome"] == "dry run: not pushed"),
        "{rows:?}"
    );
}

/// `publish-pr` where GitHub opens the pull request but its answers are lost: `times` answers
/// to `POST /repos/demo/app/pulls` are 502 after the request was carried out. Returns the
/// agent's JSON answer, the branch and the pull requests GitHub has.
fn publish_with_lost_answers(times: u32) -> (serde_json::Value, Vec<serde_json::Value>, String) {
    use zodex::devhub::Fault;
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, "lost.txt", b"l\n", "survive a lost answer");
    rig.demo
        .hub
        .inject(Fault::status_after(502, times).matching("POST", "/repos/demo/app/pulls"));
    let out = rig.agent(
        &app,
        &[
            "publish-pr",
            "--repo",
            "demo/app",
            "--title",
            "Lost answer",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}\n{}", text(&out), rig.log());
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let branch = answer["result"]["branch"].as_str().unwrap().to_string();
    assert_eq!(
        rig.remote_sha("app", &format!("refs/heads/{branch}")),
        Some(head(&app)),
        "the branch of the open pull request is kept"
    );
    (answer, rig.pulls("app"), branch)
}

#[test]
fn a_pull_request_github_opened_before_a_502_is_adopted_not_opened_twice() {
    // The retry of the lost POST is GitHub's 422 "A pull request already exists for …".
    let (answer, pulls, branch) = publish_with_lost_answers(1);
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["state"], "open");
    assert_eq!(pulls[0]["head"]["ref"], branch.as_str());
    assert_eq!(answer["result"]["number"], pulls[0]["number"]);
    assert_eq!(answer["result"]["url"], pulls[0]["html_url"]);
}

#[test]
fn a_pull_request_github_opened_is_adopted_even_when_every_answer_is_lost() {
    // Every attempt is lost (the first opens it, the retries are refused as duplicates): the
    // failure's cleanup finds the open pull request, adopts it and keeps its branch.
    let (answer, pulls, branch) = publish_with_lost_answers(4);
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["head"]["ref"], branch.as_str());
    assert_eq!(answer["result"]["number"], pulls[0]["number"]);
}

/// GitHub answering 502 to everything is GitHub's failure, said as such: exit 1 (never 3, which
/// is a policy's refusal), what was being done, that nothing was pushed, and to try again.
#[test]
fn github_answering_502_is_an_upstream_failure_not_a_refusal() {
    use zodex::devhub::{Fault, FaultScope};
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    support::devhub::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "down.txt", b"d\n", "while GitHub is down");
    rig.demo
        .hub
        .inject(Fault::status(502, 10_000).on(FaultScope::Any));

    let check = |what: &str, out: &std::process::Output| {
        let said = stderr(out);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(out));
        for words in [
            "GitHub answered 502",
            "demo/app",
            "nothing was pushed",
            "try again",
        ] {
            assert!(said.contains(words), "{what} should say {words:?}: {said}");
        }
        for words in ["denied", "policy", "not installed", "refused"] {
            assert!(
                !said.to_lowercase().contains(words),
                "{what} must not read as a refusal ({words:?}): {said}"
            );
        }
    };
    // The credential helper, for a repository whose coverage was never checked.
    let (answer, said) = rig.get("lib");
    assert!(!answer.contains("password="), "no token: {answer}");
    for words in [
        "GitHub answered 502",
        "demo/lib",
        "no token was handed out",
        "try again",
    ] {
        assert!(
            said.contains(words),
            "credential get should say {words:?}: {said}"
        );
    }
    assert!(!said.to_lowercase().contains("denied"), "{said}");
    let publish = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Down"],
    );
    check("publish-pr", &publish);
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(!push.status.success(), "{}", text(&push));
    let said = stderr(&push);
    assert!(said.contains("GitHub answered 502"), "{said}");
    assert!(said.contains("try again"), "{said}");
    assert!(said.contains("nothing was pushed"), "{said}");
    for words in ["denied", "refused", "policy"] {
        assert!(!said.to_lowercase().contains(words), "{said}");
    }
    rig.demo.hub.clear_faults();
    assert_eq!(rig.remote_sha("app", "refs/heads/feature"), None);
    assert!(rig.pulls("app").is_empty());
}

/// A pull request the publisher opens ends with a footer naming who asked and what allowed it,
/// with what the agent wrote escaped; `pr_footer = false` leaves the body as written.
#[test]
fn a_pull_request_names_what_allowed_it_unless_turned_off() {
    for (extra, footer) in [("", true), ("pr_footer = false", false)] {
        let rig = Rig::start_with(HOUR, extra);
        let work = tempfile::tempdir().unwrap();
        let app = rig.clone(work.path(), "app");
        commit_file(&app, "fix.txt", b"fixed\n", "fix the thing");
        let out = rig.agent(
            &app,
            &[
                "publish-pr",
                "--repo",
                "demo/app",
                "--title",
                "Fix",
                "--body",
                "The fix.",
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
        let pulls = rig.pulls("app");
        let body = pulls[0]["body"].as_str().unwrap_or_default().to_string();
        assert!(body.starts_with("The fix."), "{body}");
        assert_eq!(body.contains("Opened by Zodex for agent"), footer, "{body}");
        assert_eq!(
            body.contains("allowed by policy publish\\-pr"),
            footer,
            "{body}"
        );
        if !footer {
            assert_eq!(body, "The fix.");
        }
    }
}

/// The shipped pace example enabled in `policy_dir`: 30 pushes in an hour to one repository
/// pass, the 31st is refused and its message names the rule.
#[test]
fn with_the_pace_example_on_the_31st_push_of_an_hour_is_refused() {
    let policies = tempfile::tempdir().unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/policies/examples/pace.cedar"),
        policies.path().join("pace.cedar"),
    )
    .unwrap();
    let rig = Rig::start_with(
        HOUR,
        &format!("policy_dir = \"{}\"", policies.path().display()),
    );
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    for n in 0..30 {
        commit_file(&app, "pace.txt", format!("{n}\n").as_bytes(), "one more");
        let push = rig.agent_git(&app, &["push", "--quiet", "origin", "HEAD:refs/heads/pace"]);
        assert!(push.status.success(), "push {n}: {}", text(&push));
    }
    commit_file(&app, "pace.txt", b"31\n", "one too many");
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:refs/heads/pace"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        text(&push).contains("pace-pushes-per-repository-per-hour"),
        "{}",
        text(&push)
    );
    assert_ne!(rig.remote_sha("app", "refs/heads/pace"), Some(head(&app)));
}

/// A policy in `policy_dir/shadow/` that would refuse pushes to demo/app: the push still goes
/// through, its audit row records what the shadow set would have decided, and the operator's
/// report counts it.
#[test]
fn a_shadow_policy_is_recorded_and_reported_never_enforced() {
    let policies = tempfile::tempdir().unwrap();
    std::fs::create_dir(policies.path().join("shadow")).unwrap();
    std::fs::write(
        policies.path().join("shadow/app-frozen.cedar"),
        "@id(\"app-frozen\")\nforbid (principal, action == Zodex::Action::\"Push\", resource)\nwhen { resource.name == \"app\" };\n",
    )
    .unwrap();
    let rig = Rig::start_with(
        HOUR,
        &format!("policy_dir = \"{}\"", policies.path().display()),
    );
    let work = tempfile::tempdir().unwrap();
    let app = granted_checkout(&rig, work.path());
    commit_file(&app, "shadow.txt", b"shadow\n", "in the shadow");
    let push = rig.agent_git(
        &app,
        &["push", "--quiet", "origin", "HEAD:refs/heads/shadowed"],
    );
    assert!(push.status.success(), "never enforced: {}", text(&push));
    assert_eq!(
        rig.remote_sha("app", "refs/heads/shadowed"),
        Some(head(&app))
    );
    let report = rig.admin_ok(r#"{"op":"policy_shadow"}"#);
    let report = &report["result"];
    assert_eq!(report["differences"], 1, "{report}");
    let group = &report["groups"][0];
    assert_eq!(group["action"], "Push", "{report}");
    assert_eq!(group["repo"], "demo/app", "{report}");
    assert_eq!(group["would"], "deny", "{report}");
    assert_eq!(group["policies"][0], "app-frozen", "{report}");
    assert_eq!(
        group["first"][0]["detail"]["shadow"]["differs"], true,
        "{report}"
    );
}
