//! A bundle's pack, indexed by gix-pack in a short-lived child process under resource limits,
//! so that the daemon's own memory (file-backed pages included: gix maps the pack it writes)
//! never grows with a pack. The daemon runs its own binary again (`/proc/self/exe`) with a
//! hidden subcommand ([`SUBCOMMAND`]); the child indexes and verifies the pack into the
//! quarantine (thin-pack bases completed from the mirror through the quarantine's alternates),
//! holds every object's resolved type and size against the limits, and answers one JSON line
//! on stdout. The parent reaps it with `wait4` (its peak memory goes to the log) and turns
//! anything but a clean answer, an out-of-memory abort included, into an [`ImportError`].
//!
//! Limits set in the child before it runs (`setrlimit`): `RLIMIT_DATA` (heap and anonymous
//! mappings, not the mapped pack) at [`MEMORY_LIMIT_BYTES`], `RLIMIT_AS` at
//! [`ADDRESS_LIMIT_BYTES`], `RLIMIT_FSIZE` (the pack it writes, with thin-pack bases added) at
//! [`FILE_LIMIT_BYTES`], `RLIMIT_CPU` at [`CPU_LIMIT_SECONDS`], and no core dump. Its
//! environment is empty. The pre-scan ([`super::packscan`]) has already refused what a pack
//! declares beyond the object limits; these limits bound everything else (delta chains, entry
//! counts, the thin path's in-memory entries).
#![allow(unsafe_code)] // resource limits and reaping of the indexing child (setrlimit, wait4); each block says why it is sound

use super::import::ImportError;
use super::packscan::{MAX_BLOB_BYTES, MAX_DELTA_BYTES, MAX_METADATA_BYTES};
use gix::odb::Header as _;
use std::ffi::OsString;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;

/// The hidden `zodex-prd` subcommand the child runs.
pub const SUBCOMMAND: &str = "index-pack";
/// `RLIMIT_DATA` of the child: heap, thread stacks, anonymous mappings. Room for the thin path
/// (every entry of a pack of up to 128 MiB kept compressed) and two threads resolving deltas
/// of objects up to [`MAX_BLOB_BYTES`].
pub const MEMORY_LIMIT_BYTES: u64 = 1024 * 1024 * 1024;
/// `RLIMIT_AS` of the child: the data limit plus the mapped pack, index and binary.
pub const ADDRESS_LIMIT_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// `RLIMIT_FSIZE` of the child: the largest pack (with thin-pack bases added) it may write.
pub const FILE_LIMIT_BYTES: u64 = 1024 * 1024 * 1024;
/// `RLIMIT_CPU` of the child, in seconds.
pub const CPU_LIMIT_SECONDS: u64 = 300;
/// The child's threads resolving deltas.
const THREADS: usize = 2;

/// What the daemon asks of the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The spooled bundle.
    pub bundle: PathBuf,
    /// Where its pack starts.
    pub pack_offset: u64,
    /// The quarantine's objects directory (its alternates name the mirror).
    pub objects: PathBuf,
    /// Whether delta bases may come from the mirror (the pack has REF-deltas).
    pub thin: bool,
}

impl Job {
    /// The subcommand's arguments for this job.
    fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--bundle".into(),
            self.bundle.clone().into(),
            "--offset".into(),
            self.pack_offset.to_string().into(),
            "--objects".into(),
            self.objects.clone().into(),
        ];
        if self.thin {
            args.push("--thin".into());
        }
        args
    }
}

/// The child's answer: one JSON line on its stdout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Answer {
    /// The pack is in the quarantine (`None`: it held no objects).
    Indexed {
        data: Option<PathBuf>,
        index: Option<PathBuf>,
    },
    Damaged {
        message: String,
    },
    BlobTooLarge {
        oid: String,
        size: u64,
    },
    MetadataTooLarge {
        oid: String,
        kind: String,
        size: u64,
    },
    OutOfMemory {
        message: String,
    },
    Failed {
        message: String,
    },
}

impl Answer {
    pub fn to_line(&self) -> String {
        format!(
            "{}\n",
            serde_json::to_string(self).expect("answers serialise")
        )
    }

    pub fn is_indexed(&self) -> bool {
        matches!(self, Self::Indexed { .. })
    }
}

/// In the child: indexes and verifies the pack into the quarantine, then checks every object's
/// resolved type and size.
pub fn run(job: &Job) -> Answer {
    run_inner(job).unwrap_or_else(|answer| answer)
}

fn failed(what: &str) -> impl Fn(std::io::Error) -> Answer + '_ {
    move |e| Answer::Failed {
        message: format!("{what}: {e}"),
    }
}

