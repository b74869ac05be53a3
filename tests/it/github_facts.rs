//! Facts come from GitHub, not from the publisher's own copies: the default branch is GitHub's
//! (learnt with coverage, followed when renamed, and an unknown one refuses force pushes and
//! deletions), and what a ref update brings is computed against GitHub's refs — a commit
//! GitHub already has still counts when the update brings it to the ref, and an object no
//! pushed ref reaches never travels or enters the mirror. A devhub, a real `zodex-prd`, real
//! git.

use crate::support;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::devhub::{AppKind, Demo, commit_file, git_ok, keys, rev_parse, sign, stores};
use support::rig::Rig;
use support::rig::{message, push_of, stderr, text};
use zodex::agent::bundle;
use zodex::agent::client::call_with_bundle;
use zodex::devhub::{Fault, FaultKind, FaultScope, Level, Permissions, Setup};

const HOUR: Duration = Duration::from_secs(3600);

/// A token of a third App, installed on `demo/<repo>` with `administration: write` (what a
/// repository admin's tool holds), registered on the running devhub.
fn admin_token(demo: &Demo, repo: &str) -> String {
    let stranger = &keys()[2];
    let mut setup = Setup::open(demo.hub.dir()).unwrap();
    let admin = Permissions::new().with("administration", Level::Write);
    let app_id = setup
        .add_app("repo-admin", &stranger.public_pem, admin.clone())
        .unwrap();
    let installation = setup.install(app_id, "demo", Some(&[repo]), admin).unwrap();
    setup.save().unwrap();
    demo.hub.reload().unwrap();
    let now = chrono::Utc::now().timestamp();
    let jwt = sign(
        stranger,
        json!({"iss": app_id.to_string(), "iat": now - 60, "exp": now + 540}),
    );
    let reply = demo.api(
        "POST",
        &format!("/app/installations/{installation}/access_tokens"),
        Some(&jwt),
        Some(json!({"repositories": [repo]})),
    );
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    reply.body["token"].as_str().unwrap().to_string()
}

/// `PATCH /repos/demo/<repo>` with `default_branch`, as GitHub takes it.
fn rename_default_branch(demo: &Demo, token: &str, repo: &str, branch: &str) {
    let reply = demo.api(
        "PATCH",
        &format!("/repos/demo/{repo}"),
        Some(token),
        Some(json!({"default_branch": branch})),
    );
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["default_branch"], branch);
}

/// Someone else (a writer token used directly, not through Zodex) pushes a commit adding a
/// workflow on `branch` of demo/app; returns the commit.
fn someone_else_pushes_a_workflow(rig: &Rig, work: &Path, branch: &str) -> String {
    let token = rig.demo.token(
        AppKind::Writer,
        "app",
        json!({"contents": "write", "workflows": "write"}),
    );
    let url = rig.demo.git_url("app", Some(&token));
    let theirs = work.join("theirs");
    git_ok(work, &["clone", "--quiet", &url, "theirs"]);
    commit_file(
        &theirs,
        ".github/workflows/ci.yml",
        b"on: push\njobs: {}\n",
        "their CI",
    );
    git_ok(
        &theirs,
        &[
            "push",
            "--quiet",
            &url,
            &format!("HEAD:refs/heads/{branch}"),
        ],
    );
    rev_parse(&theirs, "HEAD")
}

fn mirror(rig: &Rig) -> PathBuf {
    rig.dir.path().join("state/mirrors/demo/app.git")
}

