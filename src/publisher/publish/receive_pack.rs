//! A receive-pack client over git's smart HTTP protocol (v0/v1): the publisher sends GitHub
//! the pack it verified, as it is on disk, instead of having `git push` pack the same objects
//! again.
//!
//! One session is two requests on one connection: `GET info/refs?service=git-receive-pack`
//! (GitHub's refs and capabilities, read into [`Advertisement`]), then `POST git-receive-pack`
//! with one pkt-line command per ref (`old new ref`: the old id is the value the decision saw,
//! so GitHub itself refuses a ref that moved since), a flush, and the pack streamed from disk
//! (none when every command is a deletion). GitHub's `report-status` answer is parsed into
//! per-ref results ([`Report`]) that are GitHub's own words. The token travels only as an HTTP
//! Basic `Authorization` header marked sensitive; no error text carries it.
//!
//! The transport is the hyper and rustls stack the GitHub client already uses
//! ([`crate::publisher::github`]), with a longer read timeout: GitHub checks the objects of a
//! large push before it answers.

use crate::publisher::github::{Token, USER_AGENT};
use base64::Engine as _;
use futures_util::StreamExt as _;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;
use tokio_util::bytes::Bytes;

/// The all-zero object id: a ref that does not exist (before a creation, after a deletion).
pub const ZERO_ID: &str = "0000000000000000000000000000000000000000";

/// A pack with no objects (header and trailing checksum), sent when no command deletes
/// nothing but every object is already at GitHub: receive-pack expects a pack after any
/// command that is not a deletion.
const EMPTY_PACK: [u8; 32] = [
    b'P', b'A', b'C', b'K', 0, 0, 0, 2, 0, 0, 0, 0, 0x02, 0x9d, 0x08, 0x82, 0x3b, 0xd8, 0xa8, 0xea,
    0xb5, 0x10, 0xad, 0x6a, 0xc7, 0x5c, 0x82, 0x3c, 0xfd, 0x3e, 0xd3, 0x1e,
];

/// The largest pkt-line payload git accepts (65520 bytes with the length).
const MAX_PKT_PAYLOAD: usize = 65516;
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
    #[error("reading the verified pack failed: {0}; push again")]
    Pack(String),
}

/// GitHub's refs and capabilities, as its receive-pack advertised them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advertisement {
    /// Ref name to object id.
    pub refs: HashMap<String, String>,
    /// Objects GitHub has without a ref of this repository naming them (`.have` lines).
    pub haves: Vec<String>,
    pub capabilities: BTreeSet<String>,
}

impl Advertisement {
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    /// Every object id advertised: ref tips and `.have`s.
    pub fn tips(&self) -> Vec<&str> {
        let mut tips: Vec<&str> = self
            .refs
            .values()
            .chain(self.haves.iter())
            .map(String::as_str)
            .collect();
        tips.sort_unstable();
        tips.dedup();
        tips
    }
}

/// One ref command: `old` is what the ref must hold at GitHub (`None`: it must not exist),
/// `new` what it becomes (`None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefCommand {
    pub dst: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// GitHub's `report-status`: whether it unpacked the pack, and each ref's outcome in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub unpack: Result<(), String>,
    pub refs: HashMap<String, Result<(), String>>,
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;
type Connector = hyper_timeout::TimeoutConnector<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
>;

/// One receive-pack session with one repository at GitHub.
pub struct Session<'t> {
    client: hyper_util::client::legacy::Client<Connector, Body>,
    /// `https://github.com/OWNER/REPO.git`, no credentials.
    url: String,
    authorization: HeaderValue,
    token: &'t Token,
}

