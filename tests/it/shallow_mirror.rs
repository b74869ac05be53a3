//! The first push into a repository decides on the tips of GitHub's refs alone (the mirror's
//! first fetch is `--depth=1`), and only where that is provably what the whole history gives;
//! the mirror is deepened before deciding wherever it is not, and after the push in any case.
//! Each test here makes GitHub's history deeper than the cut and pushes against it through a
//! real `zodex-prd`, the way `git-remote-zodex` does (`list for-push`, then the push).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::devhub::{AppKind, commit_file, git_ok, rev_parse};
use support::rig::{Rig, message, push_of, stderr, text};
use zodex::agent::bundle;
use zodex::agent::client::{call, call_with_bundle};
use zodex::protocol::AgentRequest;

const HOUR: Duration = Duration::from_secs(3600);
const DECIDED_SHALLOW: &str = "decided on the mirror's shallow history";
const DEEPENED: &str = "the mirror was deepened to GitHub's whole history";

fn mirror(rig: &Rig) -> PathBuf {
    rig.dir.path().join("state/mirrors/demo/app.git")
}

/// Someone else gives demo/app's main four more commits, and a branch `old` at the first of
/// them (its history, too, goes beneath a first fetch's cut). Returns their checkout.
fn deeper_history(rig: &Rig, work: &Path) -> PathBuf {
    let bare = rig.bare("app");
    git_ok(work, &["clone", "-q", bare.to_str().unwrap(), "theirs"]);
    let theirs = work.join("theirs");
    for i in 0..4 {
        commit_file(
            &theirs,
            "history.txt",
            format!("{i}\n").as_bytes(),
            "history",
        );
    }
    git_ok(
        &theirs,
        &["push", "-q", "origin", "HEAD:main", "HEAD~3:refs/heads/old"],
    );
    theirs
}

/// `git rev-list --count` of `rev` in the repository at `dir`.
fn count(dir: &Path, rev: &str) -> String {
    git_ok(dir, &["rev-list", "--count", rev])
}

/// `list for-push` as `git-remote-zodex` sends it before a push.
fn list(rig: &Rig) {
    let socket = rig.dir.path().join("agent.sock");
    let listed = call(
        &socket,
        &AgentRequest::ListRefs {
            repo: "demo/app".into(),
        },
    )
    .unwrap();
    assert!(listed.ok, "{listed:?}");
}

/// An ordinary first push decides on the tips; the mirror is whole once the push is answered
/// (the next push then decides without the shallow check), and it holds no tree it did not.
#[test]
fn a_first_push_decides_on_the_tips_and_the_mirror_is_deepened_after_it() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    deeper_history(&rig, work.path());
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "feature.txt", b"feature\n", "feature");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(
        rig.remote_sha("app", "refs/heads/feature"),
        Some(rev_parse(&app, "HEAD"))
    );
    assert_eq!(
        rig.log().matches(DECIDED_SHALLOW).count(),
        1,
        "{}",
        rig.log()
    );
    rig.wait_for_log(DEEPENED);
    let mirror = mirror(&rig);
    assert!(!mirror.join("shallow").exists(), "the mirror is still cut");
    let main = rev_parse(&app, "origin/main");
    assert_eq!(count(&mirror, &main), count(&rig.bare("app"), &main));

    commit_file(&app, "more.txt", b"more\n", "more");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}", rig.log());
    assert_eq!(
        rig.log().matches(DECIDED_SHALLOW).count(),
        1,
        "{}",
        rig.log()
    );
}

