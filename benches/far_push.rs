//! Pushing across an ocean (issue 38): on loopback a round trip to GitHub costs nothing, so the
//! gateway's extra round trips hide; here devhub sits behind TLS with a throwaway CA and a relay
//! that delays each direction by RTT/2 (`support/far_hub.rs`), and the publisher, the agent's
//! git and plain git all reach it through that. For each round-trip time, side by side:
//!
//! - a push of one small file, of 1 MiB and of 32 MiB (random data in 1 MiB files) through
//!   `git-remote-zodex` and `zodex-prd`, against a plain `git push` with a token; the plain
//!   side's branch is taken away again (untimed, not across the ocean), so each zodex push meets
//!   a quiet repository;
//! - a small push right after another client pushed 1 MiB (not across the ocean: another
//!   client is elsewhere), plain or through zodex, alternating which comes first.
//!
//! - `publish-pr` (a small change) against a plain `git push` of it plus the REST call that
//!   opens its pull request (curl, as a user's script would);
//! - a first clone of `demo/lib` through the credential helper (its read token cached: the
//!   warm-up asked for it) against a plain clone with a token in the URL, and a fetch of
//!   another client's new commit the same two ways.
//!
//! Each case alternates the order of the two paths round by round and reports the medians, the
//! ratio and the time zodex adds, in milliseconds and in round trips: `(zodex - plain) / RTT`.
//! Targets (issue 38): small and 1 MiB at most one round trip more than plain, 32 MiB ≤ 1.05×,
//! after another client's push at most two round trips more, `publish-pr` at most one more
//! than push-and-open, clone and fetch with a cached token none (less than half of one: the
//! rest is noise).
//!
//! Environment: `ZODEX_FAR_RTTS` (ms, default `40,120`), `ZODEX_FAR_SIZES` (MiB, default
//! `1,32`), `ZODEX_FAR_ROUNDS` (default 5); `ZODEX_BENCH_STAGES=1` prints the publisher's stage
//! lines of each case's zodex pushes.
//!
//! Run: `cargo bench --bench far_push` (needs git; several minutes at the defaults).

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/changes.rs"]
mod changes;
#[path = "support/delay_relay.rs"]
mod delay_relay;
#[path = "support/far_hub.rs"]
mod far_hub;
#[path = "support/pushes.rs"]
mod pushes;
#[path = "../tests/it/support/mod.rs"]
mod support;
#[path = "support/throwaway_ca.rs"]
mod throwaway_ca;
#[path = "support/tls_front.rs"]
mod tls_front;

use changes::commit_change;
use far_hub::FarHub;
use pushes::{alternating, commit_small, delete_branch, median, plain_push, timed, zodex_push};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use support::devhub::{AppKind, Demo, git_command, git_ok};
use support::rig::Rig;

/// The size of another client's push in the "right after" case.
const OTHER_CLIENT_MIB: usize = 1;

/// `name` as numbers separated by commas, or `default` when it is unset.
fn env_list(name: &str, default: &[u64]) -> Vec<u64> {
    let Ok(value) = std::env::var(name) else {
        return default.to_vec();
    };
    let parsed: Result<Vec<u64>, _> = value.split(',').map(|s| s.trim().parse()).collect();
    match parsed {
        Ok(list) if !list.is_empty() && list.iter().all(|n| *n > 0) => list,
        _ => panic!("{name}={value:?}: expected positive whole numbers separated by commas"),
    }
}

/// What a case pushes: one small file, or so many MiB.
#[derive(Clone, Copy)]
enum Change {
    Small,
    Mib(usize),
}

impl Change {
    fn label(self) -> String {
        match self {
            Change::Small => "one small file".to_string(),
            Change::Mib(mib) => format!("{mib} MiB"),
        }
    }

    fn slug(self) -> String {
        match self {
            Change::Small => "small".to_string(),
            Change::Mib(mib) => format!("{mib}mib"),
        }
    }

    fn commit(self, app: &Path, branch: &str, seed: &mut u64) {
        match self {
            Change::Small => commit_small(app, branch),
            Change::Mib(mib) => commit_change(app, branch, mib, seed),
        }
    }
}

/// One repository's checkout, pushed to through zodex and with plain git.
struct Bench<'a> {
    rig: &'a Rig,
    app: &'a Path,
    /// Plain git's URL across the ocean, with a writer token.
    far_url: String,
    /// The same repository straight at devhub: untimed clean-up and other clients' pushes.
    near_url: String,
    rounds: usize,
    seed: u64,
}

