//! Scanning one blob: the binary rule, the budget, the windows, the findings named.
//!
//! Memory does not grow with the blob: the blob is read in place, window by window (see
//! `window.rs`), and what is kept is at most [`Limits::max_findings`] findings plus one
//! window's candidates.

use std::fmt;
use std::time::{Duration, Instant};

use crate::detect::{Candidate, Detector};
use crate::fingerprint::Fingerprint;
use crate::rules::Rules;
use crate::window::{newlines, windows};

/// Git's own rule for a binary blob (`buffer_is_binary` in xdiff): a NUL byte among the first
/// 8000 bytes. Such a blob is not scanned (only the rules on paths see it).
pub const BINARY_PROBE: usize = 8000;

/// GitHub refuses a file over 100 MiB, so a blob past it cannot reach GitHub anyway.
pub const GITHUB_FILE_LIMIT: u64 = 100 << 20;

/// A scan's budget for one blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes scanned at most; past them the scan stops and says so
    /// ([`Skipped::OverBytes`]). Default [`GITHUB_FILE_LIMIT`]: everything GitHub takes.
    pub max_bytes: u64,
    /// Wall-clock time at most, checked between windows (one window's work is bounded: the
    /// `regex` crate runs in time linear in the window); past it the scan stops and says so
    /// ([`Skipped::OutOfTime`]). Default: none, since the bytes already bound the time and a
    /// clock would make the same push pass or fail with the machine's load.
    pub max_time: Option<Duration>,
    /// Findings kept at most; the scan stops at the next one and sets [`Scan::more`].
    /// Default 20.
    pub max_findings: usize,
    /// Whether the rule set's global path allowlist (`node_modules/`, `vendor/`, lock files,
    /// images…) skips a blob ([`Skipped::AllowedPath`]), as under gitleaks. Default true; a
    /// caller scanning what an untrusted party pushed sets false — the pusher chooses the
    /// path, and would choose `vendor/` to carry a secret past the scan.
    pub trust_paths: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bytes: GITHUB_FILE_LIMIT,
            max_time: None,
            max_findings: 20,
            trust_paths: true,
        }
    }
}

/// One secret found: its rule, where it is, its fingerprint. It carries no part of the
/// secret, so printing or logging it (`Debug` included) leaks nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    /// The rule's id (`aws-access-token`, `private-key`…).
    pub rule: String,
    pub path: String,
    /// The line the match starts on, from 1; 0 when the rule matched the path (the whole
    /// file is the secret, such as a `.p12` key store).
    pub line: u32,
    pub fingerprint: Fingerprint,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{} in {}", self.rule, self.path)?,
            line => write!(f, "{} at {}:{line}", self.rule, self.path)?,
        }
        write!(f, " (fingerprint {})", self.fingerprint)
    }
}

/// Why a blob, or its end, was not scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// Git's rule: a NUL among the first [`BINARY_PROBE`] bytes.
    Binary,
    /// The rule set's global allowlist names the path (lock files, vendored code, images…).
    AllowedPath,
    /// Only the first `scanned` of `size` bytes were scanned ([`Limits::max_bytes`]).
    OverBytes { scanned: u64, size: u64 },
    /// The time ran out after `scanned` of `size` bytes ([`Limits::max_time`]).
    OutOfTime { scanned: u64, size: u64 },
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skipped::Binary => write!(f, "binary (a NUL byte in its first {BINARY_PROBE} bytes)"),
            Skipped::AllowedPath => write!(f, "its path is allowlisted by the rules"),
            Skipped::OverBytes { scanned, size } => {
                write!(
                    f,
                    "only its first {scanned} of {size} bytes were scanned (the byte budget)"
                )
            }
            Skipped::OutOfTime { scanned, size } => {
                write!(
                    f,
                    "only its first {scanned} of {size} bytes were scanned (the time budget)"
                )
            }
        }
    }
}

/// What a scan found, and what it did not read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scan {
    /// In the order they appear (rules on paths first), at most [`Limits::max_findings`].
    pub findings: Vec<Finding>,
    /// More findings than `findings` holds: the scan stopped at the first one past the cap.
    pub more: bool,
    /// `Some` when part or all of the blob was not scanned, and why.
    pub skipped: Option<Skipped>,
}

/// Scans the blob at `path` for the secrets `rules` describe.
pub fn scan(rules: &Rules, path: &str, bytes: &[u8], limits: &Limits) -> Scan {
    let started = Instant::now();
    let mut out = Scan::default();
    if limits.trust_paths && rules.global.iter().any(|a| a.allows_path(path)) {
        out.skipped = Some(Skipped::AllowedPath);
        return out;
    }
    let budget = usize::try_from(limits.max_bytes).unwrap_or(usize::MAX);
    let scanned = &bytes[..bytes.len().min(budget)];
    for rule in rules.rules.iter().filter(|r| r.regex.is_none()) {
        let matches = rule
            .path
            .as_ref()
            .is_some_and(|p| p.is_match(path.as_bytes()));
        if matches && !rule.allowlists.iter().any(|a| a.allows_path(path)) {
            let finding = Finding {
                rule: rule.id.clone(),
                path: path.to_owned(),
                line: 0,
                // The whole file is the secret.
                fingerprint: Fingerprint::of(&rule.id, scanned),
            };
            if !keep(&mut out, finding, limits) {
                return out;
            }
        }
    }
    if scanned[..scanned.len().min(BINARY_PROBE)].contains(&0) {
        out.skipped = Some(Skipped::Binary);
        return out;
    }
    let mut detector = Detector::new(rules, path);
    let mut found: Vec<Candidate> = Vec::new();
    // Lines are counted only up to a window that found something: a clean blob costs none.
    let (mut line_at, mut at) = (1usize, 0);
    for w in windows(scanned) {
        if limits.max_time.is_some_and(|t| started.elapsed() >= t) {
            out.skipped = Some(Skipped::OutOfTime {
                scanned: w.start as u64,
                size: bytes.len() as u64,
            });
            return out;
        }
        found.clear();
        detector.window(scanned, w, &mut found);
        if !found.is_empty() {
            line_at += newlines(&scanned[at..w.start]);
            at = w.start;
        }
        for c in &found {
            let rule = &rules.rules[c.rule].id;
            let finding = Finding {
                rule: rule.clone(),
                path: path.to_owned(),
                line: u32::try_from(line_at + c.line).unwrap_or(u32::MAX),
                fingerprint: Fingerprint::of(rule, &scanned[c.secret.clone()]),
            };
            if !keep(&mut out, finding, limits) {
                return out;
            }
        }
    }
    if scanned.len() < bytes.len() {
        out.skipped = Some(Skipped::OverBytes {
            scanned: scanned.len() as u64,
            size: bytes.len() as u64,
        });
    }
    out
}

/// Keeps a finding, or marks that there are more; `false` when the scan should stop.
fn keep(out: &mut Scan, finding: Finding, limits: &Limits) -> bool {
    if out.findings.len() >= limits.max_findings {
        out.more = true;
        return false;
    }
    out.findings.push(finding);
    true
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
