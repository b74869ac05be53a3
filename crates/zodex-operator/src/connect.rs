//! `zodex sprite connect`: make the MCP capability key for a sprite. The key is created here,
//! only its SHA-256 travels to the sprite (through the admin path), and the URL that carries it
//! is kept for the operator alone (mode 0600).

use super::registry::SpriteEntry;
use super::transport;
use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use zodex_protocol::AdminRequest;
use zodex_tools::server::key::{KeyHash, generate_key};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "invalid --host `{0}`: give a host name, optionally with :PORT, without scheme or path (e.g. sprite-1.example.com)"
    )]
    BadHost(String),
    #[error(
        "sprite `{sprite}` already has an MCP key for {old_host}; pass --rotate to replace it with a new key for {new_host}"
    )]
    OtherHost {
        sprite: String,
        old_host: String,
        new_host: String,
    },
    #[error("{0}")]
    Worker(String),
    #[error("cannot make a key: {0}")]
    Key(String),
    #[error(transparent)]
    Transport(#[from] transport::TransportError),
    #[error("sprite `{sprite}` refused the key: {message}")]
    Refused { sprite: String, message: String },
    #[error(
        "sprite `{sprite}` serves no OAuth: give it the public URL clients use (`zodex sprite mcp public-url https://{host}/mcp --sprite {sprite}` sets it and turns OAuth on), then connect again"
    )]
    NoOAuth { sprite: String, host: String },
    #[error(
        "sprite `{sprite}` issues OAuth tokens for {issuer}, not for {host}: set its public URL to the one clients use (`zodex sprite mcp public-url URL --sprite {sprite}`, e.g. https://{host}/mcp)"
    )]
    OtherIssuer {
        sprite: String,
        host: String,
        issuer: String,
    },
    #[error("cannot store the MCP URL in {path}: {source}")]
    Store {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Connection {
    pub sprite: String,
    /// `https://HOST/mcp?key=…` — a secret: whoever holds it can run commands on the sprite.
    pub url: String,
    pub url_file: PathBuf,
    /// False when an existing key for the same host was kept.
    pub new_key: bool,
    /// When the sprite could not be told to accept the host (a sprite not set up with
    /// `zodex sprite setup`): what the operator should do instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_note: Option<String>,
}

/// The connector URL for OAuth: no secret in it. The client discovers the sprite's
/// authorization server from its first 401; the operator approves the connection with
/// `zodex sprite mcp approve CODE`.
#[derive(Debug, Clone, Serialize)]
pub struct OAuthConnection {
    pub sprite: String,
    /// `https://HOST/mcp`.
    pub url: String,
    pub issuer: String,
    /// Whether `?key=` still works beside OAuth.
    pub key_url: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_note: Option<String>,
}

/// The OAuth connector URL of `sprite`: the public URL it issues tokens for (`[mcp]
/// public_url`), checked against `host` when one is given, or against the Worker's host when
/// one is registered.
pub fn connect_oauth(
    sprite: &SpriteEntry,
    host: Option<&str>,
) -> Result<OAuthConnection, ConnectError> {
    if let Some(host) = host
        && !valid_host(host)
    {
        return Err(ConnectError::BadHost(host.to_string()));
    }
    let response = transport::call(sprite, &AdminRequest::McpClients)?;
    let answer: zodex_protocol::McpClientsAnswer =
        response.answer().map_err(|e| ConnectError::Refused {
            sprite: sprite.name.clone(),
            message: e.to_string(),
        })?;
    let Some(issuer) = answer.issuer.filter(|_| answer.oauth) else {
        return Err(ConnectError::NoOAuth {
            sprite: sprite.name.clone(),
            host: host.unwrap_or("HOST").to_string(),
        });
    };
    let origin = issuer.trim_end_matches("/oauth").to_string();
    let url = answer.resource.unwrap_or_else(|| format!("{origin}/mcp"));
    let issued_for = super::worker::host_of(&origin);
    let (expected, accepted) = match host {
        Some(host) => (Some(host.to_string()), host.to_string()),
        None => match super::worker::connect_hosts(sprite) {
            Ok((host, accepted)) => (Some(host), accepted),
            Err(super::worker::WorkerError::NoWorker(_)) => (None, issued_for.to_string()),
            Err(e) => return Err(ConnectError::Worker(e.to_string())),
        },
    };
    if let Some(host) = expected
        && !host.eq_ignore_ascii_case(issued_for)
    {
        return Err(ConnectError::OtherIssuer {
            sprite: sprite.name.clone(),
            host,
            issuer,
        });
    }
    Ok(OAuthConnection {
        sprite: sprite.name.clone(),
        url,
        issuer,
        key_url: answer.key_url,
        host_note: allow_host(sprite, &accepted),
    })
}

/// Has an installed sprite's MCP server accept `host` in `Host` (what a proxy forwards);
/// `None` when done, else what to do by hand.
pub(super) fn allow_host(sprite: &SpriteEntry, host: &str) -> Option<String> {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    if matches!(name, "localhost" | "127.0.0.1") {
        return None;
    }
    let by_hand = format!(
        "make sure the sprite's MCP server accepts Host {host}: add it to [mcp] allowed_hosts (or set [mcp] public_url) in its zodex.toml and restart zodex-agent"
    );
    let Ok(reach) = super::remote::Reach::of(sprite) else {
        return Some(by_hand);
    };
    match reach.prd(&["allow-host", host, "--json"], super::remote::Stdin::None) {
        Ok(ran) if ran.success => None,
        _ => Some(by_hand),
    }
}

/// Where the operator keeps a sprite's MCP URL.
pub fn url_file(sprite: &str) -> PathBuf {
    super::zodex_home()
        .join("sprites")
        .join(sprite)
        .join("mcp-url")
}

/// The MCP key this operator holds for `sprite` (from its stored URL), if any.
pub fn stored_key(sprite: &str) -> Option<String> {
    let url = std::fs::read_to_string(url_file(sprite)).ok()?;
    let query = url.trim().split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("key="))
        .map(str::to_string)
}

