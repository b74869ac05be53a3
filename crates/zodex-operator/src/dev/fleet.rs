//! `zodex dev fleet up|down`: a whole fleet on this machine, as the current user, in one
//! directory: the local GitHub, a private PostgreSQL, the fleet's CA, replicas of the service
//! on loopback ports (each a `zodex-prd serve` with `[fleet] listen`, all on the one
//! database), the operator enrolled (`$DIR/operator`, registered as the fleet `dev-fleet`, so
//! `zodex fleet …` works at once) and sprites, each a directory with its own key, certificate,
//! `zodex.toml`, `env.sh` and a running `zodex-prd relay`. A second `up` reuses what exists.

use super::process::{log_len, running_pid, said_address_in_use, stop_all, wait_ready_while_alive};
use super::{DevError, io};
use crate::registry::{Registry, SpriteEntry, local_admin_command};
use crate::sibling_binary;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use zodex_config::{Config, FleetConfig, RelayConfig, StoreConfig};
use zodex_protocol::AdminRequest;

/// The fleet's name (its trust domain) and its registry entry.
pub const DEV_FLEET: &str = "dev-fleet";
/// The operator `dev fleet up` enrols.
const OPERATOR: &str = "dev";

/// What `zodex dev fleet up` started.
#[derive(Debug, Clone, Serialize)]
pub struct DevFleet {
    pub dir: PathBuf,
    pub fleet: String,
    pub replicas: Vec<ReplicaInfo>,
    pub sprites: Vec<SpriteInfo>,
    /// The operator's key, certificate and the fleet's CA (the key is a secret, 0600).
    pub operator_dir: PathBuf,
    pub operator_key_file: PathBuf,
    pub devhub_api_url: String,
    pub devhub_git_url: String,
    pub devhub_pid: i32,
    pub store_url: String,
    /// The store is a Patroni cluster (`--ha`).
    pub store_ha: bool,
}

/// What `zodex dev fleet up` starts.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub replicas: usize,
    pub sprites: usize,
    /// The store in a Patroni cluster, not one server.
    pub ha: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplicaInfo {
    pub name: String,
    pub url: String,
    /// Its Prometheus metrics (`/metrics`; `/livez`, `/readyz` beside), on loopback.
    pub metrics_url: Option<String>,
    pub pid: i32,
    pub config: PathBuf,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct SpriteInfo {
    pub name: String,
    /// `source` it for the sprite's agent side (its config, PATH, git).
    pub env_file: PathBuf,
    pub agent_socket: PathBuf,
    pub relay_pid: i32,
    pub log: PathBuf,
    /// Its MCP endpoint's connector URL (with its key; OAuth works on it too).
    pub mcp_url: String,
    /// `zodex-agent serve` for it.
    pub agent_pid: i32,
}

/// The default directory: `$ZODEX_HOME/dev-fleet`.
pub fn default_dir() -> PathBuf {
    crate::zodex_home().join("dev-fleet")
}

fn fleet_err(context: &str) -> impl FnOnce(String) -> DevError + '_ {
    move |e| DevError::Fleet(format!("{context}: {e}"))
}