impl<'t> Session<'t> {
    /// A session with the repository at `url`, authenticated with `token`.
    pub fn new(url: &str, token: &'t Token) -> Result<Self, ReceivePackError> {
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(|e| ReceivePackError::Transport {
                what: "loading the system's TLS roots",
                message: e.to_string(),
            })?
            .https_or_http()
            .enable_http1()
            .build();
        let mut connector = hyper_timeout::TimeoutConnector::new(connector);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        // GitHub checks every object of a large push before it writes its report.
        connector.set_read_timeout(Some(Duration::from_secs(600)));
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build::<_, Body>(connector);
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
            token,
        })
    }

    fn scrub(&self, text: String) -> String {
        super::git::scrub(&text, Some(self.token))
    }

    /// Sends one request; returns GitHub's answer body, refused statuses turned into errors.
    async fn exchange(
        &self,
        what: &'static str,
        request: http::request::Builder,
        body: Body,
    ) -> Result<Bytes, ReceivePackError> {
        let request = request
            .header(AUTHORIZATION, self.authorization.clone())
            .header(http::header::USER_AGENT, USER_AGENT)
            .body(body)
            .map_err(|e| ReceivePackError::Protocol {
                what,
                message: self.scrub(e.to_string()),
            })?;
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
        let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES);
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

    /// `GET info/refs?service=git-receive-pack`: GitHub's refs and capabilities.
    pub async fn advertisement(&self) -> Result<Advertisement, ReceivePackError> {
        const WHAT: &str = "reading GitHub's refs for a push";
        let request =
            http::Request::get(format!("{}/info/refs?service=git-receive-pack", self.url))
                .header(ACCEPT, "*/*");
        let body = self.exchange(WHAT, request, empty_body()).await?;
        parse_advertisement(&body).map_err(|message| ReceivePackError::Protocol {
            what: WHAT,
            message,
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
        let deletes_only = commands.iter().all(|c| c.new.is_none());
        let (body, len): (Body, u64) = match pack {
            Some(path) => {
                let file = tokio::fs::File::open(path)
                    .await
                    .map_err(|e| ReceivePackError::Pack(e.to_string()))?;
                let pack_len = file
                    .metadata()
                    .await
                    .map_err(|e| ReceivePackError::Pack(e.to_string()))?
                    .len();
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
        parse_report(&answer).map_err(|message| ReceivePackError::Protocol {
            what: WHAT,
            message,
        })
    }
}

fn empty_body() -> Body {
    full_body(Vec::new())
}

fn full_body(bytes: Vec<u8>) -> Body {
    BodyExt::boxed_unsync(
        http_body_util::Full::new(Bytes::from(bytes)).map_err(|never| match never {}),
    )
}

/// An error and its causes on one line (hyper's own text hides the cause, "Connection
/// refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// One pkt-line: four hex digits of length (itself included), then the payload.
fn pkt_line(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
    out.extend_from_slice(payload);
}

/// The commands as pkt-lines, capabilities after a NUL on the first, then a flush.
pub fn command_lines(commands: &[RefCommand], capabilities: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, c) in commands.iter().enumerate() {
        let mut line = format!(
            "{} {} {}",
            c.old.as_deref().unwrap_or(ZERO_ID),
            c.new.as_deref().unwrap_or(ZERO_ID),
            c.dst
        )
        .into_bytes();
        if i == 0 {
            line.push(0);
            line.extend_from_slice(capabilities.join(" ").as_bytes());
        }
        line.push(b'\n');
        pkt_line(&mut out, &line);
    }
    out.extend_from_slice(b"0000");
    out
}

/// Splits `bytes` into pkt-lines; `None` stands for a flush packet.
fn pkt_lines(mut bytes: &[u8]) -> Result<Vec<Option<&[u8]>>, String> {
    let mut lines = Vec::new();
    while !bytes.is_empty() {
        let Some(head) = bytes.get(..4) else {
            return Err("a truncated pkt-line length".into());
        };
        let len = std::str::from_utf8(head)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                format!(
                    "{:?} is not a pkt-line length",
                    String::from_utf8_lossy(head)
                )
            })?;
        match len {
            0 => {
                lines.push(None);
                bytes = &bytes[4..];
            }
            1..=3 => return Err(format!("pkt-line length {len} is reserved")),
            _ if len - 4 > MAX_PKT_PAYLOAD => return Err(format!("pkt-line length {len}")),
            _ => {
                let Some(payload) = bytes.get(4..len) else {
                    return Err("a truncated pkt-line".into());
                };
                lines.push(Some(payload.strip_suffix(b"\n").unwrap_or(payload)));
                bytes = &bytes[len..];
            }
        }
    }
    Ok(lines)
}

