//! Small programs the attack suite runs *as the agent user*: the test binary re-runs itself
//! (hard-linked into the sprite's `bin/`) with `ZXATTACK_ROUTINE` naming a file that holds one
//! [`Routine`] as JSON, and its child entry `child_agent_routine` (below) calls [`serve`], which does the work, prints
//! `ZXR:<json>` lines and exits. Raw frames, file probes, floods and slow clients need no
//! other language on the machine this way.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::{BufRead, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zodex::protocol::{AGENT_VERSION, AgentHeader};

/// The name of this test binary inside the sprite's `bin/`.
pub const BINARY: &str = "attack-routine";
const ENV: &str = "ZXATTACK_ROUTINE";
const MARK: &str = "ZXR:";
/// The child entry (`support::child`) of every binary that runs routines.
pub const CHILD: &str = "support::routines::child_agent_routine";

/// One agent request: metadata bytes exactly as given (valid JSON or not), a declared bundle
/// length, and the bytes actually sent after the metadata.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frame {
    /// The metadata block (sent verbatim).
    pub metadata: String,
    /// Header fields; `None` means "what a well-behaved client would send".
    #[serde(default)]
    pub magic: Option<[u8; 4]>,
    #[serde(default)]
    pub version: Option<u16>,
    #[serde(default)]
    pub metadata_len: Option<u32>,
    #[serde(default)]
    pub bundle_len: Option<u64>,
    /// A file whose bytes follow the metadata (default: none).
    #[serde(default)]
    pub bundle: Option<PathBuf>,
    /// Extra raw bytes after the bundle.
    #[serde(default)]
    pub trailer: Vec<u8>,
}

impl Frame {
    /// A well-formed request with no bundle.
    pub fn request(request: &Value) -> Self {
        Self {
            metadata: request.to_string(),
            magic: None,
            version: None,
            metadata_len: None,
            bundle_len: None,
            bundle: None,
            trailer: Vec::new(),
        }
    }

    /// A well-formed request followed by the bundle in `file`.
    pub fn with_bundle(request: &Value, file: &Path) -> Self {
        Self {
            bundle: Some(file.to_path_buf()),
            ..Self::request(request)
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Routine {
    /// Sends each frame on its own connection; the result is each answer (or the error).
    Frames { socket: PathBuf, frames: Vec<Frame> },
    /// Tries each `(operation, path)`: read, list, unlink, rename, create, mkdir, connect.
    Access { checks: Vec<(String, PathBuf)> },
    /// Holds `connections` connections open, each dripping one header byte per `interval_ms`.
    Drip {
        socket: PathBuf,
        connections: usize,
        interval_ms: u64,
    },
    /// Serves `answer` to anyone connecting at `path`.
    Impostor { path: PathBuf, answer: String },
    /// `total` pings (every third one malformed) from `threads` threads.
    Flood {
        socket: PathBuf,
        total: usize,
        threads: usize,
    },
    /// `threads` threads each getting a credential for `path` and erasing it, round after
    /// round, until the answer is no longer a write token (or `rounds` are done). Ready after
    /// the first write token; the result lists every write token seen and counts the read
    /// tokens handed out after the revoke.
    CredentialRace {
        socket: PathBuf,
        host: String,
        path: String,
        threads: usize,
        rounds: usize,
    },
}

/// The command that runs `routine` as the sprite's agent.
pub fn command(sprite: &super::sprite::Sprite, routine: &Routine) -> Command {
    // In a file, not the environment: one environment string is limited to 128 KiB.
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).unwrap();
    let file = sprite
        .work
        .join(format!("routine-{}.json", hex::encode(raw)));
    std::fs::write(&file, serde_json::to_vec(routine).unwrap()).unwrap();
    super::sprite::chown(&file, Some(&sprite.users.agent), None);
    let mut cmd = sprite.as_agent(sprite.bin.join(BINARY), &sprite.work);
    cmd.args(super::child::args(CHILD))
        .args(["--test-threads=1", "--quiet"])
        .env(super::child::ENV, CHILD)
        .env(ENV, &file);
    cmd
}

/// The result a routine printed.
pub fn result(out: &Output) -> Option<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(MARK))
        .rfind(|l| *l != "ready")
        .and_then(|l| serde_json::from_str(l).ok())
}

