//! Bundles as the agent side builds them: the new tips minus what GitHub already has, as a thin
//! pack behind a v2 bundle header. The publisher verifies everything again; this side only
//! keeps bundles small (never the whole history) and refuses early what cannot pass.

use crate::protocol::bundle_header::write_header;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The built-in bundle ceiling (128 MiB); an operator policy may lower it, never raise it.
pub const MAX_BUNDLE_BYTES: u64 = 128 * 1024 * 1024;

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

/// Builds a bundle carrying `tips` (`(oid, refname)`) minus everything reachable from `haves`
/// (ids GitHub has; those missing locally are ignored). `None` when GitHub already has every
/// object (a tag on a pushed commit, say). `progress` shows git's packing progress.
pub fn build(
    workdir: &Path,
    tips: &[(String, String)],
    haves: &[String],
    progress: bool,
) -> Result<Option<Built>, BundleBuildError> {
    let haves = existing(workdir, haves)?;
    let news: Vec<String> = tips.iter().map(|(oid, _)| oid.clone()).collect();
    let revs = rev_args(&news, &haves);
    let (prerequisites, needed) = boundary(workdir, &revs)?;
    if !needed {
        return Ok(None);
    }
    let mut file = tempfile::Builder::new()
        .prefix("zodex-bundle-")
        .tempfile()?;
    file.write_all(&write_header(&prerequisites, tips))?;
    file.flush()?;
    let mut child = git(workdir)
        .args([
            "pack-objects",
            "--stdout",
            // Not thin: a self-contained pack is verified by zodex-prd as a pure stream, in
            // little memory; the few bases it adds cost less than that.
            "--delta-base-offset",
            "--revs",
            if progress { "--progress" } else { "-q" },
        ])
        .stdin(Stdio::piped())
        // Opened for appending: the pack goes after the header.
        .stdout(std::fs::OpenOptions::new().append(true).open(file.path())?)
        .stderr(if progress {
            Stdio::inherit()
        } else {
            Stdio::piped()
        })
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
