//! Starting and stopping a devhub: two loopback listeners (the REST API and git smart HTTP, as
//! "api.github.com" and "github.com"), the handle tests and `zodex dev` hold, a blocking
//! variant with its own runtime for synchronous tests, and `serve` for a foreground process.

use super::api::{self, shapes::Urls};
use super::config::DevHubConfig;
use super::error::{DevHubError, io};
use super::faults::Fault;
use super::git::{self, hook};
use super::hub::Hub;
use super::model::Description;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The file a foreground devhub (`serve`) writes so other processes can find and drive it.
pub const RUN_FILE: &str = "run.json";

/// Entry points: [`DevHub::start`], and [`DevHub::seed_demo`] (in `seed`).
pub struct DevHub;

/// Counters for tests and figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub api_requests: u64,
    pub git_requests: u64,
    pub tokens_minted: u64,
    pub tokens_revoked: u64,
    pub tokens_live: usize,
}

/// Where a running devhub listens, and its admin key; `serve` writes it to `<dir>/run.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    pub api_url: String,
    pub git_url: String,
    pub admin_key: String,
    pub dir: PathBuf,
    pub pid: u32,
}

impl RunInfo {
    /// Reads `<dir>/run.json` written by [`serve`].
    pub fn load(dir: &Path) -> Result<Self, DevHubError> {
        let path = dir.join(RUN_FILE);
        let text = std::fs::read_to_string(&path).map_err(io(format!(
            "cannot read {} (is `zodex dev devhub` running?)",
            path.display()
        )))?;
        serde_json::from_str(&text).map_err(|e| DevHubError::Description {
            path,
            problem: e.into(),
        })
    }
}

pub(crate) fn stats(hub: &Hub) -> Stats {
    let tokens = hub.tokens.lock().unwrap_or_else(|e| e.into_inner());
    Stats {
        api_requests: hub.api_requests.load(Ordering::Relaxed),
        git_requests: hub.git_requests.load(Ordering::Relaxed),
        tokens_minted: tokens.minted,
        tokens_revoked: tokens.revoked,
        tokens_live: tokens.live(hub.now()),
    }
}

/// A devhub serving on the current tokio runtime. Dropping it stops the servers.
pub struct RunningDevHub {
    hub: Arc<Hub>,
    cancel: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl DevHub {
    /// Binds both listeners (ports 0 pick free ones), loads `<dir>/devhub.json`, refreshes the
    /// hook of every described repository, and serves until the handle is shut down or dropped.
    pub async fn start(mut config: DevHubConfig) -> Result<RunningDevHub, DevHubError> {
        std::fs::create_dir_all(config.repos_dir()).map_err(io(format!(
            "cannot create {}",
            config.repos_dir().display()
        )))?;
        config.dir = config
            .dir
            .canonicalize()
            .map_err(io(format!("cannot resolve {}", config.dir.display())))?;
        let description = Description::load(&config.dir)?;
        for repo in &description.repos {
            let path = config.repos_dir().join(repo.relative_path());
            if path.is_dir() {
                hook::install(&path)?;
            }
        }
        let bind = |port: u16| {
            let addr = SocketAddr::new(config.host, port);
            async move {
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| DevHubError::Bind {
                        addr: addr.to_string(),
                        source,
                    })
            }
        };
        let api_listener = bind(config.api_port).await?;
        let git_listener = bind(config.git_port).await?;
        let url = |listener: &tokio::net::TcpListener| {
            listener
                .local_addr()
                .map(|a| format!("http://{a}"))
                .map_err(io("cannot read the listening address"))
        };
        let urls = Urls {
            api: url(&api_listener)?,
            web: url(&git_listener)?,
        };
        let admin_key = super::tokens::random_string(b"0123456789abcdefghijklmnopqrstuvwxyz", 32);
        let hub = Arc::new(Hub::new(config, description, urls, admin_key));
        let cancel = CancellationToken::new();
        let mut tasks = Vec::new();
        for (listener, router) in [
            (api_listener, api::router(hub.clone())),
            (git_listener, git::http::router(hub.clone())),
        ] {
            let cancel = cancel.clone();
            tasks.push(tokio::spawn(async move {
                let service = router.into_make_service_with_connect_info::<SocketAddr>();
                if let Err(e) = axum::serve(listener, service)
                    .with_graceful_shutdown(cancel.cancelled_owned())
                    .await
                {
                    tracing::error!(error = %e, "devhub: server stopped");
                }
            }));
        }
        tracing::info!(api = %hub.urls.api, git = %hub.urls.web, "devhub: serving");
        Ok(RunningDevHub { hub, cancel, tasks })
    }
}

impl RunningDevHub {
    /// The REST API base ("https://api.github.com"), without a trailing slash.
    pub fn api_url(&self) -> &str {
        &self.hub.urls.api
    }