#[test]
fn githubs_default_branch_is_protected_and_is_the_pull_request_base() {
    let rig = Rig::start(HOUR);
    // The configuration says `main`; GitHub's default branch becomes `trunk`.
    git_ok(&rig.bare("app"), &["branch", "trunk", "main"]);
    let admin = admin_token(&rig.demo, "app");
    rename_default_branch(&rig.demo, &admin, "app", "trunk");

    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    let trunk = rig.remote_sha("app", "refs/heads/trunk");
    git_ok(&app, &["checkout", "-q", "-B", "rewrite", "origin/trunk~1"]);
    commit_file(&app, "rewrite.txt", b"x\n", "rewrite history");

    let force = rig.agent_git(&app, &["push", "--force", "origin", "HEAD:trunk"]);
    assert!(!force.status.success(), "{}", text(&force));
    assert!(
        stderr(&force).contains("protect-default-branch"),
        "{}",
        text(&force)
    );
    let delete = rig.agent_git(&app, &["push", "origin", ":trunk"]);
    assert!(!delete.status.success(), "{}", text(&delete));
    assert!(
        stderr(&delete).contains("protect-default-branch"),
        "{}",
        text(&delete)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/trunk"), trunk);

    // `main` is an ordinary branch now: the configured name is no default branch.
    let main = rig.agent_git(&app, &["push", "--force", "origin", "HEAD:main"]);
    assert!(main.status.success(), "{}\n{}", text(&main), rig.log());
    assert_eq!(
        rig.remote_sha("app", "refs/heads/main"),
        Some(rev_parse(&app, "HEAD"))
    );

    // A pull request without --base targets GitHub's default branch: one fact for both.
    git_ok(&app, &["checkout", "-q", "-B", "fix", "origin/trunk"]);
    commit_file(&app, "fix.txt", b"fixed\n", "fix");
    let out = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Fix"],
    );
    assert!(out.status.success(), "{}\n{}", text(&out), rig.log());
    let pulls = rig.pulls("app");
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0]["base"]["ref"], "trunk");
}

#[test]
fn a_renamed_default_branch_is_followed_after_the_coverage_check() {
    use zodex::engine::policy::Policies;
    use zodex::engine::store::{App, GrantVia, Store};
    use zodex::engine::targets::{TargetSpec, Targets};
    use zodex::engine::{
        Ask, Authority, ChangeFacts, Engine, GrantTerms, Principal, RefName, RefUpdate, RepoName,
    };

    let demo = Demo::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in_runtime = runtime.enter();
    let github = demo.publisher_client(demo.hub.api_url());
    let repo = RepoName::parse("demo/app").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("state.db")).unwrap();
    let targets = Targets::from_specs(&[TargetSpec {
        repo: None,
        owner: Some("demo".into()),
        default_branch: Some("main".into()),
    }])
    .unwrap();
    let engine = Engine::new(Policies::load(None).unwrap(), targets);
    let operator = Principal::Operator("uid:0".parse().unwrap());
    let now = chrono::Utc::now().timestamp();
    Authority { engine: &engine }
        .grant_push(
            &mut store,
            &operator,
            &repo,
            GrantTerms {
                ttl_seconds: None,
                allow_workflows: false,
                via: GrantVia::Gateway,
                refs: Vec::new(),
                allow: Default::default(),
            },
            Default::default(),
            now,
        )
        .unwrap();
    let check = |store: &mut Store| {
        let coverage = runtime.block_on(github.check_coverage(&repo, now)).unwrap();
        zodex::engine::ledger::record_coverage(
            store,
            &repo.key(),
            &coverage.reader,
            &coverage.writer,
            coverage.token.as_ref(),
        )
        .unwrap();
        coverage
    };
    let force = |store: &mut Store, branch: &str| {
        let ask = Ask::Push {
            repo: repo.clone(),
            update: RefUpdate {
                ref_name: RefName::branch(branch).unwrap(),
                change: ChangeFacts::Supposed {
                    ref_exists: true,
                    force: true,
                    delete: false,
                },
                touches_workflows: false,
                paths: Default::default(),
                secrets: Vec::new(),
            },
            bundle_bytes: 10,
        };
        store
            .read(|f| engine.decide(f, &Principal::Agent, &ask, now))
            .unwrap()
    };

    let first = check(&mut store);
    assert_eq!(first.writer.default_branch.as_deref(), Some("main"));
    assert_eq!(first.reader.default_branch.as_deref(), Some("main"));
    // The coverage check's token could read the repository and nothing else, and is gone.
    let token = first.token.clone().unwrap();
    assert_eq!(token.permissions, r#"{"metadata":"read"}"#);
    assert!(token.revoked_at.is_some(), "{token:?}");
    assert!(!force(&mut store, "main").allowed);
    assert!(force(&mut store, "trunk").allowed);

    git_ok(
        &demo.hub.dir().join("repos/demo/app.git"),
        &["branch", "trunk", "main"],
    );
    let admin = admin_token(&demo, "app");
    rename_default_branch(&demo, &admin, "app", "trunk");
    let second = check(&mut store);
    assert_eq!(second.writer.default_branch.as_deref(), Some("trunk"));
    let decision = force(&mut store, "trunk");
    assert!(!decision.allowed);
    assert_eq!(
        decision.policies,
        vec!["protect-default-branch".to_string()]
    );
    assert!(force(&mut store, "main").allowed);
    let writer = store
        .read(|f| f.coverage("demo/app", App::Writer))
        .unwrap()
        .unwrap();
    assert_eq!(writer.default_branch.as_deref(), Some("trunk"));

    // devhub refuses a default branch that does not exist, as GitHub does.
    let reply = demo.api(
        "PATCH",
        "/repos/demo/app",
        Some(&admin),
        Some(json!({"default_branch": "nope"})),
    );
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    // Without `administration: write` the change is refused.
    let writer_token = demo.token(AppKind::Writer, "app", json!({"contents": "write"}));
    let reply = demo.api(
        "PATCH",
        "/repos/demo/app",
        Some(&writer_token),
        Some(json!({"default_branch": "main"})),
    );
    assert_eq!(reply.status, 403, "{:?}", reply.body);
}

