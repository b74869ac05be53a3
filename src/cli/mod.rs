//! The command lines of the five binaries: clap definitions and output formatting, nothing else.
//!
//! Architecture invariant: `cli` parses and prints; it holds no business rule. Exit codes are
//! the same everywhere: 0 ok, 2 usage, 3 denied by policy, 1 anything else.

pub mod agent;
pub mod audit;
pub mod credential_helper;
pub mod dev;
pub mod fleet;
mod fleet_mcp;
mod fleet_service;
pub mod github_args;
pub mod local;
pub mod pipe;
pub mod prd;
pub mod prd_fleet;
pub mod prd_install;
pub mod prd_store;
pub mod proofs;
pub mod publish;
pub mod remote_helper;
pub mod render;
pub mod serve;
pub mod sprite_deploy;
pub mod sprite_mcp;
pub mod sprite_proxy;
pub mod watch;
pub mod zodex;

use crate::protocol::{ErrorKind, Response};
use std::time::Duration;

/// Runs one command's async work (a proof, GitHub checks) to its end on a runtime of the
/// command's own: the binaries' edge is the one place a runtime is made and waited on.
pub fn run_async<F: std::future::Future>(work: F) -> std::io::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(work))
}

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_DENIED: i32 = 3;

/// The version of the `--json` envelope (docs/json.md); raised when a field changes meaning or
/// goes away, never for an added field.
pub const JSON_VERSION: u32 = 1;

/// What every `--json` output is: the envelope's version, then the answer (`ok`, `result` or
/// `error`, and `next_before` on a page).
#[derive(serde::Serialize)]
struct Envelope<'a> {
    version: u32,
    #[serde(flatten)]
    response: &'a Response,
}

/// Prints `response` in the `--json` envelope (controls written as `\uXXXX`).
pub fn print_json(response: &Response) {
    println!(
        "{}",
        render::json_pretty(&Envelope {
            version: JSON_VERSION,
            response,
        })
    );
}

/// Prints `result` as a successful `--json` answer; returns exit code 0.
pub fn print_json_ok(result: impl serde::Serialize) -> i32 {
    print_json(&Response::ok(result));
    EXIT_OK
}

/// clap value parser for `--ttl` (clap shows the error's text).
pub fn ttl_arg(text: &str) -> Result<Duration, crate::engine::ttl::TtlError> {
    crate::engine::ttl::parse_ttl(text)
}

/// clap value parser for `--repo` (clap shows the error's text).
pub fn repo_arg(text: &str) -> Result<crate::engine::RepoName, crate::engine::repo::RepoNameError> {
    crate::engine::RepoName::parse(text)
}

/// The exit code for a response.
pub fn exit_code(response: &Response) -> i32 {
    match &response.error {
        None if response.ok => EXIT_OK,
        Some(e) => match e.kind {
            ErrorKind::Usage => EXIT_USAGE,
            ErrorKind::Denied => EXIT_DENIED,
            _ => EXIT_FAILURE,
        },
        None => EXIT_FAILURE,
    }
}

/// Prints a response: as JSON with `--json`, else `render` for success and a readable error.
/// Either way nothing in it reaches the terminal raw (see [`render::safe`]).
/// The result is read as the typed answer `T` of the request (see `protocol::answers`); one this
/// build cannot read is said to be a version mismatch, never printed half-empty.
pub fn print_response<T: serde::de::DeserializeOwned>(
    response: &Response,
    json: bool,
    render: impl FnOnce(&T) -> String,
) -> i32 {
    if json {
        print_json(response);
    } else if response.ok {
        match response.answer::<T>() {
            Ok(answer) => {
                let text = render(&answer);
                if !text.is_empty() {
                    println!("{}", text.trim_end());
                }
            }
            Err(e) => {
                eprintln!("error: {}", render::safe(&e.to_string()));
                return EXIT_FAILURE;
            }
        }
    } else {
        eprintln!("{}", render::error_text(response));
    }
    exit_code(response)
}

/// Prints an error that happened before any response (transport, configuration).
pub fn print_failure(error: &dyn std::fmt::Display, json: bool) -> i32 {
    if json {
        print_json(&Response::error(ErrorKind::Internal, error.to_string()));
    } else {
        eprintln!("{}", failure_text(&error.to_string()));
    }
    EXIT_FAILURE
}

/// An error as the operator reads it: `error: ` once (a sprite's own `error: ` is not said
/// twice), its first line the cause, each further line on a line of its own, indented. Every
/// line is escaped on its own: transport errors relay what the sprite printed, never raw to
/// the terminal.
pub fn failure_text(text: &str) -> String {
    let text = text.trim_end();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let mut out = format!(
        "error: {}",
        render::safe(first.strip_prefix("error: ").unwrap_or(first))
    );
    for line in lines {
        out.push_str("\n  ");
        out.push_str(&render::safe(line.trim_start()));
    }
    out
}

/// A part of Zodex that this build does not have yet: say so, and fail.
pub fn not_built(what: &str) -> i32 {
    eprintln!("error: {what} is not built yet in this version of Zodex; nothing was done");
    EXIT_FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed restart relayed from a sprite: one `error: `, the cause on the first line, the
    /// other lines on lines of their own — never a literal `\n` — each escaped.
    #[test]
    fn a_relayed_failure_says_error_once_and_keeps_its_lines() {
        let relayed = "error: the writer App key is open to others: chmod 600 KEY\n\
                       zodex-prd did not come up within 20 s\n\
                       next: `zodex sprite doctor`\u{1b}[2K\n";
        assert_eq!(
            failure_text(relayed),
            "error: the writer App key is open to others: chmod 600 KEY\n  \
             zodex-prd did not come up within 20 s\n  \
             next: `zodex sprite doctor`\\x1b[2K"
        );
        assert_eq!(
            failure_text("no sprite named `x`"),
            "error: no sprite named `x`"
        );
    }
}
