//! Consent pages as the server knows them without storing them (issue 37): each page holds its
//! own sealed request ([`PageRequest`]), and the server remembers in memory only which client
//! and redirect each code it showed belongs to ([`ShownPages`]), so that `approve` can name
//! them. That memory is bounded; losing an entry costs nothing but a second of waiting — the
//! page's next poll says again what it is.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use zodex_engine::store::OAuthClient;

/// Pages remembered at once (each entry at most a few KiB: a client id, a name of 100
/// characters, a redirect URI of 2,000).
pub const MAX_SHOWN: usize = 4096;

/// An authorization request as its consent page carries it, sealed (short field names: the
/// page posts it back every second).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageRequest {
    /// A random nonce: two pages of the same request are two pages.
    pub n: String,
    pub client: PageClient,
    /// The redirect URI, one of the client's.
    pub r: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub st: Option<String>,
    /// The PKCE S256 challenge.
    pub ch: String,
    /// The resource the tokens are for.
    pub rs: String,
    /// Opened at, expires at.
    pub t: i64,
    pub x: i64,
}

/// The client a page was opened for, as recorded when its approval is collected.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageClient {
    pub id: String,
    pub kind: String,
    pub name: String,
    pub auth: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_sha256: Option<String>,
    pub uris: Vec<String>,
    pub created: i64,
}

impl PageClient {
    pub fn of(client: &OAuthClient) -> Self {
        Self {
            id: client.client_id.clone(),
            kind: client.kind.clone(),
            name: client.name.clone(),
            auth: client.auth_method.clone(),
            secret_sha256: client.secret_sha256.clone(),
            uris: client.redirect_uris.clone(),
            created: client.created_at,
        }
    }

    pub fn client(&self) -> OAuthClient {
        OAuthClient {
            client_id: self.id.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            redirect_uris: self.uris.clone(),
            auth_method: self.auth.clone(),
            secret_sha256: self.secret_sha256.clone(),
            created_at: self.created,
            last_used_at: None,
            revoked_at: None,
        }
    }
}

/// What a code's page showed: what `approve` and `deny` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownPage {
    /// The SHA-256 of the page's nonce.
    pub page: String,
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A code shown by two different pages: `approve` refuses it rather than guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collision;

struct Entry {
    page: ShownPage,
    collided: bool,
    /// A counter, not a clock: the least recently seen entry is evicted first.
    seen: u64,
}

#[derive(Default)]
struct Inner {
    by_code: HashMap<String, Entry>,
    tick: u64,
}

/// The codes of the consent pages shown or polled lately.
#[derive(Default)]
pub struct ShownPages {
    inner: Mutex<Inner>,
}

impl ShownPages {
    /// Remembers that `code` belongs to `page` (a page's render or poll).
    pub fn saw(&self, code: &str, page: ShownPage) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if let Some(entry) = inner.by_code.get_mut(code) {
            entry.collided |= entry.page.page != page.page;
            entry.seen = tick;
            return;
        }
        if inner.by_code.len() >= MAX_SHOWN
            && let Some(oldest) = inner
                .by_code
                .iter()
                .min_by_key(|(_, e)| e.seen)
                .map(|(code, _)| code.clone())
        {
            inner.by_code.remove(&oldest);
        }
        inner.by_code.insert(
            code.to_string(),
            Entry {
                page,
                collided: false,
                seen: tick,
            },
        );
    }

    /// The page showing `code` (expired or not: the sweeper forgets expired ones).
    pub fn showing(&self, code: &str) -> Result<Option<ShownPage>, Collision> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match inner.by_code.get(code) {
            Some(e) if e.collided => Err(Collision),
            Some(e) => Ok(Some(e.page.clone())),
            None => Ok(None),
        }
    }

    /// Forgets the pages expired by `now` (the sweeper, once a minute).
    pub fn forget_expired(&self, now: i64) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.by_code.retain(|_, e| e.page.expires_at > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(nonce: &str, expires_at: i64) -> ShownPage {
        ShownPage {
            page: nonce.into(),
            client_id: "c".into(),
            client_name: "n".into(),
            redirect_uri: "https://c.example/cb".into(),
            created_at: 0,
            expires_at,
        }
    }

    #[test]
    fn a_code_shown_by_two_pages_is_a_collision_and_memory_is_bounded() {
        let shown = ShownPages::default();
        shown.saw("AAAA-AAAA", page("p1", 100));
        shown.saw("AAAA-AAAA", page("p1", 100));
        assert_eq!(shown.showing("AAAA-AAAA"), Ok(Some(page("p1", 100))));
        assert_eq!(shown.showing("BBBB-BBBB"), Ok(None));
        shown.saw("AAAA-AAAA", page("p2", 100));
        assert_eq!(shown.showing("AAAA-AAAA"), Err(Collision));

        // A flood evicts the least recently seen; a page that keeps polling stays.
        let shown = ShownPages::default();
        shown.saw("KEEP-KEEP", page("mine", 1000));
        for i in 0..MAX_SHOWN * 2 {
            shown.saw(&format!("F{i}"), page(&format!("f{i}"), 1000));
            if i % 1000 == 0 {
                shown.saw("KEEP-KEEP", page("mine", 1000));
            }
        }
        assert!(shown.inner.lock().unwrap().by_code.len() <= MAX_SHOWN);
        assert_eq!(shown.showing("KEEP-KEEP"), Ok(Some(page("mine", 1000))));
        shown.forget_expired(1000);
        assert!(shown.inner.lock().unwrap().by_code.is_empty());
    }
}