fn valid_host(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

fn host_of(url: &str) -> Option<&str> {
    url.strip_prefix("https://")?.split('/').next()
}

/// The URL's host: `--host` as given, else the sprite's edge Worker — only when it runs this
/// build for this sprite; the sprite then has to accept its own host, not the Worker's.
pub fn connect_default(
    sprite: &SpriteEntry,
    host: Option<&str>,
    rotate: bool,
) -> Result<Connection, ConnectError> {
    match host {
        Some(host) => connect(sprite, host, host, rotate),
        None => {
            let (worker, own) = super::worker::connect_hosts(sprite).map_err(|e| match e {
                super::worker::WorkerError::NoWorker(_) => ConnectError::Worker(format!(
                    "{e}; or give the host that serves it: --host HOST"
                )),
                e => ConnectError::Worker(e.to_string()),
            })?;
            connect(sprite, &worker, &own, rotate)
        }
    }
}

/// Creates (or, without `rotate`, reuses) the MCP key of `sprite` for `host`; has the sprite
/// accept `accepted` in `Host` (the host itself, or the sprite's own behind a Worker).
pub fn connect(
    sprite: &SpriteEntry,
    host: &str,
    accepted: &str,
    rotate: bool,
) -> Result<Connection, ConnectError> {
    if !valid_host(host) {
        return Err(ConnectError::BadHost(host.to_string()));
    }
    let path = url_file(&sprite.name);
    if !rotate && let Ok(existing) = std::fs::read_to_string(&path) {
        let existing = existing.trim().to_string();
        match host_of(&existing) {
            Some(old) if old == host => {
                return Ok(Connection {
                    sprite: sprite.name.clone(),
                    url: existing,
                    url_file: path,
                    new_key: false,
                    host_note: allow_host(sprite, accepted),
                });
            }
            Some(old) => {
                return Err(ConnectError::OtherHost {
                    sprite: sprite.name.clone(),
                    old_host: old.to_string(),
                    new_host: host.to_string(),
                });
            }
            None => {}
        }
    }
    let key = generate_key().map_err(|e| ConnectError::Key(e.to_string()))?;
    let request = AdminRequest::SetMcpKeyHash {
        sha256: KeyHash::of_key(&key).to_hex(),
    };
    let response = transport::call(sprite, &request)?;
    if !response.ok {
        return Err(ConnectError::Refused {
            sprite: sprite.name.clone(),
            message: response.error.map(|e| e.message).unwrap_or_default(),
        });
    }
    let url = format!("https://{host}/mcp?key={key}");
    let store_err = |source| ConnectError::Store {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(store_err)?;
    }
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(store_err)?;
    file.write_all(format!("{url}\n").as_bytes())
        .map_err(store_err)?;
    std::fs::rename(&tmp, &path).map_err(store_err)?;
    Ok(Connection {
        sprite: sprite.name.clone(),
        url,
        url_file: path,
        new_key: true,
        host_note: allow_host(sprite, accepted),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_names_with_an_optional_port() {
        for good in ["sprite-1.example.com", "localhost:8443", "a"] {
            assert!(valid_host(good), "{good}");
        }
        for bad in [
            "",
            "https://x",
            "x/mcp",
            "x:0",
            "x:99999",
            "a..b",
            "sp ace",
            "x?key=1",
        ] {
            assert!(!valid_host(bad), "{bad}");
        }
        assert_eq!(host_of("https://h:1/mcp?key=k"), Some("h:1"));
    }
}