impl Bench<'_> {
    /// Medians (plain, zodex) of `rounds` fresh changes pushed by each path, alternating
    /// which path goes first.
    fn side_by_side(&mut self, rtt: u64, change: Change) -> (Duration, Duration) {
        let (mut plain, mut zodex) = (Vec::new(), Vec::new());
        for round in 0..self.rounds {
            let p = format!("far-plain-{rtt}-{}-{round}", change.slug());
            let z = format!("far-zodex-{rtt}-{}-{round}", change.slug());
            change.commit(self.app, &p, &mut self.seed);
            change.commit(self.app, &z, &mut self.seed);
            let push_plain = || {
                let took = timed(|| plain_push(self.app, &self.far_url, &p));
                delete_branch(self.app, &self.near_url, &p);
                took
            };
            let push_zodex = || timed(|| zodex_push(self.rig, self.app, &z));
            if round % 2 == 0 {
                plain.push(push_plain());
                zodex.push(push_zodex());
            } else {
                zodex.push(push_zodex());
                plain.push(push_plain());
            }
        }
        (median(plain), median(zodex))
    }

    /// Medians (plain, zodex) of a small push made right after another client pushed.
    fn after_another_client(&mut self, rtt: u64) -> (Duration, Duration) {
        alternating(self.rounds, |round, through_zodex| {
            let other = format!("far-other-{rtt}-{round}-{through_zodex}");
            commit_change(self.app, &other, OTHER_CLIENT_MIB, &mut self.seed);
            timed(|| plain_push(self.app, &self.near_url, &other));
            let small = format!("far-after-{rtt}-{round}-{through_zodex}");
            commit_small(self.app, &small);
            match through_zodex {
                true => timed(|| zodex_push(self.rig, self.app, &small)),
                false => timed(|| plain_push(self.app, &self.far_url, &small)),
            }
        })
    }

    /// One push each way, untimed: no median holds the first push's one-off work (the
    /// mirror's first fetch) or connections opened at another round-trip time.
    fn warm_up(&mut self, rtt: u64) {
        let (p, z) = (
            format!("far-warm-plain-{rtt}"),
            format!("far-warm-zodex-{rtt}"),
        );
        commit_small(self.app, &p);
        commit_small(self.app, &z);
        timed(|| zodex_push(self.rig, self.app, &z));
        timed(|| plain_push(self.app, &self.far_url, &p));
        delete_branch(self.app, &self.near_url, &p);
    }

    /// Where the publisher's log ends now: [`Bench::stages`] prints what comes after.
    fn log_mark(&self) -> usize {
        self.rig.log().len()
    }

    /// The publisher's stage lines since `mark` (a case's zodex pushes), when asked for.
    fn stages(&self, mark: usize) {
        if std::env::var_os("ZODEX_BENCH_STAGES").is_none() {
            return;
        }
        let log = self.rig.log();
        let staged = |l: &&str| l.contains("handled") || l.contains("listed tips");
        for line in log.get(mark..).unwrap_or_default().lines().filter(staged) {
            println!("      {line}");
        }
    }
}

/// The pull-request and read cases: what they need beside [`Bench`].
struct Reads<'a> {
    far: &'a FarHub,
    /// A writer token that may also open pull requests (the plain side's).
    pr_token: String,
    /// `demo/lib` across the ocean with a reader token in the URL (plain clones and fetches).
    lib_far_url: String,
    /// Another client's checkout of `demo/lib`, pushing straight at devhub.
    other_lib: std::path::PathBuf,
    work: &'a Path,
}

