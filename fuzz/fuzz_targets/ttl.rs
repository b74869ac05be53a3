//! The TTL grammar (`engine::ttl`): never panics; whatever it accepts is a positive duration of
//! at most ten years that formats back to text parsing to the same duration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::engine::ttl::{format_duration, parse_ttl};

/// The grammar's ceiling: ten years of 366 days.
const TEN_YEARS: u64 = 10 * 366 * 24 * 3600;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_ttl(text) {
        Ok(duration) => {
            assert!(duration.as_secs() > 0 && duration.as_secs() <= TEN_YEARS);
            assert_eq!(duration.subsec_nanos(), 0);
            assert_eq!(parse_ttl(&format_duration(duration)), Ok(duration));
        }
        Err(e) => assert!(e.to_string().contains("1h30m"), "{e}"),
    }
});
