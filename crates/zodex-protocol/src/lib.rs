//! What the publisher and its clients say to each other, and nothing of either side's
//! internals: both `zodex-publisher` (the server) and `zodex-agent`, `zodex-operator` and the
//! root crate's `cli` (the clients) depend on this crate; it depends on neither, only on
//! `zodex-types` (the vocabulary) and, with its default `engine` feature, on `zodex-engine`,
//! whose values many answers are made from with `From` (a client turns the feature off). `zodex-git` also reads the bundle
//! header, the listed refs and the push updates from here.
//!
//! Code map:
//! - [`admin`]: the admin socket's requests (one JSON line in, one out);
//! - [`agent`]: the agent socket's requests (a framed header, JSON metadata, bundle bytes);
//! - [`answers`]: the typed result of every request, deserialised by the clients (its table says
//!   which request gets which answer); each the protocol's own type, made from the engine's value
//!   with `From`, its JSON pinned by golden tests; `WireBytes`, the measure of the engine's page
//!   budgets;
//! - [`response`]: the envelope both sockets answer with, and the error kinds the CLIs map to exit
//!   codes;
//! - [`frame`]: the agent header, the blocking client round trip, the request cap;
//! - [`bundle_header`]: the git bundle header the agent writes and the publisher reads;
//! - [`doctor`]: checks' findings, and a fleet replica's `fleet_doctor` answer;
//! - [`ttl`]: the lifetime a request asks for (its default decided by the publisher);
//! - [`watch`]: the board's stream, made of the operator's read requests, over whatever
//!   [`watch::AdminCall`] carries them (the admin socket; a fleet's mutual TLS).
//!
//! Repository names, and the one parser of remote URLs and credential paths, are
//! `zodex_types::repo`'s: the engine keys its state by them.
//!
//! Invariants:
//! - Depends on `zodex-types`, and `zodex-engine` behind `engine` (tidy checks the manifest); the publisher and its clients
//!   share this crate and never each other's internals.
//! - Every request has one typed answer: the publisher builds it, the client reads it back with
//!   `Response::answer`, so a renamed field breaks the build on both sides, and an answer of
//!   another shape is said as a version mismatch, never shown blank.
//! - The wire is this crate's: no engine or store type is re-exported as a request or an answer,
//!   so what the engine stores, and how, never changes what travels.
//! - The wire is bounded: agent metadata and every response line under `MAX_REQUEST_BYTES`
//!   (1 MiB), a bundle under `MAX_BUNDLE_BYTES` (128 MiB), streamed in chunks of at most
//!   `MAX_CHUNK_BYTES`.

pub mod admin;
pub mod agent;
pub mod answers;
pub mod bundle_header;
pub mod doctor;
pub mod frame;
pub mod response;
pub mod ttl;
pub mod watch;

pub use admin::{
    AdminRequest, CoverageAnswer, FleetEnrolled, FleetJoinCodeIssued, FleetJoinRequest,
    FleetMcpEndpoint, FleetMember, FleetRemoved, FleetRenewed, FleetRole, ForSprites,
    McpAuthorizationView, McpClientView, McpClientsAnswer, McpKeyUrlState, McpRevoked,
};
pub use agent::{
    AgentRequest, CredentialGrant, ListedRef, McpPublished, McpPublishedKey, OAUTH_MAX_BODY,
    OAuthHttpReply, OAuthHttpRequest, Published, PushOutcome, PushUpdate, RefResult,
};
pub use doctor::{Finding, Findings, FleetDoctorAnswer, MemberHealth};
pub use frame::{
    AGENT_HEADER_LEN, AGENT_MAGIC, AGENT_VERSION, AgentHeader, HeaderError, MAX_BUNDLE_BYTES,
    MAX_CHUNK_BYTES, MAX_REQUEST_BYTES, STREAMED_BUNDLE, agent_roundtrip, agent_roundtrip_with,
    end_chunks, read_response, write_chunk,
};
pub use response::{AnswerError, ErrorKind, Response, WireError};
pub use ttl::Ttl;
