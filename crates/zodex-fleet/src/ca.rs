//! The fleet's certificate authority, and the key pairs members make for themselves.
//!
//! A member (a sprite's relay, an operator) makes its key pair where it runs and sends only a
//! certificate request; the CA signs a short-lived certificate naming the identity the service
//! registered for it. The request proves possession of the key (its signature is checked) and
//! must ask for that same identity, but nothing else in it is copied: the CA writes every field
//! itself, so a request cannot make itself a CA, a server, or someone else.

use crate::FleetError;
use crate::identity::{Identity, Name, Role};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData,
    SanType,
};
use std::time::Duration;
use time::OffsetDateTime;

/// How long the CA's own certificate is valid.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// A certificate is valid from this long before it was issued: a member whose clock is a
/// little behind the CA's can use it at once.
const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// The fleet's CA: its certificate and its signing key (held by the service only).
pub struct FleetCa {
    fleet: Name,
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for FleetCa {
    /// Everything but the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetCa")
            .field("fleet", &self.fleet)
            .finish_non_exhaustive()
    }
}

impl FleetCa {
    /// A new CA for `fleet`, with a fresh key.
    pub fn create(fleet: &Name) -> Result<FleetCa, FleetError> {
        let key = KeyPair::generate().map_err(crypto)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = common_name(&format!("zodex fleet {fleet} CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - CLOCK_SKEW;
        params.not_after = now + CA_VALIDITY;
        let cert = params.self_signed(&key).map_err(crypto)?;
        Self::load(fleet, &cert.pem(), &key.serialize_pem())
    }

    /// The CA of `fleet` from its certificate and key (PEM), as [`FleetCa::create`] made them.
    pub fn load(fleet: &Name, cert_pem: &str, key_pem: &str) -> Result<FleetCa, FleetError> {
        let key = KeyPair::from_pem(key_pem).map_err(|_| FleetError::BadKey)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
            .map_err(|e| FleetError::BadCertificate(format!("the CA certificate: {e}")))?;
        Ok(FleetCa {
            fleet: fleet.clone(),
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            issuer,
        })
    }

    /// The CA of `fleet` carried from another of its replicas (`zodex-prd fleet export-ca`):
    /// as [`FleetCa::load`], and refused unless the certificate is a CA's, names `fleet` as
    /// [`FleetCa::create`] names it, and certifies `key_pem`'s key — so a replica never signs
    /// with a key its members' trusted certificate does not hold, nor for another fleet.
    pub fn import(fleet: &Name, cert_pem: &str, key_pem: &str) -> Result<FleetCa, FleetError> {
        let ca = Self::load(fleet, cert_pem, key_pem)?;
        let der = crate::tls::certificates(cert_pem)?
            .into_iter()
            .next()
            .ok_or_else(|| FleetError::BadCertificate("no certificate in it".into()))?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| FleetError::BadCertificate(e.to_string()))?;
        if !cert.is_ca() {
            return Err(FleetError::BadCertificate("it is not a CA's".into()));
        }
        let subject = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or_default();
        let named = subject
            .strip_prefix("zodex fleet ")
            .and_then(|rest| rest.strip_suffix(" CA"))
            .unwrap_or(subject);
        if named != fleet.as_str() {
            return Err(FleetError::OtherFleet(named.to_owned()));
        }
        let key = KeyPair::from_pem(key_pem).map_err(|_| FleetError::BadKey)?;
        if cert.tbs_certificate.subject_pki.raw != key.subject_public_key_info().as_slice() {
            return Err(FleetError::BadCertificate(
                "the key given with it is not the key it certifies".into(),
            ));
        }
        Ok(ca)
    }

    /// Whether `cert_pem` is this CA's certificate (the same DER, however the PEM is wrapped).
    pub fn is_certificate(&self, cert_pem: &str) -> bool {
        match (
            crate::tls::certificates(&self.cert_pem),
            crate::tls::certificates(cert_pem),
        ) {
            (Ok(ours), Ok(theirs)) => ours == theirs,
            _ => false,
        }
    }

    pub fn fleet(&self) -> &Name {
        &self.fleet
    }

    /// The CA's certificate: what every member trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's signing key (a secret: the service's file, 0600).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The CA key's signature over `message` (ECDSA P-256 with SHA-256, DER), hex: what
    /// the audit's checkpoints carry. The message must begin with a prefix of its own purpose
    /// (a checkpoint's does), so it can never be taken for a certificate's signed part.
    pub fn sign_message(&self, message: &[u8]) -> Result<String, FleetError> {
        use rcgen::SigningKey;
        let key = KeyPair::from_pem(&self.key_pem).map_err(|_| FleetError::BadKey)?;
        Ok(hex::encode(key.sign(message).map_err(crypto)?))
    }

    /// Signs `request_pem` (a member's certificate request) as `identity`, valid for `ttl`.
    /// Refused when the request's signature does not hold, when it asks for another identity,
    /// or when `identity` is of another fleet.
    pub fn issue(
        &self,
        request_pem: &str,
        identity: &Identity,
        ttl: Duration,
    ) -> Result<String, FleetError> {
        self.issue_at(request_pem, identity, OffsetDateTime::now_utc(), ttl)
    }

    /// [`FleetCa::issue`] as of `issued_at` (Unix seconds): valid from then for `ttl` (a
    /// certificate issued in the past, to see what its holder does as it ages).
    pub fn issue_as_of(
        &self,
        request_pem: &str,
        identity: &Identity,
        issued_at: i64,
        ttl: Duration,
    ) -> Result<String, FleetError> {
        let at = OffsetDateTime::from_unix_timestamp(issued_at)
            .map_err(|e| FleetError::BadRequest(e.to_string()))?;
        self.issue_at(request_pem, identity, at, ttl)
    }

    pub(crate) fn issue_at(
        &self,
        request_pem: &str,
        identity: &Identity,
        now: OffsetDateTime,
        ttl: Duration,
    ) -> Result<String, FleetError> {
        if identity.fleet != self.fleet {
            return Err(FleetError::OtherFleet(identity.fleet.to_string()));
        }
        let request = CertificateSigningRequestParams::from_pem(request_pem)
            .map_err(|e| FleetError::BadRequest(e.to_string()))?;
        let asked: Vec<String> = request
            .params
            .subject_alt_names
            .iter()
            .filter_map(|san| match san {
                SanType::URI(uri) => Some(uri.as_str().to_owned()),
                _ => None,
            })
            .collect();
        if asked != [identity.uri()] {
            return Err(FleetError::BadRequest(format!(
                "it asks to be {asked:?}, but this key is registered as {}",
                identity.uri()
            )));
        }
        let params = member_params(identity, now, ttl)?;
        let cert = params
            .signed_by(&request.public_key, &self.issuer)
            .map_err(crypto)?;
        Ok(cert.pem())
    }

    /// A server certificate and key for a replica of the service, answering as `hosts` (DNS
    /// names or IP addresses). The replica runs beside the CA, so its key is made here.
    pub fn issue_service(
        &self,
        name: &Name,
        hosts: &[String],
        ttl: Duration,
    ) -> Result<(String, String), FleetError> {
        let identity = Identity::new(&self.fleet, Role::Service, name);
        let key = KeyPair::generate().map_err(crypto)?;
        let mut params = member_params(&identity, OffsetDateTime::now_utc(), ttl)?;
        for host in hosts {
            params.subject_alt_names.push(match host.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(
                    host.as_str()
                        .try_into()
                        .map_err(|_| FleetError::BadName(host.clone()))?,
                ),
            });
        }
        let cert = params.signed_by(&key, &self.issuer).map_err(crypto)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The fields of every member certificate, written by the CA alone.
fn member_params(
    identity: &Identity,
    now: OffsetDateTime,
    ttl: Duration,
) -> Result<CertificateParams, FleetError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = common_name(&identity.uri());
    params.subject_alt_names = vec![SanType::URI(
        identity
            .uri()
            .try_into()
            .map_err(|_| FleetError::BadName(identity.uri()))?,
    )];
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // A member certificate authenticates a client, a service certificate a server: never the
    // other way round (rustls checks the purpose on both ends).
    params.extended_key_usages = vec![match identity.role {
        Role::Service => ExtendedKeyUsagePurpose::ServerAuth,
        Role::Sprite | Role::Operator => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    params.not_before = now - CLOCK_SKEW;
    params.not_after = now + ttl;
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

fn common_name(text: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, text);
    name
}

fn crypto(e: rcgen::Error) -> FleetError {
    FleetError::Crypto(e.to_string())
}

/// A member's own key pair, made where the member runs; only its request leaves.
pub struct MemberKey {
    key: KeyPair,
}

impl std::fmt::Debug for MemberKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemberKey(..)")
    }
}

impl MemberKey {
    pub fn generate() -> Result<MemberKey, FleetError> {
        Ok(MemberKey {
            key: KeyPair::generate().map_err(crypto)?,
        })
    }

