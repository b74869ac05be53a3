//! The vocabulary at the bottom: the plain values every Zodex crate may name — ref names,
//! object ids, repositories, TTLs, targets, protected paths, a fleet's names and labels, and
//! the audit's fixed words. No Cedar, no SQL, no I/O: a client parses a ref name without
//! linking the policy engine. `zodex-engine` re-exports each module under its old path.
//!
//! Code map:
//! - `ref_name`, `object_id`: `RefName` (a full ref name git accepts, by `gix-validate` and our
//!   stricter rules) and `ObjectId` (hex SHA-1, its zero value `ObjectId::ZERO`), parsed once
//!   where they enter and serialized as the same strings.
//! - `ref_change`: `RefChange` — create, update (forced or not), delete — with exactly the ids
//!   each needs; the old value is the lease.
//! - `repo`: `RepoName` (GitHub's spelling, lower-cased key) and the one reader of remote URLs
//!   and credential paths.
//! - `targets`: the configured targets, repositories or owners this sprite may ever write to.
//! - `ttl`: the TTL grammar people type (`30s`, `45m`, `2h`, `1d`, `1h30m`).
//! - `paths`: the protected path patterns and the paths an update changes, as facts.
//! - `fleet`: a fleet member's name and role, a sprite's labels, an owner, a sprite filter.
//! - `action`: the Cedar schema's actions, by name.
//! - `vocabulary`: the audit's fixed words (`Actor`, `AuditAction`, `AuditDecision`,
//!   `EventKind`, `Outcome`), each with its one stored text; read leniently (a text no build
//!   writes is kept as `Recorded`).
//! - `coverage`, `token`: the GitHub App facts the GitHub client finds out and the engine
//!   stores (`App`, `CoverageFact`, `IssuedToken`).

pub mod action;
pub mod coverage;
pub mod fleet;
pub mod object_id;
pub mod paths;
pub mod ref_change;
pub mod ref_name;
pub mod repo;
pub mod targets;
pub mod token;
pub mod ttl;
pub mod vocabulary;

pub use action::Action;
pub use object_id::{ObjectId, ObjectIdError};
pub use ref_change::{RefChange, RefChangeError};
pub use ref_name::{RefName, RefNameError};
pub use repo::RepoName;
pub use vocabulary::{Actor, AuditAction, AuditDecision, EventKind, OperatorName, Outcome};

/// What git says of one ref (or of a pack) it was sent: `ok`, or the remote's own words for a
/// refusal (`ng <ref> <reason>`, `unpack <reason>`); the publisher's for the agent's git alike.
// String: the remote's words, passed on to the person pushing as they are; no type of ours
// can say more of them than they do.
pub type GitStatus = Result<(), String>;

/// Pending agent requests kept at most, unless the configuration says otherwise.
pub const DEFAULT_MAX_PENDING_REQUESTS: u32 = 20;
