//! What can go wrong in the authorization server, by what failed: its settings, opening it,
//! writing its public file, its keys, and what a client sends (a form, a redirect URI, a
//! metadata document). The last three are answered to the client as text (an OAuth
//! `error_description` or a page), so each says what to change.

use std::net::IpAddr;
use std::path::PathBuf;
use zodex_engine::store::StoreError;
use zodex_github::error_chain;

use super::cimd::{FETCH_TIMEOUT, MAX_DOCUMENT_BYTES};
use super::register::MAX_URI_CHARS;

/// Why `[mcp] public_url` cannot be the resource of an authorization server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("[mcp] public_url {0:?} is not a URL")]
    NotUrl(String),
    #[error("[mcp] public_url {0:?} must be https (plain http only on loopback) for OAuth")]
    NotHttps(String),
    #[error("[mcp] public_url must not have a query for OAuth")]
    Query,
}

/// Why the authorization server could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("loading the system's TLS roots: {0}")]
    TlsRoots(std::io::Error),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("{0}")]
    Store(StoreError),
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// Why the public file was not written.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Store(StoreError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(
        "cannot write the MCP OAuth file {}: {error}; its directory must be writable by the publisher user",
        path.display()
    )]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Why a signing key could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("could not generate an Ed25519 key")]
    Generate,
    #[error("could not read back the generated Ed25519 key")]
    ReadBack,
    #[error("signing an access token failed: {0}")]
    Sign(jsonwebtoken::errors::Error),
}

/// A query or form body that is not one value per field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    #[error("the parameter {0} is given more than once")]
    Repeated(String),
}

/// A redirect URI a client may not use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectUriError {
    #[error("a redirect URI is at most {MAX_URI_CHARS} characters")]
    TooLong,
    #[error("the redirect URI {0:?} has a fragment")]
    Fragment(String),
    #[error("the redirect URI {0:?} has a backslash")]
    Backslash(String),
    #[error("the redirect URI {0:?} has a user part (user@host): name the host alone")]
    UserPart(String),
    #[error("the redirect URI {0:?} is not a URL")]
    NotUrl(String),
    #[error("the redirect URI {0:?} uses plain http off loopback: use https")]
    PlainHttp(String),
    #[error(
        "the redirect URI {0:?} must be https, http on loopback, or a private-use scheme (reverse domain name)"
    )]
    Scheme(String),
}

/// Why a client's metadata document was refused.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("the client id is not a URL")]
    NotUrl,
    #[error("a client id URL must be https with a path")]
    NotHttpsPath,
    #[error("the client's metadata document is at a private address ({0})")]
    PrivateAddress(IpAddr),
    #[error("building the request: {0}")]
    Request(http::Error),
    #[error(
        "fetching the client's metadata document failed: {}",
        error_chain(.0)
    )]
    Fetch(hyper_util::client::legacy::Error),
    #[error("the client's metadata document answered {0} (a redirect): redirects are not followed")]
    Redirect(http::StatusCode),
    #[error("the client's metadata document answered {0}")]
    Status(http::StatusCode),
    #[error("the client's metadata document is larger than {MAX_DOCUMENT_BYTES} bytes")]
    TooLarge,
    #[error(
        "the client's metadata document did not arrive within {} s",
        FETCH_TIMEOUT.as_secs()
    )]
    Timeout,
    #[error("the client's metadata document is not valid JSON metadata: {0}")]
    NotJson(serde_json::Error),
    #[error("the client's metadata document names another client_id ({0:?})")]
    OtherClientId(String),
    #[error(
        "a metadata-document client must be public (token_endpoint_auth_method none, no secret)"
    )]
    NotPublic,
    #[error("the client's metadata document has no redirect_uris")]
    NoRedirectUris,
    #[error(transparent)]
    RedirectUri(#[from] RedirectUriError),
}
