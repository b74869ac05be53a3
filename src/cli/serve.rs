//! `zodex-agent serve`: clap definition and exit codes. The server lives in
//! `tools::server::run_serve`; this file only parses and reports.

use std::path::PathBuf;

use crate::tools::server::{self, ServeOptions, UsageError};

/// Serve the three MCP tools (sprite mode: the capability key is required).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (IP:PORT). Default: the configuration, else 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Speak MCP on stdin/stdout instead of HTTP (for clients that launch the server).
    #[arg(long)]
    pub stdio: bool,
    /// Configuration file (TOML; its [mcp] table).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// File holding only the hex SHA-256 of the MCP capability key.
    #[arg(long, value_name = "FILE")]
    pub key_hash_file: Option<PathBuf>,
    /// Another accepted Host header value (repeatable); "*" accepts any host.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
}

/// Runs the server; returns the exit code (0 ok, 2 usage, 1 other).
pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    server::init_logging();
    let runtime = tokio::runtime::Runtime::new()?;
    let options = ServeOptions {
        listen: args.listen,
        stdio: args.stdio,
        config: args.config,
        key_hash_file: args.key_hash_file,
        allowed_hosts: args.allowed_hosts,
    };
    Ok(match runtime.block_on(server::run_serve(options)) {
        Ok(()) => 0,
        Err(e) => report(&e),
    })
}

/// Prints an error and returns its exit code: 2 for usage mistakes, 1 otherwise.
pub(crate) fn report(error: &anyhow::Error) -> i32 {
    eprintln!("error: {error:#}");
    if error.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}
