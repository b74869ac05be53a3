//! The clock a test sets: a test build of zodex-prd adds the whole seconds its
//! `test_clock_file` holds to the system's time (`publisher::clock`), so a TTL or expiry test
//! moves that file forward instead of sleeping through the TTL. [`super::rig::Rig`] and
//! [`super::dev::Dev`] each name one in their `zodex.toml`.

use std::path::Path;

/// Moves the clock of the publisher reading `file` `seconds` ahead of where it stands. The new
/// offset replaces the old one at once (a rename), so a publisher never reads a half-written
/// file and sees time go back.
pub fn advance(file: &Path, seconds: i64) {
    let now: i64 = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let next = file.with_extension("next");
    std::fs::write(&next, format!("{}\n", now + seconds)).unwrap();
    std::fs::rename(&next, file).unwrap();
}
