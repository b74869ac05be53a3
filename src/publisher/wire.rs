//! The two socket protocols of `zodex-prd`, shared by the daemon and its clients.
//!
//! - Admin socket: one JSON request line in, one JSON response line out.
//! - Agent socket: a fixed binary header (magic, version, metadata length, bundle length), the
//!   JSON metadata, then exactly `bundle length` raw bytes; one JSON response line out. The
//!   daemon decides on the metadata and the declared size before it reads one bundle byte.

use crate::engine::store::GrantVia;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Largest admin request line or agent metadata block we accept.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Magic bytes opening every agent request.
pub const AGENT_MAGIC: [u8; 4] = *b"ZDXA";
/// The agent protocol version this build speaks.
pub const AGENT_VERSION: u16 = 1;
/// Size of the fixed agent header: magic, version (u16), metadata length (u32), bundle length (u64).
pub const AGENT_HEADER_LEN: usize = 4 + 2 + 4 + 8;

/// A lifetime as requested: a number of seconds, the explicit `--no-ttl` opt-out, or the
/// publisher's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ttl {
    Seconds(i64),
    NoTtl,
    /// Whatever the publisher's default is for the request (30 minutes for a push grant or
    /// request, 2 hours for a YOLO scope): decided on the server, not by each client.
    Default,
}

/// Requests an operator sends through `zodex-prd admin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AdminRequest {
    Ping,
    GrantPush {
        repo: String,
        ttl: Ttl,
        #[serde(default)]
        allow_workflows: bool,
        #[serde(default)]
        via: GrantVia,
        /// Ref patterns the grant is limited to (`feature/*`, `refs/tags/*`, `main`); none:
        /// every ref. The publisher normalises and checks them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
    },
    RevokePush {
        repo: String,
    },
    /// An empty `repos` sets one scope over every installed repository.
    Yolo {
        #[serde(default)]
        repos: Vec<String>,
        ttl: Ttl,
        #[serde(default)]
        allow_workflows: bool,
        /// Ref patterns the scope is limited to; none: every ref.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<String>,
    },
    Default,
    /// Prove the write invariants of the daemon's effective policy set now; the answer is a
    /// `publisher::prove::Report`.
    ProvePolicies,
    /// Ask GitHub now (read-only, audited as `CheckCoverage`) whether each App is installed on
    /// `repo`: what `zodex sprite setup` and `doctor` check for every target.
    CheckCoverage {
        repo: String,
    },
    /// Grants, scopes and requests, each list bounded (with its total) so the answer always
    /// fits the reply cap; `requests` and `audit` page through the rest.
    Status,
    /// One page of pending requests, newest first from `before` (exclusive); the answer's
    /// [`Response::next_before`] is the cursor of the next page.
    Requests {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<i64>,
    },
    Approve {
        id: i64,
        #[serde(default)]
        ttl: Option<Ttl>,
    },
    Deny {
        id: i64,
    },
    /// One page of audit rows (the newest first from `before`, shown oldest first); the
    /// answer's [`Response::next_before`] is the cursor of the next page.
    Audit {
        #[serde(default)]
        since_seconds: Option<i64>,
        #[serde(default)]
        repo: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<i64>,
    },
    /// Store the SHA-256 (hex) of a new MCP capability key; the key itself never travels here.
    SetMcpKeyHash {
        sha256: String,
    },
    /// A what-if `Push` decision for the agent; no side effects.
    Explain {
        repo: String,
        ref_name: String,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        delete: bool,
        #[serde(default)]
        bytes: i64,
        #[serde(default)]
        touches_workflows: bool,
        #[serde(default)]
        ref_exists: bool,
    },
}

/// Requests the agent side sends on the agent socket (the metadata block).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AgentRequest {
    Ping,
    RequestPush {
        repo: String,
        ttl: Ttl,
        #[serde(default)]
        reason: Option<String>,
    },
    /// The state of one of the agent's requests (for `request-push --wait`).
    RequestState {
        id: i64,
    },
    RevokePush {
        repo: String,
    },
    Status,
    /// The credential helper's `get`: a token for the repository `path` names on `host`.
    Credential {
        host: String,
        path: String,
    },
    /// The credential helper's `erase`: forget the cached token (and revoke a write token).
    CredentialErase {
        host: String,
        path: String,
    },
    /// `git-remote-zodex`'s `list for-push`: the repository's branches and tags, fetched into
    /// the publisher's mirror just now.
    ListRefs {
        repo: String,
    },
    /// A direct push: every ref update of one `git push`, their objects in the bundle that
    /// follows (none when every new id is already on GitHub, e.g. a tag or a deletion).
    Push {
        repo: String,
        updates: Vec<PushUpdate>,
        #[serde(default)]
        atomic: bool,
        /// `git push --dry-run`: everything is checked and decided (and audited as a dry
        /// run), nothing is pushed.
        #[serde(default)]
        dry_run: bool,
    },
    /// A review-first pull request from the bundle's `head` commit.
    PublishPr {
        repo: String,
        title: String,
        #[serde(default)]
        body: String,
        /// The branch to merge into; the repository's default branch when absent.
        #[serde(default)]
        base: Option<String>,
        #[serde(default)]
        draft: bool,
        /// The commit to publish (the bundle's tip).
        head: String,
    },
}

