//! Bundles as the agent side builds them: the new tips minus what GitHub already has, as a thin
//! pack behind a v2 bundle header. The publisher verifies everything again; this side only
//! keeps bundles small (never the whole history) and refuses early what cannot pass.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use zodex_protocol::bundle_header::write_header;

/// The built-in bundle ceiling (128 MiB); an operator policy may lower it, never raise it.
pub const MAX_BUNDLE_BYTES: u64 = zodex_protocol::MAX_BUNDLE_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum BundleBuildError {
    #[error("git {what} failed: {message}")]
    Git { what: String, message: String },
    #[error(
        "the bundle is {0} bytes, over the 134217728-byte (128 MiB) ceiling; push fewer or smaller commits at a time (git-lfs keeps large files)"
    )]
    TooLarge(u64),
    #[error("writing the bundle failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A bundle on disk, ready to send.
pub struct Built {
    pub file: tempfile::NamedTempFile,
    pub len: u64,
    pub prerequisites: Vec<String>,
}

/// A `git` command in `workdir` (the user's own configuration applies: it is their checkout).
pub fn git(workdir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(workdir).stdin(Stdio::null());
    cmd
}

/// Runs `git args…` and returns its trimmed stdout.
pub fn git_output(workdir: &Path, args: &[&str]) -> Result<String, BundleBuildError> {
    let out = git(workdir).args(args).output()?;
    if !out.status.success() {
        return Err(BundleBuildError::Git {
            what: args.first().copied().unwrap_or_default().to_string(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The subset of `oids` that exist in the local repository.
pub fn existing(workdir: &Path, oids: &[String]) -> Result<Vec<String>, BundleBuildError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let mut child = git(workdir)
        .args(["cat-file", "--batch-check=%(objectname) %(objecttype)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let writer = feed(&mut child, oids.iter().map(|o| format!("{o}\n")).collect());
    let stdout = child.stdout.take().expect("piped");
    let found = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.ends_with(" missing"))
        .filter_map(|l| l.split(' ').next().map(str::to_string))
        .collect();
    let _ = writer.join();
    child.wait()?;
    Ok(found)
}

/// Writes `input` to the child's stdin from a thread, so that reading its stdout meanwhile
/// cannot deadlock; the pipe closes when the thread is done.
fn feed(
    child: &mut std::process::Child,
    input: String,
) -> std::thread::JoinHandle<std::io::Result<()>> {
    let mut stdin = child.stdin.take().expect("stdin is piped");
    std::thread::spawn(move || stdin.write_all(input.as_bytes()))
}

/// `git rev-list --stdin` arguments: the new tips, minus what GitHub has.
fn rev_args(news: &[String], haves: &[String]) -> String {
    let mut input = String::new();
    for oid in news {
        input.push_str(&format!("{oid}\n"));
    }
    for oid in haves {
        input.push_str(&format!("^{oid}\n"));
    }
    input
}

/// Prerequisites (boundary commits) and whether any object is missing from `haves`.
fn boundary(workdir: &Path, revs: &str) -> Result<(Vec<String>, bool), BundleBuildError> {
    let mut child = git(workdir)
        .args(["rev-list", "--objects", "--boundary", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let writer = feed(&mut child, revs.to_string());
    let mut prerequisites = Vec::new();
    let mut needed = false;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        match line.strip_prefix('-') {
            Some(oid) => prerequisites.push(oid.to_string()),
            None if !line.is_empty() => needed = true,
            None => {}
        }
    }
    let _ = writer.join();
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(BundleBuildError::Git {
            what: "rev-list".into(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok((prerequisites, needed))
}

/// What a bundle of `tips` minus what `haves` reach is made of: its prerequisites and the
/// `rev-list` input of its pack; `None` when GitHub already has every object.
fn plan(
    workdir: &Path,
    tips: &[(String, String)],
    haves: &[String],
) -> Result<Option<(Vec<String>, String)>, BundleBuildError> {
    let haves = existing(workdir, haves)?;
    let news: Vec<String> = tips.iter().map(|(oid, _)| oid.clone()).collect();
    let revs = rev_args(&news, &haves);
    let (prerequisites, needed) = boundary(workdir, &revs)?;
    Ok(needed.then_some((prerequisites, revs)))
}

/// A bundle being written: its header, and `git pack-objects` writing its pack. The first
/// bytes of the pack are read before anything is sent, so that the request goes out only
/// when the pack flows (`pack-objects` first searches for deltas, for seconds on a large
/// change, writing nothing) and zodex-prd's pace rule measures the sending, not the packing.
pub struct Streaming {
    header: Vec<u8>,
    first: Vec<u8>,
    child: std::process::Child,
    stdout: std::process::ChildStdout,
}

/// Starts a bundle carrying `tips` minus what `haves` reach, as [`build`] does, its pack to be
/// sent as it is written ([`Streaming::send`]). `None` when GitHub already has every object.
pub fn start(
    workdir: &Path,
    tips: &[(String, String)],
    haves: &[String],
    progress: bool,
) -> Result<Option<Streaming>, BundleBuildError> {
    let Some((prerequisites, revs)) = plan(workdir, tips, haves)? else {
        return Ok(None);
    };
    let mut child = pack_objects(workdir, progress)
        .stdout(Stdio::piped())
        .spawn()?;
    let _ = feed(&mut child, revs).join();
    let mut stdout = child.stdout.take().expect("piped");
    let mut first = vec![0u8; 64 * 1024];
    let n = read_some(&mut stdout, &mut first)?;
    first.truncate(n);
    let mut streaming = Streaming {
        header: write_header(&prerequisites, tips),
        first,
        child,
        stdout,
    };
    if n == 0 {
        // Nothing was written: pack-objects failed; its error says why.
        streaming.wait()?;
        return Err(BundleBuildError::Git {
            what: "pack-objects".into(),
            message: "it wrote no pack".into(),
        });
    }
    Ok(Some(streaming))
}

/// One read, retried when interrupted.
fn read_some(from: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match from.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

impl Streaming {
    /// Sends the bundle as chunks (see [`zodex_protocol::STREAMED_BUNDLE`]) as pack-objects
    /// writes it, and its end chunk once pack-objects succeeded. Past the ceiling, or when
    /// pack-objects fails, it stops without the end chunk (zodex-prd then keeps nothing) and
    /// says why. `sent` is told the bytes sent so far. Returns the bundle's length.
    pub fn send(
        mut self,
        out: &mut impl Write,
        mut sent: impl FnMut(u64),
    ) -> Result<u64, BundleBuildError> {
        use zodex_protocol::{end_chunks, write_chunk};
        let mut total = (self.header.len() + self.first.len()) as u64;
        write_chunk(out, &self.header)?;
        write_chunk(out, &self.first)?;
        sent(total);
        let mut buf = std::mem::take(&mut self.first);
        buf.resize(256 * 1024, 0);
        loop {
            let n = read_some(&mut self.stdout, &mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > MAX_BUNDLE_BYTES {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(BundleBuildError::TooLarge(total));
            }
            write_chunk(out, &buf[..n])?;
            sent(total);
        }
        self.wait()?;
        end_chunks(out)?;
        out.flush()?;
        Ok(total)
    }

    /// Waits for pack-objects; its failure is an error.
    fn wait(&mut self) -> Result<(), BundleBuildError> {
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        let status = self.child.wait()?;
        if !status.success() {
            return Err(BundleBuildError::Git {
                what: "pack-objects".into(),
                message: stderr.trim().to_string(),
            });
        }
        Ok(())
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        // A bundle abandoned half-sent: pack-objects must not write on into a closed pipe.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `git pack-objects` writing a bundle's pack to stdout, the revisions on stdin. Not thin: a
/// self-contained pack is verified by zodex-prd as a pure stream, in little memory; the few
/// bases it adds cost less than that.
fn pack_objects(workdir: &Path, progress: bool) -> Command {
    let mut cmd = git(workdir);
    cmd.args([
        "pack-objects",
        "--stdout",
        "--delta-base-offset",
        "--revs",
        if progress { "--progress" } else { "-q" },
    ])
    .stdin(Stdio::piped())
    .stderr(if progress {
        Stdio::inherit()
    } else {
        Stdio::piped()
    });
    cmd
}

/// Builds a bundle carrying `tips` (`(oid, refname)`) minus everything reachable from `haves`
/// (ids GitHub has; those missing locally are ignored). `None` when GitHub already has every
/// object (a tag on a pushed commit, say). `progress` shows git's packing progress.
pub fn build(
    workdir: &Path,
    tips: &[(String, String)],
    haves: &[String],
    progress: bool,
) -> Result<Option<Built>, BundleBuildError> {
    let Some((prerequisites, revs)) = plan(workdir, tips, haves)? else {
        return Ok(None);
    };
    let mut file = tempfile::Builder::new()
        .prefix("zodex-bundle-")
        .tempfile()?;
    file.write_all(&write_header(&prerequisites, tips))?;
    file.flush()?;
    let mut child = pack_objects(workdir, progress)
        // Opened for appending: the pack goes after the header.
        .stdout(std::fs::OpenOptions::new().append(true).open(file.path())?)
        .spawn()?;
    let _ = feed(&mut child, revs).join();
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(BundleBuildError::Git {
            what: "pack-objects".into(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let len = file.as_file().metadata()?.len();
    if len > MAX_BUNDLE_BYTES {
        return Err(BundleBuildError::TooLarge(len));
    }
    Ok(Some(Built {
        file,
        len,
        prerequisites,
    }))
}