fn is_object_id(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Reads an `info/refs` answer for `git-receive-pack` (smart HTTP, protocol v0/v1).
pub fn parse_advertisement(body: &[u8]) -> Result<Advertisement, String> {
    let lines = pkt_lines(body)?;
    let mut lines = lines.into_iter().peekable();
    // `# service=git-receive-pack`, a flush, then the refs (a dumb server sends none of it).
    match lines.next() {
        Some(Some(line)) if line == b"# service=git-receive-pack" => {}
        _ => return Err("no `# service=git-receive-pack` line".into()),
    }
    if lines.next() != Some(None) {
        return Err("no flush after the service line".into());
    }
    if lines.peek() == Some(&Some(b"version 1".as_slice())) {
        lines.next();
    }
    let mut advertisement = Advertisement::default();
    let mut first = true;
    for line in lines {
        let Some(line) = line else { break };
        let line = if first {
            first = false;
            let (refline, caps) = match line.iter().position(|&b| b == 0) {
                Some(nul) => (&line[..nul], &line[nul + 1..]),
                None => (line, &b""[..]),
            };
            let caps = String::from_utf8_lossy(caps);
            advertisement.capabilities = caps
                .split(' ')
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            refline
        } else {
            line
        };
        let text = std::str::from_utf8(line).map_err(|_| "a ref line is not UTF-8".to_string())?;
        let Some((oid, name)) = text.split_once(' ') else {
            return Err(format!("{text:?} is not a ref line"));
        };
        if !is_object_id(oid) {
            return Err(format!("{oid:?} is not an object id"));
        }
        match name {
            // An empty repository: capabilities only.
            "capabilities^{}" => {}
            ".have" => advertisement.haves.push(oid.to_string()),
            _ => {
                advertisement.refs.insert(name.to_string(), oid.to_string());
            }
        }
    }
    if first {
        return Err("no refs and no capabilities".into());
    }
    Ok(advertisement)
}

/// Reads a `report-status` answer (without side-band).
pub fn parse_report(body: &[u8]) -> Result<Report, String> {
    let mut unpack = None;
    let mut refs = HashMap::new();
    for line in pkt_lines(body)? {
        let Some(line) = line else { break };
        let text = String::from_utf8_lossy(line);
        if let Some(status) = text.strip_prefix("unpack ") {
            unpack = Some(if status == "ok" {
                Ok(())
            } else {
                Err(status.to_string())
            });
        } else if let Some(name) = text.strip_prefix("ok ") {
            refs.insert(name.to_string(), Ok(()));
        } else if let Some(rest) = text.strip_prefix("ng ") {
            let (name, reason) = rest.split_once(' ').unwrap_or((rest, "rejected"));
            refs.insert(name.to_string(), Err(reason.to_string()));
        } else {
            return Err(format!("unexpected report line {text:?}"));
        }
    }
    let unpack = unpack.ok_or_else(|| "no `unpack` line".to_string())?;
    Ok(Report { unpack, refs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_pkt_lines_with_capabilities_on_the_first() {
        let lines = command_lines(
            &[
                RefCommand {
                    dst: "refs/heads/main".into(),
                    old: Some("a".repeat(40)),
                    new: Some("b".repeat(40)),
                },
                RefCommand {
                    dst: "refs/heads/gone".into(),
                    old: Some("c".repeat(40)),
                    new: None,
                },
            ],
            &["report-status".into(), "atomic".into()],
        );
        let text = String::from_utf8(lines).unwrap();
        let first = format!(
            "{} {} refs/heads/main\0report-status atomic\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let second = format!("{} {ZERO_ID} refs/heads/gone\n", "c".repeat(40));
        assert_eq!(
            text,
            format!(
                "{:04x}{first}{:04x}{second}0000",
                first.len() + 4,
                second.len() + 4
            )
        );
    }

    #[test]
    fn an_advertisement_gives_refs_haves_and_capabilities() {
        let mut body = Vec::new();
        pkt_line(&mut body, b"# service=git-receive-pack\n");
        body.extend_from_slice(b"0000");
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        pkt_line(
            &mut body,
            format!("{a} refs/heads/main\0report-status atomic ofs-delta agent=git/2\n").as_bytes(),
        );
        pkt_line(&mut body, format!("{b} .have\n").as_bytes());
        body.extend_from_slice(b"0000");
        let ad = parse_advertisement(&body).unwrap();
        assert_eq!(ad.refs.get("refs/heads/main"), Some(&a));
        assert_eq!(ad.haves, vec![b.clone()]);
        assert!(ad.has("atomic") && ad.has("report-status") && !ad.has("side-band-64k"));
        assert_eq!(ad.tips(), vec![a.as_str(), b.as_str()]);

        let mut empty = Vec::new();
        pkt_line(&mut empty, b"# service=git-receive-pack\n");
        empty.extend_from_slice(b"0000");
        pkt_line(
            &mut empty,
            format!("{ZERO_ID} capabilities^{{}}\0report-status\n").as_bytes(),
        );
        empty.extend_from_slice(b"0000");
        let ad = parse_advertisement(&empty).unwrap();
        assert!(ad.refs.is_empty() && ad.has("report-status"));

        assert!(parse_advertisement(b"<html>").is_err());
        assert!(parse_advertisement(b"").is_err());
    }

    #[test]
    fn a_report_gives_each_refs_outcome_in_githubs_words() {
        let mut body = Vec::new();
        pkt_line(&mut body, b"unpack ok\n");
        pkt_line(&mut body, b"ok refs/heads/main\n");
        pkt_line(&mut body, b"ng refs/heads/other failed to update ref\n");
        body.extend_from_slice(b"0000");
        let report = parse_report(&body).unwrap();
        assert_eq!(report.unpack, Ok(()));
        assert_eq!(report.refs["refs/heads/main"], Ok(()));
        assert_eq!(
            report.refs["refs/heads/other"],
            Err("failed to update ref".to_string())
        );
        assert!(parse_report(b"0000").is_err(), "no unpack line");
        assert!(parse_report(b"00zz").is_err());
    }
}
