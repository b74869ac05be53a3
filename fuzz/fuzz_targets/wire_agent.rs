//! The agent socket's framing (`protocol`), read the way the daemon reads it: the fixed
//! header, then `metadata_len` bytes of JSON. Never panics; a header that decodes re-encodes to
//! the same bytes, its metadata length is within the cap, and a request that parses serialises
//! and parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::protocol::{AGENT_HEADER_LEN, AgentHeader, AgentRequest, MAX_REQUEST_BYTES};

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<AGENT_HEADER_LEN>() else {
        return;
    };
    let Ok(header) = AgentHeader::decode(head) else {
        return;
    };
    assert_eq!(&header.encode(), head);
    assert!(header.metadata_len as usize <= MAX_REQUEST_BYTES);
    let Some(metadata) = rest.get(..header.metadata_len as usize) else {
        return;
    };
    if let Ok(request) = serde_json::from_slice::<AgentRequest>(metadata) {
        let again = serde_json::to_vec(&request).expect("requests serialise");
        assert_eq!(
            serde_json::from_slice::<AgentRequest>(&again).expect("reparses"),
            request
        );
    }
});
