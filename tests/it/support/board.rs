//! The operator's board as the tests run it: `zodex sprite watch --no-open` against a
//! `zodex dev up` installation, and a small raw HTTP client (raw, so the tests choose every
//! header, `Host` included, exactly as a hostile page or a browser would send it).

use super::dev::Dev;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running board, stopped when dropped.
pub struct Board {
    child: Child,
    pub url: String,
    pub port: u16,
    /// The path prefix with the capability: `/b/<capability>/`.
    pub base: String,
}

impl Board {
    /// Starts `zodex ARGS --no-open` and waits for the URL it prints.
    pub fn start(dev: &Dev, args: &[&str]) -> Board {
        let mut all = args.to_vec();
        all.push("--no-open");
        Board::spawn(dev.zodex_command(&all))
    }

    /// Starts a board command (with `--no-open`) and waits for the URL it prints.
    pub fn spawn(mut command: std::process::Command) -> Board {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().expect("the board printed its URL").unwrap();
            if let Some(url) = line.strip_prefix("The board is at ") {
                break url.trim().to_string();
            }
        };
        // Keep reading what it prints, so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .expect("a loopback URL");
        let (port, path) = rest.split_once('/').unwrap();
        Board {
            child,
            port: port.parse().unwrap(),
            base: format!("/{path}"),
            url,
        }
    }

    /// The page's CSRF token, read from the page as a browser gets it.
    pub fn csrf(&self) -> String {
        let page = self.get(&self.base);
        assert_eq!(page.status, 200, "{}", page.body);
        let at = page.body.find("name=\"zodex-csrf\" content=\"").unwrap() + 27;
        page.body[at..at + 64].to_string()
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn get(&self, path: &str) -> Answer {
        self.request("GET", path, &[("Host", &self.host())], "")
    }

    /// An action as the page sends it (same origin, token, JSON).
    pub fn act(&self, csrf: &str, body: &str) -> Answer {
        let origin = format!("http://{}", self.host());
        self.request(
            "POST",
            &format!("{}api/action", self.base),
            &[
                ("Host", &self.host()),
                ("Origin", &origin),
                ("X-Zodex-Csrf", csrf),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    }

    /// One request with exactly these headers; the whole answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Answer::parse(&String::from_utf8_lossy(&raw))
    }

    /// The event stream: each `data:` line's JSON, as it arrives, on a channel.
    pub fn events(&self, last_event_id: Option<u64>) -> mpsc::Receiver<serde_json::Value> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!(
            "GET {}events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n",
            self.base,
            self.host()
        );
        if let Some(id) = last_event_id {
            head.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        let (send, receive) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if let Some(data) = line.strip_prefix("data: ")
                    && let Ok(value) = serde_json::from_str(data)
                    && send.send(value).is_err()
                {
                    break;
                }
            }
        });
        receive
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: status, headers (names lower-cased) and body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    fn parse(raw: &str) -> Answer {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Answer {
            status,
            headers,
            body: body.to_string(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// The first event `matches` accepts within `within`, or a panic naming what was waited for.
pub fn wait_for(
    events: &mpsc::Receiver<serde_json::Value>,
    within: Duration,
    what: &str,
    matches: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let end = Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(event) if matches(&event) => return event,
            Ok(_) => {}
            Err(_) => panic!("no event with {what} within {within:?}"),
        }
    }
}
