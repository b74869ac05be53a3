//! Write tokens kept in the shared ledger, sealed: so that when the publisher that minted one
//! is killed, another publisher on the same store can still revoke it by value.
//!
//! The key is derived (HKDF-SHA-256) from the writer App's private key, which every publisher
//! of a deployment holds and nothing else does: the database, its backups and its
//! administrator see only AES-256-GCM ciphertext. The token's hash is the associated data, so
//! a sealed value moved to another row does not open.

use crate::github::Token;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};

/// How long a publisher may stay silent before its sealed tokens are swept by the others.
pub const SILENT_AFTER_SECONDS: i64 = 15;

pub struct TokenSeal {
    key: LessSafeKey,
}

impl TokenSeal {
    /// The seal of the deployment the configuration's `[github]` writer App names (none
    /// without GitHub: no write token to seal).
    pub(super) fn of_config(
        config: &zodex_config::Config,
    ) -> Result<Option<Self>, super::HostError> {
        let Some(github) = &config.github else {
            return Ok(None);
        };
        let key_file = &github.writer.private_key_file;
        let key = std::fs::read(key_file).map_err(|e| {
            super::HostError::Config(format!(
                "cannot read the writer key {}: {e}",
                key_file.display()
            ))
        })?;
        Ok(Some(Self::from_writer_key(&key)))
    }

    /// The seal of the deployment whose writer key is `private_key` (the PEM file's bytes).
    pub fn from_writer_key(private_key: &[u8]) -> Self {
        let prk = Salt::new(HKDF_SHA256, b"zodex token ledger seal v1").extract(private_key);
        let mut key = [0u8; 32];
        prk.expand(&[b"aes-256-gcm"], &AES_256_GCM)
            .and_then(|okm| okm.fill(&mut key))
            .expect("32 bytes is AES-256's key length");
        Self {
            key: LessSafeKey::new(
                UnboundKey::new(&AES_256_GCM, &key).expect("an AES-256 key is 32 bytes"),
            ),
        }
    }

    /// `token` sealed: a random nonce, then the ciphertext and its tag.
    pub fn seal(&self, token: &Token) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the system's randomness");
        let mut sealed = token.expose().as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(token.sha256().as_bytes()),
                &mut sealed,
            )
            .expect("sealing a short token cannot fail");
        let mut out = nonce.to_vec();
        out.extend(sealed);
        out
    }

    /// The token sealed in `sealed` for the row of `sha256`; `None` when it does not open (a
    /// different deployment's key, a changed or moved value).
    pub fn open(&self, sha256: &str, sealed: &[u8]) -> Option<Token> {
        if sealed.len() <= NONCE_LEN {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let mut rest = rest.to_vec();
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(sha256.as_bytes()), &mut rest)
            .ok()?;
        let token = Token::new(String::from_utf8(plain.to_vec()).ok()?);
        (token.sha256() == sha256).then_some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_token_opens_only_with_its_key_and_for_its_row() {
        let seal = TokenSeal::from_writer_key(b"-----BEGIN PRIVATE KEY----- one");
        let token = Token::new("ghs_secret".into());
        let sealed = seal.seal(&token);
        assert!(
            !sealed.windows(10).any(|w| w == b"ghs_secret"),
            "no plain text"
        );
        let opened = seal.open(&token.sha256(), &sealed).unwrap();
        assert_eq!(opened.expose(), "ghs_secret");
        let other = Token::new("ghs_other".into());
        assert!(
            seal.open(&other.sha256(), &sealed).is_none(),
            "moved to another row"
        );
        let stranger = TokenSeal::from_writer_key(b"-----BEGIN PRIVATE KEY----- two");
        assert!(
            stranger.open(&token.sha256(), &sealed).is_none(),
            "another deployment"
        );
        let mut changed = sealed.clone();
        *changed.last_mut().unwrap() ^= 1;
        assert!(seal.open(&token.sha256(), &changed).is_none(), "changed");
    }
}
