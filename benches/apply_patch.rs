//! Bench of `apply_patch`: a patch of 200 hunks into a 5,000-line file (target: at most 50 ms
//! per application), beside a baseline of plain read + write of the same file, with the ratio
//! printed at the end.

#[path = "support/bench_line.rs"]
mod bench_line;

use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion};
use zodex::tools::apply_patch::apply_patch;

const LINES: usize = 5_000;
const HUNKS: usize = 200;

fn original() -> String {
    (0..LINES)
        .map(|i| format!("    let value_{i} = compute({i}, \"some text on line {i}\");\n"))
        .collect()
}

/// 200 hunks, evenly spread, each replacing one line with three lines of context either side.
fn patch() -> String {
    let line = |i: usize| format!("    let value_{i} = compute({i}, \"some text on line {i}\");");
    let mut patch = String::from("*** Begin Patch\n*** Update File: big.rs\n");
    let step = LINES / HUNKS;
    for h in 0..HUNKS {
        let target = h * step + step / 2;
        patch.push_str(&format!("@@ {}\n", line(target - 4)));
        for i in target - 3..target {
            patch.push_str(&format!(" {}\n", line(i)));
        }
        patch.push_str(&format!("-{}\n", line(target)));
        patch.push_str(&format!(
            "+    let value_{target} = compute_faster({target});\n"
        ));
        for i in target + 1..=target + 3 {
            patch.push_str(&format!(" {}\n", line(i)));
        }
    }
    patch.push_str("*** End Patch\n");
    patch
}

fn reset(dir: &Path, text: &str) {
    fs::write(dir.join("big.rs"), text).unwrap();
}

fn baseline(dir: &Path) {
    let path = dir.join("big.rs");
    let text = fs::read_to_string(&path).unwrap();
    let temp = dir.join(".big.rs.tmp");
    fs::write(&temp, black_box(text)).unwrap();
    fs::rename(&temp, &path).unwrap();
}

fn mean_of(runs: u32, mut setup: impl FnMut(), mut f: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        setup();
        let start = Instant::now();
        f();
        total += start.elapsed();
    }
    total / runs
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let text = original();
    let patch = patch();
    reset(dir.path(), &text);
    let check = apply_patch(&patch, dir.path()).expect("bench patch applies");
    assert_eq!(check.changes.len(), 1);

    // `-- --skip-criterion` prints only the side-by-side means (as `scripts/bench-report` does).
    if !std::env::args().any(|a| a == "--skip-criterion") {
        let mut c = Criterion::default().configure_from_args();
        let mut group = c.benchmark_group("apply_patch");
        group.bench_function("200_hunks_into_5000_lines", |b| {
            b.iter_batched(
                || reset(dir.path(), &text),
                |()| apply_patch(black_box(&patch), dir.path()).unwrap(),
                BatchSize::PerIteration,
            )
        });
        group.bench_function("baseline_read_write_5000_lines", |b| {
            b.iter_batched(
                || reset(dir.path(), &text),
                |()| baseline(dir.path()),
                BatchSize::PerIteration,
            )
        });
        group.finish();
        c.final_summary();
    }

    let runs = 100;
    let patched = mean_of(
        runs,
        || reset(dir.path(), &text),
        || {
            apply_patch(&patch, dir.path()).unwrap();
        },
    );
    let plain = mean_of(runs, || reset(dir.path(), &text), || baseline(dir.path()));
    println!(
        "apply_patch 200 hunks / 5000 lines: mean {:.3} ms (target <= 50 ms); baseline read+write: \
         mean {:.3} ms; ratio {:.1}x",
        patched.as_secs_f64() * 1e3,
        plain.as_secs_f64() * 1e3,
        patched.as_secs_f64() / plain.as_secs_f64()
    );
    bench_line::BenchLine {
        name: "apply_patch_vs_read_write",
        unit: "ms",
        value: patched.as_secs_f64() * 1e3,
        baseline: Some(plain.as_secs_f64() * 1e3),
        max_ratio: None,
        max_value: Some(50.0),
        max_added: None,
    }
    .print();
}
