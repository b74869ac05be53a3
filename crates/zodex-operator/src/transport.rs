//! Carries one admin request to a sprite: runs its admin command (`… zodex-prd admin`), writes
//! the request as one JSON line to its stdin, and reads one JSON response line from its stdout.
//! A fleet's entry is reached over mutual TLS instead (`fleet_transport`).

use super::registry::SpriteEntry;
use std::io::Write;
use std::process::{Command, Stdio};
use zodex_protocol::{AdminRequest, Response};

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("cannot run `{command}` to reach sprite `{sprite}`: {source}")]
    Spawn {
        sprite: String,
        command: String,
        source: std::io::Error,
    },
    #[error("sprite `{sprite}` did not answer: {detail}")]
    NoAnswer { sprite: String, detail: String },
    #[error("fleet `{fleet}`'s service did not answer: {detail}")]
    FleetNoAnswer { fleet: String, detail: String },
}

/// Sends `request` to the sprite and returns its answer.
pub fn call(sprite: &SpriteEntry, request: &AdminRequest) -> Result<Response, TransportError> {
    if let Some(reach) = &sprite.fleet {
        return super::fleet_transport::call(&sprite.name, reach, request);
    }
    let mut argv = sprite.admin_command.clone();
    if argv.first().map(String::as_str) == Some("zodex-prd") {
        argv[0] = super::sibling_binary("zodex-prd").display().to_string();
    }
    let command_text = argv.join(" ");
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| TransportError::Spawn {
            sprite: sprite.name.clone(),
            command: command_text.clone(),
            source,
        })?;
    let mut line = serde_json::to_string(request).expect("requests always serialise");
    line.push('\n');
    if let Some(mut stdin) = child.stdin.take() {
        // A transport that exits early closes the pipe; its stderr then says why.
        let _ = stdin.write_all(line.as_bytes());
    }
    let output = child
        .wait_with_output()
        .map_err(|source| TransportError::Spawn {
            sprite: sprite.name.clone(),
            command: command_text.clone(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(serde_json::from_str::<Response>)
    {
        Some(Ok(response)) => Ok(response),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let detail = stderr.trim();
            Err(TransportError::NoAnswer {
                sprite: sprite.name.clone(),
                detail: if detail.is_empty() {
                    format!(
                        "`{command_text}` exited with {} and printed no answer",
                        output.status
                    )
                } else {
                    detail.to_string()
                },
            })
        }
    }
}

/// Starts the sprite's `zodex-prd admin watch` (one long-lived process through the same exec
/// transport): its stdout is the stream of JSON lines, from just after `after` when given.
pub fn watch(
    sprite: &SpriteEntry,
    after: Option<i64>,
    after_call: Option<i64>,
) -> Result<std::process::Child, TransportError> {
    if sprite.fleet.is_some() {
        return Err(TransportError::NoAnswer {
            sprite: sprite.name.clone(),
            detail: "a fleet's board watches over mutual TLS from this machine (`zodex fleet watch`), not through a process on the service's host".into(),
        });
    }
    let mut argv = sprite.admin_command.clone();
    if argv.first().map(String::as_str) == Some("zodex-prd") {
        argv[0] = super::sibling_binary("zodex-prd").display().to_string();
    }
    argv.push("watch".into());
    if let Some(after) = after {
        argv.push("--after".into());
        argv.push(after.to_string());
    }
    if let Some(after) = after_call {
        argv.push("--after-call".into());
        argv.push(after.to_string());
    }
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| TransportError::Spawn {
            sprite: sprite.name.clone(),
            command: argv.join(" "),
            source,
        })
}
