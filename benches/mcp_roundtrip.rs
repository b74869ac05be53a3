//! `exec_command` of `true` over HTTP, round trip, against spawning `bash -lc true` directly in
//! the same run (issue 5's first figure: p50 ≤ 15 ms; issue 12's: p50 ≤ 2× the direct spawn).
//!
//! Run: `cargo bench --bench mcp_roundtrip` (release build of `zodex-agent`). Both sides run
//! with the same throwaway HOME, so the machine's own dotfiles do not weigh on either.
//! `MCP_BENCH_N` sets the number of samples (default 300).

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::mcp_server::{Server, tool_call};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let p50 = percentile(&samples, 0.5);
    println!(
        "{name:<32} n={:<4} p50 {:>7.2} ms  p90 {:>7.2} ms  p99 {:>7.2} ms  min {:>7.2} ms",
        samples.len(),
        ms(p50),
        ms(percentile(&samples, 0.9)),
        ms(percentile(&samples, 0.99)),
        ms(samples[0]),
    );
    p50
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let n: usize = std::env::var("MCP_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let server = Server::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_zodex-agent")),
        &[("RUST_LOG", "warn,zodex_tools::server=info")],
    );
    let workdir = tempfile::tempdir().unwrap();
    let path = format!("/mcp?key={}", server.key);
    let call = tool_call(
        1,
        "exec_command",
        json!({"cmd": "true", "workdir": workdir.path().to_str().unwrap()}),
    );
    let mut conn = server.connect();
    let once = |conn: &mut support::mcp_server::Conn| {
        let started = Instant::now();
        let r = conn.post_json(&path, &call, &[]);
        let took = started.elapsed();
        assert_eq!(r.status, 200);
        let result = r.json();
        assert_eq!(
            result["result"]["structuredContent"]["exit_code"], 0,
            "{result}"
        );
        took
    };
    for _ in 0..20 {
        once(&mut conn);
    }
    let direct = || {
        let started = Instant::now();
        let status = Command::new("bash")
            .args(["-lc", "true"])
            .env_clear()
            .env("HOME", &server.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(workdir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        started.elapsed()
    };
    for _ in 0..20 {
        direct();
    }
    // Interleave the two so both see the same machine load.
    let mut over_mcp = Vec::with_capacity(n);
    let mut spawned = Vec::with_capacity(n);
    for _ in 0..n {
        over_mcp.push(once(&mut conn));
        spawned.push(direct());
    }
    println!("exec_command `true` round trip vs `bash -lc true` ({n} samples each, interleaved)");
    let mcp_p50 = report("exec_command over HTTP (MCP)", over_mcp);
    let bash_p50 = report("bash -lc true (spawn + wait)", spawned);
    println!(
        "ratio p50 MCP / direct: {:.2}x  (overhead {:.2} ms; targets: ratio <= 2x, p50 <= 15 ms: {})",
        ms(mcp_p50) / ms(bash_p50),
        ms(mcp_p50) - ms(bash_p50),
        if ms(mcp_p50) <= 15.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    bench_line::BenchLine {
        name: "exec_true_vs_bash_lc",
        unit: "ms",
        value: ms(mcp_p50),
        baseline: Some(ms(bash_p50)),
        max_ratio: Some(2.0),
        max_value: Some(15.0),
        max_added: None,
    }
    .print();
}
