//! OAuth on the resource-server side: `/mcp` accepts an access token the sprite's
//! authorization server signed, checked here with its public key alone; everything that can
//! mint or refresh a token lives elsewhere (the publisher), reached through an
//! [`OAuthForward`] the binary supplies.
//!
//! A token is accepted only from `Authorization: Bearer` (never a query string), only when it
//! is an EdDSA JWT of type `at+jwt` signed by a published key, issued by the published issuer,
//! for exactly the published resource, unexpired, and its client and refresh family are not
//! revoked. The published file (`[mcp] oauth_file`) is followed like the key hash file: one
//! `stat` per request, read again when it changed, so a revocation or `key off` takes effect
//! on the next request.
//!
//! Not here: the routes and the 401 answer (`http.rs`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use super::key::FileStamp;

/// The public file as the publisher writes it (`publisher::oauth::PublishedAuth`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Published {
    pub issuer: String,
    pub resource: String,
    pub resource_metadata: String,
    pub keys: Vec<PublishedKey>,
    pub key_url: bool,
    #[serde(default)]
    pub revoked_families: Vec<String>,
    #[serde(default)]
    pub revoked_clients: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PublishedKey {
    pub kid: String,
    pub x: String,
}

/// The claims checked beyond what `jsonwebtoken` validates (exp, iss, aud).
#[derive(Debug, Deserialize)]
struct Claims {
    client_id: String,
    fam: String,
}

/// An HTTP request for the authorization server, as received.
#[derive(Clone)]
pub struct ForwardRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub body: String,
}

/// The authorization server's answer.
pub struct ForwardReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Passes a request on to the authorization server (blocking: the server runs it on a
/// blocking thread). `Err` says why it could not be asked.
pub trait OAuthForward: Send + Sync + 'static {
    fn forward(&self, request: ForwardRequest) -> Result<ForwardReply, ForwardError>;
}

/// Why the authorization server could not be asked: the binary's own error over the agent
/// socket, which this crate does not know; only logged (the client is answered 503).
pub type ForwardError = Box<dyn std::error::Error + Send + Sync>;

/// The largest OAuth request body passed on.
pub const MAX_FORWARD_BODY: usize = 64 * 1024;

/// Which requests share a pool of connections to the authorization server. The publisher
/// gives this process 8 connections (`[agent_limits] connections_per_process`); the pools
/// together hold 7, so a flood of one kind of anonymous request can take only its own pool:
/// a token refresh never waits behind consent pages or registrations (issue 37).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardClass {
    /// `POST /oauth/token`: what a connected client needs to stay connected.
    Token,
    /// `GET /oauth/authorize`: may wait (briefly) on a client's metadata document.
    Authorize,
    /// Everything else: metadata, registration, the consent page's poll.
    Other,
}

impl ForwardClass {
    pub fn of(method: &str, path: &str) -> Self {
        match (method, path.trim_end_matches('/')) {
            ("POST", "/oauth/token") => ForwardClass::Token,
            ("GET", "/oauth/authorize") => ForwardClass::Authorize,
            _ => ForwardClass::Other,
        }
    }

    /// Connections the class may hold at once.
    pub fn slots(self) -> usize {
        match self {
            ForwardClass::Token => 2,
            ForwardClass::Authorize => 3,
            ForwardClass::Other => 2,
        }
    }

    /// How long a request waits for a connection of its pool before it is answered 503.
    pub fn patience(self) -> std::time::Duration {
        std::time::Duration::from_secs(match self {
            ForwardClass::Token => 20,
            ForwardClass::Authorize | ForwardClass::Other => 5,
        })
    }
}

/// The pools of [`ForwardClass`].
struct ForwardSlots {
    token: Arc<tokio::sync::Semaphore>,
    authorize: Arc<tokio::sync::Semaphore>,
    other: Arc<tokio::sync::Semaphore>,
}

impl Default for ForwardSlots {
    fn default() -> Self {
        let pool = |c: ForwardClass| Arc::new(tokio::sync::Semaphore::new(c.slots()));
        Self {
            token: pool(ForwardClass::Token),
            authorize: pool(ForwardClass::Authorize),
            other: pool(ForwardClass::Other),
        }
    }
}

