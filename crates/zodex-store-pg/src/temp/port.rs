//! A loopback port for a server that binds it later: the one `free_port` of the Rust code (the
//! tests, and `zodex dev` for the servers it starts).
//!
//! Asking the kernel for port 0 and releasing it leaves a window before the server binds it, in
//! which any other bind to port 0 or outgoing connection on the machine may be handed the same
//! port: both come from the kernel's ephemeral range. A port chosen at random below that range
//! is handed out by neither, so only a second explicit bind can take it meanwhile. That is rare,
//! not impossible: a caller whose child binds the port later still starts again on "address in
//! use" (`zodex dev` does).

use std::hash::BuildHasher;
use std::net::{Ipv4Addr, TcpListener};

/// The lowest port chosen: above the well-known and most registered service ports.
const LOWEST: u16 = 10_000;

/// A port on 127.0.0.1 that nothing listens on now, below the kernel's ephemeral range when
/// that range leaves room, else one the kernel picks.
pub fn free_port() -> std::io::Result<u16> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > LOWEST + 1_000 {
        let span = u64::from(ephemeral_low - LOWEST);
        // Different in each call and process (std's per-process random keys, and a counter).
        let random = std::collections::hash_map::RandomState::new();
        for attempt in 0..64u64 {
            let port = LOWEST + (random.hash_one(attempt) % span) as u16;
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_free_and_below_the_ephemeral_range() {
        let port = free_port().unwrap();
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("free");
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if low > LOWEST + 1_000 {
            assert!((LOWEST..low).contains(&port), "{port} is not below {low}");
        }
    }
}
