//! What the publisher and its clients say to each other, and nothing of either side's
//! internals: both `publisher` (the server) and `agent`, `operator` and `cli` (the clients)
//! depend on this module; it depends on neither.
//!
//! - [`admin`]: the admin socket's requests (one JSON line in, one out);
//! - [`agent`]: the agent socket's requests (a framed header, JSON metadata, bundle bytes);
//! - [`answers`]: the typed result of every request, deserialised by the clients;
//! - [`response`]: the envelope both sockets answer with, and the error kinds;
//! - [`frame`]: the agent header, the blocking client round trip, the request cap;
//! - [`bundle_header`]: the git bundle header the agent writes and the publisher reads;
//! - [`ttl`]: the lifetime a request asks for (its default decided by the publisher).
//!
//! Repository names, and the one parser of remote URLs and credential paths, are
//! `engine::repo`'s: the engine keys its state by them.

pub mod admin;
pub mod agent;
pub mod answers;
pub mod bundle_header;
pub mod frame;
pub mod response;
pub mod ttl;

pub use admin::{
    AdminRequest, CoverageAnswer, McpAuthorizationView, McpClientView, McpClientsAnswer,
    McpKeyUrlState, McpRevoked,
};
pub use agent::{
    AgentRequest, CredentialGrant, ListedRef, OAUTH_MAX_BODY, OAuthHttpReply, OAuthHttpRequest,
    Published, PushOutcome, PushUpdate, RefResult, ZERO_OID,
};
pub use frame::{
    AGENT_HEADER_LEN, AGENT_MAGIC, AGENT_VERSION, AgentHeader, HeaderError, MAX_BUNDLE_BYTES,
    MAX_CHUNK_BYTES, MAX_REQUEST_BYTES, STREAMED_BUNDLE, agent_roundtrip, agent_roundtrip_with,
    end_chunks, read_response, write_chunk,
};
pub use response::{AnswerError, ErrorKind, Response, WireError};
pub use ttl::Ttl;
