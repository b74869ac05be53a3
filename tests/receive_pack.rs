//! The publisher's pass-through push against devhub's real `git http-backend`: a verified
//! bundle imported into a quarantine, then pushed with `upload::push_leased`, which sends the
//! verified pack over receive-pack when that is sound and falls back to `git push` otherwise.
//! Each test checks GitHub's (devhub's) refs afterwards, and which route the push took. The
//! same end to end through `zodex-prd` is in `tests/it/publish_pass_through.rs`.
//!
//! No libtest harness (`harness = false`): importing a bundle runs the indexer in a child
//! process, `/proc/self/exe index-pack …`, which is this binary; [`main`] answers that as
//! `zodex-prd` does, and otherwise runs the tests one after the other (a name given as an
//! argument runs only the tests whose names contain it).

#[path = "it/support/mod.rs"]
mod support;

use serde_json::json;
use std::path::PathBuf;
use support::devhub::{AppKind, Demo, commit_file, git_ok, rev_parse};
use zodex::publisher::github::Token;
use zodex::publisher::publish::upload::{
    LeasedUpdate, Pushed, RefOutcomes, Route, Target, push_leased,
};
use zodex::publisher::publish::{Quarantine, SharedQuarantine};

/// A devhub, a writer token for `demo/app`, a mirror of it (as the publisher keeps one) and a
/// checkout to commit in.
struct World {
    demo: Demo,
    token: Token,
    work: tempfile::TempDir,
    mirror: PathBuf,
    checkout: PathBuf,
}

impl World {
    fn new() -> Self {
        let demo = Demo::start();
        let token = demo.token(AppKind::Writer, "app", json!({"contents": "write"}));
        let work = tempfile::tempdir().unwrap();
        let mirror = work.path().join("mirror.git");
        let checkout = work.path().join("checkout");
        let url = demo.git_url("app", Some(&token));
        git_ok(
            work.path(),
            &[
                "clone",
                "--quiet",
                "--mirror",
                &url,
                mirror.to_str().unwrap(),
            ],
        );
        git_ok(
            work.path(),
            &["clone", "--quiet", &url, checkout.to_str().unwrap()],
        );
        Self {
            demo,
            token: Token::new(token),
            work,
            mirror,
            checkout,
        }
    }

    fn url(&self) -> String {
        self.demo.git_url("app", None)
    }

    /// The ref's value at devhub.
    fn remote(&self, refname: &str) -> Option<String> {
        let bare = self.demo.hub.dir().join("repos/demo/app.git");
        let out = support::devhub::git(&bare, &["rev-parse", "--verify", "--quiet", refname]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// A thin bundle of `refs` (as `git bundle create` gets them, exclusions included) from
    /// the checkout, imported into a quarantine beside the mirror.
    fn import(&self, refs: &[&str]) -> SharedQuarantine {
        let spool = self.work.path().join("push.bundle");
        let mut args = vec!["bundle", "create", "--quiet", spool.to_str().unwrap()];
        args.extend_from_slice(refs);
        git_ok(&self.checkout, &args);
        let tmp = self.work.path().join("tmp");
        SharedQuarantine::new(Quarantine::import(&self.mirror, true, &spool, &tmp, false).unwrap())
    }

    fn push(
        &self,
        quarantine: &SharedQuarantine,
        updates: &[LeasedUpdate],
        atomic: bool,
        whole: bool,
    ) -> (Pushed, Route) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let listed = git_ok(&self.mirror, &["for-each-ref", "--format=%(objectname)"]);
        let url = self.url();
        let target = Target {
            mirror: &self.mirror,
            url: &url,
            github_tips: listed.lines().map(String::from).collect(),
        };
        runtime.block_on(push_leased(
            &target,
            quarantine,
            updates,
            atomic,
            &self.token,
            whole,
        ))
    }

    fn head(&self) -> String {
        rev_parse(&self.checkout, "HEAD")
    }
}

/// An update of `dst` to `new` (`None`: deleted), leased on `expected` (empty: must not exist).
fn update(dst: &str, new: Option<&str>, expected: &str) -> LeasedUpdate {
    let id = |hex: &str| zodex::engine::ObjectId::parse(hex).unwrap();
    let old = Some(expected).filter(|e| !e.is_empty()).map(id);
    LeasedUpdate {
        dst: dst.parse().unwrap(),
        change: zodex::engine::RefChange::between(old, new.map(id), false).unwrap(),
    }
}

fn outcomes(pushed: Pushed) -> RefOutcomes {
    pushed.expect("one outcome per ref")
}

fn a_verified_thin_pack_passes_through_and_github_has_the_commits() {
    let w = World::new();
    let main = rev_parse(&w.checkout, "main");
    git_ok(&w.checkout, &["checkout", "-q", "-b", "feature"]);
    commit_file(&w.checkout, "a.txt", b"one\n", "one");
    commit_file(&w.checkout, "b.txt", b"two\n", "two");
    let quarantine = w.import(&["refs/heads/feature", &format!("^{main}")]);
    assert!(
        !quarantine.with(|q| q.header.as_ref().unwrap().prerequisites.is_empty()),
        "the bundle is thin"
    );

    let head = w.head();
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/feature", Some(&head), "")],
        false,
        true,
    );
    assert_eq!(route, Route::PassedThrough);
    assert_eq!(outcomes(pushed)["refs/heads/feature"], Ok(()));
    assert_eq!(w.remote("refs/heads/feature"), Some(head.clone()));
    // GitHub has every object, not only the tip: a fresh clone checks out the file.
    let fresh = w.work.path().join("fresh");
    git_ok(
        w.work.path(),
        &[
            "clone",
            "--quiet",
            "-b",
            "feature",
            &w.demo.git_url("app", Some(w.token.expose())),
            fresh.to_str().unwrap(),
        ],
    );
    assert_eq!(std::fs::read(fresh.join("b.txt")).unwrap(), b"two\n");
    git_ok(&fresh, &["fsck", "--no-progress"]);
}

