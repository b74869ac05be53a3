//! git's remote-helper protocol (`agent::remote_helper::Helper`): the first line is the remote
//! URL, the rest what git sends on stdin. Never panics. No publisher listens on the socket, so
//! `list` and `push` end in a connection error before any git runs or anything is sent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use zodex::agent::remote_helper::Helper;

fuzz_target!(|data: &[u8]| {
    let (url, input) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(url) = std::str::from_utf8(url) else {
        return;
    };
    let socket = PathBuf::from("/nonexistent/zodex-fuzz/agent.sock");
    let Ok(mut helper) = Helper::new(url, socket, PathBuf::from("/nonexistent/zodex-fuzz")) else {
        return;
    };
    let mut out = Vec::new();
    let _ = helper.run(&mut &input[..], &mut out);
});
