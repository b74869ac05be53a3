//! The admin socket's request line and both sockets' response line (`protocol`): never
//! panic; a request or response that parses serialises and parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::protocol::{AdminRequest, Response, read_response};

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<AdminRequest>(data) {
        let again = serde_json::to_vec(&request).expect("requests serialise");
        assert_eq!(
            serde_json::from_slice::<AdminRequest>(&again).expect("reparses"),
            request
        );
    }
    if let Ok(response) = read_response(&mut &data[..]) {
        let line = response.to_line();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        // `result` is free JSON whose floats need not survive a second trip bit for bit.
        let again = read_response(&mut line.as_bytes()).expect("reparses");
        assert_eq!((again.ok, again.error), (response.ok, response.error));
    }
});
