//! Local mode: the MCP server on the user's own machine, as the host user, with the environment
//! of their login shell captured at start (`zodex local start|stop|status|history`).
//!
//! State lives in `$ZODEX_HOME/local` (`$ZODEX_HOME` defaults to `~/.zodex`), a 0700
//! directory: `pid`, `state.json` (path, address, start and expiry times), `url` (mode 0600: the
//! MCP URL with a fresh key per start), `server.log`, `history.sqlite` and `spill/`.
//!
//! `start` runs the server in the background by re-executing the current binary with
//! `--foreground` in a new session (`setsid`), output to `server.log`, and waits until it has
//! written its URL. `--ttl` stops the server when it expires. Linux and macOS only.
//!
//! Not here: argument parsing and printing (`cli::local`), the server itself (`mod.rs`).
#![allow(unsafe_code)] // the detached start of the local server (pre_exec); each block says why it is sound

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::context::ContextSources;
use super::deps::session::Shell;
use super::history::{HistoryFilter, NumberedEntry, read_filtered};
use super::http::HttpOptions;
use super::{CoreSettings, UsageError, build_core, key};

/// Where `zodex local start` listens by default.
pub const DEFAULT_LOCAL_LISTEN: &str = "127.0.0.1:8765";
/// How long `start` waits for the background server to come up.
const START_WAIT: Duration = Duration::from_secs(90);
/// How long `stop` waits for the server to exit after SIGTERM before SIGKILL.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The files of local mode.
#[derive(Debug, Clone)]
pub struct LocalPaths {
    pub dir: PathBuf,
}

impl LocalPaths {
    /// `$ZODEX_HOME/local`, `$ZODEX_HOME` defaulting to `~/.zodex`.
    pub fn from_env() -> anyhow::Result<LocalPaths> {
        let root = match std::env::var_os("ZODEX_HOME").filter(|v| !v.is_empty()) {
            Some(root) => PathBuf::from(root),
            None => super::home_dir()?.join(".zodex"),
        };
        Ok(LocalPaths {
            dir: root.join("local"),
        })
    }
    pub fn pid(&self) -> PathBuf {
        self.dir.join("pid")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn url(&self) -> PathBuf {
        self.dir.join("url")
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }
    pub fn history(&self) -> PathBuf {
        super::history::history_path(&self.dir)
    }
    /// Local mode's settings (`zodex local config`).
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.toml")
    }
}

/// Options of `zodex local start`.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The suggested first workdir (default: the current directory).
    pub path: Option<PathBuf>,
    pub ttl: Option<Duration>,
    pub listen: Option<String>,
    pub allowed_hosts: Vec<String>,
    /// The public HTTPS URL a tunnel or reverse proxy gives this server (its host is accepted
    /// in `Host`, and the printed MCP URL uses it).
    pub public_url: Option<String>,
    /// Serve MCP on stdin/stdout instead of HTTP (implies foreground; no URL, no key).
    pub stdio: bool,
    /// Run in this process instead of in the background.
    pub foreground: bool,
}

/// What `state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LocalState {
    pub pid: u32,
    pub path: String,
    pub addr: String,
    pub started_at: String,
    pub expires_at: Option<String>,
}

/// A running local server, as `start` and `status` report it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Running {
    pub pid: u32,
    /// The MCP URL including its key.
    pub url: String,
    pub path: String,
    pub started_at: String,
    pub expires_at: Option<String>,
    /// Seconds until the TTL stops it, if it has one.
    pub seconds_left: Option<u64>,
    pub log: String,
}

/// The answer of `status`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Status {
    pub running: bool,
    #[serde(flatten)]
    pub server: Option<Running>,
}

/// The answer of `stop`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Stopped {
    /// The pid that was stopped, or None when nothing was running.
    pub pid: Option<u32>,
    /// True when it had to be killed after not stopping on SIGTERM.
    pub killed: bool,
}

