//! `zodex dev up --postgres`: the installation's state in a private PostgreSQL server, started
//! from the machine's own install (`initdb` and `pg_ctl`, through `zodex_store_pg::temp`) in
//! the installation directory. No system service, port or shared socket directory is touched:
//! the server listens on a Unix socket of its own and nothing else.
//!
//! Where it lives is recorded in `DIR/postgres.json`, so a second `dev up` (with or without the
//! flag) reuses the cluster and its database, and `dev down` stops it:
//! - the cluster (`data/`, `server.log`) in `DIR/postgres`, unless the server's user cannot
//!   reach it (as root the server runs as `postgres`, which may not traverse `DIR`'s parents):
//!   then in a fresh directory under `/tmp`;
//! - the socket beside it, unless its path would pass the 107 bytes a Unix socket allows: then
//!   in a fresh short directory under `/tmp`.
//!
//! The database is prepared by `zodex-prd store init` as the cluster's owner (the schema and the
//! `zodex_publisher` role), and the publisher connects as `zodex_publisher`: the same two roles
//! as a real deployment. The socket trusts local users, so no password is involved.

use super::{DevError, io};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use zodex_store_pg::temp::{
    PatroniCluster, PatroniOptions, TempError, TempOptions, TempServer, server_user,
};

const RECORD: &str = "postgres.json";
/// The database the installation's state is in.
const DATABASE: &str = "zodex";
/// The role the publisher connects as (what `zodex-prd store init` creates by default).
const PUBLISHER_ROLE: &str = "zodex_publisher";
/// The longest path a Unix socket may have.
const SOCKET_PATH_MAX: usize = 107;

/// Where the installation's PostgreSQL is, as recorded in `DIR/postgres.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DevPostgres {
    /// The cluster: `data/` and `server.log`.
    pub cluster_dir: PathBuf,
    /// The directory of the server's Unix socket.
    pub socket_dir: PathBuf,
    /// The URL the publisher connects with (its role, no password).
    pub url: String,
    /// A Patroni cluster (`dev fleet up --ha`) in `cluster_dir`, not one server.
    #[serde(default)]
    pub ha: bool,
}