impl Bench<'_> {
    /// Medians (plain, zodex) of a small change published as a pull request: `publish-pr`
    /// against `git push` plus the REST call that opens the pull request.
    fn publish_pr(&mut self, rtt: u64, reads: &Reads) -> (Duration, Duration) {
        alternating(self.rounds, |round, through_zodex| {
            let branch = format!("far-pr-{rtt}-{round}-{through_zodex}");
            commit_small(self.app, &branch);
            if through_zodex {
                return timed(|| {
                    let started = Instant::now();
                    let args = ["publish-pr", "--repo", "demo/app", "--title", &branch];
                    (self.rig.agent(self.app, &args), started.elapsed())
                });
            }
            let took = timed(|| {
                let started = Instant::now();
                let pushed = plain_push(self.app, &self.far_url, &branch).0;
                if !pushed.status.success() {
                    return (pushed, started.elapsed());
                }
                (reads.open_pull_request(&branch), started.elapsed())
            });
            delete_branch(self.app, &self.near_url, &branch);
            took
        })
    }

    /// Medians (plain, zodex) of a first clone of `demo/lib`: through the credential helper
    /// (token cached) and with a token in the URL.
    fn first_clone(&mut self, rtt: u64, reads: &Reads) -> (Duration, Duration) {
        alternating(self.rounds, |round, through_zodex| {
            let dir = reads
                .work
                .join(format!("clone-{rtt}-{round}-{through_zodex}"));
            let took = match through_zodex {
                true => timed(|| reads.zodex_clone(self.rig, &dir)),
                false => timed(|| reads.plain_clone(&dir)),
            };
            let _ = std::fs::remove_dir_all(&dir);
            took
        })
    }

    /// Medians (plain, zodex) of fetching another client's new commit into a clone of
    /// `demo/lib`: through the credential helper (token cached) and with a token in the URL.
    fn fetch(&mut self, rtt: u64, reads: &Reads) -> (Duration, Duration) {
        let zodex_dir = reads.work.join(format!("fetch-zodex-{rtt}"));
        let plain_dir = reads.work.join(format!("fetch-plain-{rtt}"));
        timed(|| reads.zodex_clone(self.rig, &zodex_dir));
        timed(|| reads.plain_clone(&plain_dir));
        alternating(self.rounds, |round, through_zodex| {
            // One new commit per round, pushed before the round's first fetch: both fetch it.
            if through_zodex == (round % 2 == 0) {
                reads.another_commit(&format!("fetch-{rtt}-{round}"));
            }
            let started = Instant::now();
            let out = match through_zodex {
                true => self.rig.agent_git(&zodex_dir, &["fetch", "-q", "origin"]),
                false => git_command(&plain_dir)
                    .args(["fetch", "-q", "origin"])
                    .output()
                    .unwrap(),
            };
            timed(|| (out, started.elapsed()))
        })
    }
}

impl Reads<'_> {
    /// Opens a pull request for `branch` as a user's script would: curl, the writer token,
    /// GitHub's REST call, across the ocean.
    fn open_pull_request(&self, branch: &str) -> Output {
        let body = serde_json::json!({"title": branch, "head": branch, "base": "main"});
        Command::new("curl")
            .args(["-sS", "-f", "-o", "/dev/null", "-X", "POST", "--cacert"])
            .arg(self.far.ca_file())
            .args(["-H", "Accept: application/vnd.github+json"])
            .args(["-H", &format!("Authorization: Bearer {}", self.pr_token)])
            .args(["-d", &body.to_string()])
            .arg(format!("{}/repos/demo/app/pulls", self.far.api_url()))
            .output()
            .expect("curl runs")
    }

    fn zodex_clone(&self, rig: &Rig, dir: &Path) -> (Output, Duration) {
        let url = format!("{}/demo/lib.git", rig.reach.git_url);
        let started = Instant::now();
        let out = rig.agent_git(self.work, &["clone", "-q", &url, &dir.to_string_lossy()]);
        (out, started.elapsed())
    }

    fn plain_clone(&self, dir: &Path) -> (Output, Duration) {
        // `--config`: the clone keeps trusting the CA for its fetches.
        let ca = format!("http.sslCAInfo={}", self.far.ca_file().display());
        let started = Instant::now();
        let out = git_command(self.work)
            .args(["clone", "-q", "--config", &ca, &self.lib_far_url])
            .arg(dir)
            .output()
            .unwrap();
        (out, started.elapsed())
    }

    /// Another client (not across the ocean) pushes a small commit to `demo/lib`'s main.
    fn another_commit(&self, name: &str) {
        let dir = &self.other_lib;
        std::fs::write(dir.join(format!("{name}.txt")), format!("{name}\n")).unwrap();
        git_ok(dir, &["add", "."]);
        git_ok(
            dir,
            &[
                "-c",
                "user.name=o",
                "-c",
                "user.email=o@e",
                "commit",
                "-q",
                "-m",
                name,
            ],
        );
        git_ok(dir, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    }
}

/// Prints one case: the human line and its `BENCH` line (`<stem>_rtt<RTT>ms_vs_plain`).
fn report(rtt: u64, case: &str, stem: &str, (plain, zodex): (Duration, Duration), target: Target) {
    let (p, z) = (plain.as_secs_f64() * 1e3, zodex.as_secs_f64() * 1e3);
    let rtt_ms = rtt as f64;
    let round_trips = (z - p) / rtt_ms;
    println!(
        "{rtt:>5}  {case:<34} {p:>9.0} {z:>9.0} {:>7.2}x {:>+9.0} {round_trips:>+8.1}",
        z / p,
        z - p
    );
    let (max_ratio, max_added) = match target {
        Target::RoundTrips(n) => (None, Some(n * rtt_ms)),
        Target::Ratio(r) => (Some(r), None),
    };
    bench_line::BenchLine {
        name: &format!("{stem}_rtt{rtt}ms_vs_plain"),
        unit: "ms",
        value: z,
        baseline: Some(p),
        max_ratio,
        max_value: None,
        max_added,
    }
    .print_with(&[("rtt_ms", rtt_ms), ("added_round_trips", round_trips)]);
}

