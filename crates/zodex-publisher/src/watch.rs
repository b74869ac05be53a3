//! `zodex-prd admin watch`: the board's stream ([`zodex_protocol::watch`]) asked of the admin
//! socket on the sprite, next to the daemon (the local socket is cheap, so it looks often).

use super::sockets::admin_call;
use std::path::PathBuf;
use zodex_protocol::watch::{AdminCall, Unreachable};
pub use zodex_protocol::watch::{Follow, FollowError, WatchError, WatchOptions};
use zodex_protocol::{AdminRequest, Response};

/// The daemon's admin socket, asked as its peer.
pub struct AdminSocket {
    pub path: PathBuf,
    pub publisher_uid: Option<u32>,
}

impl AdminCall for AdminSocket {
    fn call(&mut self, request: &AdminRequest) -> Result<Response, Unreachable> {
        let line = serde_json::to_string(request).expect("requests always serialise");
        admin_call(&self.path, self.publisher_uid, &line).map_err(|e| Unreachable {
            to: self.path.display().to_string(),
            detail: e.to_string(),
        })
    }
}

/// Watches the daemon at `socket` until `out` stops taking lines (`Ok`) or the daemon cannot
/// be reached or refuses (`Err`, after a `{"kind":"error"}` line the board can show).
pub fn run(
    options: &WatchOptions,
    mut socket: AdminSocket,
    calls: Option<&mut dyn Follow>,
    out: &mut impl std::io::Write,
) -> Result<(), WatchError> {
    zodex_protocol::watch::run(options, &mut socket, calls, out)
}