/// Why a presented token was refused (said in the 401's `error_description`, never logged
/// with the token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NotConfigured,
    Malformed,
    BadSignature,
    WrongAudience,
    Expired,
    /// Its `nbf` (not before) is still ahead.
    NotYetValid,
    Revoked,
}

impl Refusal {
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::NotConfigured => "this server has no OAuth configuration yet",
            Refusal::Malformed => "the token is not an access token of this server",
            Refusal::BadSignature => "the token's signature or issuer is not this server's",
            Refusal::WrongAudience => "the token was issued for another resource",
            Refusal::Expired => "the token expired",
            Refusal::NotYetValid => "the token is not valid yet (its nbf is in the future)",
            Refusal::Revoked => "the token's grant was revoked",
        }
    }
}

/// The resource server's view of OAuth: the followed public file and the forwarder.
pub struct OAuthGate {
    path: PathBuf,
    last: Mutex<Option<(FileStamp, Option<Arc<Published>>)>>,
    forward: Option<Arc<dyn OAuthForward>>,
    slots: ForwardSlots,
    /// The protected-resource metadata URL to name before the file exists.
    fallback_metadata: Option<String>,
}

impl OAuthGate {
    pub fn new(
        path: PathBuf,
        forward: Option<Arc<dyn OAuthForward>>,
        public_url: Option<&str>,
    ) -> Self {
        let fallback_metadata = public_url.and_then(|url| {
            let uri: axum::http::Uri = url.parse().ok()?;
            Some(format!(
                "{}://{}/.well-known/oauth-protected-resource{}",
                uri.scheme_str()?,
                uri.authority()?,
                uri.path().trim_end_matches('/')
            ))
        });
        Self {
            path,
            last: Mutex::new(None),
            forward,
            slots: ForwardSlots::default(),
            fallback_metadata,
        }
    }

