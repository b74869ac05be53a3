//! `zodex-prd`, the publisher: the only process that holds the GitHub App keys and the only one
//! that calls GitHub's API (through `zodex-github`, and `zodex-git` for the bytes). It hosts the
//! engine behind two Unix sockets (admin and agent), checks every peer's uid, and decides every
//! write before acting on it; around the daemon are `policy prove` and `admin watch`. Its users
//! are the root crate's `cli::prd` and `zodex-install` (whose `doctor` runs the ground checks,
//! the proofs and the admin client here). Its manifest names only crates below it (the list
//! is `zodex-publisher`'s line of `CRATE_ARROWS` in tests/it/tidy.rs, which checks it), none of
//! its clients.
//!
//! Code map:
//! - `sockets`: bind in a private directory and rename into place with the final mode; refuse a
//!   directory others can write, or a symlink; check the peer's uid both ways (`check_server`).
//! - `daemon`: `serve`: the ground checked, the accept loops (the peer's uid checked before it
//!   holds anything), request deadlines.
//!   - `daemon::gate`: connections in all and per process, bundle requests, spool bytes: over a
//!     bound, "busy" at once, never queued; when full, the oldest idle connection makes room.
//!   - `daemon::spool`: a bundle body into a private file at a minimum average rate.
//!   - `daemon::sweeper`: once a second, grants expired, tokens of ended grants and stopped
//!     publishers revoked, history pruned.
//!   - `daemon::fleet_listener`: `[fleet] listen`: members over mutual TLS, refused at the
//!     handshake (audited, bounded) or on the registry, then served as the Unix sockets serve,
//!     a sprite as its own principal, an operator under its name.
//! - `ground`: what `serve` checks before it serves (also `check-ground`, run by `doctor`): key
//!   files and directories private, `GET /app` as each App.
//!   - `ground::apps`: what `GET /app` must say of the reader and of the writer.
//!   - `ground::candidate`: keys an install is about to put in place, checked from memory; keys
//!     given the wrong way round are said to be swapped.
//!   - `ground::tests`: the ground rules on real files, and the App permission rules.
//! - `host`: the engine as the daemon hosts it, async (GitHub awaited, SQLite and git on blocking
//!   threads through `host::core::blocking`, no `block_on`): a router over owners, each with
//!   its behaviour; arrows point down this list.
//!   - `host::admin`: the operator requests' router (one `match`, each to its handler),
//!     answers under the reply cap (pages), pruning.
//!   - `host::admin_grants`, `host::admin_views`: the handlers of grants and scopes, and of
//!     what an operator reads (status, pages of requests and audit, explain).
//!   - `host::agent`: the agent requests' router and the agent's own requests on the store.
//!   - `host::fleet_admin`, `host::mcp_oauth`: the fleet registry's requests; OAuth's.
//!   - `host::start`: the private state directory and the uid, before the owners open.
//!   - `host::pipeline`: pushes and pull requests: admitted on the declared request
//!     (`Pipeline::admit`), then handled once the body is spooled or as it streams.
//!     - `pipeline::stream`: a push whose bundle is still arriving: GitHub's receive-pack fed
//!       as it lands, its checksum sent only when every update was allowed exactly as sent.
//!     - `pipeline::push`: imported, each ref decided on facts established against GitHub's
//!       refs, pushed with a token revoked right after (beside the answer).
//!     - `pipeline::pr`: review-first pull requests, recorded under an idempotency key before
//!       anything is pushed; `pr_open` opens one or takes its branch back; `pr_names` names it.
//!     - `pipeline::step_token`: a step's token, revoked when the step ends, on every path.
//!     - `pipeline::types`: what the stages share (decided updates, admission, stage timings
//!       and what each stage asked of GitHub).
//!   - `host::mirror`: the mirrors' owner: a request's fetched mirror and its quarantine;
//!     `list for-push`'s refs, seconds old and leased, which the push that follows decides on.
//!   - `host::tip_fetch`: the listed tips the mirror lacks, fetched while git packs: one
//!     request on the pooled connection to GitHub, or `git fetch` for a shallow mirror.
//!   - `host::shallow`: decide on a shallow mirror only where the whole history gives the same,
//!     else deepen first; deepen after the request in any case.
//!   - `host::credential`: the tokens' owner: read tokens, write tokens under a `--via token`
//!     grant whose life is cut to the grant's, the publisher's own read tokens, revocations.
//!   - `host::revocations`: step tokens revoked in tasks of their own after the answer; a
//!     graceful stop waits for them.
//!   - `host::tokens`: the agent's token cache and live write set, the publisher's own read
//!     tokens, one write issuance per repository, the previous run's leftovers.
//!   - `host::record`: what the GitHub client reported, written through `engine::ledger`;
//!     revocation at most once.
//!   - `host::proofs`: the proofs run at start and on demand, summed up in `status`.
//!   - `host::coverage`: which App is installed where, fresh or asked of GitHub.
//!   - `host::audit_gate`: `audit_required`: no write unless its record can leave the sprite.
//!   - `host::checkpoint`: a fleet's signed audit checkpoints, written and checked.
//!   - `host::lost_commits`: the store compared with what its sinks shipped, said loudly.
//!   - `host::core`: the engine over the store, the clock, GitHub's client, the settings.
//!   - `host::failure`: a failed request on its way to the wire.
//!   - `host::tests`: configuration refused at start, limits enforced on requests.
//! - `credentials`: the token cache behind the credential helper, and the live set of write
//!   tokens (registered before they are recorded, persisted 0600) revoked by value.
//! - `store_admin`: `zodex-prd store check|init|migrate` (verify, prepare PostgreSQL's roles,
//!   copy a store into another with its audit proven equal).
//! - `store_open`: the store where `[store]` puts it (SQLite's file, or PostgreSQL's pool).
//! - `shared_store`: the state's stores (one for SQLite, one per pooled connection for
//!   PostgreSQL), lent one at a time (`run` on a blocking thread, `with` from one); what
//!   `oauth` and `sinks` hold instead of the host.
//! - `shares`: fair shares among a fleet's members: requests in service, stores held.
//! - `metrics`: the Prometheus series (requests by operation and outcome, their duration, the
//!   store's health, each sink's lag), served with `/livez` and `/readyz` by
//!   `daemon::metrics_listener` when `[metrics] listen` is set.
//! - `clock`: the system's clock; in a test build only, plus the offset in `test_clock_file`.
//! - `oauth`: the MCP endpoint's OAuth authorization server (`/oauth/…` arrives from
//!   `zodex-agent serve` over the agent socket, `mcp_oauth`).
//!   - `oauth::authorize`: the consent page and its status poll, which alone hands out the code.
//!   - `oauth::pages`: a page's sealed request and a bounded memory of the codes shown.
//!   - `oauth::token`: code exchange (PKCE S256, exact redirect URI), refresh with rotation.
//!   - `oauth::register`: dynamic client registration (RFC 7591), storing nothing.
//!   - `oauth::clients`: a client from its row or from its sealed id.
//!   - `oauth::cimd`: client ID metadata documents, fetched off the request, bounded in time,
//!     size and number, from public addresses only.
//!   - `oauth::seal`: HMAC-sealed values anonymous callers carry instead of rows.
//!   - `oauth::crypto`: random secrets stored by hash, PKCE, the Ed25519 key, EdDSA access JWTs.
//!   - `oauth::published`: the public file the resource server follows (keys, revocations, key
//!     URL on/off).
//!   - `oauth::reply`: the HTTP answers (JSON, OAuth errors, redirects, pages), all `no-store`.
//!   - `oauth::admin`: the operator's commands (approve, deny, clients, revoke, key URL).
//!   - `oauth::fleet`: on a fleet's service, one authorization server per sprite, for the
//!     public URL an operator set for it (`host::mcp_oauth` routes to it as the admitted
//!     sprite).
//!   - `oauth::tests`, `oauth::flood_tests`: the flows and their attacks; anonymous floods.
//! - `sinks`: the audit leaving the sprite as it is written: one task per `[[audit_sinks]]` entry
//!   reads the rows after its cursor, delivers them in id order, retries with backoff.
//!   - `sinks::event`: the event schema (docs/audit.md) and its one-line chat form.
//!   - `sinks::jsonl`: a JSON Lines file, appended, synced and rotated.
//!   - `sinks::syslog`: RFC 5424 over TCP or a Unix datagram socket.
//!   - `sinks::webhook`: one signed POST per row (or Slack's `{"text"}`).
//! - `fleet`: `[fleet]`, a fleet's service: its CA (`zodex-prd fleet init`), signing members'
//!   certificate requests at enrolment, the listener's server certificate; the registry
//!   requests and the admission of members live in `host::fleet_admin`.
//! - `relay`: `zodex-prd relay`, a fleet sprite's agent socket passed through to a replica of
//!   the service over mutual TLS with the sprite's own key (no App key, no state); it keeps
//!   the sprite's `[mcp] oauth_file` as the service publishes it (`relay::published`).
//! - `watch`: `zodex-prd admin watch`, the board's one long-lived stream of audit rows and status
//!   (`zodex_protocol::watch`) asked of the admin socket.
//! - `prove`: each property and `never-errors` compiled by the Symbolic Cedar Compiler per
//!   request environment and handed to a solver (cvc5 or z3).
//!   - `prove::example`: a counterexample re-decided by the ordinary authorizer, then shown.
//! - `github`, `publish`, `locks`: re-exports of `zodex-github`, `zodex-git` and its `locks`.
//!
//! Invariants:
//! - The only process that holds the App keys or mints a token. The one token that leaves it: a
//!   `--via token` grant's short-lived write token, handed to the agent's credential helper for
//!   that grant's repository only, and revoked with the grant.
//! - Every write is decided by the engine before it is made; the publisher changes the engine's
//!   state only through its named operations (`engine::Authority`, `engine::ledger`,
//!   `engine::mcp_oauth`), never a transaction of its own (tidy checks).
//! - A peer is refused before one byte of its request is read; the agent socket's principal is
//!   always the agent, a fleet connection's the member its certificate and the registry name,
//!   whatever the request says; the principal admitted is the one every decision of that
//!   request (and the token cache it is served from) is for.
//! - No pack, whatever it declares, grows the daemon's memory.
//! - Facts about a ref update come from GitHub's refs, never from which objects the mirror
//!   stores; only objects the pushed tips reach enter the mirror.
//! - A decision never waits for an audit sink (the audit table is the outbox, so a restart loses
//!   nothing); a broken, unwaived policy property refuses start.

pub mod clock;
pub mod credentials;
pub mod daemon;
pub mod fleet;
/// The GitHub client (crate `zodex-github`).
pub use zodex_github as github;
pub mod ground;
pub mod host;
pub use zodex_git::locks;
pub mod metrics;
pub mod oauth;
pub mod prove;
pub mod relay;
/// The bytes of publishing: mirrors, bundle import, packs, the upload (crate `zodex-git`).
pub use zodex_git as publish;
pub mod shared_store;
pub mod shares;
pub mod sinks;
pub mod sockets;
pub mod store_admin;
pub mod store_open;
pub mod watch;