impl AgentRequest {
    /// Requests followed by bundle bytes (possibly zero of them).
    pub fn carries_bundle(&self) -> bool {
        matches!(self, Self::Push { .. } | Self::PublishPr { .. })
    }
}

/// The all-zero object id: "absent" in a lease, as git writes it.
pub const ZERO_OID: &str = "0000000000000000000000000000000000000000";

/// One ref update of a push, as git asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushUpdate {
    /// The full destination ref, e.g. `refs/heads/feature`.
    pub dst: String,
    /// The new object id; `None` deletes the ref.
    #[serde(default)]
    pub new: Option<String>,
    /// The push was forced (`+src:dst`, `--force`). Whether the update really is a
    /// non-fast-forward is established by the publisher.
    #[serde(default)]
    pub force: bool,
    /// `--force-with-lease`: the id the ref must still have at GitHub ([`ZERO_OID`]: must not
    /// exist).
    #[serde(default)]
    pub lease: Option<String>,
}

/// The outcome of one ref update, as `git push` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefResult {
    pub dst: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unblock: Option<String>,
}

impl RefResult {
    /// The update went through (or, in a dry run, would).
    pub fn pushed(dst: impl Into<String>) -> Self {
        Self {
            dst: dst.into(),
            ok: true,
            message: None,
            policies: Vec::new(),
            unblock: None,
        }
    }

    /// The update failed for a reason that is not a policy's.
    pub fn failed(dst: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            dst: dst.into(),
            ok: false,
            message: Some(message.into()),
            policies: Vec::new(),
            unblock: None,
        }
    }
}

/// What `zodex-prd` answers to [`AgentRequest::Push`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushOutcome {
    pub repo: String,
    pub results: Vec<RefResult>,
}

/// What `zodex-prd` answers to [`AgentRequest::PublishPr`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub repo: String,
    pub number: u64,
    pub url: String,
    pub branch: String,
    pub base: String,
    pub draft: bool,
    /// The same publish was made before; this is its pull request.
    pub reused: bool,
}

/// What `zodex-prd` answers to [`AgentRequest::Credential`] (the `result`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialGrant {
    pub username: String,
    pub password: String,
    /// Unix seconds.
    pub password_expiry_utc: i64,
    /// `read` or `write`.
    pub kind: String,
}

impl std::fmt::Debug for CredentialGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialGrant")
            .field("username", &self.username)
            .field("password_expiry_utc", &self.password_expiry_utc)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request was malformed: fix it and retry (CLI exit 2).
    Usage,
    /// A policy refused it (CLI exit 3).
    Denied,
    /// The peer may not use this socket at all.
    Forbidden,
    NotFound,
    Conflict,
    Internal,
    /// GitHub (or the way to it) failed — a 5xx, a timeout, a rate limit: nothing was decided
    /// against the agent; try again (CLI exit 1, never 3).
    Upstream,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unblock: Option<String>,
}

/// Every response, on either socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WireError>,
    /// On a paged answer (`requests`, `audit`) with more rows: send the same request again
    /// with `before` set to this to get the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

impl Response {
    pub fn ok(result: impl Serialize) -> Self {
        Self {
            ok: true,
            result: Some(serde_json::to_value(result).unwrap_or(serde_json::Value::Null)),
            error: None,
            next_before: None,
        }
    }

    /// A page of a longer list: `next_before` is the cursor of the next page, if any.
    pub fn page(items: impl Serialize, next_before: Option<i64>) -> Self {
        Self {
            next_before,
            ..Self::ok(items)
        }
    }

    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            ok: false,
            result: None,
            error: Some(WireError {
                kind,
                message: message.into(),
                policies: Vec::new(),
                unblock: None,
            }),
            next_before: None,
        }
    }

    /// The response as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("responses always serialise");
        line.push('\n');
        line
    }
}

/// The fixed header of an agent request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentHeader {
    pub version: u16,
    pub metadata_len: u32,
    pub bundle_len: u64,
}

impl AgentHeader {
    pub fn encode(&self) -> [u8; AGENT_HEADER_LEN] {
        let mut out = [0u8; AGENT_HEADER_LEN];
        out[..4].copy_from_slice(&AGENT_MAGIC);
        out[4..6].copy_from_slice(&self.version.to_be_bytes());
        out[6..10].copy_from_slice(&self.metadata_len.to_be_bytes());
        out[10..18].copy_from_slice(&self.bundle_len.to_be_bytes());
        out
    }

