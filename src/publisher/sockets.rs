//! Unix sockets with peer-credential checks: the kernel's `SO_PEERCRED` says who is on the other
//! end; a peer not on the list is refused before one byte of its request is read. File modes
//! are a second layer, never the only one.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::net::{UnixListener, UnixStream};

/// Binds `path`, replacing a stale socket file left by a process that died, but refusing when
/// a live daemon still answers on it.
pub async fn bind(path: &Path, mode: u32) -> io::Result<UnixListener> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{} is in use by a running zodex-prd; stop it first (`zodex dev down` or your service manager)",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// The uid of the process on the other end of `stream`, as the kernel reports it.
pub fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    Ok(stream.peer_cred()?.uid())
}

/// Who may use the admin socket: root, the publisher's own uid, and configured operators.
pub fn admin_allowed(uid: u32, publisher_uid: u32, operator_uids: &[u32]) -> bool {
    uid == 0 || uid == publisher_uid || operator_uids.contains(&uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_accepts_root_self_and_operators_only() {
        assert!(admin_allowed(0, 500, &[]));
        assert!(admin_allowed(500, 500, &[]));
        assert!(admin_allowed(1000, 500, &[1000]));
        assert!(!admin_allowed(1001, 500, &[1000]));
    }

    #[tokio::test]
    async fn bind_replaces_a_stale_socket_but_not_a_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/admin.sock");
        let live = bind(&path, 0o600).await.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = bind(&path, 0o600).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        drop(live);
        // The file is still there but nobody answers: a stale socket.
        assert!(path.exists());
        bind(&path, 0o600).await.unwrap();
    }
}
