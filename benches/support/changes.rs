//! Fresh changes for the push benchmarks: incompressible data in 1 MiB files, committed on a
//! new branch from `origin/main`.

#![allow(dead_code)]

use crate::support::devhub::git_command;
use std::path::Path;

const MIB: usize = 1 << 20;

pub fn random_bytes(n: usize, seed: &mut u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        // xorshift64*: fast and incompressible enough for zlib.
        *seed ^= *seed >> 12;
        *seed ^= *seed << 25;
        *seed ^= *seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Commits `mib` files of 1 MiB each on a new branch from origin/main.
pub fn commit_change(dir: &Path, branch: &str, mib: usize, seed: &mut u64) {
    let run = |args: &[&str]| {
        let out = git_command(dir).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["checkout", "-q", "-B", branch, "origin/main"]);
    let data = dir.join("data").join(branch);
    std::fs::create_dir_all(&data).unwrap();
    for i in 0..mib {
        std::fs::write(data.join(format!("{i}.bin")), random_bytes(MIB, seed)).unwrap();
    }
    run(&["add", "data"]);
    run(&[
        "-c",
        "user.name=bench",
        "-c",
        "user.email=b@e",
        "commit",
        "-q",
        "-m",
        branch,
    ]);
}
