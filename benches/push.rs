//! Pushing through `git-remote-zodex` and `zodex-prd` against a plain `git push` with a token,
//! same devhub, same sizes of change, in one run:
//!
//! - wall time for changes of 1 MiB, 32 MiB and 120 MiB (random, incompressible data in 1 MiB
//!   files), median of `ROUNDS` rounds, each round pushing fresh commits on both paths in
//!   alternating order; the ratio zodex/plain and the added milliseconds;
//! - CPU seconds (user + system, the kernel's accounting) per MiB pushed: zodex-prd with the
//!   children it waited for (its indexing child, git), beside this process's waited children
//!   over the plain pushes (client git and devhub's receiving git);
//! - zodex-prd's peak RSS (VmHWM) after the 120 MiB pushes (the daemon itself: ≤ 64 MiB),
//!   anonymous and file-backed pages sampled apart, and, apart, the peak of the child processes
//!   that indexed the packs (from the log);
//! - a pack bomb (one blob declared and compressed as 2 GiB of zeros, about 2 MiB on the wire)
//!   sent as `publish_pr` and as a push: the time to refuse it and zodex-prd's peak RSS after it;
//! - the time to refuse a bundle over the ceiling on its header, for declared sizes from
//!   128 MiB + 1 to 64 GiB (it must not depend on the size);
//! - as a busy repository meets a sprite: pushes of 1 and 32 MiB through zodex interleaved with
//!   plain pushes of the same size that stay at GitHub (the mirror never sees a quiet
//!   repository), and a small push right after another client pushed 32 MiB, against a small
//!   plain push after the same.
//!
//! Run: `cargo bench --bench push` (needs git; takes a few minutes).

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/changes.rs"]
mod changes;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/log_figures.rs"]
mod log_figures;
#[path = "support/proc_status.rs"]
mod proc_status;
#[path = "support/pushes.rs"]
mod pushes;
#[path = "../tests/it/support/mod.rs"]
mod support;

use changes::commit_change;
use proc_status::status_kib;
use pushes::{commit_small, delete_branch, median, plain_push, timed, zodex_push};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use support::devhub::{AppKind, git_command};
use support::rig::Rig;
use zodex::agent::client::call_with_bundle;
use zodex::protocol::{AgentRequest, PushUpdate, agent_roundtrip_with};

const ROUNDS: usize = 3;

/// Samples zodex-prd's resident memory every 5 ms: the peaks of its anonymous memory (heap,
/// stacks) and of its file-backed pages (mapped pack files), apart.
struct RssSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<(u64, u64)>>,
    /// The largest file-backed mappings when file-backed pages peaked: what they are.
    at_peak: std::sync::Arc<std::sync::Mutex<Vec<(u64, String)>>>,
}

