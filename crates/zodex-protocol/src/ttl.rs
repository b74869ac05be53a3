//! The lifetime a request asks for, as it travels: the grammar people type (`30m`, `2h`,
//! `--no-ttl`) is parsed by `engine::ttl`; the default is the publisher's to decide.

use serde::{Deserialize, Serialize};

/// A lifetime as requested: a number of seconds, the explicit `--no-ttl` opt-out, or the
/// publisher's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ttl {
    Seconds(i64),
    NoTtl,
    /// Whatever the publisher's default is for the request (30 minutes for a push grant or
    /// request, 2 hours for a YOLO scope): decided on the server, not by each client.
    Default,
}