fn a_ref_that_moved_since_the_decision_is_refused_by_github_and_nothing_is_pushed() {
    let w = World::new();
    let main = rev_parse(&w.checkout, "main");
    let url = w.demo.git_url("app", Some(w.token.expose()));
    // `topic` is at `main` when the decision looks (the mirror's value, the lease).
    git_ok(
        &w.checkout,
        &["push", "--quiet", "origin", "main:refs/heads/topic"],
    );
    git_ok(
        &w.mirror,
        &["fetch", "--quiet", &url, "+refs/heads/*:refs/heads/*"],
    );
    git_ok(&w.checkout, &["checkout", "-q", "-b", "topic"]);
    commit_file(&w.checkout, "a.txt", b"ours\n", "ours");
    let ours = w.head();
    let quarantine = w.import(&["refs/heads/topic", &format!("^{main}")]);

    // Someone else moves `topic` at GitHub after the decision.
    let other = w.work.path().join("other");
    git_ok(
        w.work.path(),
        &[
            "clone",
            "--quiet",
            "-b",
            "topic",
            &url,
            other.to_str().unwrap(),
        ],
    );
    commit_file(&other, "b.txt", b"theirs\n", "theirs");
    git_ok(&other, &["push", "--quiet", "origin", "topic"]);
    let theirs = rev_parse(&other, "HEAD");

    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/topic", Some(&ours), &main)],
        false,
        true,
    );
    assert_eq!(route, Route::PassedThrough);
    let outcome = outcomes(pushed).remove("refs/heads/topic").unwrap();
    let why = outcome.expect_err("GitHub refuses the stale lease");
    assert!(why.starts_with("GitHub refused it"), "{why}");
    assert_eq!(w.remote("refs/heads/topic"), Some(theirs.clone()));

    // A creation is leased too: the ref must not exist.
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/topic", Some(&ours), "")],
        false,
        true,
    );
    assert_eq!(route, Route::PassedThrough);
    assert!(outcomes(pushed)["refs/heads/topic"].is_err());
    assert_eq!(w.remote("refs/heads/topic"), Some(theirs.clone()));

    // When the bundle's base itself moved at GitHub (main, here), the mirror cannot show it
    // is still reachable: `git push` goes instead, and its lease refuses all the same.
    commit_file(&other, "c.txt", b"main moves\n", "main moves");
    git_ok(
        &other,
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
    );
    git_ok(&other, &["push", "--quiet", "origin", ":refs/heads/topic"]);
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/main", Some(&ours), &main)],
        false,
        true,
    );
    assert!(matches!(route, Route::Repacked(_)), "{route:?}");
    assert!(outcomes(pushed)["refs/heads/main"].is_err());
    assert_eq!(w.remote("refs/heads/main"), Some(rev_parse(&other, "HEAD")));
}

