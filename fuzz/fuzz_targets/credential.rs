//! git's credential protocol (`agent::credential::read_request`): never panics on any input;
//! a request read once, written back as `key=value` lines, reads back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::agent::credential::{CredentialRequest, read_request};

fuzz_target!(|data: &[u8]| {
    let Ok(request) = read_request(&mut &data[..]) else {
        return;
    };
    let mut text = String::new();
    for (key, value) in [
        ("protocol", &request.protocol),
        ("host", &request.host),
        ("path", &request.path),
        ("username", &request.username),
    ] {
        if let Some(value) = value {
            text.push_str(&format!("{key}={value}\n"));
        }
    }
    for capability in &request.capabilities {
        text.push_str(&format!("capability[]={capability}\n"));
    }
    let again: CredentialRequest = read_request(&mut text.as_bytes()).expect("reads back");
    assert_eq!(again, request);
});