    /// The published file as it is now (`None`: absent or unreadable).
    pub fn published(&self) -> Option<Arc<Published>> {
        let stamp = FileStamp::of(&self.path)?;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, published)) = last.as_ref()
            && *seen == stamp
        {
            return published.clone();
        }
        let published = std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Published>(&bytes).ok())
            .map(Arc::new);
        *last = Some((stamp, published.clone()));
        published
    }

    /// Whether `?key=` (and a bearer key) still open /mcp: yes until the operator turns it
    /// off, and while there is no published file yet (the publisher has not started OAuth).
    pub fn key_url_enabled(&self) -> bool {
        self.published().is_none_or(|p| p.key_url)
    }

    pub fn forwarder(&self) -> Option<&Arc<dyn OAuthForward>> {
        self.forward.as_ref()
    }

    /// A connection of `class`'s pool, waiting at most its patience; `None` when the pool
    /// stayed full.
    pub async fn forward_slot(
        &self,
        class: ForwardClass,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let pool = match class {
            ForwardClass::Token => &self.slots.token,
            ForwardClass::Authorize => &self.slots.authorize,
            ForwardClass::Other => &self.slots.other,
        };
        tokio::time::timeout(class.patience(), pool.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// The protected-resource metadata URL the 401 names.
    pub fn resource_metadata_url(&self) -> Option<String> {
        self.published()
            .map(|p| p.resource_metadata.clone())
            .or_else(|| self.fallback_metadata.clone())
    }

    /// Checks an access token at `now` (Unix seconds).
    pub fn verify(&self, token: &str, now: i64) -> Result<(), Refusal> {
        let published = self.published().ok_or(Refusal::NotConfigured)?;
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
        if header.alg != jsonwebtoken::Algorithm::EdDSA
            || header
                .typ
                .as_deref()
                .map(str::to_ascii_lowercase)
                .as_deref()
                != Some("at+jwt")
        {
            return Err(Refusal::Malformed);
        }
        let key = published
            .keys
            .iter()
            .find(|k| header.kid.as_deref() == Some(k.kid.as_str()))
            .ok_or(Refusal::BadSignature)?;
        let decoding = jsonwebtoken::DecodingKey::from_ed_components(&key.x)
            .map_err(|_| Refusal::BadSignature)?;
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
        validation.set_issuer(&[&published.issuer]);
        validation.set_audience(&[&published.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        // Expiry is checked below against `now`, with no leeway.
        validation.validate_exp = false;
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &decoding, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidAudience => Refusal::WrongAudience,
                jsonwebtoken::errors::ErrorKind::InvalidSignature
                | jsonwebtoken::errors::ErrorKind::InvalidIssuer => Refusal::BadSignature,
                _ => Refusal::Malformed,
            })?;
        let exp = data
            .claims
            .get("exp")
            .and_then(|v| v.as_i64())
            .ok_or(Refusal::Malformed)?;
        if exp <= now {
            return Err(Refusal::Expired);
        }
        // `jsonwebtoken` checks `nbf` only when asked, and then with its own clock and leeway:
        // checked here against `now`, as `exp` is. A malformed `nbf` is a malformed token.
        match data.claims.get("nbf") {
            None => {}
            Some(nbf) => match nbf.as_i64() {
                Some(nbf) if nbf > now => return Err(Refusal::NotYetValid),
                Some(_) => {}
                None => return Err(Refusal::Malformed),
            },
        }
        let claims: Claims = serde_json::from_value(data.claims).map_err(|_| Refusal::Malformed)?;
        if published.revoked_families.contains(&claims.fam)
            || published.revoked_clients.contains(&claims.client_id)
        {
            return Err(Refusal::Revoked);
        }
        Ok(())
    }
}

/// True when a bearer value has a JWT's shape (three dot-separated parts): a capability key
/// (base64url, no dots) never does.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_flood_of_consent_pages_leaves_the_token_path_its_connections() {
        let dir = tempfile::tempdir().unwrap();
        let gate = OAuthGate::new(dir.path().join("mcp-oauth.json"), None, None);
        assert_eq!(
            ForwardClass::of("POST", "/oauth/token"),
            ForwardClass::Token
        );
        assert_eq!(
            ForwardClass::of("GET", "/oauth/authorize/"),
            ForwardClass::Authorize
        );
        assert_eq!(
            ForwardClass::of("POST", "/oauth/register"),
            ForwardClass::Other
        );
        let pools = [
            ForwardClass::Token,
            ForwardClass::Authorize,
            ForwardClass::Other,
        ];
        // Together they stay under the publisher's 8 connections per process.
        assert!(pools.iter().map(|c| c.slots()).sum::<usize>() < 8);
        // Every authorize connection held (a tarpit), and every "other" one too …
        let mut held = Vec::new();
        for class in [ForwardClass::Authorize, ForwardClass::Other] {
            for _ in 0..class.slots() {
                held.push(gate.forward_slot(class).await.unwrap());
            }
        }
        // … a refresh still gets its connection at once.
        let token = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            gate.forward_slot(ForwardClass::Token),
        )
        .await
        .expect("the token pool is its own");
        assert!(token.is_some());
        // The full pool makes its own kind wait (and, past its patience, answers 503).
        let more = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            gate.forward_slot(ForwardClass::Authorize),
        )
        .await;
        assert!(more.is_err(), "a full pool handed out one more connection");
        drop(held);
    }

    #[test]
    fn keys_and_jwts_are_told_apart() {
        assert!(looks_like_jwt("a.b.c"));
        assert!(!looks_like_jwt(
            "k3yK3yk3yK3yk3yK3yk3yK3yk3yK3yk3yK3yk3yK3yk"
        ));
    }

    #[test]
    fn without_a_published_file_tokens_are_refused_and_the_key_url_works() {
        let dir = tempfile::tempdir().unwrap();
        let gate = OAuthGate::new(
            dir.path().join("mcp-oauth.json"),
            None,
            Some("https://s.example/mcp"),
        );
        assert_eq!(gate.verify("a.b.c", 0), Err(Refusal::NotConfigured));
        assert!(gate.key_url_enabled());
        assert_eq!(
            gate.resource_metadata_url().as_deref(),
            Some("https://s.example/.well-known/oauth-protected-resource/mcp")
        );
    }
}
