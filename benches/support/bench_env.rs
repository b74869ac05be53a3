//! What a bench reads from its environment.

#![allow(dead_code)] // each bench uses a part

/// `name` as a positive whole number, or `default` when it is unset; anything else stops the
/// bench with what was wrong (a figure is never made of a setting silently ignored).
pub fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => v
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{name}={v:?}: expected a positive whole number")),
    }
}
