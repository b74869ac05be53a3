//! The operator's side: the registry of sprites, the exec transport that carries one admin
//! request to a sprite's `zodex-prd admin` (`transport`) or runs any sprite-side command with
//! bytes on stdin (`remote`), deploying and looking after a sprite (`deploy`), the MCP key
//! (`connect`), the edge Worker in front of a sprite (`worker`, over `http`), and
//! `zodex dev up|down`.
//!
//! Architecture invariant: nothing here decides; it asks a sprite's `zodex-prd` and reports
//! the answer.

pub mod board;
pub mod connect;
pub mod deploy;
pub mod dev;
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
