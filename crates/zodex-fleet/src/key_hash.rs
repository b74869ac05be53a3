//! The fingerprint a member is registered by: SHA-256 of its public key as a
//! SubjectPublicKeyInfo (DER), taken from its certificate request at enrolment and from its
//! certificate on every connection. A certificate for a registered name over another key (a
//! stolen CA signature, an old certificate after re-enrolment) does not match.

use crate::FleetError;
use rcgen::{CertificateSigningRequestParams, PublicKeyData};
use sha2::{Digest, Sha256};

/// The key hash (lower-case hex) of the key a certificate request is for.
pub fn request_key_sha256(request_pem: &str) -> Result<String, FleetError> {
    let request = CertificateSigningRequestParams::from_pem(request_pem)
        .map_err(|e| FleetError::BadRequest(e.to_string()))?;
    Ok(hex::encode(Sha256::digest(
        request.public_key.subject_public_key_info(),
    )))
}

/// The key hash (lower-case hex) of the key a certificate (DER) certifies.
pub fn certificate_key_sha256(der: &[u8]) -> Result<String, FleetError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| FleetError::BadCertificate(e.to_string()))?;
    Ok(hex::encode(Sha256::digest(
        cert.tbs_certificate.subject_pki.raw,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FleetCa, Identity, MemberKey, Name, Role};

    #[test]
    fn a_request_and_the_certificate_issued_for_it_have_one_key_hash() {
        let fleet = Name::parse("acme").unwrap();
        let ca = FleetCa::create(&fleet).unwrap();
        let identity = Identity::new(&fleet, Role::Sprite, &Name::parse("s1").unwrap());
        let key = MemberKey::generate().unwrap();
        let request = key.request_pem(&identity).unwrap();
        let cert_pem = ca
            .issue(&request, &identity, std::time::Duration::from_secs(600))
            .unwrap();
        let der = crate::tls::certificates(&cert_pem).unwrap().remove(0);
        let from_request = request_key_sha256(&request).unwrap();
        assert_eq!(from_request.len(), 64);
        assert_eq!(certificate_key_sha256(&der).unwrap(), from_request);
        // Another key of the same member: another hash.
        let other = MemberKey::generate().unwrap();
        let other_request = other.request_pem(&identity).unwrap();
        assert_ne!(request_key_sha256(&other_request).unwrap(), from_request);
        assert!(request_key_sha256("not a request").is_err());
        assert!(certificate_key_sha256(b"not a certificate").is_err());
    }
}
