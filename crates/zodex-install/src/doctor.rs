//! `zodex-prd doctor` (as root, on the sprite; `zodex sprite doctor` runs it through the
//! transport): every check of a deployment, each one line with its fix — services up and at
//! this binary's version, the publisher and the MCP server answering, the publisher's ground
//! (keys, directories, `[github]` and both Apps, checked as the publisher), coverage of every
//! target, the boundary as the agent sees it, and the MCP endpoint's three tools (with the
//! key URL off: the OAuth door as a client meets it, `mcp_door.rs`). The findings come ordered
//! by cause (`causes`): what follows from another failure is marked so.

use super::layout::{InstallRecord, PublisherMode, SERVICES};
use super::mcp_door::http;
use super::{Finding, isolation, services};
use serde::{Deserialize, Serialize};
use std::path::Path;
use zodex_config::Config;
use zodex_protocol::{AdminRequest, CoverageAnswer};

/// What doctor found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorReport {
    /// This `zodex-prd`'s version (the operator compares it with its own).
    pub version: String,
    pub services: Vec<services::ServiceState>,
    pub findings: Vec<Finding>,
}

impl DoctorReport {
    pub fn all_ok(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
    }
}

/// The tools the MCP endpoint must list, exactly.
pub const MCP_TOOLS: [&str; 3] = ["apply_patch", "exec_command", "write_stdin"];

pub async fn run(config_path: &Path, mcp_key: Option<&str>) -> DoctorReport {
    let version = env!("CARGO_PKG_VERSION").to_string();
    let mut findings = Vec::new();
    let record = match InstallRecord::beside(config_path) {
        Ok(record) => record,
        Err(message) => {
            match dev_installation(config_path) {
                Some(config) => {
                    // The trial's own key URL (`mcp-url` beside its configuration, the same
                    // user's) when the operator has none stored.
                    let dev_key = std::fs::read_to_string(config_path.with_file_name("mcp-url"))
                        .ok()
                        .and_then(|url| url.trim().split_once("key=").map(|(_, k)| k.to_string()));
                    let key = mcp_key.map(str::to_string).or(dev_key);
                    findings.extend(dev_checks(&config, key.as_deref()).await)
                }
                None => findings.push(Finding::fail("install", message.to_string())),
            }
            return DoctorReport {
                version,
                services: Vec::new(),
                findings: super::causes::by_cause(findings),
            };
        }
    };
    let config = match Config::load(config_path) {
        Ok(config) => config,
        Err(e) => {
            findings.push(Finding::fail(
                "config",
                format!("{e}; fix the file, or rerun `zodex sprite setup`"),
            ));
            return DoctorReport {
                version,
                services: services::status(&record),
                findings,
            };
        }
    };
    let states = services::status(&record);
    findings.extend(service_findings(&states, &version));
    let relay = record.publisher_mode == PublisherMode::Relay;
    if !relay {
        // A fleet sprite holds no keys, Apps or policies: the service does.
        findings.push(publisher_health(&config));
        findings.push(proofs(&config).await);
        findings.extend(audit_sinks(&config));
    }
    findings.push(mcp_health(&record.mcp_listen));
    if !relay {
        findings.extend(ground(&record, config_path));
        findings.extend(coverage(&config));
    }
    match isolation::check_as_agent(&record, config_path) {
        Ok(found) => findings.extend(found),
        Err(e) => findings.push(Finding::fail("isolation", e.to_string())),
    }
    if relay {
        findings.extend(super::relay::doctor_findings(&config, &record.mcp_listen));
    } else {
        findings.push(mcp_endpoint(&config, &record.mcp_listen, mcp_key));
    }
    DoctorReport {
        version,
        services: states,
        findings: super::causes::by_cause(findings),
    }
}

