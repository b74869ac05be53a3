//! Scan cost per MiB, to set beside a push's own (the goal: scanning a 32 MiB push
//! costs at most 10% of pushing it).
//!
//! Corpora, 32 MiB each, generated (deterministic, nothing secret-looking):
//! - source-like text: lines of code-ish words, with a line naming a key, token, secret or
//!   password every few KiB so the keyword prefilter switches rules on as in real code; as one
//!   blob, as 32 blobs of 1 MiB and as 4096 blobs of 8 KiB (the per-blob cost);
//! - random bytes as 32 blobs of 1 MiB: binary by git's rule, skipped after 8000 bytes;
//! - random bytes without NUL (no blob is skipped: the worst case for the regexes).
//!
//! Prints MiB/s and ms per MiB (median of 5 runs) for each, then runs Criterion on the text
//! unless `--skip-criterion`. Run: `cargo bench -p zodex-secrets --bench scan`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use zodex_secrets::{Limits, Rules, scan};

const MIB: usize = 1 << 20;
const SIZE: usize = 32 * MIB;
const RUNS: usize = 5;

/// xorshift64*: deterministic bytes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[(self.next() % words.len() as u64) as usize]
    }
}

const IDENTS: &[&str] = &[
    "count", "items", "buffer", "offset", "result", "handler", "config", "value", "index",
    "window", "parser", "reader", "writer", "stream", "request", "response", "client", "server",
    "entry", "state", "cache", "length", "options", "context", "message", "builder", "path",
];
const CALLS: &[&str] = &[
    "len()",
    "is_empty()",
    "clone()",
    "iter()",
    "unwrap()",
    "to_string()",
    "as_ref()",
    "next()",
];
/// Every few KiB: lines a prefilter keyword switches rules on for, with values no rule takes.
const KEYWORD_LINES: &[&str] = &[
    "    let key = settings.get(\"key\").unwrap_or_default();",
    "    // the token is read from the environment, never stored",
    "    let secret_name = format!(\"{}-secret\", service);",
    "    if password.is_empty() { return Err(Error::MissingPassword); }",
    "    let api_url = base.join(\"/api/v1/items\")?;",
    "    auth.refresh(&client).await?;",
];

fn source_text(size: usize) -> Vec<u8> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(size + 200);
    let mut next_keyword = 0;
    while out.len() < size {
        if out.len() >= next_keyword {
            out.extend_from_slice(rng.pick(KEYWORD_LINES).as_bytes());
            out.push(b'\n');
            next_keyword = out.len() + 2048 + (rng.next() % 4096) as usize;
            continue;
        }
        let line = match rng.next() % 6 {
            0 => {
                format!("fn {}_{}(", rng.pick(IDENTS), rng.pick(IDENTS))
                    + &format!("{}: &{}) -> usize {{", rng.pick(IDENTS), "str")
            }
            1 => "}".to_owned(),
            2 => format!(
                "    let {} = {}.{};",
                rng.pick(IDENTS),
                rng.pick(IDENTS),
                rng.pick(CALLS)
            ),
            3 => format!(
                "    for {} in {}.{} {{ {} += {}; }}",
                rng.pick(IDENTS),
                rng.pick(IDENTS),
                rng.pick(CALLS),
                rng.pick(IDENTS),
                rng.next() % 1000
            ),
            4 => format!(
                "    // {} the {} before the {}",
                rng.pick(IDENTS),
                rng.pick(IDENTS),
                rng.pick(IDENTS)
            ),
            _ => format!(
                "    {}.push({}[{}]);",
                rng.pick(IDENTS),
                rng.pick(IDENTS),
                rng.next() % 64
            ),
        };
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.truncate(size);
    out
}

fn random_bytes(size: usize, nul: bool) -> Vec<u8> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut out: Vec<u8> = (0..size / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    if !nul {
        out.iter_mut().filter(|b| **b == 0).for_each(|b| *b = 1);
    }
    out
}

/// Scans `blob` in `blobs` pieces; the median time of `RUNS` runs.
fn time(rules: &Rules, blob: &[u8], piece: usize) -> Duration {
    let limits = Limits::default();
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            for (n, chunk) in blob.chunks(piece).enumerate() {
                let path = format!("src/module_{n}.rs");
                black_box(scan(rules, &path, chunk, &limits));
            }
            started.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn report(name: &str, bytes: usize, took: Duration) {
    let mib = bytes as f64 / MIB as f64;
    println!(
        "{name:<44} {:>8.1} MiB/s {:>8.3} ms/MiB  ({:.0} ms for {mib:.0} MiB)",
        mib / took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / mib,
        took.as_secs_f64() * 1000.0
    );
}

fn main() {
    let started = Instant::now();
    let rules = Rules::shipped();
    println!(
        "rules: {} of {} compiled in {:.0} ms",
        rules.len(),
        rules.defined(),
        started.elapsed().as_secs_f64() * 1000.0
    );
    let text = source_text(SIZE);
    let random = random_bytes(SIZE, true);
    let no_nul = random_bytes(SIZE, false);
    report(
        "source text, one 32 MiB blob",
        SIZE,
        time(rules, &text, SIZE),
    );
    report(
        "source text, 32 blobs of 1 MiB",
        SIZE,
        time(rules, &text, MIB),
    );
    report(
        "source text, 4096 blobs of 8 KiB",
        SIZE,
        time(rules, &text, 8 << 10),
    );
    report(
        "random binary, 32 blobs of 1 MiB (skipped)",
        SIZE,
        time(rules, &random, MIB),
    );
    report(
        "random bytes without NUL, one 32 MiB blob",
        SIZE,
        time(rules, &no_nul, SIZE),
    );

    if !std::env::args().any(|a| a == "--skip-criterion") {
        let mut criterion = Criterion::default()
            .sample_size(10)
            .measurement_time(Duration::from_secs(10))
            .configure_from_args();
        let mut group = criterion.benchmark_group("scan");
        group.throughput(Throughput::Bytes(SIZE as u64));
        group.bench_function("source text, 32 MiB blob", |b| {
            b.iter(|| scan(rules, "src/lib.rs", black_box(&text), &Limits::default()))
        });
        group.finish();
        criterion.final_summary();
    }
}
