//! Installation tokens: minted opaque and random, remembered only as SHA-256 hashes with the
//! scope they carry (installation, repositories, permissions, expiry), revocable. An expired or
//! revoked token is simply unknown: it answers 401 `Bad credentials` like any other.

use super::config::TokenFormat;
use super::perms::Permissions;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// What a token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub installation_id: u64,
    pub app_id: u64,
    /// Repository ids; `None` means every repository of the installation.
    pub repositories: Option<Vec<u64>>,
    pub permissions: Permissions,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Default)]
pub struct TokenStore {
    grants: HashMap<[u8; 32], Grant>,
    pub minted: u64,
    pub revoked: u64,
}

pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Live-token count at which minting first sweeps out expired tokens.
const PURGE_AT: usize = 10_000;

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const URL_SAFE: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_";

/// `len` characters drawn uniformly from `alphabet` (rejection sampling, no modulo bias).
pub fn random_string(alphabet: &[u8], len: usize) -> String {
    let limit = 256 - (256 % alphabet.len());
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut buf).expect("the operating system RNG is available");
        for &b in &buf {
            if (b as usize) < limit && out.len() < len {
                out.push(alphabet[b as usize % alphabet.len()] as char);
            }
        }
    }
    out
}

pub fn new_token(format: TokenFormat) -> String {
    match format {
        TokenFormat::Classic => format!("ghs_{}", random_string(BASE62, 36)),
        TokenFormat::Long => format!("ghs_{}", random_string(URL_SAFE, 516)),
    }
}

impl TokenStore {
    pub fn mint(&mut self, grant: Grant, format: TokenFormat) -> String {
        // Expired tokens are otherwise forgotten only when presented; keep a long soak bounded.
        if self.grants.len() >= PURGE_AT {
            let now = grant.expires_at.min(Utc::now());
            self.grants.retain(|_, g| g.expires_at > now);
        }
        let token = new_token(format);
        self.grants.insert(token_hash(&token), grant);
        self.minted += 1;
        token
    }

    /// The grant of a live token; expired ones are forgotten on the way.
    pub fn lookup(&mut self, token: &str, now: DateTime<Utc>) -> Option<Grant> {
        let hash = token_hash(token);
        match self.grants.get(&hash) {
            Some(grant) if grant.expires_at > now => Some(grant.clone()),
            Some(_) => {
                self.grants.remove(&hash);
                None
            }
            None => None,
        }
    }

    /// Forgets a token; `false` when it was not live.
    #[cfg(test)]
    pub fn revoke(&mut self, token: &str) -> bool {
        self.revoke_hash(&token_hash(token))
    }

    /// [`TokenStore::revoke`] by the token's hash.
    pub fn revoke_hash(&mut self, hash: &[u8; 32]) -> bool {
        let removed = self.grants.remove(hash).is_some();
        if removed {
            self.revoked += 1;
        }
        removed
    }

    pub fn live(&self, now: DateTime<Utc>) -> usize {
        self.grants.values().filter(|g| g.expires_at > now).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires_at: DateTime<Utc>) -> Grant {
        Grant {
            installation_id: 1,
            app_id: 2,
            repositories: Some(vec![3]),
            permissions: Permissions::new(),
            expires_at,
        }
    }

    #[test]
    fn tokens_are_opaque_hashed_expiring_and_revocable() {
        let now = Utc::now();
        let mut store = TokenStore::default();
        let token = store.mint(
            grant(now + chrono::Duration::hours(1)),
            TokenFormat::Classic,
        );
        assert_eq!(token.len(), 40);
        assert!(token.starts_with("ghs_"));
        assert!(store.lookup(&token, now).is_some());
        assert!(store.lookup("ghs_other", now).is_none());
        assert!(
            store
                .lookup(&token, now + chrono::Duration::hours(2))
                .is_none()
        );
        let long = store.mint(grant(now + chrono::Duration::hours(1)), TokenFormat::Long);
        assert_eq!(long.len(), 520);
        assert!(store.revoke(&long));
        assert!(!store.revoke(&long));
        assert!(store.lookup(&long, now).is_none());
        assert_eq!((store.minted, store.revoked), (2, 1));
        assert_ne!(
            new_token(TokenFormat::Classic),
            new_token(TokenFormat::Classic)
        );
    }
}
