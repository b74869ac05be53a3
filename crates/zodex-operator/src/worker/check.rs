//! What a deployed Worker serves, from outside: its `/status` against this build and the
//! recorded origin (`status`, and `connect_hosts` for `zodex sprite connect`), and the MCP
//! contract through it (`verify`).

mod error;

use super::{WorkerError, build_id, host_of, recorded};
use crate::http::{self, Answer};
use crate::registry::{SpriteEntry, WorkerRecord};
pub use error::{ContractError, DocumentError, StatusError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long one request to the Worker may take (a cold sprite's wake probes included).
const TIMEOUT: Duration = Duration::from_secs(40);

/// The tools the sprite serves, in order, each with its required arguments.
const TOOLS: [(&str, &[&str]); 3] = [
    ("exec_command", &["cmd", "workdir"]),
    ("write_stdin", &["session_handle"]),
    ("apply_patch", &["patch", "workdir"]),
];

/// What a Worker's `/status` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    pub build: String,
    pub version: String,
    pub sprite: String,
    pub origin: String,
}

/// A Worker's state as seen from here.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerStatus {
    pub sprite: String,
    pub url: String,
    /// This zodex's build of the Worker.
    pub expected_build: String,
    pub expected_origin: String,
    /// What `/status` answered; `None` when it did not.
    pub served: Option<Served>,
    /// Each problem with its fix; empty when the Worker serves this build for this sprite.
    pub problems: Vec<String>,
}

impl WorkerStatus {
    pub fn fresh(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One check of `verify`.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: &'static str,
    pub ok: bool,
    pub message: String,
}

/// What `verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub sprite: String,
    pub url: String,
    pub checks: Vec<Check>,
}

