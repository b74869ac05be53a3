//! Values the authorization server hands to anonymous callers and reads back later, sealed
//! (HMAC-SHA-256) instead of stored: a dynamically registered client's id and a consent page's
//! request. Anyone on the internet may register or open a consent page, so neither may cost a
//! row, a byte of disk or an entry that evicts another caller's (issue 37): what the server
//! must know again later travels with the caller, and the seal proves the server wrote it.
//!
//! Not secret: the payload is readable JSON (base64url). Nothing confidential goes in — a
//! client secret only as its SHA-256. The MAC key is derived from the signing key, so it lives
//! where that key lives (state.db, readable only by the publisher) and changes with it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use zodex_engine::store::SigningKey;

/// The MAC bytes kept: 128 bits, as forgeable as guessing a random 128-bit value.
const MAC_BYTES: usize = 16;

/// What a sealed value is for: a value sealed for one purpose never opens as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A dynamically registered client (its id).
    Client,
    /// A consent page's authorization request.
    Page,
    /// The code a consent page shows, derived from the page.
    UserCode,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::Client => b"client",
            Purpose::Page => b"page",
            Purpose::UserCode => b"user-code",
        }
    }
}

/// Seals and opens values with a key only the publisher holds.
pub struct Sealer {
    key: hmac::Key,
}

impl Sealer {
    /// The sealer of the single sprite's endpoint (`sprite` `None`), or of one fleet sprite's:
    /// a value sealed for one endpoint never opens at another's (a page or registration made
    /// through sprite A is unknown to sprite B).
    pub fn new(signing: &SigningKey, sprite: Option<&str>) -> Self {
        let mut derived = Sha256::new();
        derived.update(b"zodex mcp oauth sealing key v1\0");
        derived.update(&signing.pkcs8);
        if let Some(sprite) = sprite {
            derived.update(b"\0fleet sprite\0");
            derived.update(sprite.as_bytes());
        }
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, &derived.finalize()),
        }
    }

    fn mac(&self, purpose: Purpose, payload: &str) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(purpose.label());
        ctx.update(b"\0");
        ctx.update(payload.as_bytes());
        ctx.sign()
    }

    /// `payload.mac`, both base64url.
    pub fn seal<T: Serialize>(&self, purpose: Purpose, value: &T) -> String {
        let json = serde_json::to_vec(value).expect("a sealed value serializes");
        let payload = URL_SAFE_NO_PAD.encode(json);
        let tag = self.mac(purpose, &payload);
        format!(
            "{payload}.{}",
            URL_SAFE_NO_PAD.encode(&tag.as_ref()[..MAC_BYTES])
        )
    }

    /// The value, when `sealed` is one this server sealed for `purpose`; `None` otherwise
    /// (forged, altered, truncated or sealed for another purpose).
    pub fn open<T: DeserializeOwned>(&self, purpose: Purpose, sealed: &str) -> Option<T> {
        let (payload, mac) = sealed.rsplit_once('.')?;
        let given = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let expected = self.mac(purpose, payload);
        if given.len() != MAC_BYTES
            || !super::crypto::same_bytes(&given, &expected.as_ref()[..MAC_BYTES])
        {
            return None;
        }
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }

    /// The code a consent page shows for `sealed_page`: eight characters of the page's own MAC
    /// under another purpose, so a page cannot choose its code and two pages share one only by
    /// a 40-bit coincidence.
    pub fn user_code(&self, sealed_page: &str) -> String {
        super::crypto::user_code_from(self.mac(Purpose::UserCode, sealed_page).as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey {
            kid: "k".into(),
            pkcs8: vec![seed; 48],
            public_key: Vec::new(),
        }
    }

    fn sealer(seed: u8) -> Sealer {
        Sealer::new(&key(seed), None)
    }

    #[test]
    fn a_value_sealed_for_one_sprite_never_opens_at_another() {
        let a = Sealer::new(&key(1), Some("a"));
        let sealed = a.seal(Purpose::Page, &7);
        assert_eq!(a.open::<i64>(Purpose::Page, &sealed), Some(7));
        assert_eq!(
            Sealer::new(&key(1), Some("b")).open::<i64>(Purpose::Page, &sealed),
            None
        );
        assert_eq!(sealer(1).open::<i64>(Purpose::Page, &sealed), None);
        assert_ne!(a.user_code(&sealed), sealer(1).user_code(&sealed));
    }

    #[test]
    fn a_sealed_value_opens_only_unaltered_for_its_purpose_and_key() {
        let s = sealer(1);
        let sealed = s.seal(Purpose::Client, &("name", 7));
        assert_eq!(
            s.open::<(String, i64)>(Purpose::Client, &sealed),
            Some(("name".into(), 7))
        );
        assert_eq!(s.open::<(String, i64)>(Purpose::Page, &sealed), None);
        assert_eq!(
            sealer(2).open::<(String, i64)>(Purpose::Client, &sealed),
            None
        );
        // The payload changed (a client renamed by whoever holds its id): refused.
        let (payload, mac) = sealed.rsplit_once('.').unwrap();
        let forged_payload = URL_SAFE_NO_PAD.encode(br#"["evil",7]"#);
        assert_ne!(forged_payload, payload);
        assert_eq!(
            s.open::<(String, i64)>(Purpose::Client, &format!("{forged_payload}.{mac}")),
            None
        );
        for bad in [
            "",
            ".",
            "abc",
            &sealed[..sealed.len() - 1],
            &format!("{sealed}A"),
        ] {
            assert_eq!(s.open::<(String, i64)>(Purpose::Client, bad), None, "{bad}");
        }
    }

    #[test]
    fn user_codes_follow_the_page_and_the_key() {
        let s = sealer(1);
        let a = s.seal(Purpose::Page, &1);
        let b = s.seal(Purpose::Page, &2);
        assert_eq!(s.user_code(&a), s.user_code(&a));
        assert_ne!(s.user_code(&a), s.user_code(&b));
        assert_ne!(s.user_code(&a), sealer(2).user_code(&a));
        assert_eq!(s.user_code(&a).len(), 9);
    }
}
