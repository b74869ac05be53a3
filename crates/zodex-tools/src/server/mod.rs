//! The MCP server: exactly three tools (`exec_command`, `write_stdin`, `apply_patch`) served over
//! streamable HTTP (both protocol eras, stateless) and stdio, in two modes:
//!
//! - **sprite mode** (`zodex-agent serve`): runs as the agent user, commands run in `bash -lc`,
//!   the capability key is required and only its SHA-256 is read (from a file);
//! - **local mode** (`zodex local start`, see [`local`]): runs as the host user with their
//!   captured login-shell environment, loopback by default, a fresh key per start, a TTL.
//!
//! Code map: [`schema`] (what the model sees), [`args`] (argument checks), [`handler`] (dispatch
//! and result shape), [`http`] (router, key check, access log), `body` (the request body cap
//! and the answer past it), [`key`] (capability keys), [`context`] (`zodex_context`),
//! [`history`] (SQLite log of calls), [`replay`] (the bounded store that replays a cut SSE answer), [`config`] (the `[mcp]` configuration), [`local`]
//! (local-mode lifecycle), `patch_result` (an `apply_patch` result kept small, the full list
//! spilled).
//!
//! Architecture invariants: this module knows nothing of GitHub, grants or tokens; its history
//! is never an access check; it never decides anything about a command — it runs what it is
//! given, in the workdir it is given. Windows is out of scope (Linux and macOS only).

pub mod args;
mod body;
pub mod config;
pub mod context;
mod ended;
pub mod handler;
pub mod history;
pub mod http;
pub mod key;
pub mod local;
pub mod local_config;
pub mod oauth;
mod patch_result;
pub mod replay;
pub mod retention;
pub mod schema;

/// The session and patch engines this server drives.
pub(crate) mod deps {
    pub use crate::{apply_patch, session};
}

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;

use self::context::{ContextConfig, ContextSources, ContextTracker};
use self::deps::session::{SessionConfig, SessionManager, Shell};
use self::handler::{Core, ZodexHandler};
use self::history::History;
use self::http::{ConnectionId, HttpOptions};

/// A mistake in how the server was invoked or configured (exit code 2), as opposed to a
/// failure while running (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Everything needed to build the handler core.
pub struct CoreSettings {
    /// Where the history and spill files live.
    pub state_dir: PathBuf,
    /// How commands are started.
    pub shell: Shell,
    /// Local mode: the suggested first workdir, named in the instructions.
    pub start_dir: Option<PathBuf>,
    pub context: ContextConfig,
    pub context_sources: ContextSources,
    /// How much tool-call history is kept.
    pub retention: retention::Retention,
}

/// Builds the shared core: session manager, context tracker, history.
pub fn build_core(settings: CoreSettings) -> anyhow::Result<Arc<Core>> {
    create_private_dir(&settings.state_dir)?;
    let mut session_config = SessionConfig::new(settings.state_dir.join("spill"));
    session_config.shell = settings.shell;
    let history = History::open_with(
        &history::history_path(&settings.state_dir),
        settings.retention,
    )?;
    let start_dir = settings.start_dir.as_ref().map(|d| d.display().to_string());
    Ok(Arc::new(Core {
        sessions: SessionManager::new(session_config),
        context: ContextTracker::new(settings.context, settings.context_sources),
        history,
        instructions: schema::instructions(start_dir.as_deref()),
    }))
}

/// Serves HTTP on `listener` until `shutdown` resolves; in-flight requests then get a few
/// seconds to finish.
pub async fn serve_http(
    core: Arc<Core>,
    listener: tokio::net::TcpListener,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = http::router(core.clone(), options);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ConnectionId>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut stop_rx = stop_rx;
    let result = tokio::select! {
        result = server => result,
        _ = async {
            let _ = stop_rx.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        } => {
            tracing::warn!("requests still running 5 s after shutdown; stopping anyway");
            Ok(())
        }
    };
    // Running commands end with the server (TERM, then KILL after the grace period).
    core.sessions.shutdown().await;
    Ok(result?)
}

/// Serves MCP over stdin/stdout until the client closes it or `shutdown` resolves.
pub async fn serve_stdio(
    core: Arc<Core>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let handler = ZodexHandler::new(
        core.clone(),
        Some(Arc::from(format!("stdio:{}", std::process::id()))),
    );
    let service = handler
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("stdio handshake failed: {e}"))?;
    let cancel = service.cancellation_token();
    let result = tokio::select! {
        result = service.waiting() => result.map(|_| ()),
        _ = shutdown => { cancel.cancel(); Ok(()) }
    };
    core.sessions.shutdown().await;
    Ok(result?)
}

