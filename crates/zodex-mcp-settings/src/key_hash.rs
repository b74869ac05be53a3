//! `KeyHash`: the SHA-256 of the MCP capability key, and its file. The publisher writes the
//! file (`zodex sprite connect` sends the hash over the admin socket), `zodex-agent serve`
//! reads it on every change; both go through this one type and this one format: the 64
//! lower-case hex digits and a newline, nothing else.

use sha2::{Digest, Sha256};
use std::fmt;
use std::path::Path;
use subtle::ConstantTimeEq;

/// The SHA-256 of a capability key: the only form of the key a sprite keeps.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyHash([u8; 32]);

/// Why a text or a file is not a key hash.
#[derive(Debug, thiserror::Error)]
pub enum KeyHashError {
    #[error("a key hash is 64 hex digits (a SHA-256)")]
    NotHex,
    #[error("cannot read key hash file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("key hash file {path}: a key hash is 64 hex digits (a SHA-256)")]
    Damaged { path: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl KeyHash {
    /// Hashes a key.
    pub fn of_key(key: &str) -> KeyHash {
        KeyHash(Sha256::digest(key.as_bytes()).into())
    }

    /// Parses exactly 64 hex digits (either case), as the admin request carries them.
    pub fn parse(text: &str) -> Result<KeyHash, KeyHashError> {
        if text.len() != 64 {
            return Err(KeyHashError::NotHex);
        }
        let bytes = hex::decode(text).map_err(|_| KeyHashError::NotHex)?;
        let mut out = [0u8; 32];
        out.copy_from_slice(&bytes);
        Ok(KeyHash(out))
    }

    /// Parses 64 hex digits, surrounding whitespace allowed (e.g. a trailing newline).
    pub fn from_hex(text: &str) -> Result<KeyHash, KeyHashError> {
        Self::parse(text.trim())
    }

    /// Reads a key hash file: it holds exactly the hex SHA-256 (and whitespace) and nothing
    /// else.
    pub fn read_file(path: &Path) -> Result<KeyHash, KeyHashError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyHashError::Read {
            path: path.display().to_string(),
            source,
        })?;
        KeyHash::from_hex(&text).map_err(|_| KeyHashError::Damaged {
            path: path.display().to_string(),
        })
    }

    /// Replaces the key hash file at `path` atomically (a new file renamed over the old: a
    /// reader sees the old hash or the new, never half of one). Mode 0644: it holds only a
    /// hash, and `zodex-agent serve` (another user) reads it.
    pub fn write_file(&self, path: &Path) -> Result<(), KeyHashError> {
        let failed = |source| KeyHashError::Write {
            path: path.display().to_string(),
            source,
        };
        write_atomically(path, format!("{}\n", self.to_hex()).as_bytes()).map_err(failed)
    }

    /// Lower-case hex, as written to a key hash file.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// True when `candidate` is the key. Constant time in the content of the key: the candidate
    /// is hashed first, so its length tells nothing about the stored key either.
    pub fn verify(&self, candidate: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        presented.ct_eq(&self.0).into()
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A hash is not secret, but there is no reason to print it either.
        f.write_str("KeyHash(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_accepts_only_the_key() {
        let hash = KeyHash::of_key("the key");
        assert!(hash.verify("the key"));
        assert!(!hash.verify(""));
        assert!(!hash.verify("the ke"));
        assert!(!hash.verify("the keyx"));
        let round = KeyHash::from_hex(&format!("{}\n", hash.to_hex())).unwrap();
        assert!(round.verify("the key"));
    }

    #[test]
    fn a_hash_is_64_hex_digits() {
        assert!(KeyHash::parse("abc").is_err());
        assert!(KeyHash::parse(&"zz".repeat(32)).is_err());
        assert!(KeyHash::parse(&"ab".repeat(33)).is_err());
        assert!(KeyHash::parse(&format!("{}\n", "ab".repeat(32))).is_err());
        assert!(KeyHash::from_hex(&format!("{}\n", "ab".repeat(32))).is_ok());
        let upper = KeyHash::parse(&"AB".repeat(32)).unwrap();
        assert_eq!(upper.to_hex(), "ab".repeat(32));
        assert_eq!(
            KeyHash::parse("x").unwrap_err().to_string(),
            "a key hash is 64 hex digits (a SHA-256)"
        );
    }

    #[test]
    fn the_file_is_written_whole_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/mcp-key.sha256");
        let hash = KeyHash::of_key("k");
        hash.write_file(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", hash.to_hex())
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        assert_eq!(KeyHash::read_file(&path).unwrap(), hash);
        KeyHash::of_key("other").write_file(&path).unwrap();
        assert!(KeyHash::read_file(&path).unwrap().verify("other"));
        std::fs::write(&path, "not a hash").unwrap();
        assert!(matches!(
            KeyHash::read_file(&path),
            Err(KeyHashError::Damaged { .. })
        ));
        assert!(matches!(
            KeyHash::read_file(&dir.path().join("none")),
            Err(KeyHashError::Read { .. })
        ));
    }
}
