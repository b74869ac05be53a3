//! The bundle header (`publisher::publish::bundle::read_header`): never panics; an accepted
//! header leaves the reader exactly at `pack_offset`, and the same prerequisites and refs
//! written by `write_header` read back to the same header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::protocol::bundle_header::{MAX_HEADER_BYTES, read_header, write_header};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let Ok(header) = read_header(&mut rest) else {
        return;
    };
    assert_eq!((data.len() - rest.len()) as u64, header.pack_offset);
    assert!(header.pack_offset <= MAX_HEADER_BYTES);
    let written = write_header(&header.prerequisites, &header.refs);
    let again = read_header(&mut &written[..]).expect("a written header reads back");
    assert_eq!(again.prerequisites, header.prerequisites);
    assert_eq!(again.refs, header.refs);
    assert_eq!(again.pack_offset, written.len() as u64);
});