/// What issue 38 holds a case to.
enum Target {
    /// At most this many round trips more than plain.
    RoundTrips(f64),
    /// At most this ratio to plain.
    Ratio(f64),
}

fn main() {
    let rtts = env_list("ZODEX_FAR_RTTS", &[40, 120]);
    let sizes = env_list("ZODEX_FAR_SIZES", &[1, 32]);
    let rounds = env_list("ZODEX_FAR_ROUNDS", &[5])[0] as usize;

    let demo = Demo::start_with(|c| c.with_token_ttl(Duration::from_secs(3600)));
    let far = FarHub::start(&demo)
        .unwrap_or_else(|e| panic!("cannot put TLS and a delay in front of devhub: {e:#}"));
    let rig = Rig::start_on(demo, far.reach(), "");
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    far.trust_in(&app);
    let token = rig.demo.token(
        AppKind::Writer,
        "app",
        serde_json::json!({"contents": "write"}),
    );
    let lib_token = rig.demo.token(
        AppKind::Reader,
        "lib",
        serde_json::json!({"contents": "read"}),
    );
    let lib_writer = rig.demo.token(
        AppKind::Writer,
        "lib",
        serde_json::json!({"contents": "write"}),
    );
    let other_lib = work.path().join("other-lib");
    git_ok(
        work.path(),
        &[
            "clone",
            "-q",
            &rig.demo.git_url("lib", Some(&lib_writer)),
            &other_lib.to_string_lossy(),
        ],
    );
    let mut bench = Bench {
        rig: &rig,
        app: &app,
        far_url: far.git_url("app", &token),
        near_url: rig.demo.git_url("app", Some(&token)),
        rounds,
        seed: 0x9E37_79B9_7F4A_7C15,
    };

    let reads = Reads {
        far: &far,
        pr_token: rig.demo.token(
            AppKind::Writer,
            "app",
            serde_json::json!({"contents": "write", "pull_requests": "write"}),
        ),
        lib_far_url: far.git_url("lib", &lib_token),
        other_lib: other_lib.clone(),
        work: work.path(),
    };
    println!(
        "far GitHub (TLS, each direction delayed RTT/2): plain `git push` vs through zodex, median of {rounds}, alternating"
    );
    println!(
        "{:>5}  {:<34} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "RTT", "push", "plain ms", "zodex ms", "ratio", "added ms", "added RT"
    );
    for rtt in rtts {
        far.set_rtt(Duration::from_millis(rtt));
        bench.warm_up(rtt);
        let changes =
            std::iter::once(Change::Small).chain(sizes.iter().map(|m| Change::Mib(*m as usize)));
        for change in changes {
            let mark = bench.log_mark();
            let medians = bench.side_by_side(rtt, change);
            // Issue 38: small changes at most one round trip more; from 32 MiB, 1.05x.
            let target = match change {
                Change::Mib(mib) if mib >= 32 => Target::Ratio(1.05),
                _ => Target::RoundTrips(1.0),
            };
            let stem = format!("far_push_{}", change.slug());
            report(rtt, &change.label(), &stem, medians, target);
            bench.stages(mark);
        }
        let mark = bench.log_mark();
        let medians = bench.after_another_client(rtt);
        let case = format!("small, after another's {OTHER_CLIENT_MIB} MiB push");
        report(
            rtt,
            &case,
            "far_small_after_other_push",
            medians,
            Target::RoundTrips(2.0),
        );
        bench.stages(mark);

        let mark = bench.log_mark();
        let medians = bench.publish_pr(rtt, &reads);
        report(
            rtt,
            "publish-pr vs push + open",
            "far_publish_pr",
            medians,
            Target::RoundTrips(1.0),
        );
        bench.stages(mark);
        // The credential helper's read token: asked for once here, cached after.
        let warm = work.path().join(format!("warm-lib-{rtt}"));
        timed(|| reads.zodex_clone(&rig, &warm));
        let medians = bench.first_clone(rtt, &reads);
        report(
            rtt,
            "first clone (credential helper)",
            "far_clone",
            medians,
            Target::RoundTrips(0.5),
        );
        let medians = bench.fetch(rtt, &reads);
        report(
            rtt,
            "fetch (credential helper)",
            "far_fetch",
            medians,
            Target::RoundTrips(0.5),
        );
    }
}
