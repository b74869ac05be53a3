//! The MCP side: exactly three tools (`exec_command`, `write_stdin`, `apply_patch`) served over
//! streamable HTTP and stdio — in sprite mode by `zodex-agent serve` (as the agent user), in
//! local mode by `zodex local start` (as the host user). A crate with no Zodex dependency; its
//! users are the root crate's `cli` (`serve`, `local`) and `zodex-operator` (capability keys for
//! `connect` and `zodex dev`, local mode's history for the board).
//!
//! Code map:
//! - `session`: the process sessions behind `exec_command` and `write_stdin`; the one table of
//!   sessions, bounded in number, each ended with its whole process tree at its timeout.
//!   - `session::api`: the tools' request and result shapes, and a result's text.
//!   - `session::error`: `ToolError`, every refusal worded for the model.
//!   - `session::config`: `SessionConfig` and `Shell` (limits; the login environment, captured
//!     once for local mode).
//!   - `session::pty`: a command started on a new PTY as a session leader (`posix_spawn` on
//!     Linux, no fork of the server; reaped through a pidfd).
//!   - `session::process`: one running command and its watchers (reaper, timeout, reader).
//!   - `session::reader`: the PTY reader thread, draining after exit.
//!   - `session::ansi`: escape sequences and control characters removed from the byte stream.
//!   - `session::utf8`: incremental, lossy UTF-8 decoding that never splits a character.
//!   - `session::output`: one session's stream (next result, tail, counts), memory bounded.
//!   - `session::tail`: the bounded tail of un-returned text; char and line counts.
//!   - `session::spill`: the private spill directory (0700, files 0600) and its sweeper.
//!   - `session::kill`: a session's process tree, by group and by its `ZODEX_SESSION` marker.
//!   - `session::token`: unguessable 128-bit handles, spill names and markers.
//!   - `session::tests`: the manager's own rules, with real processes.
//! - `apply_patch`: Codex-format patches applied all or nothing.
//!   - `apply_patch::parser`: the patch grammar, lenient where models are harmlessly sloppy.
//!   - `apply_patch::plan`: every target read once, every hunk resolved in memory.
//!   - `apply_patch::update`: one `*** Update File:` section's hunks, in patch order.
//!   - `apply_patch::matcher`: the four matching passes and the "closest miss".
//!   - `apply_patch::text`: a file's lines with their own endings and BOM.
//!   - `apply_patch::commit`: the plan written with a journal that rolls back.
//!   - `apply_patch::error`: every failure worded for the model that sent the patch.
//!   - `apply_patch::tests`: end to end against temporary directories.
//! - `server`: the MCP server (rmcp), sprite mode and local mode.
//!   - `server::schema`: what the model sees of the three tools, and the `instructions`.
//!   - `server::args`: arguments checked by hand into `isError` results the model can act on.
//!   - `server::handler`: `tools/list`, `tools/call` dispatch, the result shape, history rows.
//!   - `server::http`: the axum router: `POST /mcp` (handshake sessions and stateless requests
//!     side by side) behind the key check, which scrubs the key; `GET /health`.
//!   - `server::body`: the 4 MiB body cap, answered in JSON-RPC (never a bare 413).
//!   - `server::ended`: sessions a client ended with `DELETE`, refused with 404 (bounded).
//!   - `server::replay`: the bounded store that replays a cut SSE answer (`Last-Event-ID`).
//!   - `server::key`: capability keys (256 bits); only their SHA-256 is held (`KeyHash`, from
//!     `zodex-mcp-settings`, shared with the publisher that writes its file).
//!   - `server::oauth`: the resource server's OAuth: access tokens checked with the public key
//!     alone; `/oauth/…` handed to an `OAuthForward` the binary supplies.
//!   - `server::context`: `zodex_context`, the AGENTS instructions and skills, capped.
//!   - `server::history`: the SQLite history of calls (the board, `zodex local history`).
//!   - `server::retention`: the history's limits (30 days, 64 MiB by default).
//!   - `server::config`: the `[mcp]` table read from a file (the table is `zodex-mcp-settings`'s).
//!   - `server::local`: local mode's lifecycle (`zodex local start|stop|status|history`).
//!   - `server::local_config`: local mode's `config.toml` (`zodex local config get|set`).
//!   - `server::patch_result`: an `apply_patch` result kept small, the full list spilled.
//!
//! Invariants:
//! - Architecture invariant: this crate knows nothing of GitHub, grants or tokens; its manifest
//!   names no other Zodex crate.
//! - The history is never an access check; the server never decides anything about a command:
//!   it runs what it is given, where it is given (`workdir` is routing, not a jail).
//! - Only the capability key's SHA-256 is held; a presented key is compared in constant time and
//!   removed from the request before anything can log it.
//! - Memory stays bounded whatever a command prints or a client sends. Linux and macOS only.

pub mod apply_patch;
pub mod server;
pub mod session;
