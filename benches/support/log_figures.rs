//! Figures the publisher writes in its log, read back by the benches.

// Each bench reads the figures it needs.
#![allow(dead_code)]

/// Drops terminal colour codes (`ESC [ … m`) from a log line.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number after `key=` on every log line that contains `message`.
fn figures(log: &str, message: &str, key: &str) -> Vec<u64> {
    let key = format!("{key}=");
    log.lines()
        .filter(|l| l.contains(message))
        .filter_map(|l| {
            let l = plain(l);
            let rest = &l[l.find(&key)? + key.len()..];
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// `child_peak_kib` of every "pack indexed in a child process" line of the log.
pub fn child_peaks(log: &str) -> Vec<u64> {
    figures(log, "pack indexed in a child process", "child_peak_kib")
}

/// `elapsed_ms` of every "the pushed blobs were scanned for secrets" line of the log: what
/// the secret scan of each push cost.
pub fn secret_scans_ms(log: &str) -> Vec<u64> {
    figures(
        log,
        "the pushed blobs were scanned for secrets",
        "elapsed_ms",
    )
}
