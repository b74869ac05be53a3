//! The bytes of publishing: per-repository mirrors, and importing a bundle into a quarantine
//! where its objects are checked (a constant-memory pre-scan of the pack, then indexing in a
//! child process under memory limits); the walks that establish each update's facts; and the
//! leased push to GitHub. Knows git and gix, not the engine's decisions or GitHub's REST API: it
//! takes `zodex-engine`'s repository names, `zodex-github`'s `Token` and HTTP stack, and
//! `zodex-protocol`'s bundle header. Its one user is `zodex-publisher` (which re-exports it as
//! `publish`, and `locks`), whose `host` ties these to decisions and tokens.
//!
//! Code map:
//! - `git`: `git` run hermetically (no system or user configuration, no prompts, no credential
//!   helpers), the token passed in the environment as an HTTP header.
//! - `mirror`: one bare mirror per repository, a treeless partial clone (`tree:0`) fetched
//!   incrementally; the few trees and bases a step needs fetched by id; repacked past 48 packs.
//! - `shallow`: a mirror's first fetch of the tips alone (`--depth=1`), the check that a decision
//!   on it is the whole history's, and the deepening.
//! - `locks`: one async lock per repository (a mirror's fetch and push, a write token's issuance).
//! - `import`: the quarantine beside the mirror: a bundle imported and checked there, and its
//!   pack adopted into the mirror only after the push.
//! - `import_error`: what an import refuses, and why, with what to do next.
//! - `packscan`: the constant-memory pre-scan of a pack (declared sizes against the limits before
//!   inflating, zlib streams against what they declare).
//! - `indexer`: gix-pack indexing in a child (`zodex-prd index-pack`) under
//!   `RLIMIT_DATA`/`AS`/`FSIZE`/`CPU`, its peak memory logged.
//! - `walk`: an update's facts against GitHub's refs with `git rev-list` (the commits it brings,
//!   origin, reachability), and whether given tips reach every object of a pack.
//! - `diff`: the paths an update's commits change (tree against parent trees, only where they
//!   differ; merges as git's combined diff), bounded, with the trees a treeless mirror lacks
//!   named round by round.
//! - `secret_scan`: the blobs a push adds, scanned for secrets (gitleaks' rules, crate
//!   `zodex-secrets`): small ones in the daemon, large ones in a child under the indexer's
//!   limits; findings carry fingerprints, never the secret.
//! - `upload`: the leased push: the verified pack passed through when that is sound, else
//!   `git push --porcelain` from the mirror; then the mirror's ref moved to match.
//! - `upload_pack`: commits fetched by id over protocol v2 on the sessions' pooled connection
//!   (one round trip where `git fetch` takes four and more).
//! - `receive_pack`: a receive-pack client over smart HTTP sending the verified pack as it is on
//!   disk, per-ref results in GitHub's own `report-status` words.
//! - `pktline`: receive-pack's text — pkt-lines, the ref advertisement, commands, `report-status`.
//! - `forward`: a streamed bundle's pack passed on to GitHub as it lands, whole entries only, its
//!   20-byte checksum held back until the verdict.
//! - `valid_refname` (here): git-check-ref-format's rules, checked before a ref name reaches a
//!   decision or a refspec.
//!
//! Invariants:
//! - Decides nothing and calls no REST endpoint; its manifest names no `zodex-publisher` or
//!   `zodex-config`.
//! - A token travels only in the environment or an HTTP header marked sensitive: never in argv,
//!   a URL, a file or an error text.
//! - No pack, whatever it declares, grows the daemon's memory.
//! - Facts about a ref update come from GitHub's refs (the mirror's refs right after a fetch),
//!   never from which objects the mirror happens to store; nothing is fetched lazily.
//! - Nothing reaches the mirror until the push succeeded, and then only a pack every object of
//!   which the pushed tips reach; a refused bundle leaves nothing behind.
//! - Every update is leased on the value the decision saw: GitHub refuses a ref that moved since.

pub mod diff;
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
pub mod secret_scan;
pub mod shallow;
pub mod upload;
pub mod upload_pack;
pub mod walk;

pub use import::{ImportError, Quarantine, SharedQuarantine, UpdateFacts};
pub use mirror::{MirrorRef, Mirrors};

/// Whether `name` is a full ref name git accepts ([`zodex_types::RefName`]'s rules: those of
/// git-check-ref-format(1), under `refs/`). For a yes or no only; code that goes on with the
/// name parses it into a `RefName`.
pub fn valid_refname(name: &str) -> bool {
    zodex_types::RefName::parse(name).is_ok()
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
