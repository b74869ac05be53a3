//! Cost grows with the change, not the repository: a 1 MiB push through `git-remote-zodex` and
//! `zodex-prd`, and a `publish-pr` of the same size, into a devhub repository with a long
//! history (`demo/lib`, given 100,000 commits and about 1 GiB of packed history), against the
//! same into a fresh one (`demo/app`, three commits), mirror warm, alternating, median of
//! `ROUNDS`. The cold mirror's first fetch of the long history is reported on its own.
//!
//! The long history is made once with `git fast-import` (a stream of commits each changing one
//! file of random, incompressible data) and kept under `target/bench-fixtures/`; devhub's
//! repository and the agent's checkout borrow its objects through `objects/info/alternates`,
//! so neither copies it. The publisher's mirror fetches it as it would from GitHub: its first
//! fetch takes the tips, and it is deepened to every commit (no tree, no blob) after the push.
//!
//! Knobs: `ZODEX_BENCH_HISTORY_COMMITS` (default 100000), `ZODEX_BENCH_HISTORY_MIB` (default
//! 1024; making it takes about a minute on two cores, the cold fetch one to two more),
//! `ZODEX_BENCH_HISTORY_ROUNDS` (default 5).
//!
//! Run: `cargo bench --bench push_history`.

#[path = "support/bench_line.rs"]
mod bench_line;
#[path = "support/changes.rs"]
mod changes;
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::devhub::git_command;
use support::rig::Rig;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Runs git in `dir`; must succeed; returns stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The bare repository holding the long history, made once and kept.
fn fixture(commits: usize, mib: usize) -> PathBuf {
    let root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("bench-fixtures");
    let path = root.join(format!("history-{commits}c-{mib}m.git"));
    if path.join("zodex-fixture-complete").exists() {
        if !has_bitmap(&path) {
            // Made by an earlier version of this bench: served as GitHub serves it from now on.
            serve_like_github(&path);
        }
        println!("long history: reusing {}", path.display());
        return path;
    }
    std::fs::create_dir_all(&root).unwrap();
    let building = root.join(format!("history-{commits}c-{mib}m.building"));
    let _ = std::fs::remove_dir_all(&building);
    git(&root, &["init", "-q", "--bare", building.to_str().unwrap()]);
    let started = Instant::now();
    let mut child = git_command(&building)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut input = std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().unwrap());
        let per = (mib << 20) / commits.max(1);
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..commits {
            let message = format!("change {i}\n");
            write!(
                input,
                "commit refs/heads/main\ncommitter Bench <bench@zodex.invalid> {} +0000\ndata {}\n{message}",
                1_500_000_000 + i,
                message.len()
            )
            .unwrap();
            let data = changes::random_bytes(per, &mut seed);
            write!(
                input,
                "M 100644 inline d{}/f{}.bin\ndata {}\n",
                i % 64,
                i % 1024,
                data.len()
            )
            .unwrap();
            input.write_all(&data).unwrap();
            input.write_all(b"\n\n").unwrap();
        }
        input.flush().unwrap();
    }
    assert!(child.wait().unwrap().success(), "git fast-import failed");
    serve_like_github(&building);
    std::fs::write(building.join("zodex-fixture-complete"), "").unwrap();
    let _ = std::fs::remove_dir_all(&path);
    std::fs::rename(&building, &path).unwrap();
    println!(
        "long history: {commits} commits, {mib} MiB made in {:.1} s at {}",
        started.elapsed().as_secs_f64(),
        path.display()
    );
    path
}

/// What GitHub keeps for a repository it serves: its objects repacked into one pack in git's
/// order (commits first, not interleaved with blobs as `fast-import` wrote them), a
/// reachability bitmap and a commit graph. Without them the stand-in spends on each fetch what
/// GitHub does not (about 1 s of a treeless fetch of this history went to enumerating and
/// gathering commits from the fast-import pack). About 15 s, once.
fn serve_like_github(repo: &Path) {
    let started = Instant::now();
    git(repo, &["repack", "-a", "-d", "-q", "--write-bitmap-index"]);
    git(repo, &["commit-graph", "write", "--reachable"]);
    println!(
        "long history: repacked with a bitmap in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn has_bitmap(repo: &Path) -> bool {
    std::fs::read_dir(repo.join("objects/pack"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".bitmap"))
}

/// The bytes under `dir`, in MiB (files only; what `du --apparent-size` counts).
fn dir_mib(dir: &Path) -> f64 {
    fn walk(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| match entry.file_type() {
                Ok(t) if t.is_dir() => walk(&entry.path()),
                Ok(t) if t.is_file() => entry.metadata().map_or(0, |m| m.len()),
                _ => 0,
            })
            .sum()
    }
    walk(dir) as f64 / (1024.0 * 1024.0)
}