    /// The git and web base ("https://github.com"): clone `<git_url>/<owner>/<repo>.git`.
    pub fn git_url(&self) -> &str {
        &self.hub.urls.web
    }

    pub fn dir(&self) -> &Path {
        &self.hub.config.dir
    }

    /// The key for `/_devhub/` (header `X-Devhub-Admin-Key`).
    pub fn admin_key(&self) -> &str {
        &self.hub.admin_key
    }

    pub fn run_info(&self) -> RunInfo {
        RunInfo {
            api_url: self.api_url().to_string(),
            git_url: self.git_url().to_string(),
            admin_key: self.admin_key().to_string(),
            dir: self.dir().to_path_buf(),
            pid: std::process::id(),
        }
    }

    /// Queues a fault for the next matching requests.
    pub fn inject(&self, fault: Fault) {
        self.hub
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(fault);
    }

    /// Moves this devhub's clock `by` ahead: tokens expire, App JWTs age and rate-limit windows
    /// roll as if that time had passed (what a test does instead of sleeping through a token's
    /// lifetime). Only a caller holding the running devhub can: no request moves it.
    pub fn advance_clock(&self, by: Duration) {
        let seconds = i64::try_from(by.as_secs()).unwrap_or(i64::MAX);
        self.hub.clock_offset.fetch_add(seconds, Ordering::Relaxed);
    }

    pub fn clear_faults(&self) {
        self.hub
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn stats(&self) -> Stats {
        stats(&self.hub)
    }

    /// Re-reads `devhub.json` after a [`super::Setup`] changed it.
    pub fn reload(&self) -> Result<(), DevHubError> {
        self.hub.reload()
    }

    /// A copy of the current description (pull requests included).
    pub fn description(&self) -> Description {
        self.hub.read(Clone::clone)
    }

    /// Stops both servers, waiting up to five seconds for requests in flight.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for task in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl Drop for RunningDevHub {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Runs a devhub in the foreground until SIGINT or SIGTERM (see [`serve_until`]).
pub async fn serve(config: DevHubConfig) -> Result<(), DevHubError> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io("cannot watch SIGTERM"))?;
    serve_until(config, async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    })
    .await
}

/// Runs a devhub until `shutdown` completes: writes `<dir>/run.json` (mode 0600: it holds the
/// admin key) once listening, and removes it on the way out.
pub async fn serve_until(
    config: DevHubConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DevHubError> {
    let running = DevHub::start(config).await?;
    let info = running.run_info();
    let path = info.dir.join(RUN_FILE);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(io(format!("cannot write {}", path.display())))?;
    std::io::Write::write_all(
        &mut file,
        serde_json::to_string_pretty(&info)
            .expect("run info serialises")
            .as_bytes(),
    )
    .map_err(io(format!("cannot write {}", path.display())))?;
    drop(file);
    shutdown.await;
    let _ = std::fs::remove_file(&path);
    running.shutdown().await;
    Ok(())
}

/// A devhub on its own thread and runtime, for synchronous tests. Dereferences to
/// [`RunningDevHub`]; dropping it stops the servers and the thread.
pub struct BackgroundDevHub {
    running: Option<RunningDevHub>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a devhub on a background thread (two worker threads) and waits until it listens.
pub fn start_in_background(config: DevHubConfig) -> Result<BackgroundDevHub, DevHubError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("devhub".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err(io("cannot build devhub's runtime")(e)));
                    return;
                }
            };
            runtime.block_on(async move {
                let _ = ready_tx.send(DevHub::start(config).await);
                let _ = stop_rx.await;
            });
            runtime.shutdown_timeout(Duration::from_secs(2));
        })
        .map_err(io("cannot start devhub's thread"))?;
    let running = ready_rx
        .recv()
        .map_err(|_| DevHubError::Invalid("devhub's thread ended before starting".into()))??;
    Ok(BackgroundDevHub {
        running: Some(running),
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

impl std::ops::Deref for BackgroundDevHub {
    type Target = RunningDevHub;

    fn deref(&self) -> &RunningDevHub {
        self.running.as_ref().expect("present until dropped")
    }
}

impl Drop for BackgroundDevHub {
    fn drop(&mut self) {
        drop(self.running.take());
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serve_until_publishes_and_withdraws_its_run_file() {
        let dir = tempfile::tempdir().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let config = DevHubConfig::new(dir.path());
        let server = tokio::spawn(serve_until(config, async {
            let _ = stopped.await;
        }));
        let path = dir.path().join(RUN_FILE);
        // A hang guard, not a measure: run.json is written as soon as both ports listen.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !path.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "no run.json after a minute"
            );
            // The pause between two looks: nothing in process says when the file is written.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let info = RunInfo::load(dir.path()).unwrap();
        assert!(info.api_url.starts_with("http://127.0.0.1:"));
        assert_eq!(info.pid, std::process::id());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        assert!(!path.exists());
    }
}