/// `zodex dev fleet up`.
pub fn up(dir: &Path, registry: &Registry, shape: Shape) -> Result<DevFleet, DevError> {
    let Shape {
        replicas,
        sprites,
        ha,
    } = shape;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(io(format!("cannot resolve {}", dir.display())))?;
    for (sub, mode) in [("run", 0o755), ("logs", 0o755)] {
        private_dir(&dir.join(sub), mode)?;
    }
    let (devhub, devhub_pid) = super::start_devhub(&dir)?;
    let database = if ha {
        super::postgres::ensure_ha(&dir, &sibling_binary("zodex-prd"))?
    } else {
        super::postgres::ensure(&dir, &sibling_binary("zodex-prd"))?
    };
    let ca_dir = dir.join("ca");
    if !ca_dir.join("ca.pem").exists() {
        let made = Command::new(sibling_binary("zodex-prd"))
            .args(["fleet", "init", "--name", DEV_FLEET, "--dir"])
            .arg(&ca_dir)
            .output()
            .map_err(io("cannot run zodex-prd fleet init"))?;
        if !made.status.success() {
            return Err(DevError::Fleet(
                String::from_utf8_lossy(&made.stderr).into(),
            ));
        }
    }
    let github = super::dev_github_config(&dir, &devhub)?;
    let mut started = Vec::new();
    for n in 1..=replicas.max(1) {
        started.push(start_replica(&dir, n, &github, &database.url)?);
    }
    let services: Vec<String> = started.iter().map(|r| r.url.clone()).collect();

    // The operator, enrolled through the first replica's admin socket (this machine is the
    // service's host), then the fleet reached over mutual TLS.
    let operator_dir = dir.join("operator");
    let fleet_entry = if operator_dir.join("cert.pem").exists() {
        let entry = fleet_entry(&services, &operator_dir);
        registry.upsert(entry.clone())?;
        entry
    } else {
        let via = SpriteEntry {
            name: format!("{DEV_FLEET}-service"),
            admin_command: local_admin_command(Some(&started[0].config)),
            worker: None,
            fleet: None,
        };
        crate::fleet::add_operator(
            registry,
            &via,
            (DEV_FLEET, OPERATOR),
            &services,
            &operator_dir,
        )
        .map_err(|e| fleet_err("enrolling the operator")(e.to_string()))?
    };

    let gitconfig = dir.join("agent.gitconfig");
    std::fs::write(&gitconfig, super::agent_gitconfig(&devhub.git_url))
        .map_err(io("cannot write agent.gitconfig"))?;
    let mut sprite_infos = Vec::new();
    for n in 1..=sprites {
        sprite_infos.push(start_sprite(
            &dir,
            n,
            &fleet_entry,
            &services,
            &devhub.git_url,
        )?);
    }
    Ok(DevFleet {
        dir: dir.clone(),
        fleet: DEV_FLEET.into(),
        replicas: started,
        sprites: sprite_infos,
        operator_key_file: operator_dir.join("key.pem"),
        operator_dir,
        devhub_api_url: devhub.api_url,
        devhub_git_url: devhub.git_url,
        devhub_pid,
        store_url: database.url,
        store_ha: database.ha,
    })
}

fn private_dir(path: &Path, mode: u32) -> Result<(), DevError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(io(format!("cannot create {}", path.display())))
}

fn fleet_entry(services: &[String], operator_dir: &Path) -> SpriteEntry {
    SpriteEntry {
        name: DEV_FLEET.into(),
        admin_command: Vec::new(),
        worker: None,
        fleet: Some(crate::registry::FleetReach {
            services: services.to_vec(),
            dir: operator_dir.to_path_buf(),
        }),
    }
}

/// Replica `n`: its configuration (written once: its port is kept across restarts), its
/// `zodex-prd serve`, ready when it answers on its admin socket. The port is free when it is
/// chosen, but the replica binds it later: if something took it meanwhile (the replica exits
/// saying "address in use"), the configuration is written again with another port and the
/// replica started again, so a race on ports cannot fail `zodex dev fleet up`.
fn start_replica(
    dir: &Path,
    n: usize,
    github: &zodex_config::GithubConfig,
    store_url: &str,
) -> Result<ReplicaInfo, DevError> {
    let name = format!("replica-{n}");
    let home = dir.join(&name);
    private_dir(&home.join("run"), 0o755)?;
    private_dir(&home.join("state"), 0o700)?;
    let config_path = home.join("zodex.toml");
    let log = dir.join(format!("logs/{name}.log"));
    let pid_file = dir.join(format!("run/{name}.pid"));
    let entry = SpriteEntry {
        name: name.clone(),
        admin_command: local_admin_command(Some(&config_path)),
        worker: None,
        fleet: None,
    };
    for attempt in 1..=PORT_TRIES {
        if !config_path.exists() {
            write_replica_config(&config_path, dir, n, github, store_url)?;
        }
        let config = Config::load(&config_path)?;
        let listen = config
            .fleet
            .as_ref()
            .and_then(|f| f.listen)
            .ok_or_else(|| {
                DevError::Fleet(format!("{} has no [fleet] listen", config_path.display()))
            })?;
        let (pid, started) = match running_pid(&pid_file) {
            Some(pid) => (pid, None),
            None => {
                let from = log_len(&log);
                let pid = super::spawn_prd("serve", &config_path, &log, &pid_file)?;
                (pid, Some(from))
            }
        };
        match wait_ready_while_alive(&entry, &log, Duration::from_secs(30), pid) {
            Ok(()) => {
                return Ok(ReplicaInfo {
                    name,
                    url: format!("https://{listen}"),
                    metrics_url: config
                        .metrics
                        .as_ref()
                        .map(|m| format!("http://{}/metrics", m.listen)),
                    pid,
                    config: config_path,
                    log,
                });
            }
            Err(e) => {
                let port_taken = started.is_some_and(|from| said_address_in_use(&log, from));
                if !port_taken || attempt == PORT_TRIES {
                    return Err(e);
                }
                // Another port next time.
                std::fs::remove_file(&config_path)
                    .map_err(io(format!("cannot remove {}", config_path.display())))?;
            }
        }
    }
    unreachable!("the last try returns")
}

