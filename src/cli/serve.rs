//! `zodex-agent serve`: clap definition and exit codes. The server lives in
//! `tools::server::run_serve`; this file only parses and reports.

use std::path::PathBuf;

use std::sync::Arc;

use crate::protocol::{AgentRequest, OAuthHttpReply, OAuthHttpRequest};
use crate::tools::server::oauth::{ForwardError, ForwardReply, ForwardRequest, OAuthForward};
use crate::tools::server::{self, Forwarder, ServeOptions, UsageError};

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
    // OAuth's endpoints are the publisher's: found through the same configuration the agent's
    // other commands use. Resolved per request, so a publisher started later is found.
    let forward = Forwarder(Arc::new(PublisherForward {
        config: args.config.clone(),
    }));
    let options = ServeOptions {
        listen: args.listen,
        stdio: args.stdio,
        config: args.config,
        key_hash_file: args.key_hash_file,
        allowed_hosts: args.allowed_hosts,
        oauth_forward: Some(forward),
    };
    Ok(match runtime.block_on(server::run_serve(options)) {
        Ok(()) => 0,
        Err(e) => report(&e),
    })
}

/// Passes OAuth requests to zodex-prd on the agent socket (`mcp_oauth`).
struct PublisherForward {
    config: Option<PathBuf>,
}

impl OAuthForward for PublisherForward {
    fn forward(&self, request: ForwardRequest) -> Result<ForwardReply, ForwardError> {
        Ok(self.ask(request)?)
    }
}

impl PublisherForward {
    fn ask(&self, request: ForwardRequest) -> anyhow::Result<ForwardReply> {
        let socket = crate::agent::client::agent_socket(self.config.as_deref())?;
        let request = AgentRequest::McpOauth(OAuthHttpRequest {
            method: request.method,
            path: request.path,
            query: request.query,
            content_type: request.content_type,
            authorization: request.authorization,
            body: request.body,
        });
        let response = crate::agent::client::call(&socket, &request)?;
        let reply: OAuthHttpReply = response.answer()?;
        Ok(ForwardReply {
            status: reply.status,
            headers: reply.headers,
            body: reply.body,
        })
    }
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
