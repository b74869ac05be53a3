//! RSA key pairs for GitHub Apps in dev and tests: 2048-bit, the private half as PKCS#1 PEM
//! (`BEGIN RSA PRIVATE KEY`, the form GitHub hands out), the public half as SPKI PEM
//! (`BEGIN PUBLIC KEY`). devhub stores only public halves; whoever generates a pair keeps the
//! private half (the publisher, or a test).

use super::error::{DevHubError, io};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::{EncodePublicKey, LineEnding};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// GitHub generates 2048-bit App keys.
pub const KEY_BITS: usize = 2048;

#[derive(Clone)]
pub struct KeyPair {
    /// PKCS#1 PEM. Keep it secret.
    pub private_pem: String,
    /// SPKI PEM, for `Setup::add_app`.
    pub public_pem: String,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("private_pem", &"<redacted>")
            .field("public_pem", &self.public_pem)
            .finish()
    }
}

/// Generates a fresh 2048-bit key pair from the operating system's RNG.
pub fn generate_key_pair() -> Result<KeyPair, DevHubError> {
    let private = rsa::PrivateKey::new(&mut getrandom::SysRng, KEY_BITS)
        .map_err(|e| DevHubError::Key(e.to_string()))?;
    let private_pem = private
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| DevHubError::Key(e.to_string()))?
        .to_string();
    let public_pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| DevHubError::Key(e.to_string()))?;
    Ok(KeyPair {
        private_pem,
        public_pem,
    })
}

impl KeyPair {
    /// Writes `<dir>/<name>.pem` (mode 0600) and `<dir>/<name>.pub.pem`; returns the private
    /// key's path.
    pub fn write(&self, dir: &Path, name: &str) -> Result<PathBuf, DevHubError> {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let private = dir.join(format!("{name}.pem"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&private)
            .map_err(io(format!("cannot create {}", private.display())))?;
        std::io::Write::write_all(&mut file, self.private_pem.as_bytes())
            .map_err(io(format!("cannot write {}", private.display())))?;
        let public = dir.join(format!("{name}.pub.pem"));
        std::fs::write(&public, &self.public_pem)
            .map_err(io(format!("cannot write {}", public.display())))?;
        Ok(private)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_signs_and_verifies_an_rs256_jwt() {
        let pair = generate_key_pair().unwrap();
        assert!(
            pair.private_pem
                .starts_with("-----BEGIN RSA PRIVATE KEY-----")
        );
        assert!(pair.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(pair.private_pem.as_bytes()).unwrap();
        let claims = serde_json::json!({"iss": "1", "iat": 1, "exp": 2});
        let jwt = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &claims,
            &key,
        )
        .unwrap();
        let public = jsonwebtoken::DecodingKey::from_rsa_pem(pair.public_pem.as_bytes()).unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        jsonwebtoken::decode::<serde_json::Value>(&jwt, &public, &validation).unwrap();
        assert!(!format!("{pair:?}").contains("PRIVATE"));
    }
}
