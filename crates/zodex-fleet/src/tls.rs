//! The mutual-TLS configurations a relay (or an operator) and the service talk over.
//!
//! Both ends trust the fleet's CA and nothing else (no system roots). A client certificate
//! from another CA, expired, or not yet valid is refused in the handshake, before a byte of a
//! request is read. A client that presents none is a new operator joining with a one-time
//! code ([`crate::join`]): the service's listener lets such a connection send one join request
//! and nothing else. The service shows the fleet's CA certificate after its own, so a joiner
//! can find the CA its code pins. TLS 1.3 only. Which member connected is then
//! read from its certificate with [`peer_identity`]; whether that member is still enrolled is
//! the service's question (its state), asked on every request.

use crate::FleetError;
use crate::identity::{Identity, Name, Role};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates in `pem`, in order.
pub fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, FleetError> {
    let mut found = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| FleetError::BadCertificate(e.to_string()))?;
        if block.label == "CERTIFICATE" {
            found.push(CertificateDer::from(block.contents));
        }
    }
    if found.is_empty() {
        return Err(FleetError::BadCertificate("no certificate in it".into()));
    }
    Ok(found)
}

fn private_key(pem: &str) -> Result<PrivateKeyDer<'static>, FleetError> {
    let key = rcgen::KeyPair::from_pem(pem).map_err(|_| FleetError::BadKey)?;
    Ok(PrivatePkcs8KeyDer::from(key.serialize_der()).into())
}

fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>, FleetError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_pem)? {
        roots
            .add(cert)
            .map_err(|e| FleetError::BadCertificate(format!("the CA certificate: {e}")))?;
    }
    Ok(Arc::new(roots))
}

fn tls(e: rustls::Error) -> FleetError {
    FleetError::Tls(e.to_string())
}

/// The service's side: its certificate and key (shown with the fleet's CA after it), and a
/// client certificate checked against the fleet's CA when one is presented. A connection with
/// none is a joiner's: the caller must refuse it everything but a join ([`peer_member`] names
/// no member for it).
pub fn server_config(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<Arc<ServerConfig>, FleetError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| FleetError::Tls(e.to_string()))?;
    let mut chain = certificates(cert_pem)?;
    chain.extend(certificates(ca_pem)?);
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private_key(key_pem)?)
        .map_err(tls)?;
    Ok(Arc::new(config))
}

/// A member's side: the service checked against the fleet's CA, this member's certificate
/// and key presented.
pub fn client_config(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<Arc<ClientConfig>, FleetError> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls)?
        .with_root_certificates(roots(ca_pem)?)
        .with_client_auth_cert(certificates(cert_pem)?, private_key(key_pem)?)
        .map_err(tls)?;
    Ok(Arc::new(config))
}

/// The member a verified connection's client certificate names, which must be of `fleet` and
/// have `role` (a sprite's certificate does not open the admin API, nor the other way round).
pub fn peer_identity(
    peer_certificates: Option<&[CertificateDer<'_>]>,
    fleet: &Name,
    role: Role,
) -> Result<Identity, FleetError> {
    let leaf = peer_certificates
        .and_then(|chain| chain.first())
        .ok_or_else(|| FleetError::BadCertificate("the peer presented none".into()))?;
    let identity = Identity::of_certificate(leaf)?;
    if &identity.fleet != fleet {
        return Err(FleetError::OtherFleet(identity.fleet.to_string()));
    }
    if identity.role != role {
        return Err(FleetError::WrongRole {
            identity: identity.to_string(),
            wanted: role.as_str(),
        });
    }
    Ok(identity)
}

/// The member a verified connection's client certificate names: a sprite or an operator of
/// `fleet` (a service's certificate is a server's and never a client's), with the SHA-256 of
/// the key it certifies, which the service compares with the key the member enrolled with.
pub fn peer_member(
    peer_certificates: Option<&[CertificateDer<'_>]>,
    fleet: &Name,
) -> Result<(Identity, String), FleetError> {
    let leaf = peer_certificates
        .and_then(|chain| chain.first())
        .ok_or_else(|| FleetError::BadCertificate("the peer presented none".into()))?;
    let identity = Identity::of_certificate(leaf)?;
    if &identity.fleet != fleet {
        return Err(FleetError::OtherFleet(identity.fleet.to_string()));
    }
    if identity.role == Role::Service {
        return Err(FleetError::WrongRole {
            identity: identity.to_string(),
            wanted: "sprite or operator",
        });
    }
    let key = crate::certificate_key_sha256(leaf)?;
    Ok((identity, key))
}

/// Checks, as the service's handshake would, that `cert_pem` is a member certificate the
/// fleet's CA (`ca_pem`) issued and that it is valid now: what a member checks before it
/// installs a certificate it was sent.
pub fn verify_member(ca_pem: &str, cert_pem: &str) -> Result<(), FleetError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca_pem)?, provider())
        .build()
        .map_err(|e| FleetError::Tls(e.to_string()))?;
    let chain = certificates(cert_pem)?;
    let now = rustls::pki_types::UnixTime::now();
    verifier
        .verify_client_cert(&chain[0], &chain[1..], now)
        .map(|_| ())
        .map_err(|e| FleetError::BadCertificate(e.to_string()))
}

/// When the (first) certificate in `cert_pem` starts and stops being valid, in Unix seconds.
pub fn validity(cert_pem: &str) -> Result<(i64, i64), FleetError> {
    let chain = certificates(cert_pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&chain[0])
        .map_err(|e| FleetError::BadCertificate(e.to_string()))?;
    let validity = cert.validity();
    Ok((
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    ))
}