/// The attack the shallow check exists for: a bundle that carries one of GitHub's own commits
/// from beneath the cut. `old` is fast-forwarded onto a new commit built on main's third
/// commit (between `old` and main's tip), and the bundle carries that third commit too. On
/// the cut history it looks new (main's history stops at its tip); GitHub is asked, says it
/// has it, and the decision is made on the whole history: one new commit, as a whole mirror
/// counts it.
#[test]
fn githubs_own_commits_beneath_the_cut_are_not_counted_as_new() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    deeper_history(&rig, work.path());
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    git_ok(&app, &["checkout", "-q", "-b", "onto", "origin/main~2"]);
    commit_file(&app, "extra.txt", b"extra\n", "extra");
    let new = rev_parse(&app, "HEAD");
    // Built against `old` alone: the pack carries main~2 as well as the new commit.
    let haves = vec![rev_parse(&app, "origin/old")];
    let built = bundle::build(
        &app,
        &[(new.clone(), "refs/heads/old".into())],
        &haves,
        false,
    )
    .unwrap()
    .unwrap();
    list(&rig);
    let answer = call_with_bundle(
        &rig.dir.path().join("agent.sock"),
        &push_of("demo/app", "refs/heads/old", &new),
        Some((built.file.path(), built.len)),
        |_, _| {},
    )
    .unwrap();
    assert!(answer.ok, "{}\n{}", message(&answer), rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/old"), Some(new));
    let log = rig.log();
    assert!(
        log.contains("deepening the mirror before deciding"),
        "{log}"
    );
    assert!(
        log.contains("which the shallow walk counts as new"),
        "{log}"
    );
    assert!(!log.contains(DECIDED_SHALLOW), "{log}");

    let audit = rig.admin_ok(r#"{"op":"audit","repo":"demo/app"}"#);
    let rows = audit["result"].as_array().cloned().unwrap_or_default();
    let row = rows
        .iter()
        .find(|r| r["action"] == "Push" && r["ref_name"] == "refs/heads/old")
        .expect("the push's audit row");
    assert_eq!(row["decision"], "allow");
    assert_eq!(row["detail"]["new_commits"], 1, "{row}");
}

/// A workflow change two commits beneath a branch's tip: a new branch built on that tip brings
/// it to the repository's history as the default branch sees it. The cut hides it; the check
/// sees the walk reach the cut, deepens, and the push is refused for want of the workflow
/// allowance — as on a whole mirror.
#[test]
fn a_workflow_change_beneath_the_cut_is_still_seen() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let theirs = deeper_history(&rig, work.path());
    git_ok(&theirs, &["checkout", "-q", "-b", "ci", "HEAD~1"]);
    commit_file(
        &theirs,
        ".github/workflows/ci.yml",
        b"on: push\n",
        "their CI",
    );
    commit_file(&theirs, "after.txt", b"after\n", "after their CI");
    // Pushed the way a person with the workflows permission would.
    let token = rig.demo.token(
        AppKind::Writer,
        "app",
        serde_json::json!({"contents": "write", "workflows": "write"}),
    );
    let url = rig.demo.git_url("app", Some(&token));
    git_ok(&theirs, &["push", "-q", &url, "ci"]);
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    git_ok(&app, &["checkout", "-q", "-b", "on-ci", "origin/ci"]);
    commit_file(&app, "mine.txt", b"mine\n", "mine");
    let push = rig.agent_git(&app, &["push", "origin", "on-ci"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("workflow-allowance"),
        "{}",
        text(&push)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/on-ci"), None);
    let log = rig.log();
    assert!(
        log.contains("deepening the mirror before deciding"),
        "{log}"
    );
    assert!(log.contains("reach the cut"), "{log}");
}

/// A branch started from an older commit of main: the bundle builds on a commit beneath the
/// cut (its prerequisite), so the mirror is deepened before the bundle is read — and the push
/// goes, as on a whole mirror.
#[test]
fn a_bundle_building_beneath_the_cut_deepens_the_mirror_first() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    deeper_history(&rig, work.path());
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    git_ok(&app, &["checkout", "-q", "-b", "behind", "origin/main~2"]);
    commit_file(&app, "behind.txt", b"behind\n", "behind");
    let push = rig.agent_git(&app, &["push", "origin", "behind"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(
        rig.remote_sha("app", "refs/heads/behind"),
        Some(rev_parse(&app, "HEAD"))
    );
    let log = rig.log();
    assert!(log.contains("builds on a commit beneath its cut"), "{log}");
    assert!(!mirror(&rig).join("shallow").exists());
}

/// `publish-pr` into a repository the mirror has never fetched: decided on the tips, the pull
/// request opened, and the mirror whole afterwards.
#[test]
fn a_first_pull_request_decides_on_the_tips_too() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    deeper_history(&rig, work.path());
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    commit_file(&app, "pr.txt", b"pr\n", "for a pull request");
    let publish = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Shallow"],
    );
    assert!(
        publish.status.success(),
        "{}\n{}",
        text(&publish),
        rig.log()
    );
    assert_eq!(rig.pulls("app").len(), 1);
    assert_eq!(
        rig.log().matches(DECIDED_SHALLOW).count(),
        1,
        "{}",
        rig.log()
    );
    rig.wait_for_log(DEEPENED);
    assert!(
        !mirror(&rig).join("shallow").exists(),
        "the mirror is still cut"
    );
}
