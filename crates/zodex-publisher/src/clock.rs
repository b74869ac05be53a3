//! The publisher's clock: the system's, in whole seconds since the Unix epoch — and, in a test
//! build only, plus the offset a test rig writes into a file (`test_clock_file` in
//! zodex.toml), so TTL and expiry tests advance time instead of sleeping through it. A release
//! build refuses that setting (`Config::load`): no configuration can move a sprite's clock.

use std::path::PathBuf;

/// Seconds since the Unix epoch, as the system says.
pub fn system_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Where the publisher reads the time.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// A test build's offset file: whole seconds to add (absent or unreadable: none).
    offset_file: Option<PathBuf>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// The system clock plus the seconds `file` holds (a test build's rig advances it).
    pub fn offset_by(file: PathBuf) -> Self {
        Self {
            offset_file: Some(file),
        }
    }

    pub fn now(&self) -> i64 {
        system_now().saturating_add(self.offset())
    }

    fn offset(&self) -> i64 {
        // Release builds never get here with a file (the configuration refuses it); the check
        // keeps it so even if one did.
        if !cfg!(debug_assertions) {
            return 0;
        }
        self.offset_file
            .as_ref()
            .and_then(|file| std::fs::read_to_string(file).ok())
            .and_then(|text| text.trim().parse::<i64>().ok())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_build_adds_the_offset_its_file_holds_and_nothing_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("offset");
        let clock = Clock::offset_by(file.clone());
        let before = system_now();
        assert!((clock.now() - before).abs() <= 1, "no file: no offset");
        std::fs::write(&file, "3600\n").unwrap();
        assert!((clock.now() - before - 3600).abs() <= 1);
        std::fs::write(&file, "not a number").unwrap();
        assert!((clock.now() - before).abs() <= 1, "unreadable: no offset");
        assert!((Clock::system().now() - before).abs() <= 1);
    }
}