fn an_atomic_push_with_one_stale_lease_moves_no_ref() {
    let w = World::new();
    let main = rev_parse(&w.checkout, "main");
    git_ok(&w.checkout, &["checkout", "-q", "-b", "one"]);
    commit_file(&w.checkout, "a.txt", b"a\n", "a");
    let one = w.head();
    let quarantine = w.import(&["refs/heads/one", &format!("^{main}")]);
    let stale = "1".repeat(40);
    let updates = [
        update("refs/heads/one", Some(&one), ""),
        update("refs/heads/main", Some(&one), &stale),
    ];
    let (pushed, route) = w.push(&quarantine, &updates, true, true);
    assert_eq!(route, Route::PassedThrough);
    let outcomes = outcomes(pushed);
    assert!(outcomes["refs/heads/one"].is_err(), "{outcomes:?}");
    assert!(outcomes["refs/heads/main"].is_err(), "{outcomes:?}");
    assert_eq!(w.remote("refs/heads/one"), None);
    assert_eq!(w.remote("refs/heads/main"), Some(main.clone()));

    // Not atomic: the good one lands, the stale one is refused.
    let (pushed, _) = w.push(&quarantine, &updates, false, true);
    let outcomes = self::outcomes(pushed);
    assert_eq!(outcomes["refs/heads/one"], Ok(()));
    assert!(outcomes["refs/heads/main"].is_err());
    assert_eq!(w.remote("refs/heads/one"), Some(one));
    assert_eq!(w.remote("refs/heads/main"), Some(main));
}

fn a_bundle_built_on_a_commit_github_no_longer_advertises_goes_through_git_push() {
    let w = World::new();
    let url = w.demo.git_url("app", Some(w.token.expose()));
    // A branch GitHub had when the mirror fetched it, deleted since: its commit stays in the
    // mirror, but GitHub advertises no ref reaching it.
    git_ok(&w.checkout, &["checkout", "-q", "-b", "gone"]);
    commit_file(&w.checkout, "gone.txt", b"gone\n", "gone");
    let gone = w.head();
    git_ok(&w.checkout, &["push", "--quiet", "origin", "gone"]);
    git_ok(
        &w.mirror,
        &["fetch", "--quiet", &url, "+refs/heads/*:refs/heads/*"],
    );
    git_ok(&w.checkout, &["push", "--quiet", "origin", ":gone"]);
    git_ok(&w.checkout, &["checkout", "-q", "-b", "next"]);
    commit_file(&w.checkout, "next.txt", b"next\n", "next");
    let next = w.head();
    let quarantine = w.import(&["refs/heads/next", &format!("^{gone}")]);
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/next", Some(&next), "")],
        false,
        true,
    );
    assert!(
        matches!(&route, Route::Repacked(why) if why.contains("not reachable")),
        "{route:?}"
    );
    assert_eq!(outcomes(pushed)["refs/heads/next"], Ok(()));
    assert_eq!(w.remote("refs/heads/next"), Some(next));
}

fn with_a_ref_of_the_request_refused_only_the_allowed_one_is_pushed_by_git_push() {
    let w = World::new();
    let main = rev_parse(&w.checkout, "main");
    git_ok(&w.checkout, &["checkout", "-q", "-b", "allowed"]);
    commit_file(&w.checkout, "a.txt", b"a\n", "a");
    let allowed = w.head();
    git_ok(&w.checkout, &["checkout", "-q", "-b", "refused"]);
    commit_file(&w.checkout, "secret.txt", b"refused\n", "refused");
    let refused = w.head();
    let quarantine = w.import(&[
        "refs/heads/allowed",
        "refs/heads/refused",
        &format!("^{main}"),
    ]);
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/allowed", Some(&allowed), "")],
        false,
        false,
    );
    assert!(matches!(route, Route::Repacked(_)), "{route:?}");
    assert_eq!(outcomes(pushed)["refs/heads/allowed"], Ok(()));
    // GitHub never received the refused ref's commit.
    let bare = w.demo.hub.dir().join("repos/demo/app.git");
    let probe = support::devhub::git(&bare, &["cat-file", "-e", &refused]);
    assert!(!probe.status.success(), "the refused commit reached GitHub");
}

