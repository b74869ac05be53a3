//! `zodex sprite proxy deploy|dev|status|verify`: the edge Worker (`worker/`, a Cloudflare Worker
//! embedded in this binary) in front of a sprite — deployed with the operator's own `wrangler`,
//! recorded in the registry, and checked from outside.
//!
//! - `deploy.rs` writes the Worker's sources and a generated `wrangler.toml` (the Worker's
//!   name, the sprite's origin and this build as variables) into a private directory, runs
//!   `wrangler deploy` there, records the Worker's URL and build, then reads its `/status`.
//!   Cloudflare's credential stays where wrangler finds it (`CLOUDFLARE_API_TOKEN` in the
//!   environment, or wrangler's own login): never in argv, a file of ours or the registry.
//! - `dev.rs`: `proxy dev` runs the same Worker on the local Workers runtime (workerd), a
//!   private CA trusted for the origin; nothing recorded.
//! - `check.rs`: `status` reads `/status` and says whether the Worker runs this build for this
//!   sprite; `verify` runs the MCP contract through the Worker with the operator's key;
//!   `connect_hosts` is what `zodex sprite connect` asks before it makes a URL through it.
//!
//! Not here: the HTTP exchange (`http.rs`), the MCP key (`connect.rs`), the Worker itself.

mod check;
mod deploy;
mod dev;

pub use check::{
    Check, Served, Verified, WorkerStatus, connect_hosts, contract, status, verify, verify_at,
};
pub use deploy::{DeployOptions, Deployed, deploy, deploy_targets, wrangler_toml};
pub use dev::{CA_ENV, DEFAULT_LISTEN, DevOptions, DevWorker, start as start_dev};

use super::registry::{RegistryError, SpriteEntry, WorkerRecord};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The Worker's sources, as wrangler gets them: the entry module first.
pub const SOURCES: [(&str, &str); 3] = [
    ("index.js", include_str!("../../../../worker/src/index.js")),
    (
        "handler.js",
        include_str!("../../../../worker/src/handler.js"),
    ),
    (
        "ratelimit.js",
        include_str!("../../../../worker/src/ratelimit.js"),
    ),
];

/// The Worker's per-address limits on the OAuth door when the operator names none (the
/// defaults of worker/src/ratelimit.js, written out so wrangler.toml shows them).
pub const DEFAULT_OAUTH_RATE_LIMITS: &str = "register=10,authorize=30,status=120,token=60";

/// `spec` if the Worker reads it as limits (`off`, or `KIND=N` pairs); the Worker would refuse
/// to serve on anything else, so it is checked before a deploy.
pub fn rate_limits(spec: &str) -> Result<String, WorkerError> {
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("off") {
        return Ok("off".into());
    }
    let valid = spec.split(',').all(|part| {
        part.split_once('=').is_some_and(|(kind, n)| {
            matches!(kind.trim(), "register" | "authorize" | "status" | "token")
                && n.trim().parse::<u32>().is_ok_and(|n| n >= 1)
        })
    });
    if valid {
        Ok(spec.to_string())
    } else {
        Err(WorkerError::BadRateLimits(spec.to_string()))
    }
}

/// The Workers runtime date the Worker is written against (tests/mcp/worker.py runs the same).
pub const COMPATIBILITY_DATE: &str = "2026-11-01";

/// The build id of the embedded Worker: the first 16 hex digits of a SHA-256 over its sources
/// (each name and length, then its text) and the compatibility date.
pub fn build_id() -> String {
    let mut hash = Sha256::new();
    for (name, text) in SOURCES {
        hash.update(format!("{name}\0{}\0", text.len()).as_bytes());
        hash.update(text.as_bytes());
    }
    hash.update(COMPATIBILITY_DATE.as_bytes());
    hex::encode(hash.finalize())[..16].to_string()
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(
        "invalid --oauth-rate-limits `{0}`: give KIND=N,… (KIND register, authorize, status or token; N requests a minute per address, at least 1), or off"
    )]
    BadRateLimits(String),
    #[error(
        "sprite `{0}` has no edge Worker yet; deploy one with `zodex sprite proxy deploy --sprite {0} --origin https://HOST`"
    )]
    NoWorker(String),
    #[error(
        "the first deploy needs the sprite's public origin: `zodex sprite proxy deploy --sprite {0} --origin https://HOST` (the HTTPS URL its host serves zodex-agent at)"
    )]
    NoOrigin(String),
    #[error(
        "invalid {what} `{value}`: give https://HOST[:PORT] with no path, query or user (plain http only for localhost)"
    )]
    BadUrl { what: &'static str, value: String },
    #[error(
        "invalid Worker name `{0}`: 1–63 lower-case letters, digits and `-`, starting with a letter"
    )]
    BadName(String),
    #[error("{0}")]
    Missing(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("`wrangler deploy` failed ({0}); its output is above. Nothing was recorded.")]
    WranglerFailed(String),
    #[error(
        "wrangler deployed `{0}` but named no URL (is workers.dev enabled for your account?); run again with --url https://HOST (the route or custom domain it serves)"
    )]
    NoUrl(String),
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    #[error("{0}")]
    Stale(String),
}

