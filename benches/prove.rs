//! `zodex-prd policy prove` on the shipped policies and properties: the proof every start of
//! zodex-prd runs (a property that does not hold refuses start), so its time is part of every
//! start. Target: at most 5 s (the median of the runs). The end-to-end test
//! (`tests/it/policy_proofs.rs`) checks what is proven; this bench owns how long it takes.
//!
//! Run: `cargo bench --bench prove` (cvc5 or z3 on `PATH`). `PROVE_BENCH_N` sets the number of
//! runs (default 5).

#[path = "support/bench_line.rs"]
mod bench_line;

use std::time::{Duration, Instant};
use zodex::publisher::prove::{SolverCommand, Subject};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let solver = SolverCommand::find()
        .expect("no SMT solver on PATH: install cvc5 (`apt-get install cvc5`) or z3");
    let subject = Subject::load(None, &[]).expect("the shipped policies load");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let runs: usize = std::env::var("PROVE_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let report = runtime.block_on(subject.prove(&solver)).unwrap();
        samples.push(started.elapsed());
        assert!(
            report.all_hold_or_waived(),
            "a shipped property does not hold"
        );
    }
    samples.sort();
    let median = samples[samples.len() / 2];
    println!(
        "policy prove, shipped set: median {:.0} ms, slowest {:.0} ms over {runs} runs (target <= 5000 ms)",
        ms(median),
        ms(samples[samples.len() - 1]),
    );
    bench_line::BenchLine {
        name: "policy_prove_shipped",
        unit: "ms",
        value: ms(median),
        baseline: None,
        max_ratio: None,
        max_value: Some(5000.0),
        max_added: None,
    }
    .print();
}
