//! `zodex dev up|down`: a complete local installation as the current user, on embedded
//! defaults, in one directory — configuration, state, sockets, logs and a running `zodex-prd` —
//! registered as the sprite `dev`. With `--postgres` the state is in a private PostgreSQL
//! server of the installation's own (`postgres`); `mcp` starts `zodex-agent serve`; `fleet`
//! is `zodex dev fleet up|down`, a whole fleet on the same parts.

pub mod fleet;
mod mcp;
mod postgres;
mod process;

use process::{running_pid, stop, wait_ready};

use super::registry::{Registry, SpriteEntry, local_admin_command};
use super::sibling_binary;
use serde::Serialize;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zodex_config::{Config, McpConfig};
use zodex_engine::targets::TargetSpec;

pub const DEV_SPRITE: &str = "dev";

#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(
        "a process of the installation did not come up (it stopped, or did not answer in time); its log {log} ends with:\n{tail}"
    )]
    NotReady { log: PathBuf, tail: String },
    #[error(transparent)]
    Registry(#[from] super::registry::RegistryError),
    #[error(transparent)]
    Config(#[from] zodex_config::ConfigError),
    /// No tokio runtime for devhub.
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error(transparent)]
    DevHub(#[from] zodex_devhub::DevHubError),
    /// The installation's PostgreSQL (`--postgres`), in words that say what to do.
    #[error("{0}")]
    Postgres(String),
    /// Setting up the local fleet (`dev fleet up`): its CA, operator or sprites.
    #[error("{0}")]
    Fleet(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DevError {
    let context = context.into();
    move |source| DevError::Io { context, source }
}

/// What `zodex dev up` started, for people and (with `--json`) scripts.
#[derive(Debug, Clone, Serialize)]
pub struct DevInstall {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub env_file: PathBuf,
    pub sprite: String,
    pub admin_socket: PathBuf,
    pub agent_socket: PathBuf,
    pub log: PathBuf,
    pub publisher_pid: i32,
    /// The MCP connector URL of the local sprite, key included (a secret; also in `mcp-url`, 0600).
    pub mcp_url: String,
    pub agent_pid: i32,
    /// The local GitHub: its REST base URL and its git base URL.
    pub devhub_api_url: String,
    pub devhub_git_url: String,
    pub devhub_pid: i32,
    /// False when an earlier `dev up` was still running and was reused.
    pub started: bool,
    /// Where the publisher keeps its state: `sqlite` or `postgres`.
    pub store: &'static str,
    /// The database URL the publisher connects with (never a password), on PostgreSQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_url: Option<String>,
    /// The private PostgreSQL cluster's directory (`--postgres`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postgres_dir: Option<PathBuf>,
}

/// The default directory: `$ZODEX_HOME/dev`.
pub fn default_dir() -> PathBuf {
    super::zodex_home().join("dev")
}

fn layout(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    (
        dir.join("zodex.toml"),
        dir.join("env.sh"),
        dir.join("logs/zodex-prd.log"),
        dir.join("run/zodex-prd.pid"),
    )
    // zodex-agent's pid file sits beside it: run/zodex-agent.pid.
}

/// The embedded defaults: everything under `dir`, this user as agent and operator, and the
/// `demo` owner as the configured target.
pub fn default_config(dir: &Path) -> Config {
    Config {
        mcp: Some(mcp_table(dir)),
        ..base_config(dir)
    }
}

/// What every local installation's publisher, replica or relay has: its state and sockets
/// under `dir`, this user as agent and operator, and the `demo` owner as the target.
fn base_config(dir: &Path) -> Config {
    let uid = nix::unistd::getuid().as_raw();
    Config {
        state_dir: dir.join("state"),
        admin_socket: dir.join("run/admin.sock"),
        agent_socket: dir.join("run/agent.sock"),
        agent_uid: Some(uid),
        operator_uids: vec![uid],
        targets: vec![TargetSpec {
            repo: None,
            owner: Some("demo".into()),
            default_branch: Some("main".into()),
        }],
        ..Config::default()
    }
}

/// A test build's clock for the installation's publisher: the file `$ZODEX_TEST_CLOCK_FILE`
/// names becomes its `test_clock_file` (see `publisher::clock`), so the tests of `zodex dev up`
/// advance time instead of sleeping through a TTL. A release build never reads the variable
/// (and its configuration would refuse the setting).
fn test_clock_file() -> Option<PathBuf> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var_os("ZODEX_TEST_CLOCK_FILE").map(PathBuf::from)
}

/// The `[mcp]` table for `zodex-agent serve`: loopback on a free port, state, the key's hash
/// and OAuth's public file inside the installation directory.
fn mcp_table(dir: &Path) -> McpConfig {
    let port = zodex_store_pg::temp::free_port().unwrap_or(8080);
    McpConfig {
        listen: Some(format!("127.0.0.1:{port}")),
        state_dir: Some(dir.join("agent")),
        key_hash_file: Some(dir.join("mcp-key.sha256")),
        // OAuth beside the key URL: the publisher is the authorization server for this
        // loopback endpoint and publishes its public half here.
        public_url: Some(format!("http://127.0.0.1:{port}/mcp")),
        oauth_file: Some(dir.join("mcp-oauth.json")),
        ..McpConfig::default()
    }
}

/// `zodex dev up`; `postgres`: keep the state in a private PostgreSQL server (implied when the
/// installation already has one).
pub fn up(dir: &Path, registry: &Registry, on_postgres: bool) -> Result<DevInstall, DevError> {
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(io(format!("cannot resolve {}", dir.display())))?;
    // `run` holds the sockets: zodex-prd refuses a socket directory others can write to,
    // whatever the umask; and a state directory open to anyone but the publisher.
    for (sub, mode) in [("run", 0o755), ("logs", 0o755), ("state", 0o700)] {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(dir.join(sub))
            .map_err(io(format!("cannot create {}/{sub}", dir.display())))?;
    }
    let (config_path, env_file, log, pid_file) = layout(&dir);
    let recorded = postgres::recorded(&dir).is_some();
    if on_postgres && !recorded && config_path.exists() {
        return Err(DevError::Postgres(format!(
            "{dir} keeps its state in SQLite already: to run on PostgreSQL, use another --dir \
             (or `zodex dev down --dir {dir}` and remove it first)",
            dir = dir.display()
        )));
    }
    let (devhub, devhub_pid) = start_devhub(&dir)?;
    let database = if on_postgres || recorded {
        Some(postgres::ensure(&dir, &sibling_binary("zodex-prd"))?)
    } else {
        None
    };
    if !config_path.exists() {
        let mut config = default_config(&dir);
        config.github = Some(dev_github_config(&dir, &devhub)?);
        config.store = database.as_ref().map(|db| zodex_config::StoreConfig {
            url: db.url.clone(),
            ..Default::default()
        });
        config.test_clock_file = test_clock_file();
        write_config(
            &config_path,
            "a local installation on embedded defaults",
            &config,
        )?;
    }
    let config = Config::load(&config_path)?;
    let gitconfig = dir.join("agent.gitconfig");
    std::fs::write(&gitconfig, agent_gitconfig(&devhub.git_url))
        .map_err(io("cannot write agent.gitconfig"))?;
    let heading = format!("the `zodex dev up` installation in {}", dir.display());
    write_env(&env_file, &heading, &config_path, &gitconfig)?;

    let (pid, started) = match running_pid(&pid_file) {
        Some(pid) => (pid, false),
        None => (spawn_prd("serve", &config_path, &log, &pid_file)?, true),
    };
    let sprite = SpriteEntry {
        name: DEV_SPRITE.to_string(),
        admin_command: local_admin_command(Some(&config_path)),
        worker: None,
        fleet: None,
    };
    wait_ready(&sprite, &log, Duration::from_secs(10))?;
    let (mcp_url, agent_pid) = mcp::start_mcp(
        &mcp::McpFiles::of_sprite(&dir),
        &config_path,
        mcp::key_through(&sprite),
    )?;
    registry.upsert(sprite)?;
    Ok(DevInstall {
        dir: dir.clone(),
        config: config_path,
        env_file,
        sprite: DEV_SPRITE.to_string(),
        admin_socket: config.admin_socket,
        agent_socket: config.agent_socket,
        log,
        publisher_pid: pid,
        mcp_url,
        agent_pid,
        devhub_api_url: devhub.api_url,
        devhub_git_url: devhub.git_url,
        devhub_pid,
        started,
        store: if config.store.is_some() {
            "postgres"
        } else {
            "sqlite"
        },
        store_url: config.store.map(|s| s.url),
        postgres_dir: database.map(|db| db.cluster_dir),
    })
}

/// Writes `config` to `path` under the dev header, saying what it is (`about`).
fn write_config(path: &Path, about: &str, config: &Config) -> Result<(), DevError> {
    let text = format!(
        "{}: {about}. Edit freely.\n{}",
        zodex_config::DEV_HEADER,
        config.to_toml()
    );
    std::fs::write(path, text).map_err(io(format!("cannot write {}", path.display())))
}

/// Writes an agent side's `env.sh` (`source` it): its configuration, the binaries on `PATH`,
/// and git set up by `gitconfig` (`https://github.com/` reaches the local GitHub; pushes go
/// through git-remote-zodex).
fn write_env(path: &Path, heading: &str, config: &Path, gitconfig: &Path) -> Result<(), DevError> {
    let bin_dir = sibling_binary("zodex-prd")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let env = format!(
        "# Agent-side environment of {heading}.\n\
         export ZODEX_CONFIG='{config}'\n\
         export PATH='{bin}':\"$PATH\"\n\
         # git: https://github.com/ reaches the local GitHub; pushes go through git-remote-zodex.\n\
         export GIT_CONFIG_GLOBAL='{gitconfig}'\n\
         export GIT_TERMINAL_PROMPT=0\n",
        config = config.display(),
        bin = bin_dir.display(),
        gitconfig = gitconfig.display(),
    );
    std::fs::write(path, env).map_err(io(format!("cannot write {}", path.display())))
}

/// Starts `zodex-prd COMMAND --config CONFIG` in the background, logging to `log`, and records
/// its pid: in its own process group, so a Ctrl-C in this terminal does not stop it.
fn spawn_prd(command: &str, config: &Path, log: &Path, pid_file: &Path) -> Result<i32, DevError> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io(format!("cannot open {}", log.display())))?;
    let child = Command::new(sibling_binary("zodex-prd"))
        .args([command, "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(io("cannot open the log"))?)
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .map_err(io("cannot start zodex-prd"))?;
    let pid = child.id() as i32;
    std::fs::write(pid_file, format!("{pid}\n")).map_err(io("cannot write the pid file"))?;
    Ok(pid)
}

/// The publisher's `[github]` table for the local GitHub: its URLs and the two seeded Apps.
fn dev_github_config(
    dir: &Path,
    devhub: &zodex_devhub::RunInfo,
) -> Result<zodex_config::GithubConfig, DevError> {
    use zodex_config::{GithubApp, GithubConfig};
    let record: serde_json::Value = std::fs::read_to_string(dir.join("devhub-seed.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let app_id = |key: &str| record["seed"][key].as_u64();
    let (Some(reader), Some(writer)) = (app_id("reader_app_id"), app_id("writer_app_id")) else {
        return Err(DevError::Io {
            context: "devhub-seed.json lacks the App ids; remove the installation directory and run `zodex dev up` again".into(),
            source: std::io::Error::other("incomplete seed record"),
        });
    };
    Ok(GithubConfig {
        api_url: devhub.api_url.trim_end_matches('/').to_string(),
        git_url: devhub.git_url.trim_end_matches('/').to_string(),
        reader: GithubApp {
            app_id: reader,
            private_key_file: dir.join("keys/reader.pem"),
        },
        writer: GithubApp {
            app_id: writer,
            private_key_file: dir.join("keys/writer.pem"),
        },
    })
}

/// The agent side's git configuration: ordinary GitHub URLs fetch from the local GitHub with
/// the credential helper, and pushes to them go through `git-remote-zodex`.
fn agent_gitconfig(devhub_git_url: &str) -> String {
    let base = devhub_git_url.trim_end_matches('/');
    format!(
        "# Written by `zodex dev up`: the agent side's git configuration.\n\
         [user]\n\tname = Zodex Dev Agent\n\temail = agent@zodex.invalid\n\
         [url \"{base}/\"]\n\tinsteadOf = https://github.com/\n\
         [url \"zodex::https://github.com/\"]\n\tpushInsteadOf = https://github.com/\n\
         [credential \"{base}\"]\n\thelper =\n\thelper = !git-credential-zodex\n\tuseHttpPath = true\n\
         [init]\n\tdefaultBranch = main\n"
    )
}

/// Starts the local GitHub (devhub) with two fresh App key pairs and the demo repositories,
/// unless it runs already. Ports are chosen once and kept, so URLs stay valid across restarts.
fn start_devhub(dir: &Path) -> Result<(zodex_devhub::RunInfo, i32), DevError> {
    use zodex_devhub::{DevHub, RunInfo, keys};
    let devhub_dir = dir.join("devhub");
    let pid_file = dir.join("run/devhub.pid");
    let hub_err = |context: &str| {
        let context = context.to_string();
        move |e: zodex_devhub::DevHubError| DevError::Io {
            context,
            source: std::io::Error::other(e.to_string()),
        }
    };
    if let Some(pid) = running_pid(&pid_file)
        && let Ok(info) = RunInfo::load(&devhub_dir)
    {
        return Ok((info, pid));
    }
    let key_dir = dir.join("keys");
    let seeded = dir.join("devhub-seed.json");
    if !seeded.exists() {
        let reader =
            keys::generate_key_pair().map_err(hub_err("cannot make the reader App key"))?;
        let writer =
            keys::generate_key_pair().map_err(hub_err("cannot make the writer App key"))?;
        reader
            .write(&key_dir, "reader")
            .map_err(hub_err("cannot write the reader App key"))?;
        writer
            .write(&key_dir, "writer")
            .map_err(hub_err("cannot write the writer App key"))?;
        let seed = DevHub::seed_demo(&devhub_dir, &reader.public_pem, &writer.public_pem)
            .map_err(hub_err("cannot seed the demo repositories"))?;
        // Port 0: the devhub binds free ports itself (no probe-release-rebind race); the ports it
        // got are recorded once it runs, so later starts keep the same URLs.
        let record = serde_json::json!({ "seed": seed, "api_port": 0, "git_port": 0 });
        std::fs::write(&seeded, record.to_string()).map_err(io("cannot write devhub-seed.json"))?;
    }
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&seeded).map_err(io("cannot read devhub-seed.json"))?,
    )
    .map_err(|e| DevError::Io {
        context: "devhub-seed.json is damaged; remove the installation directory".into(),
        source: std::io::Error::other(e),
    })?;
    let port = |key: &str| record[key].as_u64().unwrap_or(0).to_string();
    let log = dir.join("logs/devhub.log");
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(io(format!("cannot open {}", log.display())))?;
    let _ = std::fs::remove_file(devhub_dir.join("run.json"));
    let child = Command::new(sibling_binary("zodex"))
        .args(["dev", "devhub", "--dir"])
        .arg(&devhub_dir)
        .args([
            "--api-port",
            &port("api_port"),
            "--git-port",
            &port("git_port"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .map_err(io("cannot start devhub"))?;
    let pid = child.id() as i32;
    std::fs::write(&pid_file, format!("{pid}\n")).map_err(io("cannot write the pid file"))?;
    let start = Instant::now();
    loop {
        if let Ok(info) = RunInfo::load(&devhub_dir) {
            let api = info
                .api_url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string();
            if std::net::TcpStream::connect(&api).is_ok() {
                record_ports(&seeded, &record, &info)?;
                return Ok((info, pid));
            }
        }
        if start.elapsed() > Duration::from_secs(10) {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(DevError::NotReady { log, tail });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Keeps the ports a first start bound (recorded as 0) in `devhub-seed.json`.
fn record_ports(
    seeded: &Path,
    record: &serde_json::Value,
    info: &zodex_devhub::RunInfo,
) -> Result<(), DevError> {
    if record["api_port"].as_u64().unwrap_or(0) != 0
        && record["git_port"].as_u64().unwrap_or(0) != 0
    {
        return Ok(());
    }
    let port_of = |url: &str| {
        url.trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.split('/').next())
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(0)
    };
    let mut record = record.clone();
    record["api_port"] = port_of(&info.api_url).into();
    record["git_port"] = port_of(&info.git_url).into();
    std::fs::write(seeded, record.to_string()).map_err(io("cannot write devhub-seed.json"))
}

/// What `zodex dev down` stopped.
#[derive(Debug, Clone, Serialize)]
pub struct DevDown {
    pub dir: PathBuf,
    pub stopped_pids: Vec<i32>,
    /// The installation's PostgreSQL server was running and is stopped (its data is kept).
    pub stopped_postgres: bool,
}

pub fn down(dir: &Path, registry: &Registry) -> Result<DevDown, DevError> {
    let (config_path, _, _, pid_file) = layout(dir);
    let mut stopped = Vec::new();
    for pid_file in [
        dir.join("run/zodex-agent.pid"),
        dir.join("run/devhub.pid"),
        pid_file,
    ] {
        if let Some(pid) = running_pid(&pid_file) {
            stop(pid);
            stopped.push(pid);
        }
        let _ = std::fs::remove_file(&pid_file);
    }
    // The publisher is gone: its database may go too.
    let stopped_postgres = postgres::stop(dir)?;
    // Forget the `dev` sprite only if it is this installation's.
    let config_text = config_path
        .canonicalize()
        .unwrap_or(config_path)
        .display()
        .to_string();
    if let Ok(entry) = registry.choose(Some(DEV_SPRITE))
        && entry.admin_command.contains(&config_text)
    {
        registry.remove(DEV_SPRITE)?;
    }
    Ok(DevDown {
        dir: dir.to_path_buf(),
        stopped_pids: stopped,
        stopped_postgres,
    })
}

/// Runs the local GitHub (devhub) in the foreground until it is stopped: what `zodex dev up`
/// starts in the background, as `zodex dev devhub`.
pub fn serve_devhub(dir: PathBuf, api_port: u16, git_port: u16) -> Result<(), DevError> {
    let config = zodex_devhub::DevHubConfig::new(dir).with_ports(api_port, git_port);
    let runtime = tokio::runtime::Runtime::new().map_err(DevError::Runtime)?;
    Ok(runtime.block_on(zodex_devhub::serve(config))?)
}