#[test]
fn an_unknown_default_branch_refuses_force_and_delete_with_a_clear_reason() {
    let rig = Rig::start(HOUR);
    // The first coverage check (the clone's): both installation lookups and the metadata
    // token go through; reading the repository hits a rate limit too long to wait for.
    rig.demo.hub.inject(Fault {
        kind: FaultKind::Delay { ms: 0 },
        times: 3,
        scope: FaultScope::Api,
        request: None,
    });
    rig.demo.hub.inject(Fault {
        kind: FaultKind::SecondaryRateLimit { retry_after: 3600 },
        times: 1,
        scope: FaultScope::Api,
        request: None,
    });
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    assert!(
        rig.log().contains("cannot read the default branch"),
        "{}",
        rig.log()
    );

    // Ordinary updates go on: a new branch, then a fast-forward of it.
    git_ok(&app, &["checkout", "-q", "-b", "feature"]);
    commit_file(&app, "a.txt", b"a\n", "a");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    commit_file(&app, "b.txt", b"b\n", "b");
    let push = rig.agent_git(&app, &["push", "origin", "feature"]);
    assert!(push.status.success(), "{}", text(&push));
    let pushed = rig.remote_sha("app", "refs/heads/feature");

    // Any branch might be the default one: no force, no deletion.
    git_ok(&app, &["commit", "-q", "--amend", "-m", "b, amended"]);
    let force = rig.agent_git(&app, &["push", "--force", "origin", "feature"]);
    assert!(!force.status.success(), "{}", text(&force));
    let said = stderr(&force);
    assert!(said.contains("protect-default-branch"), "{said}");
    assert!(
        said.contains("default branch of demo/app is not known"),
        "{said}"
    );
    let delete = rig.agent_git(&app, &["push", "origin", ":feature"]);
    assert!(!delete.status.success(), "{}", text(&delete));
    assert!(
        stderr(&delete).contains("is not known"),
        "{}",
        text(&delete)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/feature"), pushed);
}

#[test]
fn objects_no_pushed_ref_reaches_never_reach_github_nor_the_mirror() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    let socket = rig.dir.path().join("agent.sock");

    // An orphan commit (a history of its own) rides along with a harmless branch.
    git_ok(&app, &["checkout", "-q", "--orphan", "orphan"]);
    git_ok(&app, &["rm", "-rfq", "."]);
    commit_file(&app, "evil.txt", b"unrelated\n", "unrelated root");
    let orphan = rev_parse(&app, "HEAD");
    git_ok(&app, &["checkout", "-q", "-b", "harmless", "origin/main"]);
    commit_file(&app, "ok.txt", b"ok\n", "harmless");
    let harmless = rev_parse(&app, "HEAD");
    let haves = vec![rev_parse(&app, "origin/main")];
    let built = bundle::build(
        &app,
        &[
            (harmless.clone(), "refs/heads/harmless".into()),
            (orphan.clone(), "refs/heads/orphan".into()),
        ],
        &haves,
        false,
    )
    .unwrap()
    .unwrap();
    let answer = call_with_bundle(
        &socket,
        &push_of("demo/app", "refs/heads/harmless", &harmless),
        Some((built.file.path(), built.len)),
        |_, _| {},
    )
    .unwrap();
    assert!(!answer.ok, "{answer:?}");
    assert!(
        message(&answer).contains("no ref of this request reaches"),
        "{answer:?}"
    );
    for (name, dir) in [("devhub", rig.bare("app")), ("the mirror", mirror(&rig))] {
        assert!(!stores(&dir, &orphan), "{name} stores the orphan");
        assert!(!stores(&dir, &harmless), "{name} stores the refused push");
    }

    // A later update that brings no bundle cannot present it as GitHub's.
    let answer = call_with_bundle(
        &socket,
        &push_of("demo/app", "refs/heads/orphan", &orphan),
        None,
        |_, _| {},
    )
    .unwrap();
    let refused = answer
        .result
        .as_ref()
        .and_then(|r| r["results"][0]["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| message(&answer));
    assert!(refused.contains("neither in the bundle nor"), "{answer:?}");
    assert_eq!(rig.remote_sha("app", "refs/heads/orphan"), None);

    // One push, two refs: the harmless one goes, the workflow change is refused — and its
    // commit is not kept in the mirror, so no later bundle-less update can use it.
    git_ok(&app, &["checkout", "-q", "-b", "ci", "origin/main"]);
    commit_file(&app, ".github/workflows/ci.yml", b"on: push\n", "add CI");
    let ci = rev_parse(&app, "HEAD");
    let push = rig.agent_git(&app, &["push", "origin", "harmless", "ci"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("workflow-allowance"),
        "{}",
        text(&push)
    );
    assert_eq!(
        rig.remote_sha("app", "refs/heads/harmless"),
        Some(harmless.clone())
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/ci"), None);
    assert!(
        !stores(&mirror(&rig), &ci),
        "the mirror keeps the refused commit"
    );
    let answer = call_with_bundle(
        &socket,
        &push_of("demo/app", "refs/heads/ci2", &ci),
        None,
        |_, _| {},
    )
    .unwrap();
    assert_eq!(rig.remote_sha("app", "refs/heads/ci2"), None, "{answer:?}");
}

#[test]
fn fast_forwarding_main_onto_an_existing_workflow_change_needs_the_allowance() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    let theirs = someone_else_pushes_a_workflow(&rig, work.path(), "their-ci");
    let app = rig.clone(work.path(), "app");
    rig.grant_push("demo/app");
    let main = rig.remote_sha("app", "refs/heads/main");

    // GitHub has the commit already: the update needs no bundle, and still brings a workflow
    // change to main.
    git_ok(&app, &["reset", "-q", "--hard", "origin/their-ci"]);
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:main"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("workflow-allowance"),
        "{}",
        text(&push)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), main);

    rig.admin_ok(
        r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"allow_workflows":true}"#,
    );
    let push = rig.agent_git(&app, &["push", "origin", "HEAD:main"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(rig.remote_sha("app", "refs/heads/main"), Some(theirs));
}

#[test]
fn a_pull_request_bringing_an_existing_workflow_change_is_refused() {
    let rig = Rig::start(HOUR);
    let work = tempfile::tempdir().unwrap();
    someone_else_pushes_a_workflow(&rig, work.path(), "their-ci");
    let app = rig.clone(work.path(), "app");
    // The agent builds on their branch: its own commit is harmless, theirs changes workflows
    // relative to the default branch, and GitHub has it already.
    git_ok(&app, &["checkout", "-q", "-b", "mine", "origin/their-ci"]);
    commit_file(&app, "docs.txt", b"docs\n", "docs");
    let out = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Docs"],
    );
    assert_eq!(out.status.code(), Some(3), "{}\n{}", text(&out), rig.log());
    assert!(
        stderr(&out).contains("pr-workflow-change"),
        "{}",
        text(&out)
    );
    assert!(rig.pulls("app").is_empty());
}