    pub fn from_pem(pem: &str) -> Result<MemberKey, FleetError> {
        Ok(MemberKey {
            key: KeyPair::from_pem(pem).map_err(|_| FleetError::BadKey)?,
        })
    }

    /// The private key (a secret: the member's file, 0600).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A certificate request for `identity`, signed with this key.
    pub fn request_pem(&self, identity: &Identity) -> Result<String, FleetError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = common_name(&identity.uri());
        params.subject_alt_names = vec![SanType::URI(
            identity
                .uri()
                .try_into()
                .map_err(|_| FleetError::BadName(identity.uri()))?,
        )];
        params
            .serialize_request(&self.key)
            .map_err(crypto)?
            .pem()
            .map_err(crypto)
    }
}

/// Whether `signature` (hex, as [`FleetCa::sign_message`] makes it) over `message` was made by
/// the key `ca_pem`'s certificate certifies.
pub fn verify_message(ca_pem: &str, message: &[u8], signature: &str) -> bool {
    let Ok(signature) = hex::decode(signature) else {
        return false;
    };
    let Some(der) = crate::tls::certificates(ca_pem)
        .ok()
        .and_then(|c| c.into_iter().next())
    else {
        return false;
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else {
        return false;
    };
    let key = cert
        .tbs_certificate
        .subject_pki
        .subject_public_key
        .data
        .as_ref();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, key)
        .verify(message, &signature)
        .is_ok()
}

#[cfg(test)]
mod message_tests {
    use super::*;

    #[test]
    fn a_message_signed_by_the_ca_verifies_against_its_certificate_and_nothing_else() {
        let fleet = Name::parse("acme").unwrap();
        let ca = FleetCa::create(&fleet).unwrap();
        let other = FleetCa::create(&fleet).unwrap();
        let message = b"zodex audit checkpoint v1\nat 5\n";
        let signature = ca.sign_message(message).unwrap();
        assert!(verify_message(ca.cert_pem(), message, &signature));
        assert!(
            !verify_message(
                ca.cert_pem(),
                b"zodex audit checkpoint v1\nat 6\n",
                &signature
            ),
            "another message"
        );
        assert!(
            !verify_message(other.cert_pem(), message, &signature),
            "another CA's certificate"
        );
        assert!(!verify_message(ca.cert_pem(), message, "zz"), "not hex");
    }
}