/// Reads a background routine's output until it says `ready`.
pub fn wait_ready(out: &mut impl BufRead, routine: &Routine) {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "routine {routine:?} ended before it was ready");
        if line.trim() == format!("{MARK}ready") {
            return;
        }
    }
}

/// Reads a background routine's output until its result.
pub fn next_result(out: &mut impl BufRead) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "the routine ended without a result");
        if let Some(json) = line.trim().strip_prefix(MARK)
            && json != "ready"
        {
            return serde_json::from_str(json).unwrap();
        }
    }
}

fn say(value: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{MARK}{value}");
    let _ = out.flush();
}

/// Runs the routine named in the environment and exits (the child entry's body).
pub fn serve() {
    super::child::enter(CHILD);
    let file = std::env::var_os(ENV).expect("the routine's file is named in the environment");
    let text = std::fs::read(&file).expect("the routine's file");
    let routine: Routine = serde_json::from_slice(&text).expect("a routine");
    let result = match routine {
        Routine::Frames { socket, frames } => {
            json!(
                frames
                    .iter()
                    .map(|f| send_frame(&socket, f))
                    .collect::<Vec<_>>()
            )
        }
        Routine::Access { checks } => json!(
            checks
                .iter()
                .map(|(op, path)| json!({"op": op, "path": path, "result": access(op, path)}))
                .collect::<Vec<_>>()
        ),
        Routine::Drip {
            socket,
            connections,
            interval_ms,
        } => drip(&socket, connections, interval_ms),
        Routine::Impostor { path, answer } => impostor(&path, &answer),
        Routine::Flood {
            socket,
            total,
            threads,
        } => flood(&socket, total, threads),
        Routine::CredentialRace {
            socket,
            host,
            path,
            threads,
            rounds,
        } => credential_race(&socket, &host, &path, threads, rounds),
    };
    say(result);
    std::process::exit(0);
}

fn errno(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => format!("errno:{code}"),
        None => format!("error:{e}"),
    }
}

/// Sends one frame and returns the daemon's answer as JSON (or `{"io": …}`).
pub fn send_frame(socket: &Path, frame: &Frame) -> Value {
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => return json!({"io": errno(&e), "stage": "connect"}),
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let bundle = frame.bundle.as_ref().map(|p| std::fs::read(p).unwrap());
    let metadata = frame.metadata.as_bytes();
    let mut head = AgentHeader {
        version: frame.version.unwrap_or(AGENT_VERSION),
        metadata_len: frame.metadata_len.unwrap_or(metadata.len() as u32),
        bundle_len: frame
            .bundle_len
            .unwrap_or(bundle.as_ref().map_or(0, |b| b.len() as u64)),
    }
    .encode()
    .to_vec();
    if let Some(magic) = frame.magic {
        head[..4].copy_from_slice(&magic);
    }
    // A refusal may come before everything is written: keep going, then read the answer.
    let _ = (|| -> std::io::Result<()> {
        stream.write_all(&head)?;
        stream.write_all(metadata)?;
        if let Some(bundle) = &bundle {
            stream.write_all(bundle)?;
        }
        stream.write_all(&frame.trailer)?;
        stream.shutdown(std::net::Shutdown::Write)
    })();
    // A daemon that closes with our bytes unread resets the connection (ECONNRESET) after
    // its answer: keep what arrived before the reset.
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let error = loop {
        match stream.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    match error {
        Some(e) if answer.is_empty() => json!({"io": errno(&e), "stage": "read"}),
        _ => serde_json::from_slice(&answer)
            .unwrap_or_else(|_| json!({"raw": String::from_utf8_lossy(&answer)})),
    }
}

fn access(op: &str, path: &Path) -> String {
    let moved = path.with_extension("moved");
    let result = match op {
        "read" => std::fs::read(path).map(|_| ()),
        "list" => std::fs::read_dir(path).map(|_| ()),
        "unlink" => std::fs::remove_file(path),
        "rename" => std::fs::rename(path, &moved),
        "rename_onto" => {
            // Replace `path` with a file of our own made beside it (in our own directory).
            let ours = std::env::current_dir().unwrap().join("decoy");
            std::fs::write(&ours, b"decoy").and_then(|()| std::fs::rename(&ours, path))
        }
        "create" => std::fs::File::create(path).map(|_| ()),
        "mkdir" => std::fs::create_dir(path),
        "symlink" => std::os::unix::fs::symlink("/tmp", path),
        "bind" => UnixListener::bind(path).map(|_| ()),
        "connect" => UnixStream::connect(path).map(|_| ()),
        "chmod" => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
        }
        other => panic!("unknown access op {other}"),
    };
    match result {
        Ok(()) => "ok".into(),
        Err(e) => errno(&e),
    }
}

