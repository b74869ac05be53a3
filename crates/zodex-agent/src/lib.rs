//! The agent's side of the publisher: the clients of the agent socket behind `zodex-agent
//! github …` (publish-pr, request-push and its wait), the git credential helper and
//! `git-remote-zodex`. It speaks `zodex-protocol` and imports nothing of `zodex-publisher` (its
//! manifest names only `zodex-engine`, `zodex-protocol` and `zodex-config`). Its user is the root
//! crate's `cli`, behind the binaries `zodex-agent`, `git-remote-zodex` and
//! `git-credential-zodex`, which run as the agent user on a sprite.
//!
//! Code map:
//! - `client`: one request on the agent socket, and its answer; a bundle sent from disk (its
//!   128 MiB ceiling checked before connecting) or streamed in chunks as `pack-objects` writes it
//!   (stopped without its end chunk at the ceiling).
//! - `credential`: git's credential protocol (parse, format, `owner/name` from `path`, `quit=1` on
//!   a refused `get` so git stops without prompting) and `serve`, the helper itself, for
//!   `zodex-agent credential` and `git-credential-zodex`: only this sprite's git host is answered.
//! - `remote_helper`: git's remote-helper protocol for `git-remote-zodex` (`capabilities`,
//!   `option`, `list for-push`, `push`: every ref update of one push in one bundle, each answered
//!   `ok` or `error`).
//! - `bundle`: bundles of the new tips minus what GitHub has (a thin pack behind a v2 header).
//! - `publish`: publish-pr's quick checks of the checkout, and its small bundle.
//! - `approval`: `request-push --wait`, polling the request's state until the operator answers.
//! - `progress`: progress on stderr, redrawn only on a terminal a person watches; never in the
//!   model's `TERM=dumb` PTY, where a wait says a plain line per change.
//!
//! Invariants:
//! - Architecture invariant: the agent side never decides; it asks `zodex-prd` and shows the
//!   answer. Its checks are courtesy, never security: the publisher verifies everything again.
//! - What it holds: no App key and no standing credential, only the short-lived tokens the
//!   publisher hands its credential helper for git — read tokens and, under a `--via token`
//!   grant, that grant's write token for its one repository (revoked at GitHub when the grant
//!   ends). It writes a token nowhere but the reply on git's stdout, never to disk.

pub mod approval;
pub mod bundle;
pub mod client;
pub mod credential;
pub mod progress;
pub mod publish;
pub mod remote_helper;
