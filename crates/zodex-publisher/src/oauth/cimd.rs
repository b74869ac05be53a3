//! Client ID Metadata Documents: a client whose id is an `https` URL is described by the JSON
//! document at that URL. Fetching a URL a stranger names is a server-side request the stranger
//! steers, so it is bounded: `https` only, every address the name resolves to must be public
//! (checked on the very addresses connected to, so DNS rebinding cannot slip past), no
//! redirects, 5 s, 16 KiB, and the document must name itself as `client_id`.
//!
//! A stranger also steers how long a fetch takes (a host that accepts and never answers), so
//! no request waits for one (issue 37): [`Documents`] runs each fetch as a task of its own —
//! at most [`MAX_FETCHES`] at once and [`MAX_FETCHES_PER_HOST`] per host — keeps what it found
//! for a while, and lets the consent page wait at most [`INLINE_WAIT`] before it answers "still
//! checking" and reloads. The token path never meets a fetch.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::error::{DocumentError, OpenError};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use serde::Deserialize;

/// The largest document read.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024;
/// How long a fetch may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Fetches running at once, and per host.
pub const MAX_FETCHES: usize = 16;
pub const MAX_FETCHES_PER_HOST: usize = 2;
/// How long an authorization request waits for a fetch before it answers "still checking".
pub const INLINE_WAIT: Duration = Duration::from_millis(300);
/// How long a fetched document (and a refusal) is kept.
const KEEP_DOCUMENT: Duration = Duration::from_secs(300);
const KEEP_REFUSAL: Duration = Duration::from_secs(30);
/// Documents and refusals kept at once (each at most [`MAX_DOCUMENT_BYTES`] as read).
pub const MAX_KEPT: usize = 256;

/// What this server reads of a metadata document.
#[derive(Debug, Clone, Deserialize)]
pub struct Document {
    pub client_id: String,
    #[serde(default)]
    pub client_name: String,
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
}

/// A document, or why it was refused: kept, and shared by every request that asks.
pub type Found = Result<Document, Arc<DocumentError>>;

/// Where a document stands for an authorization request.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Fetched (or refused) recently.
    Ready(Found),
    /// Being fetched: ask again in a moment.
    Pending,
    /// Too many fetches run (in all or for this host): ask again in a moment.
    Busy,
}

type Done = (std::time::Instant, Found);

#[derive(Default)]
struct Kept {
    done: std::collections::HashMap<String, Done>,
    /// Insertion order of `done`, oldest first (evicted first).
    order: std::collections::VecDeque<String>,
    running: std::collections::HashMap<String, tokio::sync::watch::Receiver<bool>>,
    per_host: std::collections::HashMap<String, usize>,
}

/// Metadata documents as authorization requests see them: fetched in the background, bounded
/// in number, time and memory, kept for a while. A clone shares the fetches, the limits and
/// what is kept (a fleet's sprites share one).
#[derive(Clone)]
pub struct Documents {
    fetcher: Arc<Fetcher>,
    kept: Arc<std::sync::Mutex<Kept>>,
}

impl Documents {
    pub fn new(fetcher: Fetcher) -> Self {
        Self {
            fetcher: Arc::new(fetcher),
            kept: Arc::default(),
        }
    }

    /// The document at `url`, waiting for a fetch at most `wait`.
    pub async fn lookup(&self, url: &str, wait: Duration) -> Lookup {
        let mut running = {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(found) = kept.fresh(url) {
                return Lookup::Ready(found);
            }
            match kept.running.get(url) {
                Some(rx) => rx.clone(),
                None => match self.start(&mut kept, url) {
                    Some(rx) => rx,
                    None => return Lookup::Busy,
                },
            }
        };
        let _ = tokio::time::timeout(wait, running.wait_for(|done| *done)).await;
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.fresh(url).map_or(Lookup::Pending, Lookup::Ready)
    }

    /// Starts fetching `url` unless the limits are reached.
    fn start(&self, kept: &mut Kept, url: &str) -> Option<tokio::sync::watch::Receiver<bool>> {
        let host = url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_ascii_lowercase))
            .unwrap_or_default();
        let of_host = kept.per_host.get(&host).copied().unwrap_or(0);
        if kept.running.len() >= MAX_FETCHES || of_host >= MAX_FETCHES_PER_HOST {
            return None;
        }
        let (tx, rx) = tokio::sync::watch::channel(false);
        kept.running.insert(url.to_string(), rx.clone());
        *kept.per_host.entry(host.clone()).or_default() += 1;
        let (fetcher, shared, url) = (self.fetcher.clone(), self.kept.clone(), url.to_string());
        tokio::spawn(async move {
            // The fetch is bounded by FETCH_TIMEOUT inside.
            let found = fetcher.fetch(&url).await;
            let mut kept = shared.lock().unwrap_or_else(|p| p.into_inner());
            kept.running.remove(&url);
            if let Some(n) = kept.per_host.get_mut(&host) {
                *n -= 1;
                if *n == 0 {
                    kept.per_host.remove(&host);
                }
            }
            kept.keep(url, found.map_err(Arc::new));
            let _ = tx.send(true);
        });
        Some(rx)
    }
}

impl Kept {
    /// What was found for `url`, while it is kept. A stale entry stays until it is fetched
    /// again or evicted, so `order` names each entry of `done` exactly once.
    fn fresh(&self, url: &str) -> Option<Found> {
        let (at, found) = self.done.get(url)?;
        let keep = if found.is_ok() {
            KEEP_DOCUMENT
        } else {
            KEEP_REFUSAL
        };
        (at.elapsed() < keep).then(|| found.clone())
    }

