//! A one-time join code: how a new operator, who has no certificate yet, reaches the
//! service from their own machine and has it sign a request for a key made there.
//!
//! The code is `FLEET.NAME.SECRET.PIN`: the fleet and the operator it admits (so the joiner
//! can make the request for exactly that identity), 128 random bits the service knows only
//! by their SHA-256, and the first 128 bits of the SHA-256 of the fleet's CA certificate.
//! The joiner trusts no CA it was not told of, and trusts nothing on first use: its TLS client
//! ([`JoinCode::client_config`]) accepts a server only if the server shows a CA certificate
//! whose hash the code pins and its own certificate chains to that CA for the replica's name.
//! So the secret reaches only the fleet's service, and the CA the joiner installs is the one
//! the code pinned. The code is shown once, to the operator who asked for it, and is a
//! secret: it never goes in an argv (the joiner reads it on stdin) or a log.

use crate::FleetError;
use crate::identity::Name;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Random bytes of a code's secret.
const SECRET_BYTES: usize = 16;
/// Bytes of the CA certificate's SHA-256 a code pins.
const PIN_BYTES: usize = 16;

/// A join code, parsed. Its `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinCode {
    pub fleet: Name,
    pub operator: Name,
    secret: String,
    pin: String,
}

impl std::fmt::Debug for JoinCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinCode")
            .field("fleet", &self.fleet)
            .field("operator", &self.operator)
            .field("pin", &self.pin)
            .finish_non_exhaustive()
    }
}

/// The SHA-256 (hex) of a code's secret: all the service keeps of it.
pub fn secret_sha256(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The pin of the CA certificate in `ca_pem` (hex).
pub fn ca_pin(ca_pem: &str) -> Result<String, FleetError> {
    let ca = crate::tls::certificates(ca_pem)?;
    Ok(pin_of(&ca[0]))
}

fn pin_of(der: &[u8]) -> String {
    hex::encode(&Sha256::digest(der)[..PIN_BYTES])
}

fn bad(why: &str) -> FleetError {
    FleetError::BadJoinCode(why.to_string())
}

impl JoinCode {
    /// A new code admitting `operator` to `fleet`, pinning the CA certificate in `ca_pem`.
    pub fn new(fleet: &Name, operator: &Name, ca_pem: &str) -> Result<JoinCode, FleetError> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| FleetError::Crypto(e.to_string()))?;
        Ok(JoinCode {
            fleet: fleet.clone(),
            operator: operator.clone(),
            secret: hex::encode(bytes),
            pin: ca_pin(ca_pem)?,
        })
    }

    /// Reads a code as [`JoinCode::text`] wrote it (surrounding white space ignored).
    pub fn parse(text: &str) -> Result<JoinCode, FleetError> {
        let parts: Vec<&str> = text.trim().split('.').collect();
        let [fleet, operator, secret, pin] = parts[..] else {
            return Err(bad("it has not the four parts FLEET.NAME.SECRET.PIN"));
        };
        let hex_of = |part: &str, bytes: usize| {
            part.len() == bytes * 2
                && part
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !hex_of(secret, SECRET_BYTES) || !hex_of(pin, PIN_BYTES) {
            return Err(bad("its secret or its CA pin is not the hex it should be"));
        }
        Ok(JoinCode {
            fleet: Name::parse(fleet)?,
            operator: Name::parse(operator)?,
            secret: secret.to_string(),
            pin: pin.to_string(),
        })
    }

    /// The code as the operator who asked for it passes it on.
    pub fn text(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.fleet, self.operator, self.secret, self.pin
        )
    }

    /// The secret the joiner sends (over the TLS [`JoinCode::client_config`] makes).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether `ca_pem`'s certificate is the CA this code pins.
    pub fn pins(&self, ca_pem: &str) -> bool {
        ca_pin(ca_pem).is_ok_and(|pin| pin == self.pin)
    }

    /// The joiner's TLS client: no certificate presented; the server accepted only when it
    /// shows the CA this code pins and its certificate chains to it for the name dialled.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, FleetError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = PinnedCa {
            pin: self.pin.clone(),
            provider: provider.clone(),
        };
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| FleetError::Tls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

/// Accepts a server whose chain holds the pinned CA certificate and whose own certificate
/// that CA issued for the name dialled (webpki's checks, with that CA as the only root).
#[derive(Debug)]
struct PinnedCa {
    pin: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let ca = intermediates
            .iter()
            .find(|c| pin_of(c) == self.pin)
            .ok_or_else(|| {
                rustls::Error::General(
                    "the server shows no CA certificate the join code pins: it is not this fleet's service (check --service)".into(),
                )
            })?;
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone().into_owned())?;
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            self.provider.clone(),
        )
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?;
        inner.verify_server_cert(end_entity, &[], server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FleetCa;

    #[test]
    fn a_code_reads_back_pins_its_ca_and_never_shows_its_secret() {
        let fleet = Name::parse("acme").unwrap();
        let ca = FleetCa::create(&fleet).unwrap();
        let other = FleetCa::create(&fleet).unwrap();
        let code = JoinCode::new(&fleet, &Name::parse("bob").unwrap(), ca.cert_pem()).unwrap();
        let text = code.text();
        assert_eq!(JoinCode::parse(&format!(" {text}\n")).unwrap(), code);
        assert!(code.pins(ca.cert_pem()));
        assert!(!code.pins(other.cert_pem()));
        assert!(!format!("{code:?}").contains(code.secret()));
        assert_eq!(secret_sha256(code.secret()).len(), 64);
        // Two codes never share a secret.
        let again = JoinCode::new(&fleet, &code.operator, ca.cert_pem()).unwrap();
        assert_ne!(again.secret(), code.secret());
        for bad in [
            "",
            "acme.bob",
            "acme.bob.zz.zz",
            &text.replace("acme", "Acme"),
            &format!("{text}.x"),
        ] {
            let err = JoinCode::parse(bad).unwrap_err();
            assert!(!err.to_string().contains(code.secret()), "{err}");
        }
    }
}
