//! The end-to-end tests, as one test binary: each file of this directory is a module (named
//! after what it checks), and `support/` is the one harness they share. One binary links the
//! crate once, where a binary per file linked it 27 times (and each took ~600 MB of disk).
//!
//! Run one file's tests with a filter: `cargo test --test it publish::` (or a test's name).
//! Tests that need root are `#[ignore = "needs root"]` (see `support::users::require_root`);
//! child-process entries are `child_*` (see `support::child`).
//!
//! Four stay binaries of their own because they measure or change the whole process:
//! `tests/devhub.rs` and `tests/session_memory.rs` (this process's peak memory),
//! `tests/session.rs` (signal dispositions) and `tests/receive_pack.rs` (no test harness: the
//! binary is also the indexer child it starts).

mod support;

mod agent_socket;
mod apply_patch_corpus;
mod attack;
mod attack_limits_and_races;
mod attack_oauth;
mod audit_evidence;
mod audit_sinks;
mod board;
mod closed_stdout;
mod credential_helper;
mod deploy;
mod deploy_oauth;
mod devhub_contract;
mod engine_concurrency;
mod fleet;
mod fleet_enroll;
mod fleet_filters;
mod fleet_health;
mod fleet_mcp_oauth;
mod fleet_operators;
mod fleet_replicas;
mod fleet_service_install;
mod github_client;
mod github_facts;
mod json_envelope;
mod local_board;
mod mcp_http;
mod mcp_oauth;
mod metrics;
mod operator_bounds;
mod operator_cli;
mod parser_properties;
mod policy_proofs;
mod protected_paths;
mod publish;
mod publish_pass_through;
mod publish_streamed;
mod publish_wire;
mod push_secrets;
mod serve_ground;
mod setup_safety;
mod shallow_mirror;
mod store_failover;
mod store_pooler;
mod store_postgres;
mod tidy;
