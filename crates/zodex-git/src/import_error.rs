//! Why a bundle was not imported or an update's facts could not be established: each message
//! says what happened and what to do next.

use super::git::GitError;
use super::packscan::{Declared, ScanError};
use zodex_protocol::bundle_header::BundleError;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}; make the bundle again with zodex-agent or git-remote-zodex")]
    Bundle(#[from] BundleError),
    #[error("the bundle's pack is damaged or truncated ({0}); nothing was stored; push again")]
    Pack(String),
    #[error(
        "the bundle builds on commit {0}, which the target repository does not have: the checkout's `origin` is another repository, or it was rewritten; clone the target repository and commit there"
    )]
    ForeignOrigin(String),
    #[error(
        "commit {0} starts a history the target repository does not share: only work that builds on the repository's own commits can be published; clone it and commit there"
    )]
    Unrelated(String),
    #[error(
        "object {0} is neither in the bundle nor in the target repository; the bundle is incomplete"
    )]
    Missing(String),
    /// The mirror's history is cut (a first fetch takes only the tips) where this needs it:
    /// the caller deepens the mirror and tries again.
    #[error(
        "zodex-prd's copy of the repository's history stops at commit {0} and could not be completed from GitHub; push again (the zodex-prd log says why)"
    )]
    HistoryCut(String),
    #[error(
        "the bundle carries object {0}, which no ref of this request reaches; nothing was stored; bundle only what the refs you push need (git-remote-zodex and zodex-agent do)"
    )]
    Unreachable(String),
    #[error("{what} {oid} is a {kind}; branches and tags must point at commits or annotated tags")]
    NotACommit {
        what: &'static str,
        oid: String,
        kind: String,
    },
    #[error(
        "{what} is {size} bytes, over GitHub's 100 MiB file limit; nothing was stored; remove the file from the commits (git-lfs keeps large files)"
    )]
    BlobTooLarge { what: String, size: u64 },
    #[error(
        "{what} is a {kind} of {size} bytes; zodex-prd accepts commits, trees and tags up to 4 MiB; nothing was stored; split the directory or shorten the message"
    )]
    MetadataTooLarge {
        what: String,
        kind: String,
        size: u64,
    },
    #[error("{0}; nothing was stored; push the change in smaller parts")]
    Limit(String),
    #[error("reading objects failed: {0}")]
    Objects(String),
    /// A thin pack builds on objects of GitHub's the mirror leaves at GitHub (it holds no
    /// blobs): the caller fetches them and imports again.
    #[error("the bundle builds on {} objects the mirror does not hold", .0.len())]
    NeedsBases(Vec<String>),
    #[error(transparent)]
    Git(#[from] GitError),
}

pub(super) fn objects_err(e: impl std::fmt::Display) -> ImportError {
    ImportError::Objects(e.to_string())
}

/// A pack the pre-scan refused, as the agent is told.
pub(super) fn scan_refusal(e: ScanError) -> ImportError {
    match e {
        ScanError::TooLarge { offset, kind, size } if kind.is_metadata() => {
            ImportError::MetadataTooLarge {
                what: format!("the pack's entry at byte {offset}"),
                kind: kind.name().to_string(),
                size,
            }
        }
        ScanError::TooLarge { offset, kind, size } => ImportError::BlobTooLarge {
            what: match kind {
                Declared::DeltaResult => {
                    format!("the object the delta at byte {offset} of the pack builds")
                }
                Declared::DeltaData => format!("the delta at byte {offset} of the pack"),
                _ => format!("the blob at byte {offset} of the pack (as its header declares)"),
            },
            size,
        },
        ScanError::Io(message) => ImportError::Objects(message),
        e @ ScanError::InflatesTooMuch { .. } => ImportError::Limit(format!("the pack {e}")),
        other => ImportError::Pack(other.to_string()),
    }
}