/// The installation's PostgreSQL, when it has one.
pub fn recorded(dir: &Path) -> Option<DevPostgres> {
    let text = std::fs::read_to_string(dir.join(RECORD)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Starts the installation's server (creating the cluster and the database the first time,
/// taking over a running one) and brings the database up to date with `zodex-prd store init`.
pub fn ensure(dir: &Path, zodex_prd: &Path) -> Result<DevPostgres, DevError> {
    let previous = recorded(dir);
    let (cluster_dir, socket_dir) = match &previous {
        Some(record) => (record.cluster_dir.clone(), record.socket_dir.clone()),
        None => places(dir)?,
    };
    let server =
        TempServer::start_with_socket(&cluster_dir, Some(&socket_dir), TempOptions::default())
            .map_err(failed)?;
    let record = DevPostgres {
        cluster_dir: server.dir().to_path_buf(),
        socket_dir: server.socket_dir().to_path_buf(),
        url: server.url_as(PUBLISHER_ROLE, DATABASE),
        ha: false,
    };
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    std::fs::write(dir.join(RECORD), text).map_err(io(format!("cannot write {RECORD}")))?;
    // Every time: a cluster under /tmp may have gone with a reboot, and been made afresh.
    match server.create_database(DATABASE) {
        Ok(()) => {}
        Err(e) if e.to_string().contains("already exists") => {}
        Err(e) => return Err(failed(e)),
    }
    // Every time: it is idempotent, and a newer zodex-prd's schema needs the owner.
    store_init(zodex_prd, &server.url(DATABASE))?;
    server.keep_running();
    Ok(record)
}

/// `dev fleet up --ha`: the installation's state in a Patroni cluster (two PostgreSQL nodes,
/// etcd, synchronous mode) on loopback ports, started again as it was when it exists; the
/// publisher is given every node (`target_session_attrs=read-write`).
pub fn ensure_ha(dir: &Path, zodex_prd: &Path) -> Result<DevPostgres, DevError> {
    let cluster_dir = match recorded(dir) {
        Some(record) if record.ha => record.cluster_dir,
        Some(_) => {
            return Err(DevError::Postgres(format!(
                "{} already keeps its state in one PostgreSQL server; `zodex dev fleet up` \
                 without --ha uses it, or choose another --dir for a cluster",
                dir.display()
            )));
        }
        None => ha_place(dir)?,
    };
    let cluster = match PatroniCluster::attach(&cluster_dir) {
        Ok(running) if running.leader().is_some() => running,
        _ => {
            // Whatever is left of it (a node without its etcd, say) goes first.
            PatroniCluster::stop_dir(&cluster_dir);
            PatroniCluster::start(&cluster_dir, DATABASE, PatroniOptions::default())
                .map_err(failed)?
        }
    };
    let owner_url = cluster.url(DATABASE);
    let record = DevPostgres {
        cluster_dir: cluster.dir().to_path_buf(),
        socket_dir: cluster.dir().to_path_buf(),
        url: owner_url.replacen("://zodex@", &format!("://{PUBLISHER_ROLE}@"), 1),
        ha: true,
    };
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    std::fs::write(dir.join(RECORD), text).map_err(io(format!("cannot write {RECORD}")))?;
    store_init(zodex_prd, &owner_url)?;
    cluster.keep_running();
    Ok(record)
}

/// `zodex dev fleet failover`: the leader's machine is lost, Patroni promotes the standby,
/// the lost node rejoins as a standby.
pub fn failover(dir: &Path) -> Result<DevFailover, DevError> {
    let not_ha = || {
        DevError::Postgres(format!(
            "the fleet in {} runs on one PostgreSQL server: start it with `zodex dev fleet up --ha` to try a failover",
            dir.display()
        ))
    };
    let record = recorded(dir).filter(|r| r.ha).ok_or_else(not_ha)?;
    let mut cluster = PatroniCluster::attach(&record.cluster_dir).map_err(failed)?;
    let (old, new, took) = cluster
        .lose_leader(std::time::Duration::from_secs(60))
        .map_err(failed)?;
    Ok(DevFailover {
        lost: cluster.node_name(old).to_string(),
        promoted: cluster.node_name(new).to_string(),
        promoted_after_seconds: took.as_secs_f64(),
        patronictl: format!(
            "patronictl -c {} list",
            record.cluster_dir.join("node1.yml").display()
        ),
    })
}

/// What `zodex dev fleet failover` did.
#[derive(Debug, Clone, Serialize)]
pub struct DevFailover {
    /// The node whose machine was lost (it rejoins as a standby).
    pub lost: String,
    /// The standby Patroni promoted.
    pub promoted: String,
    /// From the kill to the new leader taking writes.
    pub promoted_after_seconds: f64,
    /// The command that shows the cluster's members.
    pub patronictl: String,
}

/// Stops the installation's server (`pg_ctl stop -m fast`), or its Patroni cluster, keeping
/// the data for the next `dev up`. True when one was running.
pub fn stop(dir: &Path) -> Result<bool, DevError> {
    match recorded(dir) {
        Some(record) if record.ha => Ok(PatroniCluster::stop_dir(&record.cluster_dir)),
        Some(record) => TempServer::stop_cluster(&record.cluster_dir).map_err(failed),
        None => Ok(false),
    }
}

/// Where a Patroni cluster lives: `DIR/patroni` when the server's user can reach it and its
/// sockets' paths fit, else a fresh short directory under `/tmp`.
fn ha_place(dir: &Path) -> Result<PathBuf, DevError> {
    let cluster = dir.join("patroni");
    let reachable_by_server = match server_user().map_err(failed)? {
        Some((uid, gid)) => reachable(dir, uid, gid),
        None => true,
    };
    // `.s.PGSQL.NNNNN` beside the data.
    let fits = cluster.as_os_str().len() + 16 <= SOCKET_PATH_MAX;
    if reachable_by_server && fits {
        std::fs::create_dir_all(&cluster)
            .map_err(io(format!("cannot create {}", cluster.display())))?;
        Ok(cluster)
    } else {
        fresh_tmp_dir("zdha")
    }
}

/// The cluster's and the socket's directories for a first start.
fn places(dir: &Path) -> Result<(PathBuf, PathBuf), DevError> {
    let mut cluster = dir.join("postgres");
    if let Some((uid, gid)) = server_user().map_err(failed)?
        && !reachable(dir, uid, gid)
    {
        cluster = fresh_tmp_dir("zodex-dev-pg")?;
    }
    let socket = cluster.join(".s.PGSQL.5432");
    let socket_dir = if socket.as_os_str().len() <= SOCKET_PATH_MAX {
        cluster.clone()
    } else {
        fresh_tmp_dir("zdpg")?
    };
    Ok((cluster, socket_dir))
}

/// Whether the user `uid` (group `gid`) may traverse every directory down to `dir`.
fn reachable(dir: &Path, uid: u32, gid: u32) -> bool {
    dir.ancestors().all(|d| {
        let Ok(meta) = std::fs::metadata(d) else {
            return false;
        };
        let mode = meta.mode();
        if meta.uid() == uid {
            mode & 0o100 != 0
        } else if meta.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        }
    })
}

/// A new directory `/tmp/PREFIX-XXXXXXXX`, not there before.
fn fresh_tmp_dir(prefix: &str) -> Result<PathBuf, DevError> {
    loop {
        let mut bytes = [0u8; 4];
        getrandom::fill(&mut bytes).map_err(|e| DevError::Postgres(e.to_string()))?;
        let path = PathBuf::from(format!("/tmp/{prefix}-{}", hex::encode(bytes)));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(format!("cannot create {}", path.display()))(e)),
        }
    }
}

/// `zodex-prd store init --url OWNER_URL`: the schema and the publisher's role.
fn store_init(zodex_prd: &Path, owner_url: &str) -> Result<(), DevError> {
    let output = Command::new(zodex_prd)
        .args(["store", "init", "--url", owner_url])
        .env_remove("ZODEX_STORE_PASSWORD")
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("cannot run {}", zodex_prd.display())))?;
    if output.status.success() {
        return Ok(());
    }
    Err(DevError::Postgres(format!(
        "`zodex-prd store init` on the dev PostgreSQL failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// The server's error, saying what to do.
fn failed(e: TempError) -> DevError {
    match e {
        TempError::Missing(what @ ("initdb" | "pg_ctl")) => DevError::Postgres(format!(
            "PostgreSQL is not installed ({what} not found): apt-get install postgresql, or run \
             `zodex dev up` without --postgres"
        )),
        TempError::MissingPackage { name, package } => DevError::Postgres(format!(
            "{name} is not installed: apt-get install {package}, or run `zodex dev fleet up` \
             without --ha"
        )),
        other => DevError::Postgres(format!("the dev PostgreSQL server: {other}")),
    }
}
