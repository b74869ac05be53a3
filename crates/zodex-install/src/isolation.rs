//! The boundary as the agent user sees it: `zodex-prd check-isolation`, run *as the agent* by
//! `install` and `doctor`. The agent must not read either App key (a fleet sprite's fleet
//! key), the state database, the
//! write-token file or the publisher's log, must not reach the admin socket or write into the socket directory; it
//! must reach its own socket, and `git ls-remote` of a covered repository must work through
//! the credential helper.

use super::layout::InstallRecord;
use super::{Finding, InstallError};
use std::io::ErrorKind;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use zodex_config::Config;
use zodex_protocol::AgentRequest;

/// Runs the checks in this process (which must be the agent user); `publisher_log` is the
/// publisher's log file of an installed sprite (the supervisor's; systemd's journal has none).
pub fn checks(config: &Config, publisher_log: Option<&Path>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(github) = &config.github {
        for (name, app) in [("writer", &github.writer), ("reader", &github.reader)] {
            out.push(unreadable(
                &format!("{name}-key-hidden"),
                &format!("the {name} App key"),
                &app.private_key_file,
                "chmod 600 the key and chmod 700 its directory, both owned by the publisher",
            ));
        }
    }
    if let Some(relay) = &config.relay {
        out.push(unreadable(
            "fleet-key-hidden",
            "the sprite's fleet key",
            &relay.dir.join(zodex_fleet::MemberFiles::KEY),
            "chmod 600 the key and chmod 700 its directory, both owned by the publisher",
        ));
    }
    out.push(unreadable(
        "state-hidden",
        "the state database",
        &config.state_db(),
        &format!("chmod 700 {}", config.state_dir.display()),
    ));
    out.push(unreadable(
        "tokens-hidden",
        "the write-token file",
        &config.state_dir.join("write-tokens"),
        &format!("chmod 700 {}", config.state_dir.display()),
    ));
    if let Some(log) = publisher_log {
        out.push(unreadable(
            "publisher-log-hidden",
            "the publisher's log",
            log,
            &format!(
                "it names grants, Apps and token hashes: `chmod 640 {}` (group: the publisher's), or rerun `zodex sprite setup`",
                log.display()
            ),
        ));
    }
    out.push(
        match std::os::unix::net::UnixStream::connect(&config.admin_socket) {
            Ok(_) => Finding::fail(
                "admin-socket-closed",
                format!(
                    "the agent can connect to the admin socket {} (the publisher still refuses it by uid): restart zodex-prd, which recreates it with mode 0600",
                    config.admin_socket.display()
                ),
            ),
            Err(_) => Finding::ok("admin-socket-closed", "the agent cannot reach the admin socket"),
        },
    );
    let socket_dir = config.agent_socket.parent().unwrap_or(Path::new("/"));
    out.push(
        match nix::unistd::access(socket_dir, nix::unistd::AccessFlags::W_OK) {
            Ok(()) => Finding::fail(
                "socket-dir-locked",
                format!(
                    "the agent can write into the socket directory {dir} and could replace a socket: `chmod 750 {dir}` (owner: the publisher)",
                    dir = socket_dir.display()
                ),
            ),
            Err(_) => Finding::ok(
                "socket-dir-locked",
                "the agent cannot create or replace sockets",
            ),
        },
    );
    out.push(agent_socket(config));
    out.push(ls_remote(config));
    out
}

fn unreadable(check: &str, what: &str, path: &Path, fix: &str) -> Finding {
    match std::fs::File::open(path) {
        Ok(_) => Finding::fail(
            check.to_string(),
            format!("the agent can read {what} {}: {fix}", path.display()),
        ),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            Finding::ok(check.to_string(), format!("the agent cannot read {what}"))
        }
        // Not there yet (no token was ever written): nothing to read either.
        Err(e) if e.kind() == ErrorKind::NotFound => Finding::ok(
            check.to_string(),
            format!("the agent cannot read {what} (absent)"),
        ),
        Err(e) => Finding::ok(
            check.to_string(),
            format!("the agent cannot read {what} ({e})"),
        ),
    }
}

