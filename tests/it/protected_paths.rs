//! Protected paths end to end (issue "Policy as product"): the publisher establishes the
//! paths each pushed update changes against what GitHub has, and the shipped policies keep
//! `.github/**`, `CODEOWNERS` and the configured patterns out of pushes and pull requests
//! unless a grant allows them — through real git, `git-remote-zodex` and devhub.

use crate::support;

use std::path::Path;
use std::time::Duration;
use support::devhub::{commit_file, git_ok};
use support::rig::{Rig, stderr, text};

const HOUR: Duration = Duration::from_secs(3600);

fn head(dir: &Path) -> String {
    support::devhub::rev_parse(dir, "HEAD")
}

/// The audit row of the push decision on `ref_name` (the only one in these tests).
fn push_row(rig: &Rig, ref_name: &str) -> serde_json::Value {
    let audit = rig.admin_ok(r#"{"op":"audit","repo":"demo/app"}"#);
    let rows = audit["result"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .find(|row| row["ref_name"] == ref_name && row["decision"] != "event")
        .cloned()
        .unwrap_or_else(|| panic!("no decision on {ref_name}: {rows:?}"))
}

#[test]
fn a_change_under_github_is_refused_naming_the_path_and_one_beside_it_is_pushed() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");

    // Beside: a directory merely named like it, deeper in the tree.
    git_ok(&app, &["checkout", "-q", "-b", "beside"]);
    commit_file(&app, "docs/.github/notes.md", b"notes\n", "notes");
    let push = rig.agent_git(&app, &["push", "origin", "beside"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/beside"), Some(head(&app)));

    git_ok(&app, &["checkout", "-q", "-b", "bot"]);
    commit_file(&app, ".github/dependabot.yml", b"version: 2\n", "bot");
    let push = rig.agent_git(&app, &["push", "origin", "bot"]);
    assert!(!push.status.success(), "{}", text(&push));
    let said = stderr(&push);
    assert!(said.contains("protected-paths"), "{said}");
    assert!(said.contains("`.github/dependabot.yml`"), "{said}");
    assert!(
        said.contains("--allow-path '.github/dependabot.yml'"),
        "the denial says how to allow it: {said}"
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/bot"), None);

    let denied = &push_row(&rig, "refs/heads/bot");
    assert_eq!(denied["decision"], "deny", "{denied}");
    assert_eq!(
        denied["detail"]["protected_paths"],
        serde_json::json!([".github/dependabot.yml"]),
        "{denied}"
    );
}

#[test]
fn a_codeowners_edit_needs_allow_path_and_a_deletion_counts_too() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    git_ok(&app, &["checkout", "-q", "-b", "owners"]);
    commit_file(&app, "CODEOWNERS", b"* @demo/reviewers\n", "owners");
    commit_file(&app, "src/lib.rs", b"// code\n", "code");
    rig.grant_push("demo/app");
    let push = rig.agent_git(&app, &["push", "origin", "owners"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(stderr(&push).contains("`CODEOWNERS`"), "{}", stderr(&push));
    assert_eq!(rig.remote_sha("app", "refs/heads/owners"), None);

    rig.admin_ok(
        r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"allow_paths":["CODEOWNERS"]}"#,
    );
    let push = rig.agent_git(&app, &["push", "origin", "owners"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/owners"), Some(head(&app)));

    // Removing the file is a change to it: a grant without the allowance refuses it.
    rig.admin_ok(r#"{"op":"revoke_push","repo":"demo/app"}"#);
    rig.grant_push("demo/app");
    git_ok(&app, &["rm", "-q", "CODEOWNERS"]);
    git_ok(&app, &["commit", "-q", "-m", "no owners"]);
    let push = rig.agent_git(&app, &["push", "origin", "owners"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(stderr(&push).contains("`CODEOWNERS`"), "{}", stderr(&push));
}

#[test]
fn configured_patterns_are_protected_too() {
    let rig = Rig::start_with(HOUR, "[policy]\nprotected_paths = [\"**/*.lock\"]\n");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    git_ok(&app, &["checkout", "-q", "-b", "deps"]);
    commit_file(&app, "web/yarn.lock", b"# lock\n", "deps");
    rig.grant_push("demo/app");
    let push = rig.agent_git(&app, &["push", "origin", "deps"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("`web/yarn.lock`"),
        "{}",
        stderr(&push)
    );

    rig.admin_ok(
        r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"allow_paths":["**/*.lock"]}"#,
    );
    let push = rig.agent_git(&app, &["push", "origin", "deps"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
}

/// Another client moved the branch (its trees are at GitHub only: the mirror is treeless):
/// the paths are still those of the agent's own commit, established level by level against
/// what GitHub has.
#[test]
fn paths_are_established_against_trees_only_github_has() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let other = rig.clone(work.path(), "app");
    git_ok(&other, &["checkout", "-q", "-b", "deep"]);
    commit_file(&other, "a/b/c/one.txt", b"1\n", "deep");
    commit_file(&other, ".github/labels.yml", b"[]\n", "labels");
    let bare = rig.bare("app");
    git_ok(&other, &["push", "-q", bare.to_str().unwrap(), "deep"]);

    let mine = tempfile::tempdir().unwrap();
    let app = rig.clone(mine.path(), "app");
    git_ok(&app, &["checkout", "-q", "deep"]);
    commit_file(&app, "a/b/c/two.txt", b"2\n", "mine");
    rig.grant_push("demo/app");
    let push = rig.agent_git(&app, &["push", "origin", "deep"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    let pushed = &push_row(&rig, "refs/heads/deep");
    assert_eq!(pushed["decision"], "allow", "{pushed}");
    assert_eq!(pushed["detail"]["paths"], 1, "only a/b/c/two.txt: {pushed}");
    assert_eq!(
        pushed["detail"]["protected_paths"],
        serde_json::json!([]),
        "the other client's .github change is GitHub's already: {pushed}"
    );
}

#[test]
fn a_pull_request_changing_a_protected_path_is_refused_and_one_beside_it_is_opened() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(&app, ".github/CODEOWNERS", b"* @demo/x\n", "owners");
    let out = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Owners"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = stderr(&out);
    assert!(said.contains("pr-protected-paths"), "{said}");
    assert!(said.contains("`.github/CODEOWNERS`"), "{said}");
    assert!(rig.pulls("app").is_empty());
    assert_eq!(
        rig.branches("app"),
        "refs/heads/main",
        "no branch left behind"
    );

    git_ok(&app, &["reset", "-q", "--hard", "HEAD~1"]);
    commit_file(&app, "docs/guide.md", b"# Guide\n", "guide");
    let out = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Guide"],
    );
    assert!(out.status.success(), "{}\n{}", text(&out), rig.log());
    assert_eq!(rig.pulls("app").len(), 1);
}
