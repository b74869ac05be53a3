//! `zodex-agent serve` for a local sprite (`dev up`'s, or each of `dev fleet up`'s), with a
//! fresh MCP key whose hash goes where the server reads it: through the admin path to the
//! sprite's own publisher, or (a local fleet's sprite) into its file directly.

use super::process::{alive, log_len, said_address_in_use};
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
/// `install_key` puts where the server reads it; returns the connector URL and the pid. The
/// `[mcp]` port was free when it was chosen, but the server binds it only now: if something
/// took it meanwhile (the server exits saying "address in use"), the port is moved in the
/// configuration file and the server started again.
pub(super) fn start_mcp(
    files: &McpFiles,
    config_path: &Path,
    install_key: impl FnOnce(&KeyHash) -> Result<(), DevError>,
) -> Result<(String, i32), DevError> {
    let (pid_file, url_file) = (&files.pid_file, &files.url_file);
    if let (Some(pid), Ok(url)) = (running_pid(pid_file), std::fs::read_to_string(url_file)) {
        return Ok((url.trim().to_string(), pid));
    }
    let key = zodex_tools::server::key::generate_key().map_err(|e| DevError::Io {
        context: "cannot make the MCP key".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    install_key(&KeyHash::of_key(&key))?;
    for attempt in 1..=PORT_TRIES {
        let listen = Config::load(config_path)?
            .mcp
            .and_then(|m| m.listen)
            .unwrap_or_else(|| "127.0.0.1:8080".to_string());
        let from = log_len(&files.log);
        let pid = spawn_serve(files, config_path)?;
        let url = format!("http://{listen}/mcp?key={key}");
        write_private(url_file, &format!("{url}\n"))?;
        match wait_healthy(&listen, pid, &files.log) {
            Ok(()) => return Ok((url, pid)),
            Err(e) => {
                if attempt == PORT_TRIES || !said_address_in_use(&files.log, from) {
                    return Err(e);
                }
                move_port(config_path, &listen)?;
            }
        }
    }
    unreachable!("the last try returns")
}

/// How many ports the MCP endpoint is given before its start gives up.
const PORT_TRIES: usize = 3;

/// `zodex-agent serve --config CONFIG_PATH` in its own process group, its pid in its file.
fn spawn_serve(files: &McpFiles, config_path: &Path) -> Result<i32, DevError> {
    let log = &files.log;
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
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
    std::fs::write(&files.pid_file, format!("{pid}\n")).map_err(io("cannot write the pid file"))?;
    Ok(pid)
}

/// Writes `text` to `path`, readable by its owner only (it holds the key).
fn write_private(path: &Path, text: &str) -> Result<(), DevError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(io("cannot write mcp-url"))
}

/// Ready when it answers on its port while it runs: one that could not bind the port has
/// exited, and what answers there is another process, so that is said at once.
fn wait_healthy(listen: &str, pid: i32, log: &Path) -> Result<(), DevError> {
    let start = Instant::now();
    while !(health_ok(listen) && alive(pid)) {
        if start.elapsed() > Duration::from_secs(10) || !alive(pid) {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(DevError::NotReady {
                log: log.to_path_buf(),
                tail: text,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Moves the `[mcp]` port in the file at `config_path` to a free one: every `listen` address
/// in its text (the listen address, and the public URL's host) becomes the new one, so the
/// rest of the file, edits and comments included, stays as it was.
fn move_port(config_path: &Path, listen: &str) -> Result<(), DevError> {
    let port = zodex_store_pg::temp::free_port().map_err(io("cannot find a free port"))?;
    let text = std::fs::read_to_string(config_path)
        .map_err(io(format!("cannot read {}", config_path.display())))?;
    let moved = replace_address(&text, listen, &format!("127.0.0.1:{port}"));
    std::fs::write(config_path, moved)
        .map_err(io(format!("cannot write {}", config_path.display())))
}

/// `text` with each `from` that is not followed by a digit (`127.0.0.1:80` is not part of
/// `127.0.0.1:8080`) replaced by `to`.
fn replace_address(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
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