impl Verified {
    pub fn all_ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// `zodex sprite proxy status`.
pub fn status(entry: &SpriteEntry) -> Result<WorkerStatus, WorkerError> {
    Ok(status_of(&entry.name, recorded(entry)?, 1))
}

/// Reads `/status` (up to `tries` times, a second or more apart: a fresh deploy takes a few
/// seconds to reach every edge) and compares it with this build and the recorded origin.
pub(super) fn status_of(sprite: &str, worker: &WorkerRecord, tries: u32) -> WorkerStatus {
    let mut status = WorkerStatus {
        sprite: sprite.to_string(),
        url: worker.url.clone(),
        expected_build: build_id(),
        expected_origin: worker.origin.clone(),
        served: None,
        problems: Vec::new(),
    };
    let redeploy = format!("redeploy with `zodex sprite proxy deploy --sprite {sprite}`");
    for attempt in 1..=tries.max(1) {
        status.problems.clear();
        match read_status(&worker.url) {
            Ok(served) => {
                if served.build != status.expected_build {
                    status.problems.push(format!(
                        "the Worker runs build {} but this zodex has build {}: {redeploy}",
                        served.build, status.expected_build
                    ));
                }
                if served.origin != worker.origin || served.sprite != sprite {
                    status.problems.push(format!(
                        "the Worker serves sprite `{}` at {}, not `{sprite}` at {}: {redeploy}, or pass --name for a Worker of this sprite's own",
                        served.sprite, served.origin, worker.origin
                    ));
                }
                status.served = Some(served);
            }
            Err(problem) => status.problems.push(problem.to_string()),
        }
        if status.fresh() || attempt == tries {
            break;
        }
        std::thread::sleep(Duration::from_secs(u64::from(attempt)));
    }
    status
}

fn read_status(url: &str) -> Result<Served, StatusError> {
    let answer = http::get(&format!("{url}/status"), TIMEOUT).map_err(StatusError::NoAnswer)?;
    if answer.status != 200 {
        return Err(StatusError::Status {
            status: answer.status,
            url: url.to_string(),
        });
    }
    serde_json::from_slice::<Served>(&answer.body).map_err(|_| StatusError::NotWorker {
        url: url.to_string(),
    })
}

/// The Worker host `zodex sprite connect` puts in the MCP URL, and the sprite's own host
/// (what its Host check must accept) — only when the Worker runs this build for this sprite.
pub fn connect_hosts(entry: &SpriteEntry) -> Result<(String, String), WorkerError> {
    let worker = recorded(entry)?;
    let status = status_of(&entry.name, worker, 1);
    if !status.fresh() {
        return Err(WorkerError::Stale(format!(
            "not connecting through the Worker at {}: {}",
            worker.url,
            status.problems.join("; ")
        )));
    }
    Ok((
        host_of(&worker.url).to_string(),
        host_of(&worker.origin).to_string(),
    ))
}

/// `zodex sprite proxy verify`: the MCP contract through the Worker.
pub fn verify(entry: &SpriteEntry) -> Result<Verified, WorkerError> {
    verify_at(entry, recorded(entry)?)
}

/// The MCP contract through `worker` (the recorded one, or a `proxy dev` runtime).
pub fn verify_at(entry: &SpriteEntry, worker: &WorkerRecord) -> Result<Verified, WorkerError> {
    let mut checks = Vec::new();
    let status = status_of(&entry.name, worker, 1);
    checks.push(Check {
        check: "status",
        ok: status.fresh(),
        message: if status.fresh() {
            format!(
                "the Worker runs build {} for this sprite",
                status.expected_build
            )
        } else {
            status.problems.join("; ")
        },
    });
    checks.push(health_check(&worker.url));
    // With the key URL off, the Worker is checked as an OAuth client meets it.
    if let Some(oauth) = oauth_only(entry) {
        checks.extend(oauth_checks(&worker.url, &oauth));
        return Ok(Verified {
            sprite: entry.name.clone(),
            url: worker.url.clone(),
            checks,
        });
    }
    match crate::connect::stored_key(&entry.name) {
        None => checks.push(Check {
            check: "key",
            ok: false,
            message: format!(
                "this operator holds no MCP key for `{0}`: run `zodex sprite connect --sprite {0}` first",
                entry.name
            ),
        }),
        Some(key) => {
            for path in ["/mcp", "/mcp/"] {
                checks.push(tools_check(&worker.url, path, &key));
            }
            checks.push(wrong_key_check(&worker.url));
        }
    }
    Ok(Verified {
        sprite: entry.name.clone(),
        url: worker.url.clone(),
        checks,
    })
}

/// The sprite's OAuth, when the key URL is off (what `zodex sprite mcp clients` reads).
fn oauth_only(entry: &SpriteEntry) -> Option<zodex_protocol::McpClientsAnswer> {
    let response = crate::transport::call(entry, &zodex_protocol::AdminRequest::McpClients).ok()?;
    let answer: zodex_protocol::McpClientsAnswer = response.answer().ok()?;
    (answer.oauth && !answer.key_url).then_some(answer)
}

/// Discovery through the Worker, as a client starts it: the 401 challenge naming the
/// resource metadata, that document naming the sprite's issuer, the issuer's metadata.
fn oauth_checks(url: &str, oauth: &zodex_protocol::McpClientsAnswer) -> Vec<Check> {
    let issuer = oauth.issuer.clone().unwrap_or_default();
    let mut checks = Vec::new();
    let challenge = http::post_json(&format!("{url}/mcp"), &tools_list(), TIMEOUT);
    let (ok, message) = match &challenge {
        Ok(a)
            if a.status == 401
                && a.www_authenticate
                    .as_deref()
                    .is_some_and(|c| c.contains("resource_metadata=")) =>
        {
            (
                true,
                "/mcp without a token answers 401 with the OAuth challenge (the key URL is off)"
                    .to_string(),
            )
        }
        Ok(a) => (
            false,
            format!(
                "/mcp without a token answered {} without the OAuth challenge: `zodex sprite doctor`",
                a.status
            ),
        ),
        Err(e) => (false, e.to_string()),
    };
    checks.push(Check {
        check: "oauth challenge",
        ok,
        message,
    });
    let document = |path: &str| -> Result<serde_json::Value, DocumentError> {
        let a = http::get(&format!("{url}{path}"), TIMEOUT)?;
        if a.status != 200 {
            return Err(DocumentError::Status {
                path: path.to_string(),
                status: a.status,
            });
        }
        serde_json::from_slice(&a.body).map_err(|_| DocumentError::NotJson {
            path: path.to_string(),
        })
    };
    let resource_path = oauth
        .resource
        .as_deref()
        .and_then(|r| r.parse::<::http::Uri>().ok())
        .map(|u| u.path().trim_end_matches('/').to_string())
        .unwrap_or_else(|| "/mcp".into());
    let (ok, message) = match document(&format!(
        "/.well-known/oauth-protected-resource{resource_path}"
    )) {
        Ok(doc) if doc["authorization_servers"][0] == issuer.as_str() => (
            true,
            format!("the resource metadata names the sprite's issuer {issuer}"),
        ),
        Ok(doc) => (
            false,
            format!(
                "the resource metadata names {} as its authorization server, not {issuer}: `zodex sprite mcp public-url` shows what the sprite issues for",
                doc["authorization_servers"][0]
            ),
        ),
        Err(e) => (false, e.to_string()),
    };
    checks.push(Check {
        check: "oauth resource",
        ok,
        message,
    });
    let issuer_path = issuer
        .parse::<::http::Uri>()
        .map(|u| u.path().trim_end_matches('/').to_string())
        .unwrap_or_else(|_| "/oauth".into());
    let (ok, message) = match document(&format!(
        "/.well-known/oauth-authorization-server{issuer_path}"
    )) {
        Ok(doc) if doc["issuer"] == issuer.as_str() => (
            true,
            "the authorization server's metadata answers through the Worker".to_string(),
        ),
        Ok(doc) => (
            false,
            format!(
                "the authorization server's metadata names {}, not {issuer}",
                doc["issuer"]
            ),
        ),
        Err(e) => (false, e.to_string()),
    };
    checks.push(Check {
        check: "oauth issuer",
        ok,
        message,
    });
    checks
}

fn health_check(url: &str) -> Check {
    let (ok, message) = match http::get(&format!("{url}/health"), TIMEOUT) {
        Ok(a) if a.status == 200 => (true, "the sprite answers /health through the Worker".into()),
        Ok(a) => (
            false,
            format!(
                "/health through the Worker answered {}: is zodex-agent running? `zodex sprite doctor`",
                a.status
            ),
        ),
        Err(e) => (false, format!("{e}")),
    };
    Check {
        check: "health",
        ok,
        message,
    }
}

fn tools_list() -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
}