/// Resolves on SIGTERM or SIGINT.
pub async fn termination_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
    }
}

/// Logs to stderr; `RUST_LOG` overrides the default (`info`, rmcp at `warn`). Never logs a key:
/// the HTTP layer removes it from requests before anything else sees them.
pub fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// Options of `zodex-agent serve`.
/// The way to the authorization server, supplied by the binary (it knows the publisher).
#[derive(Clone)]
pub struct Forwarder(pub std::sync::Arc<dyn oauth::OAuthForward>);

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forwarder(..)")
    }
}

#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub listen: Option<String>,
    pub stdio: bool,
    pub config: Option<PathBuf>,
    pub key_hash_file: Option<PathBuf>,
    pub allowed_hosts: Vec<String>,
    /// Where `/oauth/…` and the well-known metadata go (with `[mcp] oauth_file` set).
    pub oauth_forward: Option<Forwarder>,
}

/// `zodex-agent serve`: sprite mode, until SIGTERM/SIGINT (or stdin closes, with `--stdio`).
pub async fn run_serve(options: ServeOptions) -> anyhow::Result<()> {
    let config = match &options.config {
        Some(path) => config::load(path)?,
        None => config::McpConfig::default(),
    };
    let state_dir = match &config.state_dir {
        Some(dir) => dir.clone(),
        None => home_dir()?.join(".zodex").join("agent"),
    };
    let settings = CoreSettings {
        state_dir,
        shell: Shell::BashLogin,
        start_dir: None,
        context: config.context.clone(),
        context_sources: ContextSources::from_env(),
        retention: retention::Retention::default(),
    };
    if options.stdio {
        let core = build_core(settings)?;
        return serve_stdio(core, termination_signal()).await;
    }
    let key_file = options
        .key_hash_file
        .clone()
        .or_else(|| config.key_hash_file.clone())
        .ok_or_else(|| {
            UsageError(
                "no capability key: pass --key-hash-file FILE (a file holding the hex SHA-256 of \
                 the key) or set mcp.key_hash_file in the configuration"
                    .into(),
            )
        })?;
    // A file that exists must hold a key hash; a missing one is waited for (a fresh sprite has
    // none until `zodex sprite connect`), and every request is refused until it appears.
    if key_file.exists() {
        key::KeyHash::read_file(&key_file)?;
    } else {
        tracing::warn!(
            file = %key_file.display(),
            "no MCP key yet: every request is refused until `zodex sprite connect` sets one"
        );
    }
    let key = std::sync::Arc::new(key::KeySource::File(key::KeyFile::new(key_file)));
    let listen = options
        .listen
        .clone()
        .or_else(|| config.listen.clone())
        .unwrap_or_else(|| config::DEFAULT_SERVE_LISTEN.to_string());
    let mut extra_hosts = config.allowed_hosts.clone();
    extra_hosts.extend(options.allowed_hosts.iter().cloned());
    let allowed_hosts = http::allowed_hosts(config.public_url.as_deref(), &extra_hosts);
    let oauth = config.oauth_file.clone().map(|file| {
        std::sync::Arc::new(oauth::OAuthGate::new(
            file,
            options.oauth_forward.as_ref().map(|f| f.0.clone()),
            config.public_url.as_deref(),
        ))
    });
    let core = build_core(settings)?;
    let listener = bind(&listen).await?;
    tracing::info!(
        addr = %listener.local_addr()?,
        version = env!("CARGO_PKG_VERSION"),
        oauth = oauth.is_some(),
        "zodex-agent serve: MCP on /mcp (key or OAuth token required), health on /health"
    );
    serve_http(
        core,
        listener,
        HttpOptions {
            key,
            allowed_hosts,
            oauth,
        },
        termination_signal(),
    )
    .await
}

/// Binds a listen address such as `127.0.0.1:8080` or `[::1]:0`.
pub async fn bind(listen: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        UsageError(format!(
            "invalid listen address `{listen}`: use IP:PORT, e.g. 127.0.0.1:8080"
        ))
    })?;
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
}

fn home_dir() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("HOME is not set"))
}

/// Creates `dir` (and parents) with mode 0700 for the last component.
pub(crate) fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    let meta = std::fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
