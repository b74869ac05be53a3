//! Unix sockets with peer-credential checks, both ways.
//!
//! - Serving: the kernel's `SO_PEERCRED` says who is on the other end; a peer not on the list
//!   is refused before one byte of its request is read. File modes are a second layer, never
//!   the only one.
//! - Binding: the socket's directory must be private to the publisher (no group or other
//!   write, owned by the publisher or root, not a symlink), and the socket is created with its
//!   final mode in a fresh private directory beside its path, then renamed into place: no one
//!   can connect while the mode is still wrong, and no mode is ever set on a path someone else
//!   could have swapped.
//! - Connecting as an operator: [`check_server`] asks the kernel who serves the admin socket
//!   before anything is sent, so a squatter on the path cannot read requests or fake answers.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::{UnixListener, UnixStream};

/// Why a socket's place is not safe to serve from.
#[derive(Debug, thiserror::Error)]
pub enum SocketPathError {
    #[error(
        "{path} is a symbolic link; a socket directory and a socket must be real paths: point the configuration at the real location"
    )]
    Symlink { path: PathBuf },
    #[error(
        "the socket directory {dir} is writable by {who} (mode {mode:o}); anyone who can write there can replace the socket: `chmod go-w {dir}`, or use a directory only the publisher can write"
    )]
    Writable {
        dir: PathBuf,
        who: &'static str,
        mode: u32,
    },
    #[error(
        "the socket directory {dir} belongs to uid {owner}, not to the publisher (uid {publisher}) or root; its owner could replace the socket: use a directory owned by the publisher user"
    )]
    Owner {
        dir: PathBuf,
        owner: u32,
        publisher: u32,
    },
    #[error(
        "{path} exists and is not a socket; zodex-prd does not replace other files: move it away or configure another socket path"
    )]
    NotASocket { path: PathBuf },
    #[error("{path} has no parent directory; configure an absolute socket path")]
    NoParent { path: PathBuf },
}

impl From<SocketPathError> for io::Error {
    fn from(err: SocketPathError) -> Self {
        io::Error::new(io::ErrorKind::PermissionDenied, err)
    }
}

/// Checks that `dir` (a socket's directory) cannot be written by anyone but `publisher_uid`
/// (or root): not a symlink, no group or other write bit, owned by the publisher or root.
pub fn check_socket_dir(dir: &Path, publisher_uid: u32) -> Result<(), io::Error> {
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(SocketPathError::Symlink {
            path: dir.to_path_buf(),
        }
        .into());
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(SocketPathError::Writable {
            dir: dir.to_path_buf(),
            who: if mode & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            mode,
        }
        .into());
    }
    if meta.uid() != publisher_uid && meta.uid() != 0 {
        return Err(SocketPathError::Owner {
            dir: dir.to_path_buf(),
            owner: meta.uid(),
            publisher: publisher_uid,
        }
        .into());
    }
    Ok(())
}

/// Binds `path` with `mode`, replacing a stale socket file left by a process that died, but
/// refusing when a live daemon still answers on it, when its directory is not private to the
/// publisher (see [`check_socket_dir`]), or when the path is a symlink or not a socket. A
/// missing directory is created with mode 0755 (the agent must reach its socket; who may talk
/// is decided by peer credentials and the socket's own mode).
pub async fn bind(path: &Path, mode: u32) -> io::Result<UnixListener> {
    let publisher_uid = nix::unistd::geteuid().as_raw();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| SocketPathError::NoParent {
            path: path.to_path_buf(),
        })?;
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)?;
    }
    check_socket_dir(dir, publisher_uid)?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if meta.file_type().is_symlink() {
            return Err(SocketPathError::Symlink {
                path: path.to_path_buf(),
            }
            .into());
        }
        if !meta.file_type().is_socket() {
            return Err(SocketPathError::NotASocket {
                path: path.to_path_buf(),
            }
            .into());
        }
        if UnixStream::connect(path).await.is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{} is in use by a running zodex-prd; stop it first (`zodex dev down` or your service manager)",
                    path.display()
                ),
            ));
        }
    }
    // Bind inside a fresh directory only this process can enter (0700), give the socket its
    // mode there, then rename it over the final path (atomic; it replaces a stale socket).
    let private = tempfile::Builder::new()
        .prefix(".zodex-bind-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(dir)?;
    let staged = private.path().join("s");
    let listener = std::os::unix::net::UnixListener::bind(&staged)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
    std::fs::rename(&staged, path)?;
    drop(private);
    listener.set_nonblocking(true)?;
    UnixListener::from_std(listener)
}

/// Writes `response` if the socket takes it without waiting (a short line always does on a
/// fresh connection), then closes: the answer to a peer refused before it holds anything.
pub fn answer_now(stream: &UnixStream, response: &zodex_protocol::Response) {
    let _ = stream.try_write(response.to_line().as_bytes());
}

/// The answer to a peer whose uid may not use the `socket` ("admin", "agent") socket; `who`
/// is the user it must run as ("operator", "agent"). `serve` and `relay` say the same.
pub fn peer_refused(uid: u32, socket: &str, who: &str) -> zodex_protocol::Response {
    zodex_protocol::Response::error(
        zodex_protocol::ErrorKind::Forbidden,
        format!(
            "uid {uid} may not use the zodex-prd {socket} socket; run this as the configured {who} user"
        ),
    )
}

/// The uid of the process on the other end of `stream`, as the kernel reports it.
pub fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    Ok(stream.peer_cred()?.uid())
}

/// Who may use the admin socket: root, the publisher's own uid, and configured operators.
pub fn admin_allowed(uid: u32, publisher_uid: u32, operator_uids: &[u32]) -> bool {
    uid == 0 || uid == publisher_uid || operator_uids.contains(&uid)
}