fn run_inner(job: &Job) -> Result<Answer, Answer> {
    let file = std::fs::File::open(&job.bundle).map_err(failed("opening the bundle"))?;
    let mut input = BufReader::with_capacity(256 * 1024, file);
    input
        .seek(SeekFrom::Start(job.pack_offset))
        .map_err(failed("seeking to the pack"))?;
    let lookup = match job.thin {
        true => {
            Some(gix::odb::at(&job.objects, gix::hash::Kind::Sha1).map_err(failed("the mirror"))?)
        }
        false => None,
    };
    let options = gix_pack::bundle::write::Options {
        thread_limit: Some(THREADS),
        alloc_limit_bytes: Some(MAX_DELTA_BYTES as usize),
        ..Default::default()
    };
    let outcome = gix_pack::Bundle::write_to_directory(
        &mut input,
        Some(&job.objects.join("pack")),
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
        lookup,
        gix::hash::Kind::Sha1,
        options,
    )
    .map_err(|e| {
        let message = format!("{e:#}");
        if message.contains("fit in memory") || message.contains("alloc") {
            Answer::OutOfMemory { message }
        } else {
            Answer::Damaged { message }
        }
    })?;
    if let Some(keep) = &outcome.keep_path {
        let _ = std::fs::remove_file(keep);
    }
    if let Some(index) = &outcome.index_path {
        check_sizes(&job.objects, index)?;
    }
    Ok(Answer::Indexed {
        data: outcome.data_path,
        index: outcome.index_path,
    })
}

/// Every object of the new pack, its delta chain resolved: blobs up to [`MAX_BLOB_BYTES`],
/// commits, trees and tags up to [`MAX_METADATA_BYTES`].
fn check_sizes(objects: &Path, index: &Path) -> Result<(), Answer> {
    let objects_err = |e: &dyn std::fmt::Display| Answer::Failed {
        message: format!("reading the new pack: {e}"),
    };
    let odb = gix::odb::at(objects, gix::hash::Kind::Sha1).map_err(|e| objects_err(&e))?;
    let index =
        gix_pack::index::File::at(index, gix::hash::Kind::Sha1).map_err(|e| objects_err(&e))?;
    for entry in index.iter() {
        let header = odb
            .try_header(&entry.oid)
            .map_err(|e| objects_err(&e))?
            .ok_or_else(|| objects_err(&format!("{} is not in its own pack", entry.oid)))?;
        let (kind, size) = (header.kind(), header.size());
        if kind == gix::objs::Kind::Blob && size > MAX_BLOB_BYTES {
            return Err(Answer::BlobTooLarge {
                oid: entry.oid.to_string(),
                size,
            });
        }
        if kind != gix::objs::Kind::Blob && size > MAX_METADATA_BYTES {
            return Err(Answer::MetadataTooLarge {
                oid: entry.oid.to_string(),
                kind: kind.to_string(),
                size,
            });
        }
    }
    Ok(())
}

/// The pack as the daemon got it back from the child.
#[derive(Debug)]
pub struct Indexed {
    /// The pack's data and index files in the quarantine (`None`: no objects).
    pub pack: Option<(PathBuf, PathBuf)>,
    /// The child's peak resident memory (`ru_maxrss`), in KiB.
    pub child_peak_kib: u64,
}

/// The program the child runs: this very binary, whatever became of its path on disk.
fn program() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// In the daemon: runs `job` in a child under the limits and waits for it. `work` (the
/// quarantine's directory) receives the child's stdout and stderr.
pub fn index(job: &Job, work: &Path) -> Result<Indexed, ImportError> {
    let started = std::time::Instant::now();
    let run = run_limited(job.args(), work, "indexer")
        .map_err(|(what, e)| ImportError::Objects(format!("{what} for indexing the pack: {e}")))?;
    let answer = run
        .out
        .lines()
        .find_map(|line| serde_json::from_str::<Answer>(line).ok());
    tracing::info!(
        child_peak_kib = run.peak_kib,
        elapsed_ms = started.elapsed().as_millis() as u64,
        thin = job.thin,
        outcome = answer.as_ref().map_or("none", answer_name),
        "pack indexed in a child process"
    );
    match answer {
        Some(answer) => from_answer(answer, run.peak_kib),
        None => Err(from_exit(run.status, &run.log)),
    }
}

/// A child's run under the limits: what it wrote (the first 64 KiB of each), how it ended.
pub(crate) struct ChildRun {
    pub out: String,
    pub log: String,
    pub status: libc::c_int,
    pub peak_kib: u64,
}

