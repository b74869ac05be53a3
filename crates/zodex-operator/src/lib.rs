//! The operator's side, on the operator's own machine: the registry of sprites, the exec
//! transport that carries one admin request to a sprite's `zodex-prd admin` (`transport`) or runs
//! any sprite-side command with bytes on stdin (`remote`), deploying and looking after a sprite
//! (`deploy`), the MCP key (`connect`), the edge Worker in front of a sprite (`worker`, over
//! `http`), the operator's board (`board`), and `zodex dev up|down`. Its user is the root crate's
//! `cli` behind the `zodex` binary. It talks to a sprite through `zodex-protocol`, takes the
//! installer's layout and report types from `zodex-install`, capability keys and local mode's history from
//! `zodex-tools`, the local GitHub of `zodex dev` from `zodex-devhub`, and its private PostgreSQL
//! server from `zodex-store-pg`.
//!
//! Code map:
//! - `registry`: `$ZODEX_HOME/sprites.toml`, each sprite and the command that reaches its
//!   `zodex-prd admin`; updated under a file lock and replaced atomically.
//! - `transport`: runs `<prefix> zodex-prd admin`: one JSON request line in, one answer line out;
//!   or the one long-lived `… admin watch`.
//! - `remote`: any sprite-side `zodex-prd` command through the same transport, bytes (keys,
//!   binaries, the MCP key) on stdin, the sprite's paths read back from the admin command.
//! - `deploy`: `zodex sprite setup|doctor|status|logs|start|stop|restart|targets|upgrade|uninstall`
//!   and `policy prove`: upload, run the sprite's own `zodex-prd`, report with the fix.
//! - `connect`: `zodex sprite connect`: the MCP key made here, only its SHA-256 sent, the URL kept
//!   0600; `--oauth`: the key-less URL, checked against the issuer the sprite serves.
//! - `dev`: `zodex dev up|down`: a one-user installation on embedded defaults — devhub,
//!   `zodex-prd` and `zodex-agent serve` in the background — registered as the sprite `dev`.
//!   - `dev::postgres`: `--postgres`, the state in a private PostgreSQL server (from
//!     `zodex-store-pg`'s `temp`), prepared by `zodex-prd store init`.
//! - `http`: one HTTPS or loopback HTTP request, bounded in time and size; no error names a query.
//! - `worker`: `zodex sprite proxy deploy|dev|status|verify`, the edge Worker (`worker/`, its
//!   sources embedded) in front of a sprite.
//!   - `worker::deploy`: a generated `wrangler.toml` in a private directory, `wrangler deploy`,
//!     the Worker's URL and build recorded in the registry.
//!   - `worker::dev`: the same Worker on the local runtime (`workerd`); nothing recorded.
//!   - `worker::check`: `/status` against this build and sprite, and the MCP contract through it.
//! - `fleet`: `zodex fleet`: an operator's key made here and enrolled, the fleet registered
//!   (its entry reached over mutual TLS), sprites enrolled through their exec transport.
//!   - `fleet_transport`: one admin request over mutual TLS with the operator's certificate,
//!     replicas tried in turn only while connecting (also the board's watch's carrier).
//! - `board`: `zodex sprite watch`, `zodex fleet watch`, `zodex local watch`: the operator's
//!   board on `127.0.0.1` behind a capability URL.
//!   - `board::feed`: the sprite's one `admin watch` (or local mode's tool calls), numbered, each
//!     row kept once, in a bounded window.
//!   - `board::fleet_feed`: a fleet's: the same watch run here, over mutual TLS.
//!   - `board::server`: the embedded page (`page/`), its server-sent events (resumed with
//!     `Last-Event-ID`) and its actions.
//!   - `board::guard`: the door: loopback `Host`, the capability compared in constant time (else
//!     404), CSRF and same origin on actions, `no-store`, no CORS, nothing logged.
//!   - `board::actions`: each button as the admin request the CLI sends.
//!   - `board::tui`: the same feed and actions in the terminal (`--tui`, ratatui);
//!     `board::tui::model` the events as shown, agent text stripped of control characters.
//! - `zodex_home`, `sibling_binary` (here): `$ZODEX_HOME` (else `~/.zodex`), and a binary beside
//!   the running one.
//!
//! Invariants:
//! - Architecture invariant: nothing here decides; it asks a sprite's `zodex-prd` and reports
//!   the answer. The board holds no authority: an action is the operator's own admin request.
//! - Nothing of the publisher service: its manifest names `zodex-install` (for the installer's
//!   types), not `zodex-publisher`; requests go through `zodex-protocol` over the transport.
//! - Keys, binaries and the MCP key travel on stdin, never in argv; only the MCP key's hash
//!   reaches the sprite.
//! - No Cloudflare credential in argv, a file of ours or the registry: it stays where wrangler
//!   finds it.
//! - The board's capability is printed once and never logged; agent text is shown as text only.
//! - `dev` is the one starter of devhub (tidy checks that nothing else imports it).

pub mod board;
pub mod connect;
pub mod deploy;
pub mod dev;
pub mod fleet;
pub mod fleet_doctor;
mod fleet_transport;
pub mod http;
pub mod registry;
pub mod remote;
pub mod transport;
pub mod worker;

/// `$ZODEX_HOME`, else `~/.zodex`: the operator's own files (registry, dev installs, MCP URLs).
pub fn zodex_home() -> std::path::PathBuf {
    if let Some(home) = std::env::var_os("ZODEX_HOME") {
        return home.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/".into());
    std::path::Path::new(&home).join(".zodex")
}

/// A sibling binary of the running one (e.g. `zodex-prd` next to `zodex`), else the bare name
/// for a `PATH` lookup.
pub fn sibling_binary(name: &str) -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| name.into())
}
