//! Timed pushes for the push benchmarks: one through `git-remote-zodex` and `zodex-prd` (a
//! single sprite's, or a fleet sprite's relay), one with plain git and a token, and the
//! medians of alternating rounds they are compared by.

#![allow(dead_code)]

use crate::support::devhub::git_command;
use crate::support::rig::Rig;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// The time of a run that must succeed (its stderr otherwise).
pub fn timed(f: impl FnOnce() -> (Output, Duration)) -> Duration {
    let (out, took) = f();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A push of `branch` (a new ref) with plain git and the writer's token, timed.
pub fn plain_push(app: &Path, url: &str, branch: &str) -> (Output, Duration) {
    let started = Instant::now();
    let out = git_command(app)
        .args(["push", "-q", url, &format!("{branch}:refs/heads/{branch}")])
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// Takes `branch` away again with plain git (untimed clean-up: the zodex path then does not
/// fetch the plain path's data into its mirror, so each path meets a quiet repository).
pub fn delete_branch(app: &Path, url: &str, branch: &str) {
    let out = git_command(app)
        .args(["push", "-q", url, &format!(":refs/heads/{branch}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "deleting {branch}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A push of `branch` through git-remote-zodex and zodex-prd, timed.
pub fn zodex_push(rig: &Rig, app: &Path, branch: &str) -> (Output, Duration) {
    zodex_push_as(rig, &rig.config, app, branch)
}

/// [`zodex_push`] as the agent of a sprite configured by `config` (a fleet sprite's, whose
/// agent socket is its relay's), against `rig`'s GitHub.
pub fn zodex_push_as(rig: &Rig, config: &Path, app: &Path, branch: &str) -> (Output, Duration) {
    let started = Instant::now();
    let mut cmd = rig.agent_git_command_as(app, config);
    if let Some(trace) = std::env::var_os("ZODEX_BENCH_GIT_TRACE") {
        cmd.env("GIT_TRACE2_PERF", trace);
    }
    let out = cmd
        .args([
            "push",
            "-q",
            "origin",
            &format!("{branch}:refs/heads/{branch}"),
        ])
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// A commit of one small file on a new branch from origin/main.
pub fn commit_small(app: &Path, branch: &str) {
    let run = |args: &[&str]| {
        let out = git_command(app).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
    };
    run(&["checkout", "-q", "-B", branch, "origin/main"]);
    std::fs::write(app.join(format!("{branch}.txt")), format!("{branch}\n")).unwrap();
    run(&["add", "."]);
    let commit = [
        "-c",
        "user.name=b",
        "-c",
        "user.email=b@e",
        "commit",
        "-q",
        "-m",
        branch,
    ];
    run(&commit);
}

/// Medians (baseline, measured) of `rounds` rounds in which each path runs once, alternating
/// which goes first: `run(round, measured)` times one run of the measured path (`true`: zodex
/// against plain git, the relay against a single sprite's publisher) or of the baseline.
pub fn alternating(
    rounds: usize,
    mut run: impl FnMut(usize, bool) -> Duration,
) -> (Duration, Duration) {
    let (mut baseline, mut measured) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for is_measured in [round % 2 == 0, round % 2 != 0] {
            let took = run(round, is_measured);
            match is_measured {
                true => measured.push(took),
                false => baseline.push(took),
            }
        }
    }
    (median(baseline), median(measured))
}