    fn keep(&mut self, url: String, found: Found) {
        while self.done.len() >= MAX_KEPT {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.done.remove(&oldest);
        }
        if self
            .done
            .insert(url.clone(), (std::time::Instant::now(), found))
            .is_none()
        {
            self.order.push_back(url);
        }
    }
}

type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<HttpConnector<PublicResolver>>,
    Empty<Bytes>,
>;

pub struct Fetcher {
    client: Client,
    private_hosts: Arc<Vec<String>>,
}

impl Fetcher {
    pub fn new(private_hosts: Vec<String>) -> Result<Self, OpenError> {
        let private_hosts = Arc::new(
            private_hosts
                .into_iter()
                .map(|h| h.to_ascii_lowercase())
                .collect::<Vec<_>>(),
        );
        let mut http = HttpConnector::new_with_resolver(PublicResolver {
            private_hosts: private_hosts.clone(),
        });
        http.enforce_http(false);
        http.set_connect_timeout(Some(FETCH_TIMEOUT));
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(OpenError::TlsRoots)?
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        Ok(Self {
            client,
            private_hosts,
        })
    }

    /// Fetches and checks the document at `url` (the client id).
    pub async fn fetch(&self, url: &str) -> Result<Document, DocumentError> {
        let uri: http::Uri = url.parse().map_err(|_| DocumentError::NotUrl)?;
        if uri.scheme_str() != Some("https") || matches!(uri.path(), "" | "/") {
            return Err(DocumentError::NotHttpsPath);
        }
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
        // An address literal is connected to without asking the resolver: check it here.
        if let Ok(ip) = host.parse::<IpAddr>()
            && !is_public(ip)
            && !self.private_hosts.iter().any(|h| h == host)
        {
            return Err(DocumentError::PrivateAddress(ip));
        }
        let request = http::Request::get(uri.clone())
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::USER_AGENT,
                concat!("zodex-prd/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::new())
            .map_err(DocumentError::Request)?;
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(DocumentError::Fetch)?;
            let status = response.status();
            if status.is_redirection() {
                return Err(DocumentError::Redirect(status));
            }
            if !status.is_success() {
                return Err(DocumentError::Status(status));
            }
            let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
                .collect()
                .await
                .map_err(|_| DocumentError::TooLarge)?
                .to_bytes();
            Ok(body)
        })
        .await
        .map_err(|_| DocumentError::Timeout)??;
        let document: Document =
            serde_json::from_slice(&fetched).map_err(DocumentError::NotJson)?;
        if document.client_id != url {
            return Err(DocumentError::OtherClientId(document.client_id));
        }
        if document.client_secret.is_some()
            || document
                .token_endpoint_auth_method
                .as_deref()
                .is_some_and(|m| m != "none")
        {
            return Err(DocumentError::NotPublic);
        }
        if document.redirect_uris.is_empty() {
            return Err(DocumentError::NoRedirectUris);
        }
        for uri in &document.redirect_uris {
            super::register::check_redirect_uri(uri)?;
        }
        Ok(Document {
            client_name: document
                .client_name
                .chars()
                .filter(|c| !c.is_control())
                .take(100)
                .collect(),
            ..document
        })
    }
}

/// A resolver that returns only public addresses (or any address of a host the configuration
/// lets through), and fails when none is left.
#[derive(Clone)]
pub struct PublicResolver {
    private_hosts: Arc<Vec<String>>,
}

impl tower_service::Service<Name> for PublicResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let private_ok = self
            .private_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name.as_str()));
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await?
                .filter(|a| private_ok || is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(std::io::Error::other(format!(
                    "{} resolves to no public address (private, loopback and link-local addresses are refused)",
                    name.as_str()
                )));
            }
            Ok(addrs.into_iter())
        })
    }
}

/// True for an address on the public internet: not loopback, private, link-local, shared,
/// multicast, documentation, benchmarking or otherwise reserved.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            // Only global unicast (2000::/3) reaches the public internet; everything else —
            // IPv4-compatible (::/96), NAT64 (64:ff9b::/96, 64:ff9b:1::/48), discard (100::/64),
            // unique-local, link- and site-local, multicast — is refused outright. Inside
            // 2000::/3, the ranges that lead to another network or none: the IETF protocol
            // assignments (2001::/23, Teredo's 2001::/32 among them), documentation
            // (2001:db8::/32, 3fff::/20) and 6to4 (2002::/16), which tunnels to any IPv4
            // address, private ones included.
            let s = v6.segments();
            let global_unicast = (s[0] & 0xe000) == 0x2000;
            let ietf_assignments = s[0] == 0x2001 && s[1] < 0x0200;
            let documentation = (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] & 0xfff0) == 0x3ff0;
            let six_to_four = s[0] == 0x2002;
            global_unicast && !ietf_assignments && !documentation && !six_to_four
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            // IPv4-compatible, NAT64 (well-known and local-use), 6to4, Teredo, site-local,
            // discard-only, documentation, ORCHIDv2, unspecified-ish.
            "::127.0.0.1",
            "::10.0.0.1",
            "::8.8.8.8",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2002:a00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "fec0::1",
            "feff::1",
            "100::1",
            "2001:db8::1",
            "3fff::1",
            "2001:20::1",
            "ff02::1",
            "::",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "1.1.1.1",
            "140.82.112.3",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:1.1.1.1",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn a_document_at_a_private_address_is_never_fetched() {
        let fetcher = Fetcher::new(Vec::new()).unwrap();
        let err = fetcher
            .fetch("https://127.0.0.1:1/client.json")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("private address"), "{err}");
        let err = fetcher
            .fetch("https://localhost:1/client.json")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no public address"), "{err}");
        let err = fetcher
            .fetch("http://c.example/client.json")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("https"), "{err}");
    }
}