/// Points `repo`'s object store at `fixture`'s (an alternate) and its `main` at the fixture's.
fn borrow(repo: &Path, fixture: &Path) -> String {
    let objects = std::fs::canonicalize(fixture.join("objects")).unwrap();
    let info = repo.join("objects/info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("alternates"), format!("{}\n", objects.display())).unwrap();
    git(fixture, &["rev-parse", "refs/heads/main"])
}

/// Someone else's commit on `bare`'s main: a new file of 4 KiB beside the tip's tree.
fn someone_else_pushes(bare: &Path, round: usize, seed: &mut u64) {
    let mut blob = git_command(bare)
        .args(["hash-object", "-w", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    blob.stdin
        .take()
        .unwrap()
        .write_all(&changes::random_bytes(4096, seed))
        .unwrap();
    let out = blob.wait_with_output().unwrap();
    assert!(out.status.success());
    let blob = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut listing = git(bare, &["ls-tree", "refs/heads/main"]);
    listing.push_str(&format!("\n100644 blob {blob}\tother-{round}.bin\n"));
    let mut mktree = git_command(bare)
        .arg("mktree")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    mktree
        .stdin
        .take()
        .unwrap()
        .write_all(listing.as_bytes())
        .unwrap();
    let out = mktree.wait_with_output().unwrap();
    assert!(out.status.success());
    let tree = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let commit = git(
        bare,
        &[
            "-c",
            "user.name=other",
            "-c",
            "user.email=o@e",
            "commit-tree",
            &tree,
            "-p",
            "refs/heads/main",
            "-m",
            "someone else",
        ],
    );
    git(bare, &["update-ref", "refs/heads/main", &commit]);
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One timed run of `run`, which must succeed.
/// How long after now the mirror at `mirror` stops being shallow (its first fetch took the
/// tips alone; zodex-prd deepens it after the push).
fn deepened_after(mirror: &Path) -> Duration {
    let started = Instant::now();
    while mirror.join("shallow").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the mirror at {} was not deepened",
            mirror.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

fn timed(run: impl FnOnce() -> std::process::Output, rig: &Rig) -> Duration {
    let started = Instant::now();
    let out = run();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        rig.log()
    );
    took
}

fn main() {
    let commits = env_or("ZODEX_BENCH_HISTORY_COMMITS", 100_000);
    let mib = env_or("ZODEX_BENCH_HISTORY_MIB", 1024);
    let rounds = env_or("ZODEX_BENCH_HISTORY_ROUNDS", 5).max(1);
    let fixture = fixture(commits, mib);

    let rig = Rig::start(Duration::from_secs(3600));
    rig.grant_push("demo/app");
    rig.grant_push("demo/lib");
    // devhub's demo/lib becomes the long history.
    let tip = borrow(&rig.bare("lib"), &fixture);
    git(&rig.bare("lib"), &["update-ref", "refs/heads/main", &tip]);
    let work = tempfile::tempdir().unwrap();
    let fresh = rig.clone(work.path(), "app");
    // The agent's checkout of the long history: its objects borrowed, its refs fetched (git
    // finds every object already there and transfers none).
    let long = work.path().join("lib");
    git(work.path(), &["init", "-q", long.to_str().unwrap()]);
    borrow(&long.join(".git"), &fixture);
    let url = format!("{}/demo/lib.git", rig.demo.hub.git_url());
    git(&long, &["remote", "add", "origin", &url]);
    let fetched = rig.agent_git(&long, &["fetch", "-q", "origin"]);
    assert!(
        fetched.status.success(),
        "{}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    git(&long, &["checkout", "-q", "-B", "main", "origin/main"]);

    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let push = |dir: &Path, branch: &str| {
        let refspec = format!("{branch}:refs/heads/{branch}");
        rig.agent_git(dir, &["push", "-q", "origin", &refspec])
    };

    // The cold mirror: the first push into each repository fetches its commits (no tree, no
    // blob). Made cold again for each round (the daemon makes a missing mirror anew).
    let mirrors = rig.dir.path().join("state/mirrors/demo");
    let cold_rounds = rounds.min(3);
    let (mut cold_on_long, mut cold_on_fresh, mut deepening) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..cold_rounds {
        for name in ["lib.git", "app.git"] {
            let _ = std::fs::remove_dir_all(mirrors.join(name));
        }
        let branch = format!("cold-{round}");
        changes::commit_change(&long, &branch, 1, &mut seed);
        changes::commit_change(&fresh, &branch, 1, &mut seed);
        // After each first push the mirror deepens itself in the background (its first fetch
        // took the tips alone): that is waited for before the next push is timed, so it is
        // never measured as part of another push.
        let cold = |dir: &Path, name: &str| {
            let took = timed(|| push(dir, &branch), &rig);
            let deepened = deepened_after(&mirrors.join(name));
            (took, deepened)
        };
        let ((long_took, long_deepened), (fresh_took, _)) = if round % 2 == 0 {
            let long = cold(&long, "lib.git");
            (long, cold(&fresh, "app.git"))
        } else {
            let fresh = cold(&fresh, "app.git");
            (cold(&long, "lib.git"), fresh)
        };
        cold_on_long.push(long_took);
        cold_on_fresh.push(fresh_took);
        deepening.push(long_deepened);
    }
    println!(
        "the long history's mirror was whole {:.0} ms (median) after its first push was answered",
        ms(median(deepening))
    );
    let (cold_long, cold_fresh) = (median(cold_on_long), median(cold_on_fresh));
    println!(
        "first push (cold mirror, median of {cold_rounds}): long history {:.0} ms, fresh {:.0} ms",
        ms(cold_long),
        ms(cold_fresh)
    );
    // Issue 26: ≤ 3× the same push into a fresh repository (52× with a full-clone mirror).
    bench_line::BenchLine {
        name: "push_history_cold_mirror_first_push",
        unit: "ms",
        value: ms(cold_long),
        baseline: Some(ms(cold_fresh)),
        max_ratio: Some(3.0),
        max_value: None,
        max_added: None,
    }
    .print();
    // What the mirror holds after it, against the history it mirrors (a full clone's size).
    let mirror = rig.dir.path().join("state/mirrors/demo/lib.git");
    let (held, history) = (dir_mib(&mirror), dir_mib(&fixture.join("objects")));
    println!("the mirror after its first push: {held:.1} MiB, of {history:.1} MiB of history");
    bench_line::BenchLine {
        name: "push_history_mirror_disk_vs_history",
        unit: "MiB",
        value: held,
        baseline: Some(history),
        max_ratio: None,
        max_value: None,
        max_added: None,
    }
    .print();

    println!(
        "1 MiB into {commits} commits / {mib} MiB of history vs a fresh repository, mirror warm (median of {rounds})"
    );
    let mut results = Vec::new();
    for kind in ["push", "publish_pr"] {
        let (mut on_long, mut on_fresh) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let branch = format!("{kind}-{round}");
            changes::commit_change(&long, &branch, 1, &mut seed);
            changes::commit_change(&fresh, &branch, 1, &mut seed);
            let run = |dir: &Path, repo: &str| match kind {
                "push" => push(dir, &branch),
                _ => rig.agent(dir, &["publish-pr", "--repo", repo, "--title", &branch]),
            };
            if round % 2 == 0 {
                on_long.push(timed(|| run(&long, "demo/lib"), &rig));
                on_fresh.push(timed(|| run(&fresh, "demo/app"), &rig));
            } else {
                on_fresh.push(timed(|| run(&fresh, "demo/app"), &rig));
                on_long.push(timed(|| run(&long, "demo/lib"), &rig));
            }
        }
        let (l, f) = (median(on_long), median(on_fresh));
        println!(
            "  {kind:<10} long history {:>8.0} ms   fresh {:>8.0} ms   {:.2}x",
            ms(l),
            ms(f),
            l.as_secs_f64() / f.as_secs_f64()
        );
        results.push((kind, l, f));
    }
    // A busy repository: someone else pushed to main just before each push (a commit adding a
    // file, written straight into devhub's repository). The mirror fetches that commit alone.
    let (mut busy_long, mut busy_fresh) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let branch = format!("busy-{round}");
        changes::commit_change(&long, &branch, 1, &mut seed);
        changes::commit_change(&fresh, &branch, 1, &mut seed);
        for name in ["lib", "app"] {
            someone_else_pushes(&rig.bare(name), round, &mut seed);
        }
        if round % 2 == 0 {
            busy_long.push(timed(|| push(&long, &branch), &rig));
            busy_fresh.push(timed(|| push(&fresh, &branch), &rig));
        } else {
            busy_fresh.push(timed(|| push(&fresh, &branch), &rig));
            busy_long.push(timed(|| push(&long, &branch), &rig));
        }
    }
    let (l, f) = (median(busy_long), median(busy_fresh));
    println!(
        "  push after another client's push: long history {:>6.0} ms   fresh {:>6.0} ms   {:.2}x",
        ms(l),
        ms(f),
        l.as_secs_f64() / f.as_secs_f64()
    );
    results.push(("push_after_another_push", l, f));
    for (kind, l, f) in results {
        bench_line::BenchLine {
            name: &format!("{kind}_1mib_long_history_vs_fresh"),
            unit: "ms",
            value: ms(l),
            baseline: Some(ms(f)),
            max_ratio: Some(1.2),
            max_value: None,
            max_added: None,
        }
        .print();
    }
    if std::env::var_os("ZODEX_BENCH_STAGES").is_some() {
        for line in rig.log().lines().filter(|l| l.contains("push handled")) {
            println!("  {line}");
        }
    }
}
