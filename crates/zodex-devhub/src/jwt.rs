//! App JWT verification the way GitHub does it: RS256 with the App's public key, `iss` the App
//! id, `exp` in the future but at most ten minutes away, `iat` not in the future beyond a small
//! leeway — each failure answered with GitHub's own wording.
//!
//! Order of checks (from GitHub's answers to skewed clocks): signature, then `exp`, then `iat`.
//! A clock five minutes fast therefore reads "'exp' is too far in the future", as on GitHub.

use super::model::Description;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

/// GitHub's longest App JWT lifetime, counted from the server's clock.
pub const MAX_JWT_LIFETIME_SECS: i64 = 600;

pub const NOT_DECODED: &str = "A JSON web token could not be decoded";
pub const EXP_NOT_FUTURE: &str = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
pub const EXP_TOO_FAR: &str = "'Expiration time' claim ('exp') is too far in the future";
pub const IAT_INVALID: &str = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";
pub const INTEGRATION_NOT_FOUND: &str = "Integration not found";

/// Why a JWT was refused: the HTTP status and GitHub's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtRejection {
    pub status: u16,
    pub message: &'static str,
}

fn reject(message: &'static str) -> JwtRejection {
    JwtRejection {
        status: 401,
        message,
    }
}

/// Whether a bearer credential is shaped like a JWT (three base64url parts), as opposed to an
/// opaque installation token.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.starts_with("eyJ")
}

/// Verifies an App JWT at time `now` (Unix seconds) and returns the App id.
pub fn verify(
    token: &str,
    description: &Description,
    now: i64,
    leeway_secs: i64,
) -> Result<u64, JwtRejection> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| reject(NOT_DECODED))?;
    if header.alg != Algorithm::RS256 {
        return Err(reject(NOT_DECODED));
    }
    let claims: Value = jsonwebtoken::dangerous::insecure_decode::<Value>(token)
        .map_err(|_| reject(NOT_DECODED))?
        .claims;
    let app_id = match claims.get("iss") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse::<u64>().ok(),
        _ => None,
    }
    .ok_or_else(|| reject(NOT_DECODED))?;
    let app = description.app(app_id).ok_or(JwtRejection {
        status: 404,
        message: INTEGRATION_NOT_FOUND,
    })?;
    let key = DecodingKey::from_rsa_pem(app.public_key_pem.as_bytes())
        .map_err(|_| reject(NOT_DECODED))?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|_| reject(NOT_DECODED))?;

    let exp = claims.get("exp").and_then(Value::as_f64);
    match exp {
        Some(exp) if exp > now as f64 => {}
        _ => return Err(reject(EXP_NOT_FUTURE)),
    }
    if exp.unwrap_or_default() > (now + MAX_JWT_LIFETIME_SECS) as f64 {
        return Err(reject(EXP_TOO_FAR));
    }
    match claims.get("iat").and_then(Value::as_i64) {
        Some(iat) if iat <= now + leeway_secs => {}
        _ => return Err(reject(IAT_INVALID)),
    }
    Ok(app_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{KeyPair, generate_key_pair};
    use crate::model::App;
    use crate::perms::Permissions;
    use std::sync::OnceLock;

    fn pairs() -> &'static (KeyPair, KeyPair) {
        static PAIRS: OnceLock<(KeyPair, KeyPair)> = OnceLock::new();
        PAIRS.get_or_init(|| (generate_key_pair().unwrap(), generate_key_pair().unwrap()))
    }

    fn sign(pair: &KeyPair, claims: Value) -> String {
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(pair.private_pem.as_bytes()).unwrap();
        jsonwebtoken::encode(&jsonwebtoken::Header::new(Algorithm::RS256), &claims, &key).unwrap()
    }

    fn description() -> Description {
        let mut d = Description::default();
        d.apps.push(App {
            id: 7,
            slug: "app".into(),
            name: "App".into(),
            owner: "o".into(),
            public_key_pem: pairs().0.public_pem.clone(),
            permissions: Permissions::new(),
            created_at: chrono::Utc::now(),
        });
        d
    }

    #[test]
    fn claims_are_checked_with_githubs_wording() {
        let d = description();
        let (good, other) = pairs();
        let now = 1_000_000;
        let ok = sign(
            good,
            serde_json::json!({"iss": "7", "iat": now - 60, "exp": now + 540}),
        );
        assert_eq!(verify(&ok, &d, now, 60), Ok(7));
        let numeric_iss = sign(
            good,
            serde_json::json!({"iss": 7, "iat": now, "exp": now + 600}),
        );
        assert_eq!(verify(&numeric_iss, &d, now, 60), Ok(7));
        let cases = [
            (
                good,
                serde_json::json!({"iss": "7", "iat": now - 700, "exp": now - 100}),
                EXP_NOT_FUTURE,
            ),
            (
                good,
                serde_json::json!({"iss": "7", "iat": now - 60}),
                EXP_NOT_FUTURE,
            ),
            (
                good,
                serde_json::json!({"iss": "7", "iat": now, "exp": now + 601}),
                EXP_TOO_FAR,
            ),
            (
                good,
                serde_json::json!({"iss": "7", "iat": now + 61, "exp": now + 500}),
                IAT_INVALID,
            ),
            (
                good,
                serde_json::json!({"iss": "7", "iat": "yesterday", "exp": now + 500}),
                IAT_INVALID,
            ),
            (
                other,
                serde_json::json!({"iss": "7", "iat": now, "exp": now + 500}),
                NOT_DECODED,
            ),
        ];
        for (pair, claims, message) in cases {
            let jwt = sign(pair, claims.clone());
            assert_eq!(
                verify(&jwt, &d, now, 60).unwrap_err().message,
                message,
                "{claims}"
            );
        }
        let unknown = sign(
            good,
            serde_json::json!({"iss": "8", "iat": now, "exp": now + 500}),
        );
        assert_eq!(verify(&unknown, &d, now, 60).unwrap_err().status, 404);
        assert_eq!(
            verify("garbage", &d, now, 60).unwrap_err().message,
            NOT_DECODED
        );
        assert!(looks_like_jwt(&ok));
        assert!(!looks_like_jwt("ghs_abc"));
    }
}
