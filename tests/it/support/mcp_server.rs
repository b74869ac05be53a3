//! Test support: start a real `zodex-agent serve` and talk to it over raw HTTP/1.1 (blocking,
//! keep-alive, `Content-Length` bodies only — what the stateless JSON side of `/mcp` and
//! `/health` send). Shared by `tests/mcp_http.rs` and `benches/mcp_roundtrip.rs`.

use super::wait::poll;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// A running server with its own HOME, key and log.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub key: String,
    pub log: PathBuf,
    pub home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `bin serve` on a free loopback port, with `extra_env` added.
    pub fn start(bin: &Path, extra_env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).unwrap();
        let key = hex::encode(raw);
        let hash_file = dir.path().join("key.sha256");
        std::fs::write(&hash_file, hex::encode(Sha256::digest(key.as_bytes()))).unwrap();
        let log = dir.path().join("server.log");
        let log_file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--key-hash-file"])
            .arg(&hash_file)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        let logged = poll(Duration::from_secs(30), || {
            let text = read();
            let rest = &text[text.find("addr=127.0.0.1:")? + 5..];
            let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
            Some(rest[..end].to_string())
        });
        let Some(addr) = logged else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("server did not log its address:\n{}", read());
        };
        Server {
            child,
            addr,
            key,
            log,
            home,
            _dir: dir,
        }
    }

    pub fn connect(&self) -> Conn {
        Conn::new(&self.addr)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait.
    pub fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// A response: status, lower-cased headers, body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One keep-alive HTTP/1.1 connection.
pub struct Conn {
    host: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn new(addr: &str) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Conn {
            host: addr.to_string(),
            reader: BufReader::new(stream),
        }
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.send("GET", path, &[], None)
    }

    /// POSTs a JSON-RPC body to `path` with the headers MCP needs.
    pub fn post_json(
        &mut self,
        path: &str,
        body: &serde_json::Value,
        headers: &[(&str, &str)],
    ) -> Response {
        let mut all = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        self.send("POST", path, &all, Some(body.to_string().as_bytes()))
    }

    fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Response {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or_default();
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let stream = self.reader.get_mut();
        stream.write_all(req.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        self.read_response()
    }

    fn read_response(&mut self) -> Response {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .expect("only Content-Length bodies are supported");
        let mut body = vec![0u8; len];
        self.reader.read_exact(&mut body).unwrap();
        Response {
            status,
            headers,
            body,
        }
    }
}

/// A `tools/call` request.
pub fn tool_call(id: u64, name: &str, arguments: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}
    })
}
