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
//! Each case alternates the order of the two paths round by round and reports the medians, the
//! ratio and the time zodex adds, in milliseconds and in round trips: `(zodex - plain) / RTT`.
//! Targets (issue 38): small and 1 MiB at most one round trip more than plain, 32 MiB ≤ 1.05×,
//! after another client's push at most two round trips more.
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
use pushes::{commit_small, delete_branch, median, plain_push, timed, zodex_push};
use std::path::Path;
use std::time::Duration;
use support::devhub::{AppKind, Demo};
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
        let (mut plain, mut zodex) = (Vec::new(), Vec::new());
        for round in 0..self.rounds {
            for through_zodex in [round % 2 == 0, round % 2 != 0] {
                let other = format!("far-other-{rtt}-{round}-{through_zodex}");
                commit_change(self.app, &other, OTHER_CLIENT_MIB, &mut self.seed);
                timed(|| plain_push(self.app, &self.near_url, &other));
                let small = format!("far-after-{rtt}-{round}-{through_zodex}");
                commit_small(self.app, &small);
                match through_zodex {
                    true => zodex.push(timed(|| zodex_push(self.rig, self.app, &small))),
                    false => plain.push(timed(|| plain_push(self.app, &self.far_url, &small))),
                }
            }
        }
        (median(plain), median(zodex))
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
        let staged = |l: &&str| l.contains("push handled") || l.contains("listed tips");
        for line in log.get(mark..).unwrap_or_default().lines().filter(staged) {
            println!("      {line}");
        }
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
    let mut bench = Bench {
        rig: &rig,
        app: &app,
        far_url: far.git_url("app", &token),
        near_url: rig.demo.git_url("app", Some(&token)),
        rounds,
        seed: 0x9E37_79B9_7F4A_7C15,
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
    }
}
