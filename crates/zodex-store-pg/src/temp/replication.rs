//! A primary's streaming-replication standby, its promotion, and a crash: what a failover
//! test needs of real PostgreSQL servers, without a cluster manager.

use super::{TempError, TempOptions, TempServer, USER, find_bin, io};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::Ordering;

impl TempServer {
    /// A primary in `primary_dir` holding database `db`, and its standby in `standby_dir`,
    /// each listening on a free loopback port, fsync on (a crash loses what it would).
    pub fn primary_with_standby(
        primary_dir: &Path,
        standby_dir: &Path,
        db: &str,
    ) -> Result<(TempServer, TempServer), TempError> {
        let port = super::free_port().map_err(io("cannot find a free port"))?;
        let options = TempOptions {
            fast: false,
            port: Some(port),
        };
        let primary = Self::start(primary_dir, options)?;
        primary.create_database(db)?;
        let standby_port = super::free_port().map_err(io("cannot find a free port"))?;
        let standby = primary.standby(standby_dir, standby_port)?;
        Ok((primary, standby))
    }

    /// The loopback port the server listens on, when it was started with one.
    pub fn port(&self) -> Option<u16> {
        self.options.port
    }

    /// A streaming-replication standby of this server (which must listen on a port), in
    /// `dir`, listening on `port`: its data copied with `pg_basebackup -R` (so it follows this
    /// server from the copy on), started, and read-only until [`promote`](Self::promote)d.
    pub fn standby(&self, dir: &Path, port: u16) -> Result<TempServer, TempError> {
        let primary = self.options.port.ok_or_else(|| TempError::Failed {
            what: "making a standby".into(),
            output: "the primary listens on no port; start it with TempOptions::port".into(),
        })?;
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let standby = Self::open(
            dir,
            TempOptions {
                port: Some(port),
                ..self.options
            },
        )?;
        if let Some((uid, gid)) = standby.run_as {
            std::os::unix::fs::chown(&standby.dir, Some(uid), Some(gid)).map_err(io(format!(
                "cannot hand {} to the server's user",
                dir.display()
            )))?;
        }
        let basebackup = find_bin("pg_basebackup")?;
        let data = standby.data();
        let from = format!("host=127.0.0.1 port={primary} user={USER}");
        standby.run(
            "pg_basebackup",
            &basebackup,
            &[
                OsStr::new("-D"),
                data.as_os_str(),
                OsStr::new("-R"),
                OsStr::new("-X"),
                OsStr::new("stream"),
                // The primary's checkpoint at once, not spread over minutes.
                OsStr::new("-c"),
                OsStr::new("fast"),
                OsStr::new("-d"),
                OsStr::new(&from),
            ],
        )?;
        standby.start_again()?;
        Ok(standby)
    }

    /// Makes a standby the primary (`pg_ctl promote`, waiting until it accepts writes).
    pub fn promote(&self) -> Result<(), TempError> {
        let data = self.data();
        self.run(
            "pg_ctl promote",
            &self.pg_ctl,
            &[
                OsStr::new("-D"),
                data.as_os_str(),
                OsStr::new("-w"),
                OsStr::new("promote"),
            ],
        )
    }

    /// Kills the server's postmaster with SIGKILL, as a crashed machine would stop it: nothing
    /// is flushed or said to the clients. Its backends end when they notice.
    pub fn kill(&self) -> Result<(), TempError> {
        let _guard = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let pid_file = self.data().join("postmaster.pid");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .map_err(io(format!("cannot read {}", pid_file.display())))?
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .ok_or_else(|| TempError::Failed {
                what: "killing the server".into(),
                output: format!("{} names no process", pid_file.display()),
            })?;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .output()
            .map_err(io("cannot run kill"))?;
        if !killed.status.success() {
            return Err(TempError::Failed {
                what: "killing the server".into(),
                output: String::from_utf8_lossy(&killed.stderr).into_owned(),
            });
        }
        self.running.store(false, Ordering::SeqCst);
        Ok(())
    }
}
