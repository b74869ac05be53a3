//! The bytes of publishing: per-repository mirrors, and importing a bundle into
//! a quarantine where its objects are checked (a constant-memory pre-scan of the pack, then
//! indexing in a child process under memory limits). Knows git and gix, not the engine or GitHub's API;
//! `host::publish` ties these to decisions and tokens.

pub mod forward;
pub mod git;
pub mod import;
mod import_error;
pub mod indexer;
pub mod locks;
pub mod mirror;
pub mod packscan;
pub mod pktline;
pub mod receive_pack;
pub mod shallow;
pub mod upload;
pub mod walk;

pub use import::{ImportError, Quarantine, SharedQuarantine, UpdateFacts};
pub use mirror::{MirrorRef, Mirrors};

/// Whether `name` is a full ref name git accepts (the rules of git-check-ref-format(1)), under
/// `refs/`. Checked before a name reaches a decision or a refspec: `refs/heads/../x` would pass
/// a `refs/heads/*` glob, and `:` or `+` would change what a refspec means.
pub fn valid_refname(name: &str) -> bool {
    name.starts_with("refs/")
        && name.len() <= 1024
        && !name.ends_with('/')
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && name != "@"
        && !name
            .bytes()
            .any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b))
        && name
            .split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.') && !part.ends_with(".lock"))
}

#[cfg(test)]
mod tests {
    use super::valid_refname;

    #[test]
    fn ref_names_follow_git_check_ref_format() {
        for ok in [
            "refs/heads/main",
            "refs/heads/feature/x-1",
            "refs/tags/v1.2.3",
        ] {
            assert!(valid_refname(ok), "{ok}");
        }
        for bad in [
            "main",
            "refs/heads/../x",
            "refs/heads/x:refs/heads/main",
            "refs/heads/a b",
            "refs/heads/x.lock",
            "refs/heads/.hidden",
            "refs/heads/x/",
            "refs/heads//x",
            "refs/heads/x@{1}",
            "refs/heads/x~1",
            "refs/heads/x^",
            "refs/heads/x?",
            "refs/heads/x*",
            "refs/heads/x[",
            "refs/heads/x\\y",
            "refs/heads/x\n",
            "refs/heads/x.",
        ] {
            assert!(!valid_refname(bad), "{bad:?}");
        }
    }
}

/// A bundle body as the daemon spooled it (`daemon::spool` makes it, the host imports it): a
/// private temporary file of exactly `len` bytes, and its SHA-256 for the audit. Here, below
/// both, so that neither imports the other.
#[derive(Debug)]
pub struct Spooled {
    pub file: tempfile::NamedTempFile,
    pub len: u64,
    pub sha256: String,
}
