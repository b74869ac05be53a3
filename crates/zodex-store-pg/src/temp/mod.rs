//! Throwaway PostgreSQL servers: for tests across the workspace and `zodex dev up --postgres`.
//!
//! A [`TempServer`] is a private cluster in a directory of the caller's: `initdb` there, then
//! `pg_ctl start` with its Unix socket in that directory and no TCP (unless a port is asked
//! for), so nothing system-wide is touched — no service, no port, no shared socket directory.
//!
//! Compiled unconditionally (no cargo feature): it needs nothing beyond what the crate already
//! uses (std, and the crate's own pool for `CREATE DATABASE`), and both the workspace's tests
//! and the `zodex` binary want it, so a feature would only add a switch to forget.
//!
//! PostgreSQL refuses to run as root. When this process is root, `initdb` and the server run
//! as the `postgres` system user (or `nobody` when there is none) through `setpriv`, and the
//! directory is handed to that user first.
#![allow(unsafe_code)]

mod patroni;
mod pgbouncer;
mod port;
mod replication;
mod shared;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use zodex_sql::{Backend, SqlError};

use crate::{PgSettings, PgStore};

pub use patroni::{PatroniCluster, PatroniOptions};
pub use pgbouncer::{PgBouncer, PoolMode};
pub use port::free_port;
pub use shared::{fresh_database, shared};

/// How to run the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct TempOptions {
    /// No fsync, asynchronous commit, no full-page writes: fast, and lost on a crash — for
    /// tests only.
    pub fast: bool,
    /// Also listen on 127.0.0.1 at this port (otherwise only the Unix socket).
    pub port: Option<u16>,
}

/// What went wrong, in words that say what to do.
#[derive(Debug, thiserror::Error)]
pub enum TempError {
    #[error(
        "{0} not found: install Debian's postgresql package (or put its bin directory on PATH)"
    )]
    Missing(&'static str),
    #[error("{name} not found: install Debian's {package} package (or put it on PATH)")]
    MissingPackage {
        name: &'static str,
        package: &'static str,
    },
    #[error(
        "the socket path {path} would be {len} bytes, over the 107 a Unix socket allows: \
         use a shorter directory (e.g. under /tmp)"
    )]
    SocketPathTooLong { path: String, len: usize },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{what} failed: {output}")]
    Failed { what: String, output: String },
    #[error("{0}")]
    Sql(#[from] SqlError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TempError {
    let what = what.into();
    move |source| TempError::Io { what, source }
}

/// A running private PostgreSQL server. Stopped by [`stop`](Self::stop) or when dropped
/// (unless [`keep_running`](Self::keep_running) let it go).
pub struct TempServer {
    dir: PathBuf,
    /// Where its Unix socket is: `dir`, unless the caller chose a shorter one.
    socket_dir: PathBuf,
    pg_ctl: PathBuf,
    /// The user (uid, gid) the server runs as when this process is root.
    run_as: Option<(u32, u32)>,
    options: TempOptions,
    running: AtomicBool,
    /// A pool on the `postgres` database for `CREATE DATABASE`, made at first use.
    admin: OnceLock<PgStore>,
    /// Serialises starts and stops.
    control: Mutex<()>,
}

const USER: &str = "zodex";

impl TempServer {
    /// Creates the cluster in `dir/data` (unless one is already there) and starts it (or
    /// takes over the one already running there); the log is `dir/server.log`.
    pub fn start(dir: &Path, options: TempOptions) -> Result<TempServer, TempError> {
        Self::start_with_socket(dir, None, options)
    }

    /// As [`start`](Self::start), with the Unix socket in `socket_dir` (created if missing)
    /// instead of `dir`: for a cluster kept in a directory too deep for a socket's path.
    pub fn start_with_socket(
        dir: &Path,
        socket_dir: Option<&Path>,
        options: TempOptions,
    ) -> Result<TempServer, TempError> {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        if let Some(socket_dir) = socket_dir {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(socket_dir)
                .map_err(io(format!("cannot create {}", socket_dir.display())))?;
        }
        let mut server = Self::open(dir, options)?;
        if let Some(socket_dir) = socket_dir {
            server.socket_dir = socket_dir
                .canonicalize()
                .map_err(io(format!("cannot resolve {}", socket_dir.display())))?;
        }
        let socket = server
            .socket_dir
            .join(format!(".s.PGSQL.{}", options.port.unwrap_or(5432)));
        let len = socket.as_os_str().len();
        if len > 107 {
            return Err(TempError::SocketPathTooLong {
                path: socket.display().to_string(),
                len,
            });
        }
        if server.socket_dir.as_os_str().as_bytes().contains(&b'\'') {
            return Err(TempError::Failed {
                what: "choosing the directory".into(),
                output: format!(
                    "{} contains a quote; choose another",
                    server.socket_dir.display()
                ),
            });
        }
        let initdb = find_bin("initdb")?;
        if let Some((uid, gid)) = server.run_as {
            for owned in [&server.dir, &server.socket_dir] {
                std::os::unix::fs::chown(owned, Some(uid), Some(gid)).map_err(io(format!(
                    "cannot hand {} to the server's user",
                    owned.display()
                )))?;
            }
        }
        if !server.data().join("PG_VERSION").exists() {
            let data = server.data();
            server.run(
                "initdb",
                &initdb,
                &[
                    OsStr::new("-D"),
                    data.as_os_str(),
                    OsStr::new("-A"),
                    OsStr::new("trust"),
                    OsStr::new("-U"),
                    OsStr::new(USER),
                    OsStr::new("-E"),
                    OsStr::new("UTF8"),
                    OsStr::new("--no-locale"),
                    OsStr::new("--no-sync"),
                ],
            )?;
        }
        server.start_again()?;
        Ok(server)
    }