fn tools_check(url: &str, path: &str, key: &str) -> Check {
    let check = if path == "/mcp" {
        "tools"
    } else {
        "tools at /mcp/"
    };
    let answer = http::post_json(&format!("{url}{path}?key={key}"), &tools_list(), TIMEOUT);
    let (ok, message) = match answer {
        Ok(answer) => match contract(&answer) {
            Ok(()) => (
                true,
                format!(
                    "{path} lists exec_command, write_stdin and apply_patch with their required fields"
                ),
            ),
            Err(problem) => (false, format!("{path}: {problem}")),
        },
        Err(e) => (false, e.to_string()),
    };
    Check { check, ok, message }
}

/// The `tools/list` contract: exactly the three tools, in order, each with its required
/// arguments, and no default `workdir`.
pub fn contract(answer: &Answer) -> Result<(), ContractError> {
    if answer.status == 401 {
        return Err(ContractError::KeyRefused);
    }
    if answer.status != 200 {
        return Err(ContractError::Status(answer.status));
    }
    let message = answer.json().ok_or(ContractError::NotJsonRpc)?;
    let tools = message["result"]["tools"]
        .as_array()
        .ok_or_else(|| ContractError::NoTools(message["error"].clone()))?;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let want: Vec<&'static str> = TOOLS.iter().map(|(name, _)| *name).collect();
    if names != want {
        return Err(ContractError::Tools {
            names: names.into_iter().map(str::to_string).collect(),
            want,
        });
    }
    for ((name, required), tool) in TOOLS.iter().zip(tools) {
        let schema = &tool["inputSchema"];
        let mut have: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        have.sort_unstable();
        let mut need = required.to_vec();
        need.sort_unstable();
        if have != need {
            return Err(ContractError::Required {
                name,
                have: have.into_iter().map(str::to_string).collect(),
                need,
            });
        }
        if schema["properties"]["workdir"].get("default").is_some() {
            return Err(ContractError::WorkdirDefault(name));
        }
    }
    Ok(())
}

fn wrong_key_check(url: &str) -> Check {
    let wrong = format!("not-the-key-{}", &build_id()[..8]);
    let (ok, message) =
        match http::post_json(&format!("{url}/mcp?key={wrong}"), &tools_list(), TIMEOUT) {
            Ok(a) if a.status == 401 => (true, "a wrong key is refused with 401".into()),
            Ok(a) => (
                false,
                format!(
                    "a wrong key got HTTP {}, not 401: the Worker may not front a zodex sprite",
                    a.status
                ),
            ),
            Err(e) => (false, e.to_string()),
        };
    Check {
        check: "wrong key",
        ok,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: serde_json::Value) -> Answer {
        Answer {
            status: 200,
            content_type: "application/json".into(),
            build_header: None,
            www_authenticate: None,
            body: body.to_string().into_bytes(),
        }
    }

    fn tool(name: &str, required: &[&str], workdir: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"name": name, "inputSchema": {"type": "object", "required": required, "properties": {"workdir": workdir}}})
    }

    #[test]
    fn the_contract_wants_exactly_three_tools_with_their_fields_and_no_default_workdir() {
        let good = |workdir: serde_json::Value| {
            answer(
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
                    tool("exec_command", &["cmd", "workdir"], workdir.clone()),
                    tool("write_stdin", &["session_handle"], serde_json::json!({})),
                    tool("apply_patch", &["workdir", "patch"], workdir),
                ]}}),
            )
        };
        assert_eq!(
            contract(&good(serde_json::json!({"type": "string"}))),
            Ok(())
        );
        let defaulted = contract(&good(serde_json::json!({"type": "string", "default": "/"})));
        assert!(defaulted.unwrap_err().to_string().contains("default"));
        let missing = answer(
            serde_json::json!({"result": {"tools": [tool("exec_command", &["cmd"], serde_json::json!({}))]}}),
        );
        assert!(
            contract(&missing)
                .unwrap_err()
                .to_string()
                .contains("not [\"exec_command\"")
        );
        let mut refused = good(serde_json::json!({}));
        refused.status = 401;
        assert!(
            contract(&refused)
                .unwrap_err()
                .to_string()
                .contains("--rotate")
        );
    }
}
