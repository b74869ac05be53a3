//! The blobs a push adds, scanned for secrets with gitleaks' rules (crate `zodex-secrets`)
//! before any token exists. A blob up to [`IN_PROCESS_BYTES`] is read and scanned in the
//! daemon (its memory stays bounded by that, per scanning thread); larger ones in a child
//! process under the indexer's resource limits, so reading a blob whole (up to GitHub's
//! 100 MiB) never grows the daemon's memory. Blobs are scanned on up to [`SCAN_THREADS`]
//! threads at once.
//!
//! Which blobs: those of the bundle's own pack (what the push adds; a blob GitHub already has
//! is not sent again) that the update's commits wrote — an older version of a file a later
//! commit replaced included, since history keeps it — each named by the path it was written
//! at; past the facts' path limit, every blob of the pack. What is skipped, by stated rules: binaries (a NUL byte in
//! the first 8,000 bytes, git's own test) and nothing else — the pusher chooses the paths, so
//! gitleaks' path allowlist (`vendor/`, lock files) is not honoured here.
//!
//! A finding carries the rule, the path, the line and a fingerprint, never the secret.

use super::diff::PathDiff;
use super::import::{ImportError, Quarantine};
use super::indexer::run_limited;
use gix::hash::ObjectId;
use std::ffi::OsString;
use std::path::PathBuf;

/// The hidden `zodex-prd` subcommand the child runs.
pub const SUBCOMMAND: &str = "scan-blobs";

/// Findings kept per push at most (the scan says when there were more).
pub const MAX_FINDINGS: usize = 50;

/// The largest blob scanned in the daemon itself; larger ones go to the child.
pub const IN_PROCESS_BYTES: u64 = 1 << 20;

/// One blob to scan, and the path it is pushed at.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub path: String,
    pub blob: String,
}

/// One secret found (no part of it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecretFinding {
    pub rule: String,
    pub path: String,
    /// 1-based; 0 when the rule matched the path itself (a key store file).
    pub line: u32,
    pub fingerprint: String,
}

/// What the scan of a push found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecretScan {
    pub findings: Vec<SecretFinding>,
    /// More findings than `findings` holds.
    pub more: bool,
    /// Blobs scanned, and their bytes.
    pub blobs: usize,
    pub bytes: u64,
    /// Blobs skipped as binary.
    pub binary: usize,
}

impl SecretScan {
    /// The distinct fingerprints found, sorted.
    pub fn fingerprints(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .findings
            .iter()
            .map(|f| f.fingerprint.clone())
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// The child's answer: one JSON line on its stdout.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Answer {
    Scanned { scan: SecretScan },
    Failed { message: String },
}

impl Quarantine {
    /// The blobs of this quarantine's own pack (what the push adds) that the update's commits
    /// wrote — each version of a file included — named by the path they were written at;
    /// when the facts name fewer paths than change, every blob of the pack (named by id where
    /// no diff named it).
    pub fn added_blobs(&self, paths: &PathDiff) -> Result<Vec<Target>, ImportError> {
        let mut targets = Vec::new();
        for blob in self.pack_blobs()?.iter().cloned() {
            let written = ObjectId::from_hex(blob.as_bytes())
                .ok()
                .and_then(|id| paths.written.get(&id).cloned());
            match (written, paths.too_many) {
                (Some(path), _) => targets.push(Target { path, blob }),
                (None, true) => targets.push(Target {
                    path: format!("(blob {blob})"),
                    blob,
                }),
                // Another update's of the same push: decided with that one.
                (None, false) => {}
            }
        }
        Ok(targets)
    }

    /// Scans `targets`: the small blobs here, the large ones in a child under the limits
    /// (see the module's documentation).
    pub fn scan_secrets(&self, targets: &[Target]) -> Result<SecretScan, ImportError> {
        use gix::objs::FindHeader;
        let started = std::time::Instant::now();
        let mut small = Vec::new();
        let mut large = Vec::new();
        for target in targets {
            let id = ObjectId::from_hex(target.blob.as_bytes())
                .map_err(|_| ImportError::Missing(target.blob.clone()))?;
            let header = self
                .odb()
                .try_header(&id)
                .map_err(|e| ImportError::Objects(e.to_string()))?
                .ok_or_else(|| ImportError::Missing(target.blob.clone()))?;
            match header.size <= IN_PROCESS_BYTES {
                true => small.push(target.clone()),
                false => large.push(target.clone()),
            }
        }
        let mut scan = scan_in_parallel(self.odb(), &small)
            .map_err(|e| ImportError::Objects(format!("the secret scan failed: {e}")))?;
        if !large.is_empty() {
            scan.absorb(self.scan_in_child(&large)?);
        }
        if !targets.is_empty() {
            tracing::info!(
                blobs = scan.blobs,
                bytes = scan.bytes,
                in_child = large.len(),
                binary = scan.binary,
                findings = scan.findings.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the pushed blobs were scanned for secrets"
            );
        }
        Ok(scan)
    }