    /// The server of an existing directory, not started.
    fn open(dir: &Path, options: TempOptions) -> Result<TempServer, TempError> {
        let dir = dir
            .canonicalize()
            .map_err(io(format!("cannot resolve {}", dir.display())))?;
        let pg_ctl = find_bin("pg_ctl")?;
        Ok(TempServer {
            socket_dir: dir.clone(),
            dir,
            pg_ctl,
            run_as: server_user()?,
            options,
            running: AtomicBool::new(false),
            admin: OnceLock::new(),
            control: Mutex::new(()),
        })
    }

    /// Stops the server of the cluster in `dir` (`pg_ctl stop -m fast`) if one runs there,
    /// whoever started it. True when it was running.
    pub fn stop_cluster(dir: &Path) -> Result<bool, TempError> {
        if !dir.join("data").join("PG_VERSION").exists() {
            return Ok(false);
        }
        let server = Self::open(dir, TempOptions::default())?;
        if !server.is_running() {
            return Ok(false);
        }
        server.running.store(true, Ordering::SeqCst);
        server.stop()?;
        Ok(true)
    }

    /// Whether a server runs on this cluster's data (`pg_ctl status`).
    pub fn is_running(&self) -> bool {
        let data = self.data();
        let args = [OsStr::new("-D"), data.as_os_str(), OsStr::new("status")];
        self.command(&self.pg_ctl, &args)
            .output()
            .is_ok_and(|out| out.status.success())
    }

    /// Lets the server run on after this value is gone (for `zodex dev up`, whose server
    /// outlives the command; `zodex dev down` stops it with [`stop_cluster`](Self::stop_cluster)).
    pub fn keep_running(self) {
        self.running.store(false, Ordering::SeqCst);
    }

