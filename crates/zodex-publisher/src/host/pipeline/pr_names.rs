//! The names a publication goes by: its branch's slug and random suffix, and the key a retry
//! finds the first attempt by.

use super::pr::PrRequest;
use sha2::{Digest, Sha256};
use zodex_engine::RepoName;

/// The same repository, head, base and text make the same key: a retry finds the first attempt.
pub(super) fn idempotency_key(repo: &RepoName, pr: &PrRequest, base: &str) -> String {
    let mut hash = Sha256::new();
    for part in [repo.key().as_str(), &pr.head, base, &pr.title, &pr.body] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.update([pr.draft as u8]);
    hex::encode(hash.finalize())
}

/// Lower-case words of the title joined by `-`, at most 40 bytes.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() + 1 > 40 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    if out.is_empty() { "change".into() } else { out }
}

pub(super) fn random6() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_lowercase_words() {
        assert_eq!(
            slug("Fix the Parser: handle CRLF!"),
            "fix-the-parser-handle-crlf"
        );
        assert_eq!(slug("ünïcode only"), "n-code-only");
        assert_eq!(slug("!!!"), "change");
        assert!(slug(&"word ".repeat(50)).len() <= 40);
        assert_eq!(random6().len(), 6);
    }
}
