//! PgBouncer in front of a server, as teams put it: Debian's `pgbouncer` on a loopback port of
//! its own, with its configuration, log and user list in a directory of the caller's (no
//! system service). It runs as the server's user when this process is root (PgBouncer refuses
//! root, as PostgreSQL does).

use super::{TempError, io, server_user};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How PgBouncer hands server connections to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A client keeps its server connection until it disconnects.
    Session,
    /// A client has a server connection for one transaction only.
    Transaction,
}

impl PoolMode {
    fn as_str(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        }
    }
}

/// A running PgBouncer; stopped when dropped.
pub struct PgBouncer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// Starts PgBouncer in `dir` on a free loopback port, in front of the server at
    /// `server_host` (an address, or a Unix socket's directory) and `server_port`, for every
    /// database, trusting `users` (loopback only), with at most `pool_size` server
    /// connections per database and user. A client waits at most 5 s for a server connection
    /// (`query_wait_timeout`), then is told the pool is full.
    pub fn start(
        dir: &Path,
        (server_host, server_port): (&str, u16),
        users: &[&str],
        mode: PoolMode,
        pool_size: u32,
    ) -> Result<Self, TempError> {
        let binary = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or(TempError::MissingPackage {
                name: "pgbouncer",
                package: "pgbouncer",
            })?;
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let port = super::free_port().map_err(io("cannot find a free port"))?;
        let user_list: String = users.iter().map(|u| format!("\"{u}\" \"\"\n")).collect();
        let users_file = dir.join("users.txt");
        std::fs::write(&users_file, user_list).map_err(io("cannot write PgBouncer's users"))?;
        let log = dir.join("pgbouncer.log");
        let ini = dir.join("pgbouncer.ini");
        let mode = mode.as_str();
        let (users_file_text, log_text) = (users_file.display(), log.display());
        std::fs::write(
            &ini,
            format!(
                "[databases]\n\
                 * = host={server_host} port={server_port}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {users_file_text}\n\
                 pool_mode = {mode}\n\
                 default_pool_size = {pool_size}\n\
                 max_client_conn = 400\n\
                 logfile = {log_text}\n\
                 admin_users = {admin}\n\
                 ignore_startup_parameters = extra_float_digits\n\
                 query_wait_timeout = 5\n\
                 {prepared}",
                admin = users.first().copied().unwrap_or("zodex"),
                // Named prepared statements across transactions: PgBouncer 1.21 and later
                // (an older one refuses to start on the unknown setting, which says why).
                prepared = if mode == "transaction" {
                    "max_prepared_statements = 200\n"
                } else {
                    ""
                },
            ),
        )
        .map_err(io("cannot write pgbouncer.ini"))?;
        let run_as = server_user()?;
        if let Some((uid, gid)) = run_as {
            for path in [dir, &ini, &users_file] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .map_err(io(format!("cannot hand {} over", path.display())))?;
            }
        }
        let mut command = super::run_as(run_as, &binary);
        let child = command
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io(format!("cannot run {}", binary.display())))?;
        let mut bouncer = PgBouncer {
            child,
            port,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if bouncer.child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                return Err(TempError::Failed {
                    what: "starting PgBouncer".into(),
                    output: std::fs::read_to_string(&log).unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(bouncer)
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db` as `user`, through this PgBouncer.
    pub fn url_for(&self, user: &str, db: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{db}", self.port)
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
