//! The MCP capability key: how it is made, stored, presented and checked.
//!
//! A key is 256 random bits in URL-safe base64 (43 characters, no padding). The server only
//! ever holds its SHA-256 ([`KeyHash`]); a presented key is hashed and compared in constant time.
//! Clients present it as `?key=…` on the MCP URL (what ChatGPT can do) or as
//! `Authorization: Bearer …`.
//!
//! Not here: the HTTP middleware that answers 401 and scrubs the key from the request before
//! anything can log it (see `http.rs`), and where the hash file lives (configuration).

use std::path::Path;

use base64::Engine as _;

/// Number of random bytes in a fresh key (256 bits; the issue asks for at least 128).
const KEY_BYTES: usize = 32;

/// Generates a fresh capability key: 256 random bits, URL-safe base64 without padding.
pub fn generate_key() -> anyhow::Result<String> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for the key: {e}"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The SHA-256 of a capability key, and its file: one type for the publisher, which writes
/// the file, and this server, which reads it (crate `zodex-mcp-settings`).
pub use zodex_mcp_settings::KeyHash;

/// Where the server finds the key's hash: fixed for its whole life (`zodex local`), or the key
/// hash file, which `zodex sprite connect` may write or rotate while the server runs. The file is
/// looked at (one `stat`) on every request and read again when it changed, so a new key works
/// at once and an old one stops at once; while there is no valid file, every request is refused.
pub enum KeySource {
    Fixed(KeyHash),
    File(KeyFile),
}

impl From<KeyHash> for KeySource {
    fn from(hash: KeyHash) -> Self {
        KeySource::Fixed(hash)
    }
}

/// A key hash file and what was last read from it.
pub struct KeyFile {
    path: std::path::PathBuf,
    last: std::sync::Mutex<Option<(FileStamp, Option<KeyHash>)>>,
}

/// What tells one version of a file from another without reading it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileStamp {
    pub(crate) fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        })
    }
}

impl KeyFile {
    pub fn new(path: std::path::PathBuf) -> Self {
        Self {
            path,
            last: std::sync::Mutex::new(None),
        }
    }

    /// The hash the file holds now, if it holds a valid one.
    pub fn current(&self) -> Option<KeyHash> {
        let stamp = FileStamp::of(&self.path)?;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, hash)) = last.as_ref()
            && *seen == stamp
        {
            return hash.clone();
        }
        let hash = KeyHash::read_file(&self.path).ok();
        *last = Some((stamp, hash.clone()));
        hash
    }
}

impl KeySource {
    /// True when `candidate` is the current key (see [`KeyHash::verify`]).
    pub fn verify(&self, candidate: &str) -> bool {
        match self {
            KeySource::Fixed(hash) => hash.verify(candidate),
            KeySource::File(file) => file.current().is_some_and(|hash| hash.verify(candidate)),
        }
    }
}

/// The key a request presents, from `?key=` or `Authorization: Bearer`. `None` when neither is
/// there. The query wins when both are present.
pub fn presented_key(query: Option<&str>, authorization: Option<&str>) -> Option<String> {
    if let Some(key) = query.and_then(|q| query_param(q, "key")) {
        return Some(key);
    }
    let auth = authorization?.trim();
    let (scheme, token) = auth.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The first `name=` parameter of a query string, decoded as a form does (`%XX` and `+`).
fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// The query string with every `key=` parameter removed; `None` when nothing is left. Used to
/// scrub a request before it goes further, so no later log line can contain the key.
pub fn strip_key_param(query: &str) -> Option<String> {
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.is_empty() && pair.split_once('=').map_or(*pair, |(k, _)| k) != "key")
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_followed_as_it_is_written_rotated_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp-key.sha256");
        let source = KeySource::File(KeyFile::new(path.clone()));
        assert!(!source.verify("first"), "no file: every key is refused");
        std::fs::write(&path, format!("{}\n", KeyHash::of_key("first").to_hex())).unwrap();
        assert!(source.verify("first"));
        assert!(!source.verify("second"));
        // A rotation replaces the file (a new inode, as the publisher writes it).
        let tmp = dir.path().join("tmp");
        std::fs::write(&tmp, KeyHash::of_key("second").to_hex()).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(source.verify("second"));
        assert!(!source.verify("first"), "the old key stops at once");
        std::fs::write(&path, "not a hash").unwrap();
        assert!(
            !source.verify("second"),
            "a damaged file refuses everything"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(!source.verify("second"));
    }

    #[test]
    fn fresh_keys_are_long_url_safe_and_distinct() {
        let a = generate_key().unwrap();
        let b = generate_key().unwrap();
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }

    #[test]
    fn a_fresh_key_verifies_against_its_hash() {
        let key = generate_key().unwrap();
        let hash = KeyHash::of_key(&key);
        assert!(hash.verify(&key));
        assert!(!hash.verify(""));
        assert!(!hash.verify(&key[..42]));
        assert!(!hash.verify(&format!("{key}x")));
        let round = KeyHash::from_hex(&format!("{}\n", hash.to_hex())).unwrap();
        assert!(round.verify(&key));
    }

    #[test]
    fn hash_files_hold_only_hex() {
        assert!(KeyHash::from_hex("abc").is_err());
        assert!(KeyHash::from_hex(&"zz".repeat(32)).is_err());
        assert!(KeyHash::from_hex(&"ab".repeat(33)).is_err());
        assert!(KeyHash::from_hex(&"ab".repeat(32)).is_ok());
    }

    #[test]
    fn key_comes_from_query_or_bearer() {
        assert_eq!(
            presented_key(Some("a=1&key=k%2Dx"), None).as_deref(),
            Some("k-x")
        );
        assert_eq!(
            presented_key(None, Some("Bearer tok")).as_deref(),
            Some("tok")
        );
        assert_eq!(
            presented_key(None, Some("bearer  tok ")).as_deref(),
            Some("tok")
        );
        assert_eq!(presented_key(None, Some("Basic tok")), None);
        assert_eq!(presented_key(Some("keyx=1"), None), None);
        assert_eq!(presented_key(None, None), None);
        assert_eq!(presented_key(Some("key=%"), None).as_deref(), Some("%"));
    }

    #[test]
    fn stripping_removes_every_key_param() {
        assert_eq!(strip_key_param("key=abc"), None);
        assert_eq!(strip_key_param("a=1&key=abc&key=d&b"), Some("a=1&b".into()));
        assert_eq!(strip_key_param("keyring=1"), Some("keyring=1".into()));
    }
}
