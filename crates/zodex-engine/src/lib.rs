//! The policy engine: SQLite state, Cedar schema and policies, and `decide()` — the one decision
//! point of Zodex. It sits near the bottom of the crate graph, on `zodex-types` (the vocabulary)
//! and `zodex-sql` alone.
//! `zodex-publisher` hosts it and is the only caller of its decisions and state changes
//! (`decide`, `Authority`, `ledger`, `mcp_oauth`); `zodex-protocol` makes its answers from the
//! engine's views and types (`From`: nothing here is serialised for the sockets, and the page
//! budgets count bytes by the caller's measure, `authority::AnswerBytes`); the GitHub client,
//! the config and the clients take its repository names, TTL grammar, targets and fact types. The built-in policies and properties (`policies/`) and
//! the SQL history (`migrations/`) are embedded at build time.
//!
//! Code map:
//! - `decide`: `decide()` — a question's facts loaded in the caller's transaction, Cedar entities
//!   and context built, Cedar asked; `Engine`, `Ask`, `Decision`, `RepoFacts`.
//! - `policy`: the embedded schema and built-in policies, the operator's `policy_dir`, fail-closed
//!   validation (file:line:col), every policy renamed after its `@id`; `ActionIndex`.
//! - `properties`: the write invariants as Cedar `permit`s with their `@assume` (built-in and the
//!   operator's `properties/`); read and validated here, proven by the publisher.
//! - `ref_name`, `object_id`, `ref_change`, `paths`, `repo`, `targets`, `ttl`, `fleet`,
//!   `vocabulary`: the vocabulary, re-exported from `zodex-types` (its lib.rs has their map).
//! - `refscope`: the `--ref` pattern grammar of grants and YOLO scopes, and a ref's scopes, which
//!   Cedar matches against them with `containsAny` (`like` takes only literal patterns).
//! - `authority`: every command that changes or shows write authority, one audited transaction
//!   each; the pending-request cap and the reason limit.
//!   - `authority::views`: what operators (and the agent's `status`) read — bounded lists with
//!     totals, pages under the admin reply cap — and pruning of old history.
//!   - `authority::pages`: the row and byte budgets of those lists and pages, and their cursors;
//!     the bytes are the answer's, measured by the caller (`AnswerBytes`).
//! - `ledger`: what the publisher records of what it did (outcomes, events, coverage, tokens and
//!   their revocation, the publication state machine), one transaction and audit row each.
//! - `mcp_oauth`: the MCP endpoint's OAuth as audited state transitions (secrets come in as
//!   hashes, the PKCE check as a function; signing stays with the publisher).
//! - `hints`: the command that would unblock a denial (advice only, never a rule).
//! - `store`: the state on SQLite or PostgreSQL: numbered migrations, every multi-row change in
//!   one transaction, every decision's reads in one snapshot; a fleet sprite's own writes in
//!   its shard (`Store::write_in`, race tests in `store::shard_tests`).
//!   - `store::audit`: one `AuditEntry`, written and read, every field bounded.
//!   - `store::audit_chain`: tamper evidence — the `evidence` and `bulk` hash chains (and on
//!     PostgreSQL each fleet sprite's pair), each pruned only from its start onto a recorded
//!     base; `verify_audit` names the first row changed.
//!   - `store::audit_checkpoint`: every chain's head in one signed row; verify holds the
//!     chains to the newest.
//!   - `store::audit_export`: the rows after a sink's cursor on each chain (the outbox).
//!   - `store::audit_shipped`: the store behind what a sink already shipped (lost commits).
//!   - `store::coverage`: whether each App is installed on a repository, as last checked.
//!   - `store::decision_facts`: both Apps' coverage, the candidate grant and the candidate YOLO
//!     scope in one statement.
//!   - `store::grants`: explicit push grants and the agent's pending requests for them.
//!   - `store::oauth`: the MCP OAuth rows (signing key, clients, authorizations, refresh families).
//!   - `store::publications`: review-first publications under their idempotency key.
//!   - `store::tokens`: the installation tokens the publisher minted, by SHA-256 only.
//!   - `store::yolo`: YOLO scopes, time-boxed push authority over one or every installed
//!     repository.
//! - `tests`, `action_index_tests` (test builds): every built-in rule through `Authority` over a
//!   real SQLite file; the action index decides exactly as the whole policy set.
//!
//! Invariants:
//! - The engine never touches the network, git, a process or the clock directly — time comes in
//!   as `now`, state comes from its SQLite store, decisions go out as values (`tests/it/tidy.rs`
//!   checks the source; the manifest names only `zodex-types` and `zodex-sql`).
//! - SQL selects the candidate facts (the furthest-reaching grant and YOLO scope); Cedar decides,
//!   expiry included. Any Cedar evaluation error is a deny; a policy file that does not parse or
//!   validate refuses start.
//! - The default branch is GitHub's, from fresh coverage only: unknown means
//!   `default_branch_known = false`, and Cedar refuses force or delete of any branch.
//! - Every change of state is a named operation in one transaction with its audit row
//!   (`Authority`, `ledger`, `mcp_oauth`); the publisher has no other way in.
//! - Audit rows are never updated (an outcome is a row of its own), so the hash chains show any
//!   row changed, inserted, reordered or removed.

pub mod decide;
// The vocabulary lives in `zodex-types`; its modules keep their paths here.
pub use zodex_types::{
    fleet, object_id, paths, ref_change, ref_name, repo, targets, ttl, vocabulary,
};
pub mod policy;
pub mod properties;
pub mod refscope;
pub mod store;

pub use decide::{
    Action, Ask, ChangeFacts, Decision, Engine, GrantTerms, Principal, RefUpdate, RepoFacts,
    ShadowVerdict,
};
pub use zodex_types::{
    Actor, AuditAction, AuditDecision, EventKind, ObjectId, ObjectIdError, OperatorName, Outcome,
    RefChange, RefChangeError, RefName, RefNameError, RepoName,
};
pub mod authority;
pub mod hints;
pub mod ledger;
pub mod mcp_oauth;

pub use authority::{Authority, AuthorityError, Denial, Status, YoloTerms};

#[cfg(test)]
mod action_index_tests;
#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod sprite_filter_tests;
#[cfg(test)]
mod tests;
