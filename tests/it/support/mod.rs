//! The one harness of the end-to-end tests and benchmarks:
//! - `board`: the operator's board (`zodex sprite watch`) and a raw HTTP client for it;
//! - `dev`: a `zodex dev up` installation in a temporary directory and the real binaries run
//!   against it;
//! - `devhub`: a seeded devhub on a background runtime, App JWTs, tokens, git with controlled
//!   credentials;
//! - `fleet`: a fleet's service (a rig with `[fleet]` and its listener) and sprites, each with
//!   its own key, certificate and a real `zodex-prd relay`;
//! - `replicas`: publishers sharing one PostgreSQL database (`[store]`), each a real
//!   `zodex-prd serve`;
//! - `rig`: a devhub and a real `zodex-prd serve` configured with its URLs and App keys, and git
//!   as the agent runs it (credential helper, pushes through `git-remote-zodex`);
//! - `mcp_server`: a `zodex-agent serve` and a raw HTTP client for the MCP endpoint;
//! - `users`, `sprite`, `routines`: real agent and publisher users, a sprite laid out like a
//!   deployment with a `zodex-prd` running as the publisher, and the small programs the attack
//!   suite runs as the agent.
//! - `child`: the one pattern for a test binary that re-runs itself as a child process;
//! - `deployment`: a two-user sprite set up by `zodex sprite setup` under a temporary prefix;
//! - `packs`: hostile packs (compression and delta bombs, lying zlib streams) and their bundles;
//! - `wait`: waiting until a check holds (`eventually`), the tests' one way to wait;
//! - `clock`: the publisher's test clock, moved forward instead of sleeping through a TTL.
//!
//! Each test crate compiles all of it and uses a part.
#![allow(dead_code)]

pub mod board;
pub mod child;
pub mod clock;
pub mod deployment;
pub mod dev;
pub mod devhub;
pub mod fleet;
pub mod mcp_server;
pub mod oauth_client;
pub mod packs;
pub mod replicas;
pub mod rig;
pub mod routines;
pub mod sprite;
pub mod users;
pub mod wait;