/// Who may serve the admin socket, as its client sees it: root, the client's own uid (a
/// local or dev installation), or the configured publisher uid.
pub fn server_trusted(server_uid: u32, client_uid: u32, publisher_uid: Option<u32>) -> bool {
    server_uid == 0 || server_uid == client_uid || publisher_uid == Some(server_uid)
}

/// The admin socket is served by a process the client must not trust.
#[derive(Debug, thiserror::Error)]
#[error(
    "the admin socket at {path} is served by uid {server_uid}, not the publisher; someone may be impersonating zodex-prd. Nothing was sent. Check who runs it (e.g. `ss -xlp`); if the publisher really runs as uid {server_uid}, set `publisher_uid = {server_uid}` in the configuration"
)]
pub struct Impersonation {
    pub path: PathBuf,
    pub server_uid: u32,
}

/// Asks the kernel who serves the other end of `stream` (connected to `path`) and refuses
/// unless [`server_trusted`]. Call before sending or believing anything.
pub fn check_server(
    stream: &std::os::unix::net::UnixStream,
    path: &Path,
    publisher_uid: Option<u32>,
) -> io::Result<()> {
    let creds = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(io::Error::from)?;
    let server_uid = creds.uid();
    if server_trusted(server_uid, nix::unistd::geteuid().as_raw(), publisher_uid) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            Impersonation {
                path: path.to_path_buf(),
                server_uid,
            },
        ))
    }
}

/// One admin request line to `admin_socket` and its answer: the server's uid is checked before
/// one byte of the request leaves (see [`check_server`]; an [`Impersonation`] comes back as the
/// error's inner value). `zodex-prd admin` carries the operator's request with this.
pub fn admin_call(
    admin_socket: &Path,
    publisher_uid: Option<u32>,
    line: &str,
) -> io::Result<zodex_protocol::Response> {
    use std::io::Write as _;
    let mut stream = std::os::unix::net::UnixStream::connect(admin_socket)?;
    check_server(&stream, admin_socket, publisher_uid)?;
    let sent = stream
        .write_all(line.as_bytes())
        .and_then(|()| stream.write_all(b"\n"));
    // A refused peer's request is never read: the answer still waits on the socket.
    match (sent, zodex_protocol::read_response(&mut stream)) {
        (_, Ok(response)) => Ok(response),
        (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(e),
    }
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

    #[test]
    fn the_client_trusts_root_itself_and_the_publisher_only() {
        assert!(server_trusted(0, 1000, None));
        assert!(server_trusted(1000, 1000, None));
        assert!(server_trusted(990, 1000, Some(990)));
        assert!(!server_trusted(65534, 1000, Some(990)));
        assert!(!server_trusted(65534, 0, None));
    }

    #[tokio::test]
    async fn bind_replaces_a_stale_socket_but_not_a_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/admin.sock");
        let live = bind(&path, 0o600).await.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // The directory it made is writable by the publisher only, and no staging directory
        // is left behind.
        let run = std::fs::metadata(dir.path().join("run")).unwrap();
        assert_eq!(run.permissions().mode() & 0o777, 0o755);
        assert_eq!(
            std::fs::read_dir(dir.path().join("run")).unwrap().count(),
            1
        );
        let err = bind(&path, 0o600).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        drop(live);
        // The file is still there but nobody answers: a stale socket. Another test of this
        // process may be starting a command at this moment, and its child holds a copy of every
        // open descriptor until it execs: for that instant the old socket still answers. So
        // this waits (briefly) for the socket to be stale, then asserts it is replaced.
        assert!(path.exists());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let listener = loop {
            match bind(&path, 0o666).await {
                Err(e)
                    if e.kind() == io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    // The pause before binding again (see above: a forked child's copy).
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                other => break other.unwrap(),
            }
        };
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
        // The renamed socket is the one that answers.
        let client = UnixStream::connect(&path).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        assert_eq!(peer_uid(&server).unwrap(), nix::unistd::geteuid().as_raw());
        drop(client);
    }

    #[tokio::test]
    async fn bind_refuses_writable_or_symlinked_places_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        for (mode, who) in [
            (0o777, "everyone"),
            (0o775, "its group"),
            (0o1777, "everyone"),
        ] {
            std::fs::set_permissions(&run, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = bind(&run.join("a.sock"), 0o600).await.unwrap_err();
            assert!(err.to_string().contains(who), "{mode:o}: {err}");
            assert!(err.to_string().contains("chmod go-w"), "{err}");
            assert!(!run.join("a.sock").exists());
        }
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A symlinked directory, and a symlink where the socket goes.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&run, &link).unwrap();
        let err = bind(&link.join("a.sock"), 0o600).await.unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), run.join("b.sock")).unwrap();
        let err = bind(&run.join("b.sock"), 0o600).await.unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        // A regular file is never removed to make room.
        std::fs::write(run.join("c.sock"), "keep").unwrap();
        let err = bind(&run.join("c.sock"), 0o600).await.unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(run.join("c.sock")).unwrap(), "keep");
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        check_socket_dir(dir.path(), me).unwrap();
        if me == 0 {
            // Root-owned directories are trusted; another owner is not.
            std::os::unix::fs::chown(dir.path(), Some(65534), None).unwrap();
            let err = check_socket_dir(dir.path(), 0).unwrap_err();
            assert!(err.to_string().contains("uid 65534"), "{err}");
        } else {
            let err = check_socket_dir(dir.path(), me + 1).unwrap_err();
            assert!(err.to_string().contains(&format!("uid {me}")), "{err}");
        }
    }

    #[test]
    fn the_client_trusts_a_server_of_its_own_uid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
        // Served by this very uid: trusted.
        check_server(&stream, &path, None).unwrap();
    }
}