    /// Checks magic, version and the metadata cap; the bundle length is the engine's to judge.
    pub fn decode(bytes: &[u8; AGENT_HEADER_LEN]) -> Result<Self, String> {
        if bytes[..4] != AGENT_MAGIC {
            return Err("not a Zodex agent request (bad magic); use zodex-agent or git-remote-zodex to talk to this socket".into());
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != AGENT_VERSION {
            return Err(format!(
                "agent protocol version {version} is not supported (this zodex-prd speaks {AGENT_VERSION}); install matching zodex-agent and zodex-prd versions"
            ));
        }
        let metadata_len = u32::from_be_bytes(bytes[6..10].try_into().expect("4 bytes"));
        if metadata_len as usize > MAX_REQUEST_BYTES {
            return Err(format!(
                "request metadata of {metadata_len} bytes is over the {MAX_REQUEST_BYTES}-byte cap; send a smaller request"
            ));
        }
        let bundle_len = u64::from_be_bytes(bytes[10..18].try_into().expect("8 bytes"));
        Ok(Self {
            version,
            metadata_len,
            bundle_len,
        })
    }
}

/// Writes one agent request with no bundle and reads its response (blocking client side).
pub fn agent_roundtrip(
    stream: &mut (impl Read + Write),
    request: &AgentRequest,
) -> io::Result<Response> {
    agent_roundtrip_with(stream, request, 0, |_| Ok(()))
}

/// Writes one agent request whose `bundle_len` bytes `send_bundle` writes after the metadata,
/// then reads the response. A request carrying a bundle is ended by the caller half-closing
/// its side in `send_bundle` (the daemon checks nothing follows the declared bytes).
pub fn agent_roundtrip_with<S: Read + Write>(
    stream: &mut S,
    request: &AgentRequest,
    bundle_len: u64,
    send_bundle: impl FnOnce(&mut S) -> io::Result<()>,
) -> io::Result<Response> {
    let metadata = serde_json::to_vec(request).map_err(io::Error::other)?;
    let header = AgentHeader {
        version: AGENT_VERSION,
        metadata_len: metadata.len() as u32,
        bundle_len,
    };
    let sent = (|| {
        let mut head = header.encode().to_vec();
        head.extend_from_slice(&metadata);
        stream.write_all(&head)?;
        stream.flush()?;
        send_bundle(stream)
    })();
    // A daemon that refuses a peer answers and closes without reading the request: the write
    // then fails, but the answer is waiting to be read.
    match (sent, read_response(stream)) {
        (_, Ok(response)) => Ok(response),
        (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(e),
    }
}

/// Reads one response line (blocking), capped at [`MAX_REQUEST_BYTES`].
pub fn read_response(stream: &mut impl Read) -> io::Result<Response> {
    let mut line = Vec::new();
    let mut limited = stream.take(MAX_REQUEST_BYTES as u64 + 1);
    io::BufRead::read_until(&mut io::BufReader::new(&mut limited), b'\n', &mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "zodex-prd closed the connection without an answer; see its log",
        ));
    }
    serde_json::from_slice(&line).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("zodex-prd sent an answer that is not valid JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_bad_magic_version_and_size() {
        let header = AgentHeader {
            version: AGENT_VERSION,
            metadata_len: 12,
            bundle_len: 134_217_729,
        };
        assert_eq!(AgentHeader::decode(&header.encode()), Ok(header));
        let mut bad = header.encode();
        bad[0] = b'X';
        assert!(AgentHeader::decode(&bad).unwrap_err().contains("magic"));
        let v2 = AgentHeader {
            version: 2,
            ..header
        };
        assert!(
            AgentHeader::decode(&v2.encode())
                .unwrap_err()
                .contains("version 2")
        );
        let big = AgentHeader {
            metadata_len: MAX_REQUEST_BYTES as u32 + 1,
            ..header
        };
        assert!(
            AgentHeader::decode(&big.encode())
                .unwrap_err()
                .contains("cap")
        );
    }

    #[test]
    fn requests_have_a_stable_json_shape() {
        let request = AdminRequest::GrantPush {
            repo: "demo/app".into(),
            ttl: Ttl::Seconds(1800),
            allow_workflows: false,
            via: GrantVia::Token,
            refs: Vec::new(),
        };
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(
            json,
            r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":1800},"allow_workflows":false,"via":"token"}"#
        );
        // The paged lists still accept the unpaged request of older clients.
        let parsed: AdminRequest = serde_json::from_str(r#"{"op":"requests"}"#).unwrap();
        assert_eq!(
            parsed,
            AdminRequest::Requests {
                limit: None,
                before: None
            }
        );
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            r#"{"op":"requests"}"#
        );
        let parsed: AdminRequest = serde_json::from_str(r#"{"op":"yolo","ttl":"no_ttl"}"#).unwrap();
        assert_eq!(
            parsed,
            AdminRequest::Yolo {
                repos: vec![],
                ttl: Ttl::NoTtl,
                allow_workflows: false,
                refs: vec![],
            }
        );
    }
}

/// The answer to [`AdminRequest::CheckCoverage`]: what GitHub said just now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageAnswer {
    pub repo: String,
    pub reader_installed: bool,
    pub writer_installed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
}