/// Resolves the start directory: given or current, absolute, existing, a directory.
pub fn resolve_path(path: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir()?,
    };
    let canonical = std::fs::canonicalize(&path).map_err(|e| {
        UsageError(format!(
            "PATH {} is not an existing directory: {e}",
            path.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(UsageError(format!("PATH {} is not a directory", path.display())).into());
    }
    Ok(canonical)
}

/// `zodex local start` without `--foreground`/`--stdio`: starts the server in the background
/// and returns once it is serving. `exe` is the binary to re-execute and `args` the arguments
/// that make it run `local start … --foreground` (the CLI knows its own syntax).
pub fn start_background(
    exe: &Path,
    args: &[String],
    paths: &LocalPaths,
) -> anyhow::Result<Running> {
    use std::os::unix::process::CommandExt;
    super::create_private_dir(&paths.dir)?;
    if let Some(running) = running(paths)? {
        return Err(anyhow::anyhow!(
            "a local server is already running (pid {}): {}\nstop it first with `zodex local stop`",
            running.pid,
            running.url
        ));
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(paths.log())?;
    let mut command = std::process::Command::new(exe);
    // stdout (where `--foreground` prints the URL with its key) goes nowhere: the log file
    // must never hold the key. Logs go to stderr, i.e. the log file.
    command
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", exe.display()))?;
    let pid = child.id();
    let deadline = Instant::now() + START_WAIT;
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow::anyhow!(
                "the local server exited during start ({status}); its log ({}) ends with:\n{}",
                paths.log().display(),
                log_tail(&paths.log(), 20)
            ));
        }
        if let Some(running) = running(paths)?
            && running.pid == pid
        {
            return Ok(running);
        }
        if Instant::now() > deadline {
            return Err(anyhow::anyhow!(
                "the local server (pid {pid}) did not come up within {} s; see {}",
                START_WAIT.as_secs(),
                paths.log().display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `zodex local start --foreground` (HTTP) or `--stdio`: runs the server in this process until
/// SIGTERM/SIGINT or the TTL. `on_ready` is called once the HTTP server is listening.
pub async fn run_foreground(
    options: StartOptions,
    paths: LocalPaths,
    on_ready: impl FnOnce(&Running),
) -> anyhow::Result<()> {
    let start_dir = resolve_path(options.path.as_deref())?;
    super::create_private_dir(&paths.dir)?;
    let shell = Shell::capture_login_env()
        .map_err(|e| anyhow::anyhow!("cannot capture the login shell environment: {e}"))?;
    let config = super::local_config::LocalConfig::load(&paths.config())?;
    let settings = CoreSettings {
        state_dir: paths.dir.clone(),
        shell,
        start_dir: Some(start_dir.clone()),
        context: config.context,
        context_sources: ContextSources::from_env(),
        retention: config.history,
    };
    let ttl = options.ttl;
    let stop = async move {
        match ttl {
            Some(ttl) => tokio::select! {
                _ = super::termination_signal() => {}
                _ = tokio::time::sleep(ttl) => tracing::info!("TTL expired: stopping"),
            },
            None => super::termination_signal().await,
        }
    };
    if options.stdio {
        let core = build_core(settings)?;
        return super::serve_stdio(core, stop).await;
    }

    if let Some(other) = running(&paths)?
        && other.pid != std::process::id()
    {
        return Err(anyhow::anyhow!(
            "a local server is already running (pid {}); stop it first with `zodex local stop`",
            other.pid
        ));
    }
    let listen = options
        .listen
        .clone()
        .unwrap_or_else(|| DEFAULT_LOCAL_LISTEN.to_string());
    let listener = super::bind(&listen).await?;
    let addr = listener.local_addr()?;
    let key = key::generate_key()?;
    let url_host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    let url = match &options.public_url {
        Some(public) => format!("{}?key={key}", public_mcp_url(public)?),
        None => format!("http://{url_host}:{}/mcp?key={key}", addr.port()),
    };
    let core = build_core(settings)?;
    let started = Utc::now();
    let state = LocalState {
        pid: std::process::id(),
        path: start_dir.display().to_string(),
        addr: addr.to_string(),
        started_at: started.to_rfc3339_opts(SecondsFormat::Secs, true),
        expires_at: ttl.map(|t| {
            (started + chrono::Duration::from_std(t).unwrap_or_default())
                .to_rfc3339_opts(SecondsFormat::Secs, true)
        }),
    };
    write_private(&paths.url(), &format!("{url}\n"))?;
    write_private(
        &paths.state(),
        &format!("{}\n", serde_json::to_string_pretty(&state)?),
    )?;
    write_private(&paths.pid(), &format!("{}\n", state.pid))?;
    tracing::info!(
        addr = %addr,
        path = %start_dir.display(),
        expires_at = state.expires_at.as_deref().unwrap_or("never"),
        "zodex local server listening (MCP URL with key in {})",
        paths.url().display()
    );
    on_ready(&running_from(&paths, &state, url));

    let options = HttpOptions {
        key: std::sync::Arc::new(key::KeyHash::of_key(&key).into()),
        allowed_hosts: super::http::allowed_hosts(
            options.public_url.as_deref(),
            &options.allowed_hosts,
        ),
        oauth: None,
    };
    let result = super::serve_http(core, listener, options, stop).await;
    remove_own_files(&paths);
    tracing::info!("zodex local server stopped");
    result
}

/// `zodex local status`.
pub fn status(paths: &LocalPaths) -> anyhow::Result<Status> {
    let server = running(paths)?;
    Ok(Status {
        running: server.is_some(),
        server,
    })
}

/// `zodex local stop`: SIGTERM, then SIGKILL after a grace period. Not running is not an error.
pub fn stop(paths: &LocalPaths) -> anyhow::Result<Stopped> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Some(server) = running(paths)? else {
        remove_files(paths);
        return Ok(Stopped {
            pid: None,
            killed: false,
        });
    };
    let pid = Pid::from_raw(server.pid as i32);
    kill(pid, Signal::SIGTERM).map_err(|e| anyhow::anyhow!("cannot signal {pid}: {e}"))?;
    let deadline = Instant::now() + STOP_WAIT;
    let mut killed = false;
    while alive(server.pid) {
        if Instant::now() > deadline {
            let _ = kill(pid, Signal::SIGKILL);
            killed = true;
            std::thread::sleep(Duration::from_millis(100));
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    remove_files(paths);
    Ok(Stopped {
        pid: Some(server.pid),
        killed,
    })
}

/// `zodex local history`: the calls `filter` picks (its `since` a time ago), oldest first.
pub fn history(
    paths: &LocalPaths,
    since: Option<Duration>,
    mut filter: HistoryFilter,
) -> anyhow::Result<Vec<NumberedEntry>> {
    filter.since = since.map(|d| Utc::now() - chrono::Duration::from_std(d).unwrap_or_default());
    read_filtered(&paths.history(), &filter)
}

/// The running server described by the state files, if its process is alive.
fn running(paths: &LocalPaths) -> anyhow::Result<Option<Running>> {
    let Ok(text) = std::fs::read_to_string(paths.state()) else {
        return Ok(None);
    };
    let Ok(state) = serde_json::from_str::<LocalState>(&text) else {
        return Ok(None);
    };
    if !alive(state.pid) {
        return Ok(None);
    }
    let Ok(url) = std::fs::read_to_string(paths.url()) else {
        return Ok(None);
    };
    Ok(Some(running_from(paths, &state, url.trim().to_string())))
}

/// The MCP endpoint under a public URL: `https://HOST[/PATH]`, with `/mcp` added unless the
/// URL ends with it. ChatGPT reaches connectors over HTTPS only, so plain HTTP is refused.
pub fn public_mcp_url(public: &str) -> anyhow::Result<String> {
    let trimmed = public.trim().trim_end_matches('/');
    let valid = trimmed.strip_prefix("https://").is_some_and(|rest| {
        let host = rest.split('/').next().unwrap_or_default();
        !host.is_empty() && !rest.contains(['?', '#', ' '])
    });
    if !valid {
        return Err(UsageError(format!(
            "--public-url `{public}`: give the HTTPS URL your tunnel or reverse proxy serves, e.g. https://abc.example.com (ChatGPT connects over HTTPS only)"
        ))
        .into());
    }
    Ok(if trimmed.ends_with("/mcp") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/mcp")
    })
}

fn running_from(paths: &LocalPaths, state: &LocalState, url: String) -> Running {
    let seconds_left = state
        .expires_at
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| (t.with_timezone(&Utc) - Utc::now()).num_seconds().max(0) as u64);
    Running {
        pid: state.pid,
        url,
        path: state.path.clone(),
        started_at: state.started_at.clone(),
        expires_at: state.expires_at.clone(),
        seconds_left,
        log: paths.log().display().to_string(),
    }
}

fn alive(pid: u32) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    if pid == 0 {
        return false;
    }
    match kill(nix::unistd::Pid::from_raw(pid as i32), None) {
        Ok(()) => !is_zombie(pid),
        Err(Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// A zombie (exited, not yet reaped by its parent) is not running.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Writes a file readable by its owner only (replacing any older file and its mode).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Removes the state files if they still describe this process.
fn remove_own_files(paths: &LocalPaths) {
    let ours = std::fs::read_to_string(paths.state())
        .ok()
        .and_then(|t| serde_json::from_str::<LocalState>(&t).ok())
        .is_some_and(|s| s.pid == std::process::id());
    if ours {
        remove_files(paths);
    }
}

fn remove_files(paths: &LocalPaths) {
    for file in [paths.url(), paths.state(), paths.pid()] {
        let _ = std::fs::remove_file(file);
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_files_are_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("url");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, "new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    #[test]
    fn nothing_running_without_state() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LocalPaths {
            dir: dir.path().to_path_buf(),
        };
        assert!(!status(&paths).unwrap().running);
        assert_eq!(
            stop(&paths).unwrap(),
            Stopped {
                pid: None,
                killed: false
            }
        );
    }

    #[test]
    fn resolve_path_refuses_files_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert!(resolve_path(Some(&file)).is_err());
        assert!(resolve_path(Some(&dir.path().join("missing"))).is_err());
        assert_eq!(
            resolve_path(Some(dir.path())).unwrap(),
            dir.path().canonicalize().unwrap()
        );
    }
}
