//! Zodex: a chat model's terminal on a real machine, with every GitHub write behind one gate.
//!
//! The root crate is the edge of the workspace: the five binaries and their command lines
//! (`cli`), over the crates under `crates/`, re-exported here under their old paths. No crate of
//! the workspace depends on this one. `ARCHITECTURE.md` gives the bird's-eye view, the crate
//! graph, the invariants and the data flows; each crate's `lib.rs` carries its own code map.
//!
//! Code map:
//! - `src/bin/`: `zodex` (the operator's), `zodex-agent` and `zodex-prd` (a sprite's),
//!   `git-remote-zodex` and `git-credential-zodex` (git's helpers; the latter a small binary of
//!   its own, which starts faster on every fetch); each calls `cli::<role>::main()` and exits
//!   with its code.
//! - `engine`, `protocol`, `config`, `publisher`, `install`, `agent`, `operator`, `tools`,
//!   `devhub`: the `zodex-*` crates of those names (the GitHub client and the git plumbing are
//!   reached as `publisher::github` and `publisher::publish`).
//! - `cli`: the command lines: clap definitions and output formatting, nothing else;
//!   `print_json`, `print_failure` and the exit codes are here.
//!   - `cli::zodex`: `zodex`, the operator's command line.
//!   - `cli::agent`: `zodex-agent`, the agent user's command line.
//!   - `cli::prd`: `zodex-prd`, the publisher daemon's command line.
//!   - `cli::prd_install`: `zodex-prd install|check-isolation|doctor|service|upgrade`.
//!   - `cli::prd_fleet`: `zodex-prd fleet init|request|install` and `zodex-prd relay`.
//!   - `cli::fleet`: `zodex fleet …`: operators, enrolment, and the `sprite github` verbs
//!     across a fleet.
//!   - `cli::sprite_deploy`: `zodex sprite setup|doctor|status|logs|…|uninstall`.
//!   - `cli::sprite_proxy`: `zodex sprite proxy …` (the edge Worker) and `zodex sprite connect`.
//!   - `cli::sprite_mcp`: `zodex sprite mcp …`, the MCP endpoint's OAuth from the operator's side.
//!   - `cli::audit`: `zodex sprite github audit --verify`, exit 1 when a chain does not hold.
//!   - `cli::watch`: `zodex sprite watch`, `zodex local watch`: the board started, its URL printed.
//!   - `cli::local`: `zodex local start|stop|status|history|config|watch`.
//!   - `cli::dev`: `zodex dev up|down`.
//!   - `cli::serve`: `zodex-agent serve`.
//!   - `cli::publish`: `zodex-agent github publish-pr`, the bundle sent, the pull request printed.
//!   - `cli::remote_helper`: `git-remote-zodex`'s entry.
//!   - `cli::credential_helper`: the credential helper's entry, shared by `zodex-agent
//!     credential` and `git-credential-zodex`.
//!   - `cli::render`: human output: sprite text made safe (`safe`, `safe_json`); `render::answers`
//!     the typed answers of `protocol::answers` as short text.
//!   - `cli::proofs`: a proof report, a line per property and each counterexample.
//!   - `cli::pipe`: a closed stdout ends a printing command quietly, by SIGPIPE, as it ends `cat`.
//!
//! Invariants:
//! - `cli` parses and prints; a business rule found here is a bug. It spawns no process, opens
//!   no socket and touches no SQLite, and each of its files stays under 800 lines (tidy checks).
//! - Every human rendering of text that came from the sprite goes through `render::safe`
//!   (control, C1 and bidi characters escaped); `--json` writes them as `\uXXXX`, and every
//!   `--json` output is the one envelope of `docs/json.md` (`version`, `ok`, `result` or
//!   `error`; `cli::print_json`).
//! - Exit codes are the same everywhere: 0 ok, 2 usage, 3 denied by policy, 1 anything else.
//! - A `serve` never installs the SIGPIPE hook: a stray print must not end a daemon.

/// The agent's side: clients of the agent socket, git helpers (crate `zodex-agent`).
pub use zodex_agent as agent;
pub mod cli;
/// zodex.toml, parsed and checked once (crate `zodex-config`).
pub use zodex_config as config;
/// The local GitHub stand-in (crate `zodex-devhub`).
pub use zodex_devhub as devhub;
/// The policy engine (crate `zodex-engine`).
pub use zodex_engine as engine;
/// `zodex-prd install` and the rest of a sprite's deployment (crate `zodex-install`).
pub use zodex_install as install;
/// The operator's side, `zodex` (crate `zodex-operator`).
pub use zodex_operator as operator;
/// What the publisher and its clients say to each other (crate `zodex-protocol`).
pub use zodex_protocol as protocol;
/// `zodex-prd`, the publisher service (crate `zodex-publisher`).
pub use zodex_publisher as publisher;
/// The MCP server and its tools (crate `zodex-tools`).
pub use zodex_tools as tools;
