//! `zodex-agent serve` for a local sprite (`dev up`'s, or each of `dev fleet up`'s), with a
//! fresh MCP key whose hash goes where the server reads it: through the admin path to the
//! sprite's own publisher, or (a local fleet's sprite) into its file directly.

use super::{DevError, io, running_pid};
use crate::registry::SpriteEntry;
use crate::{sibling_binary, transport};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zodex_config::Config;
use zodex_protocol::AdminRequest;
use zodex_tools::server::key::KeyHash;

/// Where one `zodex-agent serve` of a local installation keeps its pid, URL and log.
pub(super) struct McpFiles {
    pub pid_file: std::path::PathBuf,
    /// The connector URL with its key (0600).
    pub url_file: std::path::PathBuf,
    pub log: std::path::PathBuf,
}

impl McpFiles {
    /// The single local sprite's, in its installation directory.
    pub(super) fn of_sprite(dir: &Path) -> Self {
        Self {
            pid_file: dir.join("run/zodex-agent.pid"),
            url_file: dir.join("mcp-url"),
            log: dir.join("logs/zodex-agent.log"),
        }
    }
}

/// Has the local sprite's publisher store the key's hash, through the admin path, exactly as
/// `zodex sprite connect` does for a remote sprite.
pub(super) fn key_through(sprite: &SpriteEntry) -> impl FnOnce(&KeyHash) -> Result<(), DevError> {
    move |hash| {
        let request = AdminRequest::SetMcpKeyHash {
            sha256: hash.to_hex(),
        };
        match transport::call(sprite, &request) {
            Ok(response) if response.ok => Ok(()),
            Ok(response) => Err(DevError::Io {
                context: "zodex-prd refused the MCP key".into(),
                source: std::io::Error::other(
                    response.error.map(|e| e.message).unwrap_or_default(),
                ),
            }),
            Err(e) => Err(DevError::Io {
                context: "cannot reach zodex-prd".into(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }
}

/// Starts `zodex-agent serve` on `config_path` (unless it runs) with a fresh key, whose hash
/// `install_key` puts where the server reads it; returns the connector URL and the pid.
pub(super) fn start_mcp(
    files: &McpFiles,
    config: &Config,
    config_path: &Path,
    install_key: impl FnOnce(&KeyHash) -> Result<(), DevError>,
) -> Result<(String, i32), DevError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (pid_file, url_file) = (&files.pid_file, &files.url_file);
    if let (Some(pid), Ok(url)) = (running_pid(pid_file), std::fs::read_to_string(url_file)) {
        return Ok((url.trim().to_string(), pid));
    }
    let listen = config
        .mcp
        .as_ref()
        .and_then(|m| m.listen.clone())
        .unwrap_or_else(|| "127.0.0.1:8080".to_string());
    let key = zodex_tools::server::key::generate_key().map_err(|e| DevError::Io {
        context: "cannot make the MCP key".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    install_key(&KeyHash::of_key(&key))?;
    let log = files.log.clone();
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(io(format!("cannot open {}", log.display())))?;
    let child = Command::new(sibling_binary("zodex-agent"))
        .args(["serve", "--config"])
        .arg(config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .map_err(io("cannot start zodex-agent serve"))?;
    let pid = child.id() as i32;
    std::fs::write(pid_file, format!("{pid}\n")).map_err(io("cannot write the pid file"))?;
    let url = format!("http://{listen}/mcp?key={key}");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(url_file)
        .map_err(io("cannot write mcp-url"))?;
    file.write_all(format!("{url}\n").as_bytes())
        .map_err(io("cannot write mcp-url"))?;
    // Ready when it answers on its port while it runs: a `zodex-agent serve` that could not
    // bind the port (taken since it was chosen) has exited, and what answers there is another
    // process, so that is said at once, not waited out.
    let start = Instant::now();
    while !(health_ok(&listen) && super::process::alive(pid)) {
        if start.elapsed() > Duration::from_secs(10) || !super::process::alive(pid) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(DevError::NotReady { log, tail: text });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((url, pid))
}

/// `GET /health` answers 200.
fn health_ok(listen: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(listen) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nHost: {listen}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}
