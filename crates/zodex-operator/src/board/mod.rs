//! The operator's board (`zodex sprite watch`, `zodex fleet watch`, `zodex local watch`): a page on the operator's
//! own machine, on the loopback address behind an unguessable capability URL, that shows what
//! the agent asks and does as it happens and forwards the operator's answers.
//!
//! `feed` numbers and keeps the events (the sprite's one long-lived `zodex-prd admin watch`
//! through the exec transport, resumed by cursor; for a fleet, `fleet_feed`: the same watch run
//! here over mutual TLS; in local mode, the tool-call history);
//! `server` serves the embedded page (`page/`), its server-sent events and its actions, every
//! request through `guard` (Host, capability, CSRF, no-store); `actions` maps a button to the
//! admin request the CLI sends for it; `tui` the same feed and actions in the terminal
//! (`--tui`).
//!
//! Architecture invariant: the board holds no authority and decides nothing — an action is the
//! operator's own admin request, carried by the same transport; everything the agent wrote is
//! data the page renders as text. The capability is printed once to the operator and never
//! logged.

pub mod actions;
pub mod feed;
pub mod fleet_feed;
pub mod guard;
pub mod server;
pub mod tui;

use crate::registry::SpriteEntry;
use feed::Feed;
use std::path::PathBuf;
use std::sync::Arc;

/// Where the board's events come from.
pub enum Source {
    /// A registered sprite, or a fleet (an entry reached over mutual TLS): its watch, and
    /// actions through its transport.
    Sprite(SpriteEntry),
    /// This machine's `zodex local` history: tool calls only, no publisher.
    Local { history: PathBuf },
}

/// How the board is served.
#[derive(Debug, Clone, Default)]
pub struct BoardOptions {
    /// The loopback port (0: any free one).
    pub port: u16,
    /// Open the page in the default browser.
    pub open: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Listen { port: u16, source: std::io::Error },
    #[error("the board's server stopped: {0}")]
    Serve(std::io::Error),
    #[error("cannot start the board's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Why the board's page could not be opened in a browser (the URL is printed anyway).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The private page that redirects to the URL could not be written.
    #[error(transparent)]
    Page(std::io::Error),
    #[error("cannot run {opener}: {source}")]
    Opener {
        opener: &'static str,
        source: std::io::Error,
    },
}

/// A started board: its URL (with the capability: for the operator's eyes only).
pub struct Started {
    pub url: String,
    /// Set when the page could not be opened in a browser (the URL is printed anyway).
    pub open_failed: Option<OpenError>,
}

/// Serves the board until the process is stopped; `ready` is told the URL once it listens.
pub fn run(
    source: Source,
    options: BoardOptions,
    ready: impl FnOnce(&Started),
) -> Result<(), BoardError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(BoardError::Runtime)?;
    runtime.block_on(serve(source, options, ready))
}

async fn serve(
    source: Source,
    options: BoardOptions,
    ready: impl FnOnce(&Started),
) -> Result<(), BoardError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
        .await
        .map_err(|source| BoardError::Listen {
            port: options.port,
            source,
        })?;
    let port = listener
        .local_addr()
        .map_err(|source| BoardError::Listen {
            port: options.port,
            source,
        })?
        .port();
    let door = guard::Door {
        capability: guard::token(),
        csrf: guard::token(),
        port,
    };
    let url = format!("{}/b/{}/", door.origin(), door.capability);
    let feed = Feed::new();
    let (sprite, title) = match source {
        Source::Sprite(sprite) => {
            let (follow, entry) = (feed.clone(), sprite.clone());
            std::thread::spawn(move || feed::follow_sprite(follow, entry));
            let title = sprite.name.clone();
            (Some(sprite), title)
        }
        Source::Local { history } => {
            let follow = feed.clone();
            std::thread::spawn(move || feed::follow_history(follow, history));
            (None, "local".to_string())
        }
    };
    let board = Arc::new(server::Board {
        door,
        feed,
        sprite,
        title,
    });
    let open_failed = if options.open {
        open_in_browser(&url).err()
    } else {
        None
    };
    ready(&Started { url, open_failed });
    axum::serve(listener, server::router(board))
        .await
        .map_err(BoardError::Serve)
}

/// Opens `url` in the default browser without putting the capability in any argv (where other
/// users of the machine could read it): a private 0600 file that redirects to it is opened
/// instead, as Jupyter does.
fn open_in_browser(url: &str) -> Result<(), OpenError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = crate::zodex_home().join("board");
    std::fs::create_dir_all(&dir).map_err(OpenError::Page)?;
    let path = dir.join("open.html");
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(OpenError::Page)?;
    write!(
        file,
        "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>Zodex board</title>"
    )
    .map_err(OpenError::Page)?;
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|mut child| {
            // Reaped when the opener returns (it hands the page to the browser and exits); the
            // file with the capability goes a little later, once the browser has read it.
            std::thread::spawn(move || {
                let _ = child.wait();
                std::thread::sleep(std::time::Duration::from_secs(30));
                let _ = std::fs::remove_file(&path);
            });
        })
        .map_err(|source| OpenError::Opener { opener, source })
}
