//! Secrets in pushed blobs, found with gitleaks' rule set.
//!
//! The publisher scans each blob a push adds with [`scan`] before it mints a token: a
//! [`Finding`] names the rule, the path and the line, and carries a [`Fingerprint`] (a hash
//! of the rule and the secret), never the secret, so refusals, the audit and logs can hold it.
//! An operator allows one finding by typing its fingerprint back ([`Fingerprint`]'s `FromStr`).
//!
//! The rules are gitleaks' own file, vendored in `rules/gitleaks.toml` (MIT, with its origin
//! and commit) and compiled once ([`Rules::shipped`]); [`Rules::from_toml`] reads another file
//! in the same format. Gitleaks' patterns are Go RE2; they compile with the `regex` crate
//! except the few [`Rules::left_out`] lists (the crate's tests name them and require 95% to
//! compile). What of the format is honoured is listed in `rules.rs`.
//!
//! What the pushed content cannot do: vouch for itself. Gitleaks' in-file `gitleaks:allow`
//! comment is not honoured; an allowance is the operator's, by fingerprint. What it can do, as
//! under gitleaks: a path the rule set's global allowlist names (`node_modules/`, `vendor/`,
//! lock files, images) is not scanned ([`Skipped::AllowedPath`]), so a caller that does not
//! trust the pusher's choice of paths decides what that skip means.
//!
//! What this crate does not do: read git objects or decide. It sees one blob's bytes and path
//! and says what it found; which blobs to scan and what a finding means for the push belong to
//! the publisher. It holds no state between scans and does no I/O.
//!
//! Code map:
//! - `file.rs`: the rule file's TOML, as serde reads it.
//! - `pattern.rs`: Go patterns compiled for the `regex` crate.
//! - `allowlist.rs`: gitleaks' allowlists, per file and per finding.
//! - `keywords.rs`: the keyword prefilter, which rules run on a window.
//! - `rules.rs`: [`Rules`], the compiled file.
//! - `window.rs`: a blob cut into overlapping windows, bounded work per window.
//! - `detect.rs`: one window's matches, secrets, entropy and allowlist checks.
//! - `scan.rs`: [`scan`], the binary rule, the budget, [`Finding`]s.
//! - `fingerprint.rs`: [`Fingerprint`], written and read back.

mod allowlist;
mod detect;
mod file;
mod fingerprint;
mod keywords;
mod pattern;
mod rules;
mod scan;
mod window;

pub use fingerprint::{Fingerprint, FingerprintError};
pub use rules::{LeftOut, Part, Problem, Rules, RulesError};
pub use scan::{BINARY_PROBE, Finding, GITHUB_FILE_LIMIT, Limits, Scan, Skipped, scan};
pub use window::{OVERLAP, WINDOW};