/// How many ports a replica is given before `fleet up` gives up.
const PORT_TRIES: usize = 3;

/// Replica `n`'s `zodex.toml`, on a port free now.
fn write_replica_config(
    config_path: &Path,
    dir: &Path,
    n: usize,
    github: &zodex_config::GithubConfig,
    store_url: &str,
) -> Result<(), DevError> {
    let home = config_path.parent().unwrap_or(dir);
    let port = zodex_store_pg::temp::free_port().map_err(io("cannot find a free port"))?;
    let metrics_port = zodex_store_pg::temp::free_port().map_err(io("cannot find a free port"))?;
    let config = Config {
        metrics: Some(zodex_config::MetricsConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], metrics_port)),
        }),
        github: Some(github.clone()),
        store: Some(StoreConfig {
            url: store_url.to_string(),
            ..Default::default()
        }),
        fleet: Some(FleetConfig {
            name: DEV_FLEET.into(),
            ca_dir: dir.join("ca"),
            member_ttl_hours: None,
            listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
            replica: Some(format!("replica-{n}")),
            hosts: Vec::new(),
        }),
        test_clock_file: super::test_clock_file(),
        ..super::base_config(home)
    };
    super::write_config(
        config_path,
        &format!("replica {n} of a local fleet's service"),
        &config,
    )
}

/// The label a local fleet's sprite `n` carries: `team=a` and `team=b` in turn, so label
/// grants (`zodex fleet grant-push --for-label team=a`) can be tried at once.
pub fn dev_sprite_label(n: usize) -> String {
    format!("team={}", if n % 2 == 1 { "a" } else { "b" })
}