fn service_findings(states: &[services::ServiceState], version: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for state in states {
        let name = &state.service;
        let check = format!("{name}-service");
        if let Some(restarts) = state.restarts.as_ref().filter(|_| state.crash_looping()) {
            out.push(Finding::fail(
                check.clone(),
                format!(
                    "{name} keeps exiting ({} restarts in the last minute){}; read its log with `zodex sprite logs --service {name}`",
                    restarts.last_minute,
                    restarts
                        .last_errors
                        .first()
                        .map(|e| format!(", last with: {e}"))
                        .unwrap_or_default()
                ),
            ));
        } else if !state.running {
            out.push(Finding::fail(check.clone(),
                format!(
                    "{name} is not running: `zodex sprite restart`, and read why with `zodex sprite logs --service {name}`"
                ),
            ));
        } else if state.stale_binary {
            out.push(Finding::fail(
                check.clone(),
                format!("{name} runs a binary replaced since it started: `zodex sprite restart`"),
            ));
        } else {
            out.push(Finding::ok(
                check.clone(),
                format!(
                    "{name} is running as {} (pid {})",
                    state.user.as_deref().unwrap_or("?"),
                    state.pid.unwrap_or_default()
                ),
            ));
        }
        match &state.installed_version {
            Some(v) if v == version => {}
            Some(v) => out.push(Finding::fail(format!("{name}-version"),
                format!(
                    "{name} on disk is {v} but zodex-prd is {version}: `zodex sprite upgrade --binaries DIR`"
                ),
            )),
            None => out.push(Finding::fail(format!("{name}-version"),
                format!("{name} is missing or does not run: `zodex sprite upgrade --binaries DIR`"),
            )),
        }
    }
    if states.len() != SERVICES.len() {
        out.push(Finding::fail(
            "services",
            "the install record names no services; rerun setup",
        ));
    }
    out
}

/// The configuration `zodex dev up` wrote (its first line says so), if `config_path` is one.
fn dev_installation(config_path: &Path) -> Option<Config> {
    let text = std::fs::read_to_string(config_path).ok()?;
    if !text.starts_with(zodex_config::DEV_HEADER) {
        return None;
    }
    Config::load(config_path).ok()
}

/// What a `zodex dev up` installation has: one user, no services, no install record — so the
/// publisher, its ground and proofs, coverage, and the MCP endpoint as a client meets it; the
/// boundary between two users is said not to exist here rather than failed.
async fn dev_checks(config: &Config, mcp_key: Option<&str>) -> Vec<Finding> {
    let mut findings = vec![Finding::ok(
        "install",
        "a `zodex dev up` installation: one user and no services, so the agent/publisher boundary is not checked here (a sprite set up with `zodex sprite setup` has it)",
    )];
    findings.push(publisher_health(config));
    findings.push(proofs(config).await);
    findings.extend(audit_sinks(config));
    findings.extend(zodex_publisher::ground::check(config).await);
    findings.extend(coverage(config));
    let listen = config.mcp.as_ref().and_then(|m| m.listen.clone());
    match listen {
        Some(listen) => {
            findings.push(mcp_health(&listen));
            findings.push(mcp_endpoint(config, &listen, mcp_key));
        }
        None => findings.push(Finding::fail(
            "mcp-health",
            "the configuration names no [mcp] listen address: run `zodex dev up` again",
        )),
    }
    findings
}

fn publisher_health(config: &Config) -> Finding {
    match ask(config, &AdminRequest::Ping) {
        Ok(response) if response.ok => Finding::ok("publisher-health", "zodex-prd answers"),
        Ok(response) => Finding::fail(
            "publisher-health",
            format!(
                "zodex-prd refused a ping: {}",
                response.error.map(|e| e.message).unwrap_or_default()
            ),
        ),
        Err(e) => Finding::fail(
            "publisher-health",
            format!(
                "zodex-prd does not answer on {}: {e}; `zodex sprite restart`, then `zodex sprite logs --service zodex-prd`",
                config.admin_socket.display()
            ),
        ),
    }
}