fn drip(socket: &Path, connections: usize, interval_ms: u64) -> Value {
    let head = AgentHeader {
        version: AGENT_VERSION,
        metadata_len: 4096,
        bundle_len: 0,
    }
    .encode();
    // A connection the daemon turns away at once (a cap) is not an error of the routine: it
    // keeps trying to hold as many as it can.
    let mut streams: Vec<(UnixStream, usize)> = (0..connections)
        .filter_map(|_| {
            let mut s = UnixStream::connect(socket).ok()?;
            s.write_all(&head[..1]).ok()?;
            Some((s, 1))
        })
        .collect();
    say("ready");
    loop {
        // The drip's pace: a slow client is what this routine is.
        std::thread::sleep(Duration::from_millis(interval_ms));
        for (stream, sent) in &mut streams {
            let byte = head.get(*sent).copied().unwrap_or(b' ');
            if stream.write_all(&[byte]).is_err() {
                // The daemon gave up on this one: come back with a new slow connection.
                if let Ok(s) = UnixStream::connect(socket) {
                    *stream = s;
                    *sent = 0;
                }
                continue;
            }
            *sent += 1;
        }
    }
}

fn impostor(path: &Path, answer: &str) -> Value {
    let listener = UnixListener::bind(path).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    say("ready");
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut line = String::new();
        let _ = std::io::BufReader::new(&mut stream).read_line(&mut line);
        let _ = stream.write_all(format!("{answer}\n").as_bytes());
    }
    json!({})
}

fn flood(socket: &Path, total: usize, threads: usize) -> Value {
    let next = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (next, answered, failures) = (next.clone(), answered.clone(), failures.clone());
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return;
                    }
                    let frame = if i % 3 == 2 {
                        Frame {
                            metadata: "{\"op\":".into(),
                            ..Frame::request(&json!({}))
                        }
                    } else {
                        Frame::request(&json!({"op": "ping"}))
                    };
                    let answer = send_frame(socket, &frame);
                    if answer.get("ok").is_some() {
                        answered.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failures.lock().unwrap().push(answer.to_string());
                    }
                }
            });
        }
    });
    let failures = failures.lock().unwrap();
    json!({
        "answered": answered.load(Ordering::Relaxed),
        "failures": failures.len(),
        "first_failures": failures.iter().take(3).collect::<Vec<_>>(),
    })
}

fn credential_race(socket: &Path, host: &str, path: &str, threads: usize, rounds: usize) -> Value {
    let tokens = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    let reads = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    let ready = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (tokens, reads, ready) = (tokens.clone(), reads.clone(), ready.clone());
            scope.spawn(move || {
                for _ in 0..rounds {
                    let get = json!({"op": "credential", "host": host, "path": path});
                    let answer = send_frame(socket, &Frame::request(&get));
                    let result = &answer["result"];
                    if answer["ok"] != true || result["kind"] != "write" {
                        if let Some(read) = result["password"].as_str() {
                            reads.lock().unwrap().insert(read.to_string());
                        }
                        return;
                    }
                    let token = result["password"].as_str().unwrap().to_string();
                    tokens.lock().unwrap().insert(token);
                    if !ready.swap(true, Ordering::SeqCst) {
                        say("ready");
                    }
                    let erase = json!({"op": "credential_erase", "host": host, "path": path});
                    send_frame(socket, &Frame::request(&erase));
                }
            });
        }
    });
    if !ready.load(Ordering::SeqCst) {
        say("ready");
    }
    json!({
        "tokens": tokens.lock().unwrap().iter().collect::<Vec<_>>(),
        "reads": reads.lock().unwrap().len(),
        "seconds": started.elapsed().as_secs_f64(),
    })
}

/// The child entry of every routine (see `support::child`): the sprite runs this test binary
/// as the agent with the routine's file named in the environment.
#[test]
#[ignore = "child process entry: started by its parent test"]
fn child_agent_routine() {
    serve();
}
