//! The authorization server's secrets: random values, their hashes, PKCE, and the Ed25519 key
//! that signs access tokens (JWTs the agent side checks with the public key alone).

use super::error::KeyError;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::KeyPair as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use zodex_engine::store::SigningKey;

/// 256 random bits in URL-safe base64 (codes, refresh tokens, client secrets, page secrets).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system's randomness");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// 128 random bits as hex: ids of families and tokens (not secrets).
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system's randomness");
    hex::encode(bytes)
}

/// The hex SHA-256 a secret is stored as.
pub fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Compares two stored hashes (or any two secrets) in constant time.
pub fn same(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Compares two byte strings in constant time.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// The letters of a user code: no look-alikes (no 0/O, 1/I/L).
const USER_CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// The code the operator approves, made from `bytes` (at least eight; a MAC): eight
/// characters of [`USER_CODE_ALPHABET`], shown as `ABCD-EFGH`.
pub fn user_code_from(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(9);
    for (i, b) in bytes.iter().take(8).enumerate() {
        if i == 4 {
            out.push('-');
        }
        // 256 % 31 leaves a bias of under 1%: irrelevant for a code that lives ten minutes and
        // must also be approved by the operator.
        out.push(USER_CODE_ALPHABET[*b as usize % USER_CODE_ALPHABET.len()] as char);
    }
    out
}

/// A user code as typed by an operator: case and dashes do not matter.
pub fn normalise_user_code(typed: &str) -> String {
    let letters: String = typed
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if letters.len() == 8 {
        format!("{}-{}", &letters[..4], &letters[4..])
    } else {
        letters
    }
}

/// RFC 7636 S256: does `verifier` hash to `challenge`? The verifier must be 43 to 128
/// characters of the unreserved set.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    well_formed && same(&URL_SAFE_NO_PAD.encode(Sha256::digest(verifier)), challenge)
}

/// A code challenge as S256 makes it: 43 characters of base64url.
pub fn is_s256_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Makes a fresh Ed25519 signing key.
pub fn new_signing_key() -> Result<SigningKey, KeyError> {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 =
        ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| KeyError::Generate)?;
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| KeyError::ReadBack)?;
    let public_key = pair.public_key().as_ref().to_vec();
    let kid = sha256_hex(&URL_SAFE_NO_PAD.encode(&public_key))[..16].to_string();
    Ok(SigningKey {
        kid,
        pkcs8: pkcs8.as_ref().to_vec(),
        public_key,
    })
}

/// The public half as the published file carries it (a JWK's `x`).
pub fn public_x(key: &SigningKey) -> String {
    URL_SAFE_NO_PAD.encode(&key.public_key)
}

/// An access token's claims (RFC 9068's profile, plus the refresh family it belongs to so the
/// resource server can refuse it once the family is revoked).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    pub client_id: String,
    pub scope: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    pub fam: String,
}

/// Signs an access token (`typ: at+jwt`, EdDSA).
pub fn sign_access_token(key: &SigningKey, claims: &AccessClaims) -> Result<String, KeyError> {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.typ = Some("at+jwt".into());
    header.kid = Some(key.kid.clone());
    let encoding = jsonwebtoken::EncodingKey::from_ed_der(&key.pkcs8);
    jsonwebtoken::encode(&header, claims, &encoding).map_err(KeyError::Sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_matches_rfc_7636_appendix_b() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(is_s256_challenge(challenge));
        assert!(!pkce_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK",
            challenge
        ));
        assert!(!pkce_matches("short", challenge));
        assert!(!is_s256_challenge("plain-challenge"));
    }

    #[test]
    fn user_codes_are_typed_back_whatever_their_case() {
        let code = user_code_from(&[7, 200, 31, 255, 0, 62, 93, 124]);
        assert_eq!(code.len(), 9);
        assert_eq!(normalise_user_code(&code.to_lowercase()), code);
        assert_eq!(normalise_user_code(&code.replace('-', " ")), code);
    }

    #[test]
    fn a_signed_token_verifies_with_the_public_key_only() {
        let key = new_signing_key().unwrap();
        let claims = AccessClaims {
            iss: "https://s.example/oauth".into(),
            aud: "https://s.example/mcp".into(),
            sub: "operator".into(),
            client_id: "c".into(),
            scope: "mcp".into(),
            iat: 1,
            exp: i64::from(u32::MAX),
            jti: "j".into(),
            fam: "f".into(),
        };
        let token = sign_access_token(&key, &claims).unwrap();
        let decoding = jsonwebtoken::DecodingKey::from_ed_components(&public_x(&key)).unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
        validation.set_audience(&["https://s.example/mcp"]);
        let data = jsonwebtoken::decode::<AccessClaims>(&token, &decoding, &validation).unwrap();
        assert_eq!(data.claims.fam, "f");
        let other = new_signing_key().unwrap();
        let wrong = jsonwebtoken::DecodingKey::from_ed_components(&public_x(&other)).unwrap();
        assert!(jsonwebtoken::decode::<AccessClaims>(&token, &wrong, &validation).is_err());
    }
}
