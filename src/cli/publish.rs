//! `zodex-agent github publish-pr`: prepare the bundle in the checkout, send it to zodex-prd,
//! print the pull request.

use super::{EXIT_USAGE, print_failure, print_response};
use crate::agent::progress::Progress;
use crate::agent::{client, publish};
use crate::engine::RepoName;
use crate::protocol::{AgentRequest, ErrorKind, Response};
use std::io::Read;
use std::path::PathBuf;

pub struct PublishArgs {
    pub repo: RepoName,
    pub title: String,
    pub body: Option<String>,
    pub body_file: Option<PathBuf>,
    pub base: Option<String>,
    pub draft: bool,
    pub workdir: Option<PathBuf>,
}

fn usage(message: String, json: bool) -> i32 {
    if json {
        super::print_json(&Response::error(ErrorKind::Usage, message));
    } else {
        eprintln!("error: {message}");
    }
    EXIT_USAGE
}

pub fn publish_pr(config: Option<&PathBuf>, json: bool, args: PublishArgs) -> i32 {
    if args.title.trim().is_empty() {
        return usage("--title may not be empty".into(), json);
    }
    let body = match (&args.body, &args.body_file) {
        (Some(body), _) => body.clone(),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut text = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                return usage(format!("cannot read the body from stdin: {e}"), json);
            }
            text
        }
        (None, Some(path)) => match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                return usage(
                    format!("cannot read --body-file {}: {e}", path.display()),
                    json,
                );
            }
        },
        (None, None) => String::new(),
    };
    let workdir = match args
        .workdir
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
    {
        Ok(dir) => dir,
        Err(e) => {
            return usage(
                format!("cannot find the current directory: {e}; pass --workdir"),
                json,
            );
        }
    };
    let socket = match client::agent_socket(config.map(PathBuf::as_path)) {
        Ok(socket) => socket,
        Err(e) => return print_failure(&e, json),
    };
    let terminal = Progress::for_stderr() == Progress::Redraw && !json;
    let prepared = match publish::prepare(&workdir, &args.repo, terminal) {
        Ok(prepared) => prepared,
        Err(publish::PublishError::Bundle(e)) => return print_failure(&e, json),
        Err(e) => return usage(e.to_string(), json),
    };
    let request = AgentRequest::PublishPr {
        repo: args.repo.to_string(),
        title: args.title,
        body,
        base: args.base,
        draft: args.draft,
        head: prepared.head.clone(),
    };
    let bundle = &prepared.bundle;
    let response = client::call_with_bundle(
        &socket,
        &request,
        Some((bundle.file.path(), bundle.len)),
        |sent, total| {
            if terminal && total >= 8 << 20 {
                eprint!(
                    "\rSending to zodex-prd: {} / {} MiB",
                    sent >> 20,
                    total >> 20
                );
                if sent == total {
                    eprintln!();
                }
            }
        },
    );
    match response {
        Ok(response) => print_response(&response, json, super::render::published),
        Err(e) => print_failure(&e, json),
    }
}
