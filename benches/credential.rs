//! The credential helper as git runs it (a whole `git-credential-zodex get` process), against
//! a plain `git credential-store get` in the same run; and token minting sustained for 60 s
//! against devhub.
//!
//! - warm: the read token is cached in zodex-prd (p50 must be ≤ 10 ms);
//! - cold: the cache is erased first (untimed), so every `get` decides, mints and records;
//! - baseline: `git credential-store --file F get` answering the same question from a file;
//! - minting: `GitHub::mint` for `demo/app` read tokens, 4 in flight, for 60 s
//!   (`ZODEX_BENCH_SOAK_SECS` changes the length; `0` skips it): tokens per second, p50 and p99.
//!
//! Warm gets and the baseline alternate, so both see the same machine. Two diagnostics say where
//! a warm get's time goes: the same question over the agent socket from this process (the
//! daemon's share), and a whole helper process for a host it does not serve (the process start
//! and configuration, no socket); and `zodex-agent credential get`, the same helper inside the
//! whole agent binary, for comparison. Target (issue 12): warm p50 ≤ 1.3× the baseline.
//!
//! Run: `cargo bench --bench credential`

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::rig::{AGENT, CREDENTIAL_HELPER, Rig};

fn run(cmd: &mut Command, input: &str) -> (Duration, String) {
    let started = Instant::now();
    let out = support::rig::with_input(cmd, input);
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn main() {
    let rig = Rig::start(Duration::from_secs(3600));
    let host = rig.host();
    let question = format!("protocol=http\nhost={host}\npath=demo/app.git\n\n");
    // What git runs on a sprite: the small `git-credential-zodex` binary.
    let helper = |op: &str| {
        let mut cmd = Command::new(CREDENTIAL_HELPER);
        cmd.arg("--config").arg(&rig.config).arg(op);
        cmd
    };

    // Baseline: git's own file-backed helper answering the same question.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::write(
        &store,
        format!("http://x-access-token:ghs_example@{host}/demo/app.git\n"),
    )
    .unwrap();
    let store_get = || {
        let mut cmd = Command::new("git");
        cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args([
                "-c",
                "credential.useHttpPath=true",
                "credential-store",
                "--file",
            ])
            .arg(&store)
            .arg("get");
        cmd
    };
    let (_, answer) = run(&mut store_get(), &question);
    assert!(answer.contains("password=ghs_example"), "{answer}");

    // Warm: one get fills the cache, then 300 timed, alternating with the baseline.
    let (_, first) = run(&mut helper("get"), &question);
    assert!(first.contains("password="), "{first}");
    for _ in 0..20 {
        run(&mut helper("get"), &question);
        run(&mut store_get(), &question);
    }
    let mut warm = Vec::new();
    let mut baseline = Vec::new();
    for round in 0..300 {
        if round % 2 == 0 {
            warm.push(run(&mut helper("get"), &question).0);
            baseline.push(run(&mut store_get(), &question).0);
        } else {
            baseline.push(run(&mut store_get(), &question).0);
            warm.push(run(&mut helper("get"), &question).0);
        }
    }

    // Where a warm get goes: the daemon's share (one request on the agent socket from here)
    // and the helper process without the socket (a host it does not serve).
    let socket = zodex::agent::client::agent_socket(Some(&rig.config)).unwrap();
    let request = zodex::protocol::AgentRequest::Credential {
        host: host.clone(),
        path: "demo/app.git".into(),
    };
    let daemon: Vec<Duration> = (0..300)
        .map(|_| {
            let started = Instant::now();
            let answer = zodex::agent::client::call(&socket, &request).unwrap();
            let took = started.elapsed();
            assert!(answer.ok, "{:?}", answer.error);
            took
        })
        .collect();
    let agent_get = || {
        let mut cmd = Command::new(AGENT);
        cmd.args(["credential", "--config"])
            .arg(&rig.config)
            .arg("get");
        cmd
    };
    let whole_agent: Vec<Duration> = (0..300)
        .map(|_| run(&mut agent_get(), &question).0)
        .collect();
    let other = "protocol=http\nhost=not-served.example\npath=demo/app.git\n\n";
    let process: Vec<Duration> = (0..300).map(|_| run(&mut helper("get"), other).0).collect();

    // Cold: erase (untimed), then get.
    let cold: Vec<Duration> = (0..60)
        .map(|_| {
            run(&mut helper("erase"), &question);
            run(&mut helper("get"), &question).0
        })
        .collect();

    let (warm50, warm99) = percentiles(warm);
    let (cold50, cold99) = percentiles(cold);
    let (base50, base99) = percentiles(baseline);
    let (daemon50, daemon99) = percentiles(daemon);
    let (process50, process99) = percentiles(process);
    let (agent50, agent99) = percentiles(whole_agent);
    println!("credential get, whole process as git runs it (ms)");
    println!("  git-credential-zodex get, warm     p50 {warm50:.2}  p99 {warm99:.2}");
    println!("  git-credential-zodex get, cold     p50 {cold50:.2}  p99 {cold99:.2}");
    println!("  zodex-agent credential get, warm   p50 {agent50:.2}  p99 {agent99:.2}");
    println!("  git credential-store get           p50 {base50:.2}  p99 {base99:.2}");
    println!(
        "  ratio warm/store p50 {:.2} (target <= 1.3), cold/store p50 {:.2}",
        warm50 / base50,
        cold50 / base50
    );
    println!("  of a warm get: agent socket round trip alone p50 {daemon50:.2}  p99 {daemon99:.2}");
    println!(
        "                helper process, no socket     p50 {process50:.2}  p99 {process99:.2}"
    );
    bench_line::BenchLine {
        name: "credential_get_warm_vs_git_credential_store",
        unit: "ms",
        value: warm50,
        baseline: Some(base50),
        max_ratio: Some(1.3),
        max_value: Some(10.0),
        max_added: None,
    }
    .print();

    // Minting sustained: the publisher's client against devhub (rate limit raised for it).
    let soak = Duration::from_secs(
        std::env::var("ZODEX_BENCH_SOAK_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    if soak.is_zero() {
        return;
    }
    let demo = support::devhub::Demo::start_with(|c| c.with_rate_limit(10_000_000));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let github = {
        let _inside = runtime.enter();
        std::sync::Arc::new(demo.publisher_client(demo.hub.api_url()))
    };
    let repo = zodex::engine::RepoName::parse("demo/app").unwrap();
    let installation = Some(demo.seed.reader_installation_id as i64);
    let latencies = runtime.block_on(async {
        let deadline = Instant::now() + soak;
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let github = github.clone();
            let repo = repo.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    github
                        .mint(
                            &repo,
                            zodex::publisher::github::TokenUse::Read,
                            installation,
                        )
                        .await
                        .expect("minting works");
                    mine.push(started.elapsed());
                }
                mine
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    let minted = latencies.len();
    let (p50, p99) = percentiles(latencies);
    println!(
        "minting for {} s, 4 in flight: {minted} tokens, {:.0} tokens/s, p50 {p50:.2} ms, p99 {p99:.2} ms",
        soak.as_secs(),
        minted as f64 / soak.as_secs_f64()
    );
    drop(github);
    runtime.shutdown_timeout(Duration::from_secs(2));
}
