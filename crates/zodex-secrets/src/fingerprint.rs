//! A finding's fingerprint: what names a secret in messages, the audit and an operator's
//! `--allow-secret`, without carrying it.
//!
//! It is SHA-256 over a domain tag, the rule id and the secret's bytes, cut to 96 bits and
//! written `zsf1-` and 24 hex digits. The same secret under the same rule has the same
//! fingerprint in any file, on any line, in any push, so an operator's allowance names the
//! secret, not where it sits. 96 bits cannot be brute-forced back into a high-entropy secret,
//! but a guessable one (`password123`) can be confirmed by hashing guesses: that is the cost of
//! a stable name, and why only secrets that pass the rules' entropy checks are reported.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};
use thiserror::Error;

/// Written before the hex digits; the version lets the hash change without confusing old ones.
const PREFIX: &str = "zsf1-";
/// Separates this hash from every other SHA-256 of the same bytes.
const DOMAIN: &[u8] = b"zodex secret finding v1\0";
const BYTES: usize = 12;

/// A finding's fingerprint (`zsf1-` and 24 hex digits). Never the secret.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; BYTES]);

impl Fingerprint {
    /// The fingerprint of `secret` as found by rule `rule`.
    pub fn of(rule: &str, secret: &[u8]) -> Fingerprint {
        let mut hash = Sha256::new();
        hash.update(DOMAIN);
        // The id's length first, so no (rule, secret) pair runs into another.
        hash.update((rule.len() as u64).to_be_bytes());
        hash.update(rule.as_bytes());
        hash.update(secret);
        let digest = hash.finalize();
        let mut cut = [0u8; BYTES];
        cut.copy_from_slice(&digest[..BYTES]);
        Fingerprint(cut)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// Why a typed fingerprint is not one. The input is never echoed: someone may paste the secret.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FingerprintError {
    #[error(
        "a secret fingerprint starts with `zsf1-` (copy it from the refusal that named it); this one does not"
    )]
    Prefix,
    #[error(
        "a secret fingerprint is `zsf1-` and 24 hex digits; this one has {0} character(s) after `zsf1-`"
    )]
    Length(usize),
    #[error(
        "a secret fingerprint is `zsf1-` and 24 hex digits; character {0} after `zsf1-` is not a hex digit"
    )]
    NotHex(usize),
}

impl FromStr for Fingerprint {
    type Err = FingerprintError;

    /// Reads `zsf1-` and 24 hex digits (either case), as [`Fingerprint`]'s `Display` writes it.
    fn from_str(text: &str) -> Result<Fingerprint, FingerprintError> {
        let digits = text.strip_prefix(PREFIX).ok_or(FingerprintError::Prefix)?;
        if let Some(at) = digits.chars().position(|c| !c.is_ascii_hexdigit()) {
            return Err(FingerprintError::NotHex(at + 1));
        }
        if digits.len() != 2 * BYTES {
            return Err(FingerprintError::Length(digits.len()));
        }
        let mut bytes = [0u8; BYTES];
        hex::decode_to_slice(digits, &mut bytes).map_err(|_| FingerprintError::NotHex(0))?;
        Ok(Fingerprint(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_stable_and_depends_on_rule_and_secret() {
        let a = Fingerprint::of("github-pat", b"secret-one");
        assert_eq!(a, Fingerprint::of("github-pat", b"secret-one"));
        assert_ne!(a, Fingerprint::of("github-pat", b"secret-two"));
        assert_ne!(a, Fingerprint::of("github-oauth", b"secret-one"));
        // The length prefix keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(Fingerprint::of("ab", b"c"), Fingerprint::of("a", b"bc"));
    }

    #[test]
    fn it_reads_back_what_it_writes() {
        let f = Fingerprint::of("r", b"s");
        let text = f.to_string();
        assert!(text.starts_with("zsf1-") && text.len() == 5 + 24, "{text}");
        assert_eq!(text.parse::<Fingerprint>(), Ok(f));
        assert_eq!(text.to_uppercase().replace("ZSF1-", "zsf1-").parse(), Ok(f));
        assert_eq!(format!("{f:?}"), format!("Fingerprint({text})"));
    }

    #[test]
    fn malformed_ones_are_refused_without_echoing_them() {
        let cases = [
            ("", FingerprintError::Prefix),
            ("zsf2-00112233445566778899aabb", FingerprintError::Prefix),
            (" zsf1-00112233445566778899aabb", FingerprintError::Prefix),
            ("zsf1-0011", FingerprintError::Length(4)),
            (
                "zsf1-00112233445566778899aabbcc",
                FingerprintError::Length(26),
            ),
            (
                "zsf1-00112233445566778899aabbg",
                FingerprintError::NotHex(25),
            ),
            ("zsf1-ghp_notahexdigit", FingerprintError::NotHex(1)),
        ];
        for (text, want) in cases {
            let err = text.parse::<Fingerprint>().unwrap_err();
            assert_eq!(err, want, "{text:?}");
            assert!(!err.to_string().contains("ghp_"));
        }
    }
}
