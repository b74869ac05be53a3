//! `zodex-agent`: the agent user's command line (asks `zodex-prd`; never decides).

use super::{EXIT_FAILURE, print_failure, print_response, render, repo_arg, ttl_arg};
use crate::agent::approval::{self, Decided};
use crate::agent::client;
use crate::engine::RepoName;
use crate::protocol::answers::Grant;
use crate::protocol::{AgentRequest, Response, Ttl};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "zodex-agent",
    version,
    about = "The agent side of Zodex: ask zodex-prd for GitHub access"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// GitHub access through zodex-prd.
    Github {
        /// The sprite's configuration (default: $ZODEX_CONFIG, else /etc/zodex/zodex.toml).
        #[arg(long, global = true)]
        config: Option<PathBuf>,
        /// Print JSON for scripts.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: GithubCommand,
    },
    /// Serve the three MCP tools over HTTP (or stdio) as the agent user.
    Serve(super::serve::ServeArgs),
    /// The git credential helper (`get`, `store`, `erase`); configure it with
    /// `credential.helper='!zodex-agent credential'` and `credential.useHttpPath=true`.
    Credential {
        /// The sprite's configuration (default: $ZODEX_CONFIG, else /etc/zodex/zodex.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// What git asks: get, store or erase (others are ignored, as git expects).
        operation: String,
    },
}

#[derive(Subcommand)]
enum GithubCommand {
    /// Ask an operator for push access to a repository (default 30m).
    RequestPush {
        #[arg(long, value_parser = repo_arg)]
        repo: RepoName,
        /// How long the grant should last once approved: 30s, 45m, 2h, 1d, 1h30m.
        #[arg(long, value_parser = ttl_arg, conflicts_with = "no_ttl", allow_hyphen_values = true)]
        ttl: Option<Duration>,
        #[arg(long)]
        no_ttl: bool,
        /// Why: shown to the operator.
        #[arg(long)]
        reason: Option<String>,
        /// Wait until the request is approved or denied.
        #[arg(long)]
        wait: bool,
    },
    /// Give up push access to a repository.
    RevokePush {
        #[arg(long, value_parser = repo_arg)]
        repo: RepoName,
    },
    /// Grants, YOLO scopes and pending requests.
    Status,
    /// Open a review-first pull request from the current checkout's HEAD.
    PublishPr {
        #[arg(long, value_parser = repo_arg)]
        repo: RepoName,
        #[arg(long)]
        title: String,
        #[arg(long, conflicts_with = "body_file")]
        body: Option<String>,
        /// Read the body from a file (`-` for stdin).
        #[arg(long)]
        body_file: Option<PathBuf>,
        /// The branch to merge into (default: the repository's default branch).
        #[arg(long)]
        base: Option<String>,
        #[arg(long)]
        draft: bool,
        /// The checkout to publish from (default: the current directory).
        #[arg(long)]
        workdir: Option<PathBuf>,
    },
}

pub fn main() -> i32 {
    // git runs the credential helper before every fetch and push: its usual command lines are
    // read directly, without building the whole command tree (anything else goes to clap, so
    // help and errors are unchanged).
    if let Some((config, operation)) =
        super::credential_helper::fast_args(std::env::args_os().skip(1))
    {
        super::pipe::end_quietly_when_stdout_closes();
        return super::credential_helper::run(config, &operation);
    }
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        super::pipe::end_quietly_when_stdout_closes();
    }
    match cli.command {
        Command::Github {
            config,
            json,
            command,
        } => github(config, json, command),
        Command::Serve(args) => super::serve::run(args).unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            EXIT_FAILURE
        }),
        Command::Credential { config, operation } => {
            super::credential_helper::run(config, &operation)
        }
    }
}

fn call(config: Option<&PathBuf>, request: &AgentRequest) -> Result<Response, client::ClientError> {
    let socket = client::agent_socket(config.map(PathBuf::as_path))?;
    client::call(&socket, request)
}

fn github(config: Option<PathBuf>, json: bool, command: GithubCommand) -> i32 {
    let request = match command {
        GithubCommand::RequestPush {
            repo,
            ttl,
            no_ttl,
            reason,
            wait,
        } => {
            let ttl = match (no_ttl, ttl) {
                (true, _) => Ttl::NoTtl,
                (false, Some(ttl)) => Ttl::Seconds(ttl.as_secs() as i64),
                (false, None) => Ttl::Default,
            };
            let request = AgentRequest::RequestPush {
                repo: repo.to_string(),
                ttl,
                reason,
            };
            return request_push(config.as_ref(), json, &request, wait);
        }
        GithubCommand::RevokePush { repo } => AgentRequest::RevokePush {
            repo: repo.to_string(),
        },
        GithubCommand::Status => AgentRequest::Status,
        GithubCommand::PublishPr {
            repo,
            title,
            body,
            body_file,
            base,
            draft,
            workdir,
        } => {
            return super::publish::publish_pr(
                config.as_ref(),
                json,
                super::publish::PublishArgs {
                    repo,
                    title,
                    body,
                    body_file,
                    base,
                    draft,
                    workdir,
                },
            );
        }
    };
    match call(config.as_ref(), &request) {
        Ok(response) => match request {
            AgentRequest::RevokePush { ref repo } => {
                print_response(&response, json, |list: &Vec<Grant>| {
                    render::grants(list, "Revoked", &format!("Nothing to revoke for {repo}."))
                })
            }
            _ => print_response(&response, json, render::status),
        },
        Err(e) => print_failure(&e, json),
    }
}

fn request_push(config: Option<&PathBuf>, json: bool, request: &AgentRequest, wait: bool) -> i32 {
    let socket = match client::agent_socket(config.map(PathBuf::as_path)) {
        Ok(socket) => socket,
        Err(e) => return print_failure(&e, json),
    };
    let response = match client::call(&socket, request) {
        Ok(response) => response,
        Err(e) => return print_failure(&e, json),
    };
    let (true, Some(id)) = (wait, approval::pending_request(&response)) else {
        return print_response(&response, json, |g: &Grant| render::grant(g, "Requested"));
    };
    eprintln!(
        "Waiting for an operator to approve request #{id} (they run `{}`); Ctrl-C stops waiting, the request stays.",
        client::approve_command(config.map(PathBuf::as_path), id)
    );
    let mut display = approval::WaitDisplay::new(approval::Progress::for_stderr(), id);
    let decided = approval::wait_for_decision(&socket, id, |waiting| {
        if let Some(text) = display.show(waiting) {
            eprint!("{text}");
            let _ = std::io::stderr().flush();
        }
    });
    if let Some(end) = display.finish() {
        eprint!("{end}");
    }
    match decided {
        Err(e) => print_failure(&e, json),
        Ok(Decided::Approved(answer)) => {
            print_response(&answer, json, |g: &Grant| render::grant(g, "Approved"))
        }
        Ok(Decided::Ended { state, answer }) => {
            if json {
                super::print_json(&answer);
            } else {
                eprintln!(
                    "error: request #{id} was {}; ask the operator why, or request again",
                    render::grant_state(state)
                );
            }
            super::EXIT_DENIED
        }
        Ok(Decided::Failed(answer)) => {
            if json {
                super::print_json(&answer);
            } else if answer.ok {
                let _ = print_response(&answer, false, |_: &Grant| String::new());
            } else {
                eprintln!("{}", render::error_text(&answer));
            }
            EXIT_FAILURE
        }
    }
}
