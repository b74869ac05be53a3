//! The agent socket's requests (the JSON metadata block of a framed request) and the answers
//! that are the protocol's own.

use super::Ttl;
use serde::{Deserialize, Serialize};
use zodex_types::{ObjectId, RefName};

/// Requests the agent side sends on the agent socket (the metadata block).
/// `op` (its [`Into<&'static str>`], from strum) is the request's serde tag, for the metrics'
/// labels: a name from this fixed set, never a value the client chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(tag = "op", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// One HTTP request to the MCP endpoint's OAuth authorization server (its metadata,
    /// `/oauth/authorize`, `/oauth/token`, `/oauth/register`), passed on by `zodex-agent serve`
    /// as it arrived: the publisher alone decides it and holds what it needs. Answered with
    /// an [`OAuthHttpReply`].
    McpOauth(OAuthHttpRequest),
    /// A fleet sprite's relay asks for a new certificate before its own expires: a request
    /// signed with the key it enrolled with (the service signs nothing for another key).
    /// Answered with a `FleetEnrolled`'s `certificate_pem`, `ca_pem` and `identity`.
    FleetRenew {
        request_pem: String,
    },
    /// A fleet sprite's relay asks for the public half of its endpoint's OAuth (issuer,
    /// resource, public keys, revocations), to write it where `zodex-agent serve` follows it.
    /// Nothing in it mints or extends a token. Answered with a [`McpPublished`].
    McpOauthPublished,
}

impl AgentRequest {
    /// Requests followed by bundle bytes (possibly zero of them).
    pub fn carries_bundle(&self) -> bool {
        matches!(self, Self::Push { .. } | Self::PublishPr { .. })
    }
}

/// One ref update of a push, as git asked for it. Its names and ids are parsed as the request
/// is read: a request naming a ref git would not accept, or an id that is not one, is refused
/// whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushUpdate {
    /// The full destination ref, e.g. `refs/heads/feature`.
    pub dst: RefName,
    /// The new object id; `None` deletes the ref.
    #[serde(default)]
    pub new: Option<ObjectId>,
    /// The push was forced (`+src:dst`, `--force`). Whether the update really is a
    /// non-fast-forward is established by the publisher.
    #[serde(default)]
    pub force: bool,
    /// `--force-with-lease`: the id the ref must still have at GitHub ([`ObjectId::ZERO`]:
    /// must not exist).
    #[serde(default)]
    pub lease: Option<ObjectId>,
}

/// The outcome of one ref update, as `git push` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefResult {
    pub dst: RefName,
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
    pub fn pushed(dst: RefName) -> Self {
        Self {
            dst,
            ok: true,
            message: None,
            policies: Vec::new(),
            unblock: None,
        }
    }

    /// The update failed for a reason that is not a policy's.
    pub fn failed(dst: RefName, message: impl Into<String>) -> Self {
        Self {
            dst,
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

/// One public key access tokens are checked with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPublishedKey {
    pub kid: String,
    /// The Ed25519 public key, base64url (a JWK's `x`).
    pub x: String,
}

/// The answer to [`AgentRequest::McpOauthPublished`]: the public file `zodex-agent serve`
/// follows (`[mcp] oauth_file`), as the authorization server holds it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPublished {
    pub issuer: String,
    pub resource: String,
    pub resource_metadata: String,
    pub keys: Vec<McpPublishedKey>,
    pub key_url: bool,
    pub revoked_families: Vec<String>,
    pub revoked_clients: Vec<String>,
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

/// One ref of the answer to [`AgentRequest::ListRefs`]: a branch or tag as GitHub has it,
/// fetched into the publisher's mirror just now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedRef {
    pub name: RefName,
    pub oid: ObjectId,
}

/// An HTTP request for the OAuth authorization server, as `zodex-agent serve` received it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthHttpRequest {
    pub method: String,
    /// The path, e.g. `/oauth/token`.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// `Authorization` (a client's `client_secret_basic` credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
    /// The body (UTF-8: forms and JSON), at most [`OAUTH_MAX_BODY`] bytes.
    #[serde(default)]
    pub body: String,
}

/// The largest OAuth request body passed on (a registration or token request is far smaller).
pub const OAUTH_MAX_BODY: usize = 64 * 1024;

impl std::fmt::Debug for OAuthHttpRequest {
    // Bodies and queries carry codes, verifiers and refresh tokens: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthHttpRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// What the authorization server answers: the HTTP response `zodex-agent serve` sends back.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthHttpReply {
    pub status: u16,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default)]
    pub body: String,
}

impl std::fmt::Debug for OAuthHttpReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthHttpReply")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}
