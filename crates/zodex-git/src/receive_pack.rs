//! A receive-pack client over git's smart HTTP protocol (v0/v1): the publisher sends GitHub
//! the pack it verified, as it is on disk, instead of having `git push` pack the same objects
//! again.
//!
//! One session is two requests on one connection (every session shares one client, whose pool
//! keeps the connection for the next): `GET info/refs?service=git-receive-pack`
//! (GitHub's refs and capabilities, read into [`Advertisement`]), then `POST git-receive-pack`
//! with one pkt-line command per ref (`old new ref`: the old id is the value the decision saw,
//! so GitHub itself refuses a ref that moved since), a flush, and the pack streamed from disk
//! (none when every command is a deletion). GitHub's `report-status` answer is parsed into
//! per-ref results ([`Report`]) that are GitHub's own words. The token travels only as an HTTP
//! Basic `Authorization` header marked sensitive; no error text carries it.
//!
//! The transport is the hyper and rustls stack the GitHub client already uses
//! ([`zodex_github`]), with a longer read timeout: GitHub checks the objects of a
//! large push before it answers.

pub use super::pktline::{Advertisement, PktError, RefCommand, Report};
use super::pktline::{command_lines, parse_advertisement, parse_report};
use base64::Engine as _;
use futures_util::StreamExt as _;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use std::path::Path;
use std::time::Duration;
use tokio_util::bytes::Bytes;
use zodex_github::Token;
use zodex_github::error_chain;
use zodex_github::traffic::{Channel, Counted};

/// A pack with no objects (header and trailing checksum), sent when no command deletes
/// nothing but every object is already at GitHub: receive-pack expects a pack after any
/// command that is not a deletion.
const EMPTY_PACK: [u8; 32] = [
    b'P', b'A', b'C', b'K', 0, 0, 0, 2, 0, 0, 0, 0, 0x02, 0x9d, 0x08, 0x82, 0x3b, 0xd8, 0xa8, 0xea,
    0xb5, 0x10, 0xad, 0x6a, 0xc7, 0x5c, 0x82, 0x3c, 0xfd, 0x3e, 0xd3, 0x1e,
];

/// The HTTP `User-Agent` of the session. GitHub answers git's smart protocol only to agents
/// that start with `git/` (others get a 404 or the dumb protocol); what follows says who it is.
/// The protocol's own `agent=` capability carries `zodex-prd/VERSION` alone.
pub const HTTP_USER_AGENT: &str = concat!("git/2.0 (zodex-prd/", env!("CARGO_PKG_VERSION"), ")");

/// The largest answer read from GitHub (refs advertised, or a report).
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ReceivePackError {
    #[error(
        "GitHub answered HTTP {status} to {what}; nothing was pushed; check that the App is installed on the repository with contents: write, then push again"
    )]
    Status { what: &'static str, status: u16 },
    #[error("GitHub answered HTTP {status} to {what}; nothing was pushed; try again in a minute")]
    Server { what: &'static str, status: u16 },
    #[error(
        "talking to GitHub failed during {what} ({message}); the push may or may not have landed; fetch and push again (the lease refuses a repeat that would overwrite)"
    )]
    Transport { what: &'static str, message: String },
    #[error(
        "GitHub's answer to {what} is not git's receive-pack protocol ({message}); nothing is known to be pushed; fetch and push again"
    )]
    Protocol { what: &'static str, message: String },
    // `problem` is in the message, so not a `#[source]` (a chain printer would repeat it).
    #[error(
        "GitHub's answer to {what} is not git's receive-pack protocol ({problem}); nothing is known to be pushed; fetch and push again"
    )]
    Answer {
        what: &'static str,
        problem: PktError,
    },
    #[error("reading the verified pack failed: {0}; push again")]
    Pack(std::io::Error),
}

pub(super) type Body = UnsyncBoxBody<Bytes, std::io::Error>;
type Connector = Counted<
    hyper_timeout::TimeoutConnector<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    >,
>;
type Client = hyper_util::client::legacy::Client<Connector, Body>;

