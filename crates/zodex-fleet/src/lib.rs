//! A fleet's identities: one certificate authority per fleet, a certificate per member (a
//! sprite's relay, an operator, a replica of the service), and the mutual-TLS configurations
//! they talk over (issue "A fleet"; docs/fleet.md).
//!
//! Why mutual TLS and not signed requests: the handshake authenticates both ends before a
//! request is read, binds every byte of the session to the keys (no body-binding, replay or
//! clock-skew scheme of our own to get right), and is what a load balancer in TCP pass-through
//! leaves intact. The identity is a SPIFFE-shaped URI in the certificate ([`identity`]).
//!
//! Code map:
//! - [`identity`]: names, roles, and the identity a certificate carries;
//! - [`ca`]: the fleet's CA (create, load, issue) and a member's own key pair and request;
//! - [`key_hash`]: the fingerprint of a member's key, from its request and its certificate;
//! - [`tls`]: rustls configurations for the service and for members, and who the peer is;
//! - [`files`]: a member's own directory: its key (made there), certificate and the CA;
//! - [`join`]: a new operator's one-time join code, and the TLS client that pins the CA by it;
//! - [`service_url`]: a replica as members name it (`https://HOST:PORT`).
//!
//! Invariants: a member's private key is made where it runs and never leaves it (only a
//! request does); the CA writes every field of a certificate itself (a request chooses only its
//! key, and must ask for the identity it is registered as); member certificates are for clients
//! and service certificates for servers, never both; both ends trust the fleet's CA only.

pub mod ca;
pub mod files;
pub mod identity;
pub mod join;
pub mod key_hash;
pub mod service_url;
pub mod tls;

pub use ca::{FleetCa, MemberKey};
pub use files::{FilesError, MemberFiles};
pub use identity::{Identity, Name, Role};
pub use join::JoinCode;
pub use key_hash::{certificate_key_sha256, request_key_sha256};
pub use service_url::Replica;

/// What can go wrong with a fleet identity. Messages say what to do next.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(
        "{0:?} is not a valid fleet, sprite or operator name: use 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'"
    )]
    BadName(String),
    #[error("the certificate cannot be used: {0}")]
    BadCertificate(String),
    #[error(
        "the certificate request is refused: {0}; make a new request with the sprite's own key (zodex fleet enroll)"
    )]
    BadRequest(String),
    #[error("the private key cannot be read (expected a PEM private key made by zodex)")]
    BadKey,
    #[error("the certificate belongs to fleet {0:?}, not this one")]
    OtherFleet(String),
    #[error("the certificate is the {identity}'s; this needs a {wanted}'s")]
    WrongRole {
        identity: String,
        wanted: &'static str,
    },
    #[error("{0:?} is not a replica's address; write https://HOST:PORT (one per replica)")]
    BadService(String),
    #[error(
        "this is not a join code ({0}); paste the whole code `zodex fleet operator add NAME` printed"
    )]
    BadJoinCode(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("the key or certificate could not be made: {0}")]
    Crypto(String),
}

#[cfg(test)]
mod tests;