/// Sprite `n`: its key made in its own directory, enrolled by the operator over mutual TLS
/// with its label ([`dev_sprite_label`]), its `zodex.toml` (`[relay]` naming every replica)
/// and `env.sh`, and its relay running.
fn start_sprite(
    dir: &Path,
    n: usize,
    fleet_entry: &SpriteEntry,
    services: &[String],
    git_url: &str,
) -> Result<SpriteInfo, DevError> {
    let name = format!("sprite-{n}");
    let home = dir.join("sprites").join(&name);
    private_dir(&home.join("run"), 0o755)?;
    private_dir(&home.join("state"), 0o700)?;
    let files = home.join("fleet");
    if !files.join("cert.pem").exists() {
        let labels = vec![dev_sprite_label(n)];
        crate::fleet::enroll_here(fleet_entry, (DEV_FLEET, &name), labels, &files)
            .map_err(|e| fleet_err("enrolling a sprite")(e.to_string()))?;
    }
    let config_path = home.join("zodex.toml");
    // The MCP endpoint's address and files, kept across restarts (its public URL is set).
    let mcp = Config::load(&config_path)
        .ok()
        .and_then(|c| c.mcp)
        .unwrap_or_else(|| super::mcp_table(&home));
    let config = Config {
        mcp: Some(mcp),
        relay: Some(RelayConfig {
            services: services.to_vec(),
            dir: files,
            git_url: Some(git_url.trim_end_matches('/').to_string()),
        }),
        // A relay decides nothing: no targets.
        targets: Vec::new(),
        ..super::base_config(&home)
    };
    super::write_config(
        &config_path,
        &format!("sprite {n} of a local fleet (its relay)"),
        &config,
    )?;
    let env_file = home.join("env.sh");
    let heading = format!("{name} in the local fleet in {}", dir.display());
    super::write_env(
        &env_file,
        &heading,
        &config_path,
        &dir.join("agent.gitconfig"),
    )?;
    let log = dir.join(format!("logs/{name}.log"));
    let pid_file = dir.join(format!("run/{name}.pid"));
    let pid = match running_pid(&pid_file) {
        Some(pid) => pid,
        None => {
            let _ = std::fs::remove_file(&config.agent_socket);
            super::spawn_prd("relay", &config_path, &log, &pid_file)?
        }
    };
    let start = Instant::now();
    while !config.agent_socket.exists() {
        if start.elapsed() > Duration::from_secs(10) || running_pid(&pid_file).is_none() {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(DevError::NotReady { log, tail });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (mcp_url, agent_pid) = start_sprite_mcp(dir, &name, &config, &config_path, fleet_entry)?;
    Ok(SpriteInfo {
        name,
        env_file,
        agent_socket: config.agent_socket,
        relay_pid: pid,
        log,
        mcp_url,
        agent_pid,
    })
}

/// The sprite's MCP endpoint: its loopback URL made its public URL at the service (which is
/// then the authorization server of its OAuth, the relay publishing the public keys into its
/// `[mcp] oauth_file`), and `zodex-agent serve` started with a key URL beside OAuth, the key's
/// hash written into the sprite's own file (this machine is the sprite).
fn start_sprite_mcp(
    dir: &Path,
    name: &str,
    config: &Config,
    config_path: &Path,
    fleet_entry: &SpriteEntry,
) -> Result<(String, i32), DevError> {
    let mcp = config
        .mcp
        .as_ref()
        .expect("the sprite's [mcp] was set above");
    set_public_url(fleet_entry, name, mcp.public_url.clone())?;
    let hash_file = mcp.key_hash_file.clone().expect("mcp_table sets it");
    let files = super::mcp::McpFiles {
        pid_file: dir.join(format!("run/{name}-agent.pid")),
        url_file: dir.join("sprites").join(name).join("mcp-url"),
        log: dir.join(format!("logs/{name}-agent.log")),
    };
    let started = super::mcp::start_mcp(&files, config_path, |hash| {
        hash.write_file(&hash_file).map_err(|e| DevError::Io {
            context: format!("cannot write {}", hash_file.display()),
            source: std::io::Error::other(e.to_string()),
        })
    })?;
    // The start moves the port when the one chosen was taken: the service learns the new URL.
    let public_url = Config::load(config_path)?.mcp.and_then(|m| m.public_url);
    if public_url != mcp.public_url {
        set_public_url(fleet_entry, name, public_url)?;
    }
    Ok(started)
}

/// Makes `url` sprite `name`'s MCP public URL at the service.
fn set_public_url(
    fleet_entry: &SpriteEntry,
    name: &str,
    url: Option<String>,
) -> Result<(), DevError> {
    let request = AdminRequest::FleetMcpPublicUrl {
        sprite: name.to_string(),
        url,
        clear: false,
    };
    crate::transport::call(fleet_entry, &request)
        .map_err(crate::fleet::FleetOpError::from)
        .and_then(crate::fleet::answered)
        .map(drop)
        .map_err(|e| fleet_err("setting a sprite's MCP URL")(e.to_string()))
}

pub use super::postgres::DevFailover;

/// `zodex dev fleet failover`: the `--ha` store's leader lost, its standby promoted.
pub fn failover(dir: &Path) -> Result<DevFailover, DevError> {
    super::postgres::failover(dir)
}

/// What `zodex dev fleet down` stopped.
#[derive(Debug, Clone, Serialize)]
pub struct DevFleetDown {
    pub dir: PathBuf,
    pub stopped_pids: Vec<i32>,
    pub stopped_postgres: bool,
}

/// Stops the relays, the replicas, devhub and PostgreSQL (their files stay), and forgets the
/// fleet's registry entry when it is this installation's.
pub fn down(dir: &Path, registry: &Registry) -> Result<DevFleetDown, DevError> {
    let mut stopped = Vec::new();
    let pid_files: Vec<PathBuf> = std::fs::read_dir(dir.join("run"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pid"))
                .collect()
        })
        .unwrap_or_default();
    // Relays first, then replicas, then devhub: nothing is left talking to what went. Each
    // kind is stopped all at once.
    let kind = |p: &PathBuf| {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("sprite-") {
            0
        } else if name.starts_with("replica-") {
            1
        } else {
            2
        }
    };
    for wave in 0..3 {
        let files: Vec<&PathBuf> = pid_files.iter().filter(|p| kind(p) == wave).collect();
        let pids: Vec<i32> = files.iter().filter_map(|f| running_pid(f)).collect();
        stop_all(&pids);
        stopped.extend(pids);
        for file in files {
            let _ = std::fs::remove_file(file);
        }
    }
    let stopped_postgres = super::postgres::stop(dir)?;
    let operator_dir = dir
        .canonicalize()
        .unwrap_or(dir.to_path_buf())
        .join("operator");
    if let Ok(entry) = registry.choose(Some(DEV_FLEET))
        && entry.fleet.as_ref().is_some_and(|f| f.dir == operator_dir)
    {
        registry.remove(DEV_FLEET)?;
    }
    Ok(DevFleetDown {
        dir: dir.to_path_buf(),
        stopped_pids: stopped,
        stopped_postgres,
    })
}