fn deletions_and_refs_on_commits_github_has_need_no_pack() {
    let w = World::new();
    let main = rev_parse(&w.checkout, "main");
    let empty = Quarantine::empty(&w.mirror, true, &w.work.path().join("tmp")).unwrap();
    let quarantine = SharedQuarantine::new(empty);
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/copy", Some(&main), "")],
        false,
        true,
    );
    assert_eq!(route, Route::PassedThrough);
    assert_eq!(outcomes(pushed)["refs/heads/copy"], Ok(()));
    assert_eq!(w.remote("refs/heads/copy"), Some(main.clone()));

    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/copy", None, &main)],
        false,
        true,
    );
    assert_eq!(route, Route::PassedThrough);
    assert_eq!(outcomes(pushed)["refs/heads/copy"], Ok(()));
    assert_eq!(w.remote("refs/heads/copy"), None);
}

fn a_refused_token_appears_in_no_error_and_nothing_is_pushed() {
    let mut w = World::new();
    let main = rev_parse(&w.checkout, "main");
    let secret = "ghs_notavalidtokenatall0123456789";
    w.token = Token::new(secret.into());
    git_ok(&w.checkout, &["checkout", "-q", "-b", "x"]);
    commit_file(&w.checkout, "x.txt", b"x\n", "x");
    let head = w.head();
    let quarantine = w.import(&["refs/heads/x", &format!("^{main}")]);
    let (pushed, route) = w.push(
        &quarantine,
        &[update("refs/heads/x", Some(&head), "")],
        false,
        true,
    );
    let Route::Repacked(why) = &route else {
        panic!("a refused session is not passed through: {route:?}")
    };
    assert!(why.contains("401"), "{why}");
    let text = format!("{why} {pushed:?}");
    assert!(!text.contains(secret), "{text}");
    assert!(pushed.is_err(), "{pushed:?}");
    assert_eq!(w.remote("refs/heads/x"), None);
}

/// The indexing child, as `zodex-prd index-pack` runs it.
fn index_pack(args: &[String]) -> ! {
    use zodex::publisher::publish::indexer;
    let value = |name: &str| {
        let at = args.iter().position(|a| a == name).expect(name);
        args[at + 1].clone()
    };
    let job = indexer::Job {
        bundle: value("--bundle").into(),
        pack_offset: value("--offset").parse().unwrap(),
        objects: value("--objects").into(),
        thin: args.iter().any(|a| a == "--thin"),
    };
    let answer = indexer::run(&job);
    print!("{}", answer.to_line());
    std::process::exit(if answer.is_indexed() { 0 } else { 1 })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(zodex::publisher::publish::indexer::SUBCOMMAND) {
        index_pack(&args[2..]);
    }
    // libtest's arguments as far as they select tests: a name filter, `--skip PATTERN`
    // (repeatable); other flags (`--include-ignored`, `--nocapture`, …) change nothing here.
    let mut filter = None;
    let mut skips = Vec::new();
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--skip" {
            skips.extend(rest.next().cloned());
        } else if !arg.starts_with('-') {
            filter = Some(arg.clone());
        }
    }
    let tests: [(&str, fn()); 7] = [
        (
            "a_verified_thin_pack_passes_through_and_github_has_the_commits",
            a_verified_thin_pack_passes_through_and_github_has_the_commits,
        ),
        (
            "a_ref_that_moved_since_the_decision_is_refused_by_github_and_nothing_is_pushed",
            a_ref_that_moved_since_the_decision_is_refused_by_github_and_nothing_is_pushed,
        ),
        (
            "an_atomic_push_with_one_stale_lease_moves_no_ref",
            an_atomic_push_with_one_stale_lease_moves_no_ref,
        ),
        (
            "a_bundle_built_on_a_commit_github_no_longer_advertises_goes_through_git_push",
            a_bundle_built_on_a_commit_github_no_longer_advertises_goes_through_git_push,
        ),
        (
            "with_a_ref_of_the_request_refused_only_the_allowed_one_is_pushed_by_git_push",
            with_a_ref_of_the_request_refused_only_the_allowed_one_is_pushed_by_git_push,
        ),
        (
            "deletions_and_refs_on_commits_github_has_need_no_pack",
            deletions_and_refs_on_commits_github_has_need_no_pack,
        ),
        (
            "a_refused_token_appears_in_no_error_and_nothing_is_pushed",
            a_refused_token_appears_in_no_error_and_nothing_is_pushed,
        ),
    ];
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if filter.as_deref().is_some_and(|f| !name.contains(f))
            || skips.iter().any(|s| name.contains(s.as_str()))
        {
            continue;
        }
        ran += 1;
        let outcome = std::panic::catch_unwind(test);
        println!(
            "test {name} ... {}",
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        if outcome.is_err() {
            failed.push(name);
        }
    }
    println!(
        "test result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        ran - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