    fn scan_in_child(&self, targets: &[Target]) -> Result<SecretScan, ImportError> {
        let work = self.work_dir();
        let internal = |what: &str, e: &dyn std::fmt::Display| {
            ImportError::Objects(format!("{what} for the secret scan: {e}"))
        };
        let list = work.join("scan-targets.json");
        let text = serde_json::to_vec(targets).map_err(|e| internal("the blob list", &e))?;
        std::fs::write(&list, text).map_err(|e| internal("writing the blob list", &e))?;
        let args: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--objects".into(),
            self.objects_dir().into(),
            "--list".into(),
            list.into(),
        ];
        let run = run_limited(args, work, "scan").map_err(|(what, e)| internal(what, &e))?;
        let answer = run
            .out
            .lines()
            .find_map(|line| serde_json::from_str::<Answer>(line).ok());
        match answer {
            Some(Answer::Scanned { scan }) => {
                tracing::debug!(
                    child_peak_kib = run.peak_kib,
                    "large blobs scanned in a child"
                );
                Ok(scan)
            }
            Some(Answer::Failed { message }) => Err(ImportError::Objects(format!(
                "the secret scan failed: {message}"
            ))),
            None => Err(ImportError::Limit(format!(
                "the secret scan ended without an answer (wait status {}); the push is refused rather than sent unscanned",
                run.status
            ))),
        }
    }
}

impl SecretScan {
    fn absorb(&mut self, other: SecretScan) {
        self.blobs += other.blobs;
        self.bytes += other.bytes;
        self.binary += other.binary;
        self.more |= other.more;
        for finding in other.findings {
            if self.findings.len() >= MAX_FINDINGS {
                self.more = true;
                break;
            }
            self.findings.push(finding);
        }
    }
}

/// What the daemon asks of the child.
pub struct Job {
    pub objects: PathBuf,
    pub list: PathBuf,
}

/// Why blobs could not be scanned (the push is refused rather than sent unscanned).
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("reading the blob list: {0}")]
    List(String),
    #[error("opening the objects: {0}")]
    Objects(String),
    #[error("blob {0} is not a valid object id")]
    BadId(String),
    #[error("reading blob {id}: {why}")]
    Read { id: ObjectId, why: String },
    #[error("blob {0} is not in the quarantine")]
    Missing(ObjectId),
    #[error("a scan thread panicked")]
    Panicked,
}

/// In the child: reads each listed blob (the quarantine with the mirror as alternate) and
/// scans it.
pub fn run(job: &Job) -> Answer {
    run_inner(job).unwrap_or_else(|e| Answer::Failed {
        message: e.to_string(),
    })
}

fn run_inner(job: &Job) -> Result<Answer, ScanError> {
    let text = std::fs::read(&job.list).map_err(|e| ScanError::List(e.to_string()))?;
    let targets: Vec<Target> =
        serde_json::from_slice(&text).map_err(|e| ScanError::List(e.to_string()))?;
    let odb = gix::odb::at(&job.objects, gix::hash::Kind::Sha1)
        .map_err(|e| ScanError::Objects(e.to_string()))?;
    Ok(Answer::Scanned {
        scan: scan_in_parallel(&odb, &targets)?,
    })
}

/// [`scan_all`] over up to [`SCAN_THREADS`] threads, each with its own view of the objects
/// and one blob in memory at a time; the findings in the order of `targets`.
fn scan_in_parallel(odb: &gix::odb::Handle, targets: &[Target]) -> Result<SecretScan, ScanError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(SCAN_THREADS);
    if threads < 2 || targets.len() < 2 {
        return scan_all(odb, targets);
    }
    let chunk = targets.len().div_ceil(threads);
    let scans: Vec<Result<SecretScan, ScanError>> = std::thread::scope(|scope| {
        let running: Vec<_> = targets
            .chunks(chunk)
            .map(|part| {
                let odb = odb.clone();
                scope.spawn(move || scan_all(&odb, part))
            })
            .collect();
        running
            .into_iter()
            .map(|t| t.join().unwrap_or(Err(ScanError::Panicked)))
            .collect()
    });
    let mut scan = SecretScan::default();
    for part in scans {
        scan.absorb(part?);
    }
    Ok(scan)
}

/// The threads [`scan_in_parallel`] uses at most.
const SCAN_THREADS: usize = 4;

/// Reads and scans each of `targets`, one blob in memory at a time.
fn scan_all(odb: &gix::odb::Handle, targets: &[Target]) -> Result<SecretScan, ScanError> {
    use gix::objs::Find;
    let rules = zodex_secrets::Rules::shipped();
    let limits = zodex_secrets::Limits {
        trust_paths: false,
        max_findings: MAX_FINDINGS,
        ..Default::default()
    };
    let mut scan = SecretScan::default();
    let mut buf = Vec::new();
    for target in targets {
        let id = ObjectId::from_hex(target.blob.as_bytes())
            .map_err(|_| ScanError::BadId(target.blob.clone()))?;
        let data = odb
            .try_find(&id, &mut buf)
            .map_err(|e| ScanError::Read {
                id,
                why: e.to_string(),
            })?
            .ok_or(ScanError::Missing(id))?;
        if data.kind != gix::objs::Kind::Blob {
            continue;
        }
        let found = zodex_secrets::scan(rules, &target.path, data.data, &limits);
        scan.blobs += 1;
        scan.bytes += data.data.len() as u64;
        if found.skipped == Some(zodex_secrets::Skipped::Binary) {
            scan.binary += 1;
        }
        scan.absorb(SecretScan {
            findings: found
                .findings
                .into_iter()
                .map(|f| SecretFinding {
                    rule: f.rule,
                    path: f.path,
                    line: f.line,
                    fingerprint: f.fingerprint.to_string(),
                })
                .collect(),
            more: found.more,
            ..Default::default()
        });
    }
    Ok(scan)
}

impl Answer {
    pub fn to_line(&self) -> String {
        format!(
            "{}\n",
            serde_json::to_string(self).expect("answers serialise")
        )
    }
}