    /// Starts the server again after [`stop`](Self::stop), on the same data.
    pub fn start_again(&self) -> Result<(), TempError> {
        let _guard = self.control.lock().unwrap_or_else(|e| e.into_inner());
        if self.running.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.is_running() {
            // Already up on this data (an earlier `zodex dev up`): take it over.
            self.running.store(true, Ordering::SeqCst);
            return Ok(());
        }
        // pg_ctl hands `-o` to a shell: the directory was checked to hold no quote.
        let mut opts = format!(
            "-k '{}' -c unix_socket_permissions=0777",
            self.socket_dir.display()
        );
        match self.options.port {
            Some(port) => opts.push_str(&format!(" -p {port} -c listen_addresses=127.0.0.1")),
            None => opts.push_str(" -c listen_addresses=''"),
        }
        if self.options.fast {
            opts.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let data = self.data();
        let log = self.log();
        self.run(
            "pg_ctl start",
            &self.pg_ctl,
            &[
                OsStr::new("-D"),
                data.as_os_str(),
                OsStr::new("-l"),
                log.as_os_str(),
                OsStr::new("-w"),
                OsStr::new("-t"),
                OsStr::new("60"),
                OsStr::new("-o"),
                OsStr::new(&opts),
                OsStr::new("start"),
            ],
        )?;
        self.running.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Stops the server (`pg_ctl stop -m fast`: open sessions are ended, data is kept).
    pub fn stop(&self) -> Result<(), TempError> {
        self.stop_with("fast")
    }

    fn stop_with(&self, mode: &str) -> Result<(), TempError> {
        let _guard = self.control.lock().unwrap_or_else(|e| e.into_inner());
        if !self.running.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let data = self.data();
        self.run(
            "pg_ctl stop",
            &self.pg_ctl,
            &[
                OsStr::new("-D"),
                data.as_os_str(),
                OsStr::new("-w"),
                OsStr::new("-m"),
                OsStr::new(mode),
                OsStr::new("stop"),
            ],
        )
    }

    /// A URL [`PgStore`] accepts for database `db`, over the Unix socket, as the cluster's
    /// owner.
    pub fn url(&self, db: &str) -> String {
        self.url_as(USER, db)
    }

    /// The same URL for another role (`user`, a plain name).
    pub fn url_as(&self, user: &str, db: &str) -> String {
        let port = self.options.port.unwrap_or(5432);
        format!(
            "postgres://{user}@{}:{port}/{db}",
            encode_path(&self.socket_dir)
        )
    }

    /// The loopback TCP URL for `db`, when the server was started with a port.
    pub fn tcp_url(&self, db: &str) -> Option<String> {
        let port = self.options.port?;
        Some(format!("postgres://{USER}@127.0.0.1:{port}/{db}"))
    }

    /// The directory holding the data, the log and (unless placed elsewhere) the socket.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory holding the Unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// Creates an empty database (`name`: lower-case letters, digits, underscores).
    pub fn create_database(&self, name: &str) -> Result<(), TempError> {
        let valid = !name.is_empty()
            && name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(TempError::Failed {
                what: format!("creating database {name:?}"),
                output: "use 1 to 63 lower-case letters, digits or underscores".into(),
            });
        }
        let admin = match self.admin.get() {
            Some(admin) => admin,
            None => {
                let mut settings = PgSettings::new(self.url("postgres"));
                settings.pool_size = 2;
                settings.wait_timeout = Duration::from_secs(60);
                let store = PgStore::connect(&settings)?;
                self.admin.get_or_init(|| store)
            }
        };
        admin
            .backend()
            .batch(&format!("CREATE DATABASE \"{name}\""))?;
        Ok(())
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Runs a PostgreSQL program, as the server's user when this process is root.
    fn run(&self, what: &str, program: &Path, args: &[&OsStr]) -> Result<(), TempError> {
        let output = self
            .command(program, args)
            .output()
            .map_err(io(format!("cannot run {}", program.display())))?;
        if output.status.success() {
            return Ok(());
        }
        let mut text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if text.is_empty() {
            text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        }
        if let Ok(log) = std::fs::read_to_string(self.log()) {
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            text.push_str(&format!(
                "\n{} says:\n{}",
                self.log().display(),
                tail.join("\n")
            ));
        }
        Err(TempError::Failed {
            what: what.into(),
            output: text,
        })
    }

    /// A PostgreSQL program's command, as the server's user when this process is root, with
    /// no `PG*` variable of the caller's.
    fn command(&self, program: &Path, args: &[&OsStr]) -> Command {
        let mut command = run_as(self.run_as, program);
        command.args(args).current_dir(&self.dir);
        for var in [
            "PGDATA",
            "PGHOST",
            "PGPORT",
            "PGUSER",
            "PGDATABASE",
            "PGOPTIONS",
        ] {
            command.env_remove(var);
        }
        command
    }
}

impl Drop for TempServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// `/tmp/x` as a URL host: `%2Ftmp%2Fx` (tokio-postgres reads a host starting with `/` as a
/// socket directory).
fn encode_path(path: &Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The file `name` in a directory of `$PATH`, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `program`'s command, run as `user` (uid, gid) through `setpriv` when there is one (this
/// process is root, and the program refuses root), else as this process.
fn run_as(user: Option<(u32, u32)>, program: &Path) -> Command {
    match user {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--init-groups")
                .arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// `name` on `$PATH`, else in the newest `/usr/lib/postgresql/<version>/bin`.
fn find_bin(name: &'static str) -> Result<PathBuf, TempError> {
    if let Some(found) = on_path(name) {
        return Ok(found);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: f64 = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin").join(name)))
        })
        .filter(|(_, p)| p.is_file())
        .max_by(|a, b| a.0.total_cmp(&b.0));
    newest.map(|(_, p)| p).ok_or(TempError::Missing(name))
}

/// The user (uid, gid) a server runs as when this process is root (PostgreSQL refuses root);
/// `None` when the server runs as this process's own user.
pub fn server_user() -> Result<Option<(u32, u32)>, TempError> {
    if is_root() {
        system_user().map(Some)
    } else {
        Ok(None)
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of `postgres`, else of `nobody`, from /etc/passwd.
fn system_user() -> Result<(u32, u32), TempError> {
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(io("cannot read /etc/passwd"))?;
    let find = |user: &str| {
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() > 3 && fields[0] == user)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
    };
    find("postgres")
        .or_else(|| find("nobody"))
        .ok_or(TempError::Missing(
            "a postgres (or nobody) user to run the server as",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_directory_becomes_a_url_host() {
        assert_eq!(
            encode_path(Path::new("/tmp/zodex-pg 1")),
            "%2Ftmp%2Fzodex-pg%201"
        );
    }

    #[test]
    fn a_missing_program_says_what_to_install() {
        let text = TempError::Missing("initdb").to_string();
        assert!(text.starts_with("initdb not found: install Debian's postgresql package"));
    }
}