/// Whether every configured audit sink delivers (none configured: no finding).
fn audit_sinks(config: &Config) -> Option<Finding> {
    let status = ask(config, &AdminRequest::status())
        .ok()
        .filter(|r| r.ok)
        .and_then(|r| r.answer::<zodex_protocol::answers::StatusAnswer>().ok())?;
    if status.audit_sinks.is_empty() {
        return None;
    }
    let failing: Vec<String> = status
        .audit_sinks
        .iter()
        .filter(|s| s.failures > 0)
        .map(|s| {
            format!(
                "{} ({} failed attempts, {} rows waiting): {}",
                s.sink,
                s.failures,
                s.pending,
                s.last_error.as_deref().unwrap_or("failing")
            )
        })
        .collect();
    Some(if failing.is_empty() {
        Finding::ok(
            "audit-sinks",
            format!("{} audit sink(s) deliver", status.audit_sinks.len()),
        )
    } else {
        Finding::fail(
            "audit-sinks",
            format!(
                "audit sink {}; the rows wait and are delivered once it works (fix the receiver or the [[audit_sinks]] entry)",
                failing.join("; ")
            ),
        )
    })
}

/// Whether the policies' write invariants were proven at start, and what is waived (setup
/// reports the same finding, so the two never disagree).
pub async fn proofs(config: &Config) -> Finding {
    let status = ask(config, &AdminRequest::status())
        .ok()
        .filter(|r| r.ok)
        .and_then(|r| r.result);
    let Some(proofs) = status.as_ref().map(|s| &s["proofs"]) else {
        return proofs_here(config).await;
    };
    let summary = proofs["summary"].as_str().unwrap_or_default();
    let waived: Vec<&str> = proofs["waived"]
        .as_array()
        .map(|w| w.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if summary.starts_with("NOT PROVEN") || summary.is_empty() {
        return Finding::fail(
            "policy-proofs",
            format!(
                "the policies' write invariants are {}",
                if summary.is_empty() {
                    "not proven yet"
                } else {
                    summary
                }
            ),
        );
    }
    let waivers = if waived.is_empty() {
        String::new()
    } else {
        format!(
            " — waived in the configuration: {} (remove from `waive_properties` once your policies hold them)",
            waived.join(", ")
        )
    };
    Finding::ok("policy-proofs", format!("{summary}{waivers}"))
}

/// The proofs of the configured policies, made here when zodex-prd does not answer: a broken
/// property is one reason `serve` refuses to start, and then only this says which.
async fn proofs_here(config: &Config) -> Finding {
    use zodex_publisher::prove::{SolverCommand, Subject};
    let fail = |message: String| Finding::fail("policy-proofs", message);
    let Some(solver) = SolverCommand::find() else {
        return fail(
            "zodex-prd does not answer and no SMT solver is installed to prove its policies here: install cvc5 (`apt-get install cvc5`)".into(),
        );
    };
    let proven = match Subject::load(config.policy_dir.as_deref(), &config.waive_properties) {
        Ok(subject) => subject.prove(&solver).await,
        Err(e) => Err(e),
    };
    match proven {
        Ok(report) if report.all_hold_or_waived() => Finding::ok(
            "policy-proofs",
            "the policies' write invariants hold (proven by doctor: zodex-prd does not answer)",
        ),
        Ok(report) => {
            let broken: Vec<&str> = report.broken().map(|v| v.property.as_str()).collect();
            fail(format!(
                "the policies break {} (zodex-prd refuses to start on that): `zodex sprite policy prove` shows the counterexample; change the policy it names, or waive the property",
                broken.join(", ")
            ))
        }
        Err(e) => fail(format!("the policies cannot be proven: {e}")),
    }
}

fn mcp_health(listen: &str) -> Finding {
    match http(listen, "GET", "/health", None).map(|a| (a.status, a.body)) {
        Ok((200, _)) => Finding::ok("mcp-health", format!("zodex-agent answers on {listen}")),
        Ok((status, _)) => Finding::fail(
            "mcp-health",
            format!("zodex-agent answered {status} on /health at {listen}; `zodex sprite restart`"),
        ),
        Err(e) => Finding::fail(
            "mcp-health",
            format!(
                "zodex-agent does not answer on {listen}: {e}; `zodex sprite restart`, then `zodex sprite logs --service zodex-agent`"
            ),
        ),
    }
}

/// `zodex-prd check-ground` as the publisher user: keys, directories, `[github]`, both Apps.
fn ground(record: &InstallRecord, config_path: &Path) -> Vec<Finding> {
    isolation::findings_as(record, &record.publisher_user, "check-ground", config_path)
        .unwrap_or_else(|e| vec![Finding::fail("ground", e.to_string())])
}

/// One admin request on the publisher's own socket (doctor runs as root).
fn ask(config: &Config, request: &AdminRequest) -> std::io::Result<zodex_protocol::Response> {
    let line = serde_json::to_string(request).expect("requests serialise");
    zodex_publisher::sockets::admin_call(&config.admin_socket, config.publisher_uid, &line)
}

/// Both Apps on every `OWNER/REPO` target, asked of GitHub now through the publisher.
fn coverage(config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    for owner in config.targets.iter().filter_map(|t| t.owner.clone()) {
        out.push(Finding::ok(
            format!("coverage {owner}/*"),
            format!(
                "{owner}/* is a target: each repository's Apps are checked when it is first used (add --target {owner}/REPO to have one checked here)"
            ),
        ));
    }
    for repo in config.targets.iter().filter_map(|t| t.repo.clone()) {
        let request = AdminRequest::CheckCoverage { repo: repo.clone() };
        let answer = ask(config, &request);
        let check = format!("coverage {repo}");
        out.push(match answer {
            Ok(response) if response.ok => {
                match response
                    .result
                    .and_then(|v| serde_json::from_value::<CoverageAnswer>(v).ok())
                {
                    Some(c) => coverage_finding(&check, &c),
                    None => Finding::fail(check.clone(), "zodex-prd gave no coverage answer"),
                }
            }
            Ok(response) => Finding::fail(
                check.clone(),
                format!(
                    "cannot check the Apps on {repo}: {}",
                    response.error.map(|e| e.message).unwrap_or_default()
                ),
            ),
            Err(e) => Finding::fail(
                check.clone(),
                format!("cannot ask zodex-prd about {repo}: {e}"),
            ),
        });
    }
    out
}

/// The one line for one target's coverage.
pub fn coverage_finding(check: &str, c: &CoverageAnswer) -> Finding {
    c.finding(check)
}

/// The MCP endpoint as its clients meet it: with the key URL off, the OAuth door as a client
/// discovers it; else `tools/list` with the operator's key.
fn mcp_endpoint(config: &Config, listen: &str, key: Option<&str>) -> Finding {
    match super::mcp_door::oauth_only(config) {
        Some(published) => super::mcp_door::oauth_door(listen, &published),
        None => mcp_tools(listen, key),
    }
}

/// `tools/list` on the MCP endpoint with the operator's key: exactly the three tools.
fn mcp_tools(listen: &str, key: Option<&str>) -> Finding {
    let Some(key) = key else {
        return Finding::fail(
            "mcp-tools",
            "the MCP endpoint was not checked: this operator has no key for the sprite; run `zodex sprite connect --host HOST` first",
        );
    };
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let path = format!("/mcp?key={key}");
    match http(listen, "POST", &path, Some(body)).map(|a| (a.status, a.body)) {
        Ok((200, text)) => {
            let json = text
                .lines()
                .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|v| v.get("result").is_some() || v.get("error").is_some())
                .unwrap_or_default();
            let mut names: Vec<String> = json["result"]["tools"]
                .as_array()
                .map(|tools| {
                    tools
                        .iter()
                        .filter_map(|t| t["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            if names == MCP_TOOLS {
                Finding::ok(
                    "mcp-tools",
                    "the MCP endpoint lists exactly the three tools",
                )
            } else {
                Finding::fail(
                    "mcp-tools",
                    format!(
                        "the MCP endpoint lists {names:?}, not {MCP_TOOLS:?}: `zodex sprite upgrade --binaries DIR`"
                    ),
                )
            }
        }
        Ok((401, _)) => Finding::fail(
            "mcp-tools",
            "the MCP endpoint refuses this operator's key (it was rotated elsewhere?): `zodex sprite connect --host HOST --rotate`",
        ),
        Ok((status, text)) => Finding::fail(
            "mcp-tools",
            format!(
                "tools/list answered {status}: {}; `zodex sprite logs --service zodex-agent`",
                text.chars().take(200).collect::<String>()
            ),
        ),
        Err(e) => Finding::fail("mcp-tools", format!("cannot reach the MCP endpoint: {e}")),
    }
}
