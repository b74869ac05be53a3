//! What the secret scan (gitleaks' rules over the blobs a push adds) costs beside the push
//! itself: pushes of 32 MiB of source-like text (1 MiB files, a few keywords per KiB so the
//! rules' prefilter does not skip it all) and of 32 MiB of random data (binary: skipped by the
//! NUL rule) through `git-remote-zodex` and `zodex-prd`, median of `ROUNDS`; the scan's own
//! time read from the publisher's log. Target (issue "Policy as product"): the scan costs at
//! most 10% of a 32 MiB push.
//!
//! Run: `cargo bench --bench secret_scan`.

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/changes.rs"]
mod changes;
#[path = "support/log_figures.rs"]
mod log_figures;
#[path = "support/pushes.rs"]
mod pushes;
#[path = "../tests/it/support/mod.rs"]
mod support;

use pushes::{median, timed, zodex_push};
use std::path::Path;
use std::time::Duration;
use support::devhub::git_command;
use support::rig::Rig;

const ROUNDS: usize = 3;
const MIB: usize = 1 << 20;

/// 1 MiB of code-like text: identifiers, calls and comments, with `key`, `token`, `secret`
/// and `password` every few lines.
fn text_mib(seed: &mut u64) -> Vec<u8> {
    let words = [
        "let", "value", "config", "parse", "return", "match", "self", "items", "count", "key",
        "token", "secret", "password", "buffer", "write", "read", "error", "result",
    ];
    let mut out = Vec::with_capacity(MIB + 128);
    let mut line = 0u64;
    while out.len() < MIB {
        let bytes = changes::random_bytes(8, seed);
        let pick = |i: usize| words[bytes[i] as usize % words.len()];
        let text = format!(
            "    {} {}_{} = {}({}, {}); // {} {}\n",
            pick(0),
            pick(1),
            line,
            pick(2),
            pick(3),
            pick(4),
            pick(5),
            pick(6)
        );
        out.extend_from_slice(text.as_bytes());
        line += 1;
    }
    out.truncate(MIB);
    out
}

/// Commits 32 files of 1 MiB on a new branch from origin/main: text or random.
fn commit(dir: &Path, branch: &str, text: bool, seed: &mut u64) {
    let run = |args: &[&str]| {
        let out = git_command(dir).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
    };
    run(&["checkout", "-q", "-B", branch, "origin/main"]);
    let data = dir.join("data").join(branch);
    std::fs::create_dir_all(&data).unwrap();
    for i in 0..32 {
        let bytes = match text {
            true => text_mib(seed),
            false => changes::random_bytes(MIB, seed),
        };
        std::fs::write(data.join(format!("{i}.rs")), bytes).unwrap();
    }
    run(&["add", "data"]);
    run(&["commit", "-q", "-m", branch]);
}

fn main() {
    let rig = Rig::start(Duration::from_secs(3600));
    rig.grant_push("demo/app");
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    println!("the secret scan beside a 32 MiB push through zodex (median of {ROUNDS})");
    for (kind, text) in [("text", true), ("random", false)] {
        let mut pushes = Vec::new();
        let mut scans = Vec::new();
        for round in 0..ROUNDS {
            let branch = format!("scan-{kind}-{round}");
            commit(&app, &branch, text, &mut seed);
            let before = log_figures::secret_scans_ms(&rig.log()).len();
            pushes.push(timed(|| zodex_push(&rig, &app, &branch)));
            let scanned = log_figures::secret_scans_ms(&rig.log());
            let ms = scanned.get(before).copied().expect("the push was scanned");
            scans.push(Duration::from_millis(ms));
        }
        let (push, scan) = (median(pushes), median(scans));
        let (push_ms, scan_ms) = (push.as_secs_f64() * 1e3, scan.as_secs_f64() * 1e3);
        println!(
            "{kind:>7}: push {push_ms:.0} ms, scan {scan_ms:.0} ms ({:.1}%, {:.2} ms/MiB)",
            100.0 * scan_ms / push_ms,
            scan_ms / 32.0
        );
        bench_line::BenchLine {
            name: &format!("secret_scan_ms_beside_a_32mib_{kind}_push"),
            unit: "ms",
            value: scan_ms,
            baseline: Some(push_ms),
            max_ratio: Some(0.10),
            max_value: None,
            max_added: None,
        }
        .print();
    }
}