/// `https://HOST[:PORT]` (or `http://` for loopback) normalised, else why not.
pub fn origin_of(what: &'static str, value: &str) -> Result<String, WorkerError> {
    let bad = || WorkerError::BadUrl {
        what,
        value: value.to_string(),
    };
    let uri: ::http::Uri = value.trim().parse().map_err(|_| bad())?;
    let authority = uri.authority().ok_or_else(bad)?;
    let loopback = matches!(authority.host(), "localhost" | "127.0.0.1" | "[::1]");
    let scheme_ok = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => loopback,
        _ => false,
    };
    let bare = matches!(uri.path(), "" | "/") && uri.query().is_none();
    if !scheme_ok || !bare || authority.as_str().contains('@') || authority.host().is_empty() {
        return Err(bad());
    }
    Ok(format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        authority.as_str().to_ascii_lowercase()
    ))
}

/// The Worker's default name for a sprite: `zodex-` and the sprite's name in Cloudflare's
/// alphabet (`_` becomes `-`), at most 63 characters.
pub fn default_name(sprite: &str) -> String {
    let mut name = format!("zodex-{}", sprite.replace('_', "-"));
    name.truncate(63);
    name.trim_end_matches('-').to_string()
}

fn valid_name(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The private directory of a sprite's Worker files.
pub fn worker_dir(sprite: &str) -> PathBuf {
    super::zodex_home()
        .join("sprites")
        .join(sprite)
        .join("worker")
}

/// The host (and port) of an origin or URL without a path: `https://h:8443` → `h:8443`.
pub fn host_of(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, host)| host)
}

/// The recorded Worker of `entry`, else how to deploy one.
pub fn recorded(entry: &SpriteEntry) -> Result<&WorkerRecord, WorkerError> {
    entry
        .worker
        .as_ref()
        .ok_or_else(|| WorkerError::NoWorker(entry.name.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_are_checked_before_a_deploy() {
        assert_eq!(
            rate_limits(DEFAULT_OAUTH_RATE_LIMITS).unwrap(),
            DEFAULT_OAUTH_RATE_LIMITS
        );
        assert_eq!(rate_limits(" OFF ").unwrap(), "off");
        assert_eq!(rate_limits("token=5").unwrap(), "token=5");
        for bad in [
            "",
            "token=0",
            "tokens=5",
            "token=-1",
            "token",
            "register=10;token=5",
        ] {
            assert!(rate_limits(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn origins_are_https_hosts_without_path_query_or_user() {
        assert_eq!(
            origin_of("o", "https://Sprite.Example.com/").unwrap(),
            "https://sprite.example.com"
        );
        assert_eq!(origin_of("o", "https://h:8443").unwrap(), "https://h:8443");
        assert_eq!(
            origin_of("o", "http://127.0.0.1:9").unwrap(),
            "http://127.0.0.1:9"
        );
        for bad in [
            "h.example.com",
            "http://h.example.com",
            "https://h/mcp",
            "https://h/?key=x",
            "https://u:p@h",
            "ftp://h",
            "",
        ] {
            assert!(origin_of("o", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn worker_names_follow_cloudflares_alphabet() {
        assert_eq!(default_name("my_sprite"), "zodex-my-sprite");
        assert!(valid_name(&default_name(&"a".repeat(63))));
        assert!(!valid_name("Zodex"));
        assert!(!valid_name("-x"));
        assert!(!valid_name("x_y"));
    }

    #[test]
    fn the_build_id_is_a_hash_of_the_embedded_sources() {
        assert_eq!(build_id().len(), 16);
        assert_eq!(build_id(), build_id());
        assert!(SOURCES[0].1.contains("handle("), "index.js is the entry");
    }
}
