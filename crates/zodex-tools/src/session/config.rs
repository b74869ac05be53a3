//! `SessionConfig` and `Shell`: how commands are run and the limits that bound them.
//!
//! `Shell::capture_login_env` is the only code here that runs a process: once, at start-up of
//! local mode, to learn the user's login environment.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How the session engine runs commands, and its limits.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// How to run `cmd`.
    pub shell: Shell,
    /// Longest output (chars) one call returns inline; past it, a tail preview and a spill file.
    pub inline_limit_chars: usize,
    /// Length (chars) of the tail preview.
    pub preview_chars: usize,
    /// Private directory for spill files (created with mode 0700).
    pub spill_dir: PathBuf,
    /// A spill file keeps only the first this-many bytes of the stream.
    pub spill_file_cap_bytes: u64,
    /// Most commands running at once; the next `exec` is refused.
    pub max_sessions: usize,
    /// Time between SIGTERM and SIGKILL when a command is ended.
    pub kill_grace: Duration,
    /// Extra environment for every command, applied last (e.g. a controlled `HOME` in tests).
    pub extra_env: Vec<(OsString, OsString)>,
    /// Spill files older than this are removed (default 24 h).
    pub spill_max_age: Duration,
    /// How often the spill directory is swept (default 1 h; also once at start).
    pub sweep_interval: Duration,
}

impl SessionConfig {
    /// The defaults, running commands with `bash -lc`.
    pub fn new(spill_dir: PathBuf) -> Self {
        Self {
            shell: Shell::BashLogin,
            inline_limit_chars: 24_000,
            preview_chars: 4_000,
            spill_dir,
            spill_file_cap_bytes: 16 * 1024 * 1024,
            max_sessions: 64,
            kill_grace: Duration::from_secs(2),
            extra_env: Vec::new(),
            spill_max_age: Duration::from_secs(24 * 3600),
            sweep_interval: Duration::from_secs(3600),
        }
    }
}

/// How a command line is run.
#[derive(Debug, Clone)]
pub enum Shell {
    /// `bash -lc CMD`, inheriting the server's environment (sprite mode).
    BashLogin,
    /// `PROGRAM -c CMD` with exactly `env` (local mode: the user's login shell and the
    /// environment it produced at start).
    Captured {
        /// The shell.
        program: PathBuf,
        /// The environment captured from a login shell.
        env: Vec<(OsString, OsString)>,
    },
}

/// Marker printed before the environment dump, so login-time chatter on stdout is skipped.
const ENV_MARKER: &[u8] = b"__ZODEX_ENV_BEGIN__\0";
/// How long the login shell may take to print its environment.
const CAPTURE_TIMEOUT: Duration = Duration::from_secs(30);
/// Variables describing the capturing shell itself, not the user's environment.
const SHELL_LOCAL_VARS: &[&str] = &["_", "SHLVL", "PWD", "OLDPWD"];

impl Shell {
    /// Runs `$SHELL -lc 'env -0'` once (falling back to `/bin/sh`) and captures the login
    /// environment it prints.
    pub fn capture_login_env() -> io::Result<Shell> {
        let program = std::env::var_os("SHELL")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/bin/sh"));
        Self::capture_env_from(&program, &[])
    }

    /// Like `capture_login_env` with an explicit shell and extra variables for the capturing
    /// shell (e.g. `HOME`).
    pub fn capture_env_from(
        program: &Path,
        extra_env: &[(OsString, OsString)],
    ) -> io::Result<Shell> {
        let mut child = Command::new(program)
            .arg("-lc")
            .arg("printf '__ZODEX_ENV_BEGIN__\\000'; env -0")
            .envs(extra_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            stdout.read_to_end(&mut buf).map(|_| buf)
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > CAPTURE_TIMEOUT {
                // SIGTERM first: a login shell killed outright can leave lock files behind.
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                std::thread::sleep(Duration::from_secs(2));
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} -lc took over {CAPTURE_TIMEOUT:?}", program.display()),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let dump = reader
            .join()
            .map_err(|_| io::Error::other("environment reader panicked"))??;
        if !status.success() {
            return Err(io::Error::other(format!(
                "{} -lc 'env -0' failed: {status}",
                program.display()
            )));
        }
        let env = parse_env_dump(&dump).ok_or_else(|| {
            io::Error::other(format!(
                "{} -lc did not print an environment (no `env -0`?)",
                program.display()
            ))
        })?;
        Ok(Shell::Captured {
            program: program.to_owned(),
            env,
        })
    }

    /// The program and its arguments to run `cmd`.
    pub(crate) fn command_line(&self, cmd: &str) -> (PathBuf, Vec<OsString>) {
        match self {
            Shell::BashLogin => (PathBuf::from("bash"), vec!["-lc".into(), cmd.into()]),
            Shell::Captured { program, .. } => (program.clone(), vec!["-c".into(), cmd.into()]),
        }
    }
}

/// Parses `NAME=value\0…` after `ENV_MARKER`; `None` if the marker is missing.
fn parse_env_dump(dump: &[u8]) -> Option<Vec<(OsString, OsString)>> {
    let start = dump
        .windows(ENV_MARKER.len())
        .position(|w| w == ENV_MARKER)?
        + ENV_MARKER.len();
    let env = dump[start..]
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            let (name, value) = (&entry[..eq], &entry[eq + 1..]);
            let skip = name.is_empty() || SHELL_LOCAL_VARS.iter().any(|v| v.as_bytes() == name);
            (!skip).then(|| {
                (
                    OsStr::from_bytes(name).to_owned(),
                    OsString::from_vec(value.to_vec()),
                )
            })
        })
        .collect();
    Some(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_dump_skips_chatter_and_shell_locals() {
        let dump = b"motd line\n__ZODEX_ENV_BEGIN__\0PATH=/bin:/usr/bin\0A=b=c\0_=/usr/bin/env\0SHLVL=2\0MULTI=x\ny\0";
        let env = parse_env_dump(dump).unwrap();
        let names: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH", "A", "MULTI"]);
        assert_eq!(env[1].1, "b=c");
        assert_eq!(env[2].1, "x\ny");
        assert!(parse_env_dump(b"PATH=/bin\0").is_none());
    }

    #[test]
    fn captures_a_login_environment_from_a_real_shell() {
        let home = tempfile::tempdir().unwrap();
        let extra = [
            ("HOME".into(), home.path().as_os_str().to_owned()),
            ("ZODEX_CAPTURE_TEST".into(), "yes".into()),
        ];
        let shell = Shell::capture_env_from(Path::new("/bin/bash"), &extra).unwrap();
        let Shell::Captured { program, env } = shell else {
            panic!("not captured")
        };
        assert_eq!(program, Path::new("/bin/bash"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert!(get("PATH").is_some());
        assert_eq!(get("ZODEX_CAPTURE_TEST").unwrap(), "yes");
        assert!(get("SHLVL").is_none());
    }

    #[test]
    fn defaults_match_the_contract() {
        let cfg = SessionConfig::new("/tmp/x".into());
        assert_eq!(cfg.inline_limit_chars, 24_000);
        assert_eq!(cfg.preview_chars, 4_000);
        assert_eq!(cfg.spill_file_cap_bytes, 16 << 20);
        assert_eq!(cfg.max_sessions, 64);
        assert_eq!(cfg.kill_grace, Duration::from_secs(2));
        assert!(matches!(cfg.shell, Shell::BashLogin));
    }
}