/// How long an idle connection to GitHub is kept for the next session: long enough for the
/// push that follows a `list for-push` (git packs in between), short enough that GitHub has
/// not dropped it yet.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// The one client of every session, made once (issue 38): its pool keeps a connection to the
/// git host open between requests, so the receive-pack that follows `list for-push` goes out on
/// the listing's connection instead of paying TCP's and TLS's round trips again. Each request
/// carries its own `Authorization` (HTTP/1.1 holds no credential on a connection), so a
/// connection opened for one token and reused for another grants the second nothing more.
/// Loading the system's TLS roots, made here once too, costs milliseconds a small push would
/// otherwise pay each time.
fn client() -> Result<Client, ReceivePackError> {
    // The failure is kept for every later session: shared, as an `io::Error` is not `Clone`.
    type Made = Result<Client, std::sync::Arc<std::io::Error>>;
    static CLIENT: std::sync::OnceLock<Made> = std::sync::OnceLock::new();
    let made = CLIENT.get_or_init(|| {
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(std::sync::Arc::new)?
            .https_or_http()
            .enable_http1()
            .build();
        let mut connector = hyper_timeout::TimeoutConnector::new(connector);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        // GitHub checks every object of a large push before it writes its report.
        connector.set_read_timeout(Some(Duration::from_secs(600)));
        let connector = Counted::new(connector, Channel::Git);
        Ok(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(POOL_IDLE)
                .pool_timer(hyper_util::rt::TokioTimer::new())
                .build::<_, Body>(connector),
        )
    });
    made.clone().map_err(|e| ReceivePackError::Transport {
        what: "loading the system's TLS roots",
        message: e.to_string(),
    })
}

/// One receive-pack session with one repository at GitHub.
pub struct Session {
    client: Client,
    /// `https://github.com/OWNER/REPO.git`, no credentials.
    url: String,
    authorization: HeaderValue,
    /// Kept to scrub it out of error texts.
    token: Token,
}

impl Session {
    /// A session with the repository at `url`, authenticated with `token`.
    pub fn new(url: &str, token: &Token) -> Result<Self, ReceivePackError> {
        let client = client()?;
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("x-access-token:{}", token.expose()));
        let mut authorization = HeaderValue::from_str(&format!("Basic {basic}")).map_err(|_| {
            ReceivePackError::Protocol {
                what: "authenticating",
                message: "the token is not a valid header value".into(),
            }
        })?;
        authorization.set_sensitive(true);
        Ok(Self {
            client,
            url: url.trim_end_matches('/').to_string(),
            authorization,
            token: token.clone(),
        })
    }

    fn scrub(&self, text: String) -> String {
        super::git::scrub(&text, Some(&self.token))
    }

    /// Sends one request; returns GitHub's answer body, refused statuses turned into errors.
    async fn exchange(
        &self,
        what: &'static str,
        request: http::request::Builder,
        body: Body,
    ) -> Result<Bytes, ReceivePackError> {
        let answer = self.send(what, request, body).await?;
        let limited = http_body_util::Limited::new(answer, MAX_ANSWER_BYTES);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| ReceivePackError::Transport {
                what,
                message: self.scrub(e.to_string()),
            })?
            .to_bytes();
        Ok(bytes)
    }

    /// Sends one request; returns GitHub's answer body, still to read, refused statuses
    /// turned into errors.
    pub(super) async fn send(
        &self,
        what: &'static str,
        request: http::request::Builder,
        body: Body,
    ) -> Result<Body, ReceivePackError> {
        let request = request
            .header(AUTHORIZATION, self.authorization.clone())
            .header(http::header::USER_AGENT, HTTP_USER_AGENT)
            .body(body)
            .map_err(|e| ReceivePackError::Protocol {
                what,
                message: self.scrub(e.to_string()),
            })?;
        zodex_github::traffic::request(Channel::Git);
        let response =
            self.client
                .request(request)
                .await
                .map_err(|e| ReceivePackError::Transport {
                    what,
                    message: self.scrub(error_chain(&e)),
                })?;
        let status = response.status().as_u16();
        if status >= 500 {
            return Err(ReceivePackError::Server { what, status });
        }
        if status != 200 {
            return Err(ReceivePackError::Status { what, status });
        }
        Ok(BodyExt::boxed_unsync(
            response.into_body().map_err(std::io::Error::other),
        ))
    }

    /// The session's repository URL (no credentials).
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// A transport error's text, the token scrubbed out.
    pub(super) fn transport(
        &self,
        what: &'static str,
        e: impl std::fmt::Display,
    ) -> ReceivePackError {
        ReceivePackError::Transport {
            what,
            message: self.scrub(e.to_string()),
        }
    }

    /// `GET info/refs?service=git-receive-pack`: GitHub's refs and capabilities.
    pub async fn advertisement(&self) -> Result<Advertisement, ReceivePackError> {
        const WHAT: &str = "reading GitHub's refs for a push";
        let request =
            http::Request::get(format!("{}/info/refs?service=git-receive-pack", self.url))
                .header(ACCEPT, "*/*");
        let body = self.exchange(WHAT, request, empty_body()).await?;
        parse_advertisement(&body).map_err(|problem| ReceivePackError::Answer {
            what: WHAT,
            problem,
        })
    }

    /// `GET info/refs?service=git-upload-pack` (protocol v0): GitHub's refs as a read token
    /// sees them, in one round trip and without a download.
    pub async fn refs(&self) -> Result<Advertisement, ReceivePackError> {
        const WHAT: &str = "reading GitHub's refs";
        let request = http::Request::get(format!("{}/info/refs?service=git-upload-pack", self.url))
            .header(ACCEPT, "*/*");
        let body = self.exchange(WHAT, request, empty_body()).await?;
        super::pktline::parse_advertisement_of("git-upload-pack", &body).map_err(|problem| {
            ReceivePackError::Answer {
                what: WHAT,
                problem,
            }
        })
    }

    /// `POST git-receive-pack`: `commands`, then the pack at `pack` (`None`: every command is a
    /// deletion, or an empty pack when one is not). `capabilities` go on the first command.
    pub async fn push(
        &self,
        commands: &[RefCommand],
        capabilities: &[String],
        pack: Option<&Path>,
    ) -> Result<Report, ReceivePackError> {
        const WHAT: &str = "sending the push";
        let head = command_lines(commands, capabilities);
        let deletes_only = commands.iter().all(|c| c.change.is_delete());
        // A request of deletions only carries no pack at all.
        let pack = pack.filter(|_| !deletes_only);
        let (body, len): (Body, u64) = match pack {
            Some(path) => {
                let file = tokio::fs::File::open(path)
                    .await
                    .map_err(ReceivePackError::Pack)?;
                let pack_len = file.metadata().await.map_err(ReceivePackError::Pack)?.len();
                let len = head.len() as u64 + pack_len;
                let first = futures_util::stream::once(async move { Ok(Bytes::from(head)) });
                let rest = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024);
                let stream = first
                    .chain(rest)
                    .map(|chunk| chunk.map(http_body::Frame::data));
                (
                    BodyExt::boxed_unsync(http_body_util::StreamBody::new(stream)),
                    len,
                )
            }
            None => {
                let mut bytes = head;
                if !deletes_only {
                    bytes.extend_from_slice(&EMPTY_PACK);
                }
                let len = bytes.len() as u64;
                (full_body(bytes), len)
            }
        };
        let request = http::Request::post(format!("{}/git-receive-pack", self.url))
            .header(CONTENT_TYPE, "application/x-git-receive-pack-request")
            .header(ACCEPT, "application/x-git-receive-pack-result")
            .header(CONTENT_LENGTH, len);
        let answer = self.exchange(WHAT, request, body).await?;
        parse_report(&answer).map_err(|problem| ReceivePackError::Answer {
            what: WHAT,
            problem,
        })
    }
}