/// The mappings of `pid` by resident KiB, largest first (`/proc/PID/smaps`).
fn largest_mappings(pid: u32, n: usize) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut out: Vec<(u64, String)> = Vec::new();
    let mut name = String::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            name = line
                .split_whitespace()
                .nth(5)
                .unwrap_or("[anon]")
                .to_string();
        } else if let Some(v) = line.strip_prefix("Rss:") {
            let kib: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            match out.iter_mut().find(|(_, n)| *n == name) {
                Some(entry) => entry.0 += kib,
                None => out.push((kib, name.clone())),
            }
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    out.truncate(n);
    out
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let at_peak = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let peak_map = at_peak.clone();
        let thread = std::thread::spawn(move || {
            let (mut anon, mut file) = (0, 0);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                anon = anon.max(status_kib(pid, "RssAnon:"));
                let now = status_kib(pid, "RssFile:");
                if now > file + 1024 {
                    *peak_map.lock().unwrap() = largest_mappings(pid, 6);
                }
                file = file.max(now);
                std::thread::sleep(Duration::from_millis(5));
            }
            (anon, file)
        });
        Self {
            stop,
            thread: Some(thread),
            at_peak,
        }
    }

    /// The largest mappings at the file-backed peak, one line.
    fn mappings(&self) -> String {
        self.at_peak
            .lock()
            .unwrap()
            .iter()
            .map(|(kib, name)| format!("{name} {kib} KiB"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

fn main() {
    let rig = Rig::start(Duration::from_secs(3600));
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    let token = rig.demo.token(
        AppKind::Writer,
        "app",
        serde_json::json!({"contents": "write"}),
    );
    let plain_url = rig.demo.git_url("app", Some(&token));
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;

    println!("push through git-remote-zodex vs plain git push with a token (median of {ROUNDS})");
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>10}",
        "change", "plain ms", "zodex ms", "ratio", "added ms"
    );
    // `ZODEX_BENCH_SIZES=1,32` runs only those sizes.
    let sizes: Vec<usize> = std::env::var("ZODEX_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 32, 120]);
    let sampler = RssSampler::start(rig.prd_pid());
    for mib in sizes {
        let mut plain = Vec::new();
        let mut zodex = Vec::new();
        // CPU seconds: the publisher (with its children) over the zodex pushes; this process's
        // children — client git and devhub's receiving git — over the plain pushes.
        let (mut publisher_cpu, mut plain_cpu) = (0.0, 0.0);
        for round in 0..ROUNDS {
            let p = format!("plain-{mib}-{round}");
            let z = format!("zodex-{mib}-{round}");
            commit_change(&app, &p, mib, &mut seed);
            commit_change(&app, &z, mib, &mut seed);
            let mut push_plain = || {
                let (started, cpu) = (Instant::now(), cpu::waited_children());
                let out = git_command(&app)
                    .args(["push", "-q", &plain_url, &format!("{p}:refs/heads/{p}")])
                    .output()
                    .unwrap();
                let took = started.elapsed();
                plain_cpu += cpu::waited_children() - cpu;
                delete_branch(&app, &plain_url, &p);
                (out, took)
            };
            let push_zodex = || {
                let mut cmd = rig.agent_git_command(&app);
                if let Some(trace) = std::env::var_os("ZODEX_BENCH_GIT_TRACE") {
                    cmd.env("GIT_TRACE", trace)
                        .env("GIT_TRACE_PERFORMANCE", "1");
                }
                let (started, cpu) = (Instant::now(), cpu::process_and_children(rig.prd_pid()));
                let out = cmd
                    .args(["push", "-q", "origin", &format!("{z}:refs/heads/{z}")])
                    .output()
                    .unwrap();
                let took = started.elapsed();
                publisher_cpu += cpu::process_and_children(rig.prd_pid()) - cpu;
                (out, took)
            };
            let mut push_zodex = push_zodex;
            if round % 2 == 0 {
                plain.push(timed(&mut push_plain));
                zodex.push(timed(&mut push_zodex));
            } else {
                zodex.push(timed(&mut push_zodex));
                plain.push(timed(&mut push_plain));
            }
        }
        let pushed = (mib * ROUNDS) as f64;
        println!(
            "        CPU per MiB pushed: zodex-prd and its children {:.3} s; plain push (client and receiving git) {:.3} s",
            publisher_cpu / pushed,
            plain_cpu / pushed
        );
        bench_line::BenchLine {
            name: &format!("publisher_cpu_s_per_mib_{mib}mib_vs_plain_git"),
            unit: "s/MiB",
            value: publisher_cpu / pushed,
            baseline: Some(plain_cpu / pushed),
            max_ratio: None,
            max_value: None,
            max_added: None,
        }
        .print();
        let (p, z) = (median(plain), median(zodex));
        println!(
            "{:>5} MiB {:>12.0} {:>12.0} {:>8.2} {:>10.0}",
            mib,
            p.as_secs_f64() * 1e3,
            z.as_secs_f64() * 1e3,
            z.as_secs_f64() / p.as_secs_f64(),
            (z.as_secs_f64() - p.as_secs_f64()) * 1e3
        );
        // Issue 12: ≤ 60 ms added at 1 MiB; ≤ 1.15× plain git push from 32 MiB up.
        let small = mib < 32;
        bench_line::BenchLine {
            name: &format!("push_{mib}mib_vs_plain_git_push"),
            unit: "ms",
            value: z.as_secs_f64() * 1e3,
            baseline: Some(p.as_secs_f64() * 1e3),
            max_ratio: (!small).then_some(1.15),
            max_value: None,
            max_added: small.then_some(60.0),
        }
        .print();
    }
    if std::env::var_os("ZODEX_BENCH_STAGES").is_some() {
        let staged = |l: &&str| {
            l.contains("push handled") || l.contains("passed on") || l.contains("passing the pack")
        };
        for line in rig.log().lines().filter(staged) {
            println!("  {line}");
        }
    }
    let mappings = sampler.mappings();
    let (anon, file) = sampler.finish();
    let peak = status_kib(rig.prd_pid(), "VmHWM:");
    println!(
        "zodex-prd peak RSS (VmHWM) over the pushes: {peak} KiB; sampled peaks: anonymous {anon} KiB, file-backed {file} KiB"
    );
    println!("  largest mappings at the file-backed peak: {mappings}");
    // Issue 26: the daemon itself ≤ 64 MiB over the pushes (its indexing child apart).
    bench_line::BenchLine {
        name: "publisher_daemon_peak_rss_over_pushes",
        unit: "KiB",
        value: peak as f64,
        baseline: None,
        max_ratio: None,
        max_value: Some(65_536.0),
        max_added: None,
    }
    .print();
    let children = log_figures::child_peaks(&rig.log());
    let child_peak = children.iter().copied().max().unwrap_or(0);
    println!(
        "indexing children's peak RSS (wait4 ru_maxrss): max {child_peak} KiB over {} packs",
        children.len()
    );
    bench_line::BenchLine {
        name: "publisher_indexing_child_peak_rss",
        unit: "KiB",
        value: child_peak as f64,
        baseline: None,
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print();
    busy_repository(&rig, &app, &plain_url, &mut seed);
    bomb(&rig, work.path());

    println!("refusing a bundle over the ceiling on its header (median of 200, p99)");
    let socket = rig.dir.path().join("agent.sock");
    let request = AgentRequest::Push {
        repo: "demo/app".into(),
        updates: vec![PushUpdate {
            dst: "refs/heads/huge".parse().unwrap(),
            new: Some("1111111111111111111111111111111111111111".parse().unwrap()),
            force: false,
            lease: None,
        }],
        atomic: false,
        dry_run: false,
    };
    for declared in [134_217_729u64, 1 << 30, 16 << 30, 64 << 30] {
        let mut times: Vec<Duration> = (0..200)
            .map(|_| {
                let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let started = Instant::now();
                let answer =
                    agent_roundtrip_with(&mut stream, &request, declared, |s| s.flush()).unwrap();
                let took = started.elapsed();
                assert!(!answer.ok);
                took
            })
            .collect();
        times.sort();
        println!(
            "  declared {:>12} bytes: median {:.2} ms, p99 {:.2} ms",
            declared,
            times[100].as_secs_f64() * 1e3,
            times[197].as_secs_f64() * 1e3
        );
    }
}

/// Issue 26's busy repository: every plain push stays at GitHub, so each zodex push meets
/// what others pushed since its last one.
fn busy_repository(rig: &Rig, app: &Path, plain_url: &str, seed: &mut u64) {
    println!(
        "a busy repository: zodex pushes interleaved with plain pushes that stay (median of {ROUNDS})"
    );
    for mib in [1usize, 32] {
        let (mut plain, mut zodex) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (p, z) = (
                format!("busy-plain-{mib}-{round}"),
                format!("busy-zodex-{mib}-{round}"),
            );
            commit_change(app, &p, mib, seed);
            commit_change(app, &z, mib, seed);
            plain.push(timed(|| plain_push(app, plain_url, &p)));
            zodex.push(timed(|| zodex_push(rig, app, &z)));
        }
        let (p, z) = (median(plain), median(zodex));
        println!(
            "{mib:>5} MiB interleaved: plain {:.0} ms, zodex {:.0} ms, {:.2}x, +{:.0} ms",
            p.as_secs_f64() * 1e3,
            z.as_secs_f64() * 1e3,
            z.as_secs_f64() / p.as_secs_f64(),
            (z.as_secs_f64() - p.as_secs_f64()) * 1e3
        );
        let small = mib < 32;
        bench_line::BenchLine {
            name: &format!("push_{mib}mib_interleaved_vs_plain_git_push"),
            unit: "ms",
            value: z.as_secs_f64() * 1e3,
            baseline: Some(p.as_secs_f64() * 1e3),
            max_ratio: Some(1.15),
            max_value: None,
            max_added: small.then_some(60.0),
        }
        .print();
    }
    // Another client pushes 32 MiB; then a small push, plain or through zodex (alternating
    // which path comes right after the big push).
    let (mut plain, mut zodex) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for through_zodex in [round % 2 == 0, round % 2 != 0] {
            let big = format!("big-{round}-{through_zodex}");
            commit_change(app, &big, 32, seed);
            timed(|| plain_push(app, plain_url, &big));
            let small = format!("small-{round}-{through_zodex}");
            commit_small(app, &small);
            match through_zodex {
                true => zodex.push(timed(|| zodex_push(rig, app, &small))),
                false => plain.push(timed(|| plain_push(app, plain_url, &small))),
            }
        }
    }
    let (p, z) = (median(plain), median(zodex));
    println!(
        "a small push after another client pushed 32 MiB: plain {:.0} ms, zodex {:.0} ms, {:.2}x",
        p.as_secs_f64() * 1e3,
        z.as_secs_f64() * 1e3,
        z.as_secs_f64() / p.as_secs_f64()
    );
    if std::env::var_os("ZODEX_BENCH_STAGES").is_some() {
        let handled: Vec<String> = rig
            .log()
            .lines()
            .filter(|l| l.contains("push handled") || l.contains("listed tips"))
            .map(str::to_string)
            .collect();
        for line in &handled[handled.len().saturating_sub(2 * ROUNDS)..] {
            println!("  {line}");
        }
    }
    bench_line::BenchLine {
        name: "small_push_after_a_32mib_push_vs_plain",
        unit: "ms",
        value: z.as_secs_f64() * 1e3,
        baseline: Some(p.as_secs_f64() * 1e3),
        max_ratio: Some(2.0),
        max_value: None,
        max_added: None,
    }
    .print();
}

/// A blob declared (and compressed) as 2 GiB of zeros, sent as `publish_pr` and as a push.
fn bomb(rig: &Rig, work: &Path) {
    let main = rig.remote_sha("app", "refs/heads/main").unwrap();
    let tip = "2222222222222222222222222222222222222222";
    let pack = support::packs::zero_blob_bomb(2 << 30);
    let bytes = support::packs::bundle(&main, tip, "refs/heads/bomb", &pack);
    let path = work.join("bomb.bundle");
    std::fs::write(&path, &bytes).unwrap();
    let socket = rig.dir.path().join("agent.sock");
    let before = status_kib(rig.prd_pid(), "VmRSS:");
    let sampler = RssSampler::start(rig.prd_pid());
    println!(
        "a bundle of {} bytes declaring one 2 GiB blob of zeros (zodex-prd at {} KiB RSS before)",
        bytes.len(),
        before
    );
    let publish = AgentRequest::PublishPr {
        repo: "demo/app".into(),
        title: "bomb".into(),
        body: String::new(),
        base: None,
        draft: false,
        head: tip.into(),
    };
    let push = AgentRequest::Push {
        repo: "demo/app".into(),
        updates: vec![PushUpdate {
            dst: "refs/heads/bomb".parse().unwrap(),
            new: Some(tip.parse().unwrap()),
            force: false,
            lease: None,
        }],
        atomic: false,
        dry_run: false,
    };
    for (name, request) in [("publish_pr", publish), ("push", push)] {
        let started = Instant::now();
        let answer = call_with_bundle(
            &socket,
            &request,
            Some((&path, bytes.len() as u64)),
            |_, _| {},
        )
        .unwrap();
        let took = started.elapsed();
        assert!(!answer.ok);
        println!(
            "  {name}: refused in {:.1} ms: {}",
            took.as_secs_f64() * 1e3,
            answer.error.map(|e| e.message).unwrap_or_default()
        );
    }
    let (anon, file) = sampler.finish();
    println!(
        "zodex-prd peak RSS (VmHWM) after the bombs: {} KiB; sampled peaks during them: anonymous {} KiB, file-backed {} KiB",
        status_kib(rig.prd_pid(), "VmHWM:"),
        anon,
        file
    );
}
