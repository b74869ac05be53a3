//! `OWNER/NAME` (`engine::RepoName::parse`): never panics; an accepted name passes the owner and
//! name rules on its own, its key is lower case without `..`, and its display parses back to it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zodex::engine::RepoName;
use zodex::engine::repo::{validate_name, validate_owner};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match RepoName::parse(text) {
        Ok(repo) => {
            assert_eq!(validate_owner(repo.owner()), Ok(()));
            assert_eq!(validate_name(repo.name()), Ok(()));
            let key = repo.key();
            assert_eq!(key, key.to_ascii_lowercase());
            assert!(!key.contains(".."));
            assert!(key.is_ascii());
            assert_eq!(RepoName::parse(&repo.to_string()).as_ref(), Ok(&repo));
        }
        Err(e) => assert!(e.to_string().contains("OWNER/NAME"), "{e}"),
    }
});