impl Session {
    /// `POST git-receive-pack` with the pack taken from `pack` as it comes (chunked: its length
    /// is not known yet). An error item from `pack` aborts the request: the connection drops
    /// before the pack's end, and GitHub keeps nothing of it (see
    /// [`super::forward`]).
    pub async fn push_streamed(
        &self,
        commands: &[RefCommand],
        capabilities: &[String],
        pack: impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    ) -> Result<Report, ReceivePackError> {
        const WHAT: &str = "sending the push";
        let head = command_lines(commands, capabilities);
        let first = futures_util::stream::once(async move { Ok(Bytes::from(head)) });
        let stream = first
            .chain(pack)
            .map(|chunk| chunk.map(http_body::Frame::data));
        let body = BodyExt::boxed_unsync(http_body_util::StreamBody::new(stream));
        let request = http::Request::post(format!("{}/git-receive-pack", self.url))
            .header(CONTENT_TYPE, "application/x-git-receive-pack-request")
            .header(ACCEPT, "application/x-git-receive-pack-result");
        let answer = self.exchange(WHAT, request, body).await?;
        parse_report(&answer).map_err(|problem| ReceivePackError::Answer {
            what: WHAT,
            problem,
        })
    }
}

fn empty_body() -> Body {
    full_body(Vec::new())
}

pub(super) fn full_body(bytes: Vec<u8>) -> Body {
    BodyExt::boxed_unsync(
        http_body_util::Full::new(Bytes::from(bytes)).map_err(|never| match never {}),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_http_agent_is_one_github_speaks_the_smart_protocol_to() {
        assert!(super::HTTP_USER_AGENT.starts_with("git/"));
        assert!(super::HTTP_USER_AGENT.contains("zodex-prd/"));
    }
}
