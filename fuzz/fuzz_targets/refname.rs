//! Ref-name validation (`publisher::publish::valid_refname`): never panics, and agrees with the
//! real `git check-ref-format` on every name under `refs/` of at most 1024 bytes (longer names
//! are refused by us and need no git to compare).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::process::{Command, Stdio};
use zodex::publisher::publish::valid_refname;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let ours = valid_refname(name);
    if name.len() > 1024 {
        assert!(!ours);
        return;
    }
    if !name.starts_with("refs/") || name.contains('\0') {
        assert!(!ours);
        return;
    }
    let git = Command::new("git")
        .args(["check-ref-format", name])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git runs");
    assert_eq!(ours, git.success(), "{name:?}");
});