/// Runs this binary with `args` in a child under the resource limits, its environment empty,
/// its stdout and stderr into `work/NAME.out` and `.err`, and waits for it. `Err` names the
/// step that failed.
pub(crate) fn run_limited(
    args: Vec<OsString>,
    work: &Path,
    name: &str,
) -> Result<ChildRun, (&'static str, std::io::Error)> {
    let out_path = work.join(format!("{name}.out"));
    let err_path = work.join(format!("{name}.err"));
    let stdout = std::fs::File::create(&out_path).map_err(|e| ("a file", e))?;
    let stderr = std::fs::File::create(&err_path).map_err(|e| ("a file", e))?;
    let mut command = Command::new(program());
    command
        .args(args)
        .env_clear()
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    // SAFETY: the closure runs between fork and exec and only calls setrlimit(2), which is
    // async-signal-safe; it allocates nothing (an `io::Error` from an OS code does not).
    unsafe {
        command.pre_exec(limit_resources);
    }
    let child = command
        .spawn()
        .map_err(|e| ("starting a child process", e))?;
    let (status, usage) = wait4(child.id()).map_err(|e| ("waiting on the child", e))?;
    Ok(ChildRun {
        out: read_bounded(&out_path),
        log: read_bounded(&err_path),
        status,
        peak_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

fn answer_name(answer: &Answer) -> &'static str {
    match answer {
        Answer::Indexed { .. } => "indexed",
        Answer::Damaged { .. } => "damaged",
        Answer::BlobTooLarge { .. } => "blob_too_large",
        Answer::MetadataTooLarge { .. } => "metadata_too_large",
        Answer::OutOfMemory { .. } => "out_of_memory",
        Answer::Failed { .. } => "failed",
    }
}

fn memory_error(detail: &str) -> ImportError {
    ImportError::Limit(format!(
        "the pack needs more memory than zodex-prd allows its indexer ({} MiB){detail}",
        MEMORY_LIMIT_BYTES >> 20
    ))
}

fn from_answer(answer: Answer, child_peak_kib: u64) -> Result<Indexed, ImportError> {
    match answer {
        Answer::Indexed { data, index } => Ok(Indexed {
            pack: data.zip(index),
            child_peak_kib,
        }),
        Answer::Damaged { message } => Err(ImportError::Pack(message)),
        Answer::BlobTooLarge { oid, size } => Err(ImportError::BlobTooLarge {
            what: format!("blob {oid}"),
            size,
        }),
        Answer::MetadataTooLarge { oid, kind, size } => Err(ImportError::MetadataTooLarge {
            what: format!("object {oid}"),
            kind,
            size,
        }),
        Answer::OutOfMemory { message } => {
            tracing::warn!(%message, "the pack indexer ran out of memory");
            Err(memory_error(""))
        }
        Answer::Failed { message } => Err(ImportError::Objects(message)),
    }
}

/// A child that gave no answer: killed by a limit, or aborted.
fn from_exit(status: libc::c_int, log: &str) -> ImportError {
    let tail: String = {
        let lines: Vec<&str> = log.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" / ")
    };
    let out_of_memory = [
        "memory allocation",
        "Cannot allocate memory",
        "out of memory",
    ]
    .iter()
    .any(|needle| log.contains(needle));
    if libc::WIFSIGNALED(status) {
        match libc::WTERMSIG(status) {
            libc::SIGXCPU => {
                return ImportError::Limit(format!(
                    "indexing the pack took more than the {CPU_LIMIT_SECONDS} s of processor time zodex-prd allows"
                ));
            }
            libc::SIGXFSZ => {
                return ImportError::Limit(format!(
                    "the pack, with the bases it builds on added, grows past the {} MiB zodex-prd allows",
                    FILE_LIMIT_BYTES >> 20
                ));
            }
            libc::SIGKILL | libc::SIGABRT | libc::SIGSEGV | libc::SIGBUS => {
                return memory_error(if out_of_memory {
                    ""
                } else {
                    " (the indexer was stopped)"
                });
            }
            _ => {}
        }
    }
    if out_of_memory {
        return memory_error("");
    }
    ImportError::Objects(format!(
        "the pack indexer ended without an answer (wait status {status}): {tail}"
    ))
}

/// The first 64 KiB of a file the child wrote, as text.
fn read_bounded(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(64 * 1024).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn limit_resources() -> std::io::Result<()> {
    // (resource, soft, hard): past its soft limit on CPU time the child gets SIGXCPU, which
    // the parent names; SIGKILL follows only if it ignores that.
    let limits = [
        (libc::RLIMIT_DATA, MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES),
        (libc::RLIMIT_AS, ADDRESS_LIMIT_BYTES, ADDRESS_LIMIT_BYTES),
        (libc::RLIMIT_FSIZE, FILE_LIMIT_BYTES, FILE_LIMIT_BYTES),
        (libc::RLIMIT_CPU, CPU_LIMIT_SECONDS, CPU_LIMIT_SECONDS + 5),
        (libc::RLIMIT_CORE, 0, 0),
    ];
    for (resource, soft, hard) in limits {
        let limit = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct it is given; no memory is shared.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reaps `pid`, with its resource usage.
fn wait4(pid: u32) -> std::io::Result<(libc::c_int, libc::rusage)> {
    let pid = libc::pid_t::try_from(pid).map_err(std::io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            return Ok((status, usage));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
