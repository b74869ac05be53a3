//! Publishing and pushing end to end: a devhub, a real `zodex-prd serve`, real git running
//! `git-remote-zodex` (pushes) and `zodex-agent github publish-pr` (pull requests), real Unix
//! sockets. Every push travels as a bundle that zodex-prd verifies, decides per ref, and pushes
//! with a one-repository token it revokes afterwards.

mod devhub_support;

use devhub_support::commit_file;
use devhub_support::rig::Rig;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn head(dir: &Path) -> String {
    devhub_support::git_ok(dir, &["rev-parse", "HEAD"])
        .trim()
        .to_string()
}

fn grant(rig: &Rig, repo: &str) {
    rig.admin_ok(&format!(
        r#"{{"op":"grant_push","repo":"{repo}","ttl":{{"seconds":3600}}}}"#
    ));
}

#[test]
fn a_feature_branch_is_pushed_under_a_grant() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    devhub_support::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "feature.txt", b"hello\n", "add a feature");
    grant(&rig, "demo/app");

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
    devhub_support::git_ok(&app, &["checkout", "-q", "-b", "feature"]);
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
}