fn agent_socket(config: &Config) -> Finding {
    let ping =
        std::os::unix::net::UnixStream::connect(&config.agent_socket).and_then(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            zodex_protocol::agent_roundtrip(&mut stream, &AgentRequest::Ping)
        });
    match ping {
        Ok(response) if response.ok && config.relay.is_some() => Finding::ok(
            "agent-socket",
            "the agent reaches the fleet's service through the relay",
        ),
        Ok(response) if response.ok => Finding::ok("agent-socket", "the agent reaches zodex-prd"),
        Ok(response) => Finding::fail(
            "agent-socket",
            format!(
                "zodex-prd refused the agent's ping ({}): check `agent_uid` in the configuration is the agent user's uid",
                response.error.map(|e| e.message).unwrap_or_default()
            ),
        ),
        Err(e) => Finding::fail(
            "agent-socket",
            format!(
                "the agent cannot reach its socket: {e}; is zodex-prd running (`zodex sprite status`), and is the agent in the socket group?"
            ),
        ),
    }
}

/// `git ls-remote` of the first repository target, as the agent's git is configured.
fn ls_remote(config: &Config) -> Finding {
    let Some(repo) = config.targets.iter().find_map(|t| t.repo.clone()) else {
        return Finding::ok(
            "git-read",
            "no OWNER/REPO target to read; add one with --target to have it checked",
        );
    };
    let url = format!("{}/{repo}.git", config.git_url().trim_end_matches('/'));
    let child = Command::new("git")
        .args(["ls-remote", "--heads", &url])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG_GLOBAL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let output = child.and_then(|child| wait_with_timeout(child, Duration::from_secs(60)));
    match output {
        Ok(out) if out.status.success() => {
            Finding::ok("git-read", format!("the agent's git reads {repo}"))
        }
        Ok(out) => Finding::fail(
            "git-read",
            format!(
                "`git ls-remote {url}` as the agent failed: {}; check that the reader App is installed on {repo} and the agent's ~/.gitconfig has the credential helper (rerun install)",
                String::from_utf8_lossy(&out.stderr)
                    .trim()
                    .replace('\n', " / ")
            ),
        ),
        Err(e) => Finding::fail("git-read", format!("cannot run git as the agent: {e}")),
    }
}

fn wait_with_timeout(
    mut child: std::process::Child,
    limit: Duration,
) -> std::io::Result<std::process::Output> {
    let start = std::time::Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            return child.wait_with_output();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            return Err(std::io::Error::other("git did not finish within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `zodex-prd check-isolation` as the agent user and returns its findings.
pub fn check_as_agent(record: &InstallRecord, config: &Path) -> Result<Vec<Finding>, InstallError> {
    Ok(findings_as(
        record,
        &record.agent_user,
        "check-isolation",
        config,
    )?)
}

/// Why a `zodex-prd` check run as another user gave no findings.
#[derive(Debug, thiserror::Error)]
pub enum FindingsError {
    #[error("the user {0} does not exist; rerun `zodex sprite setup`")]
    NoUser(String),
    #[error("cannot run zodex-prd {subcommand} as {user}: {error}")]
    Run {
        subcommand: String,
        user: String,
        error: std::io::Error,
    },
    /// `status` and `stderr`: how it exited and what it said.
    #[error("zodex-prd {subcommand} as {user} printed no report ({status}): {stderr}")]
    NoReport {
        subcommand: String,
        user: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// Runs `zodex-prd SUBCOMMAND --json` (one answering `{findings, all_ok}`) as `user`, with
/// that user's groups and a plain environment, and returns its findings.
pub fn findings_as(
    record: &InstallRecord,
    user: &str,
    subcommand: &str,
    config: &Path,
) -> Result<Vec<Finding>, FindingsError> {
    let account = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .ok_or_else(|| FindingsError::NoUser(user.to_string()))?;
    let mut command = Command::new(record.layout.binary("zodex-prd"));
    command.args([subcommand, "--json", "--config"]).arg(config);
    super::system::as_user(&mut command, &account);
    let out = command.output().map_err(|error| FindingsError::Run {
        subcommand: subcommand.to_string(),
        user: user.to_string(),
        error,
    })?;
    serde_json::from_slice::<zodex_protocol::Response>(&out.stdout)
        .ok()
        .and_then(|r| r.result)
        .and_then(|v| serde_json::from_value::<zodex_publisher::ground::Findings>(v).ok())
        .map(|report| report.findings)
        .ok_or_else(|| FindingsError::NoReport {
            subcommand: subcommand.to_string(),
            user: user.to_string(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
}
