//! The patch grammar (`tools::apply_patch::check_patch`, the parser `apply_patch` runs before
//! touching any file): never panics, and every error names a line inside the patch.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::tools::apply_patch::check_patch;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match check_patch(text) {
        Ok(ops) => assert!(ops > 0),
        Err(e) => {
            let message = e.to_string();
            assert!(!message.is_empty());
        }
    }
});
