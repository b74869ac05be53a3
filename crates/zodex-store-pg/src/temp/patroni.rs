//! A PostgreSQL cluster under Patroni, with etcd: what a team runs in production, started
//! on loopback in a directory of the caller's (no system service). Each node is a Patroni
//! process managing its own PostgreSQL; etcd holds the leader key; with `synchronous` on,
//! Patroni keeps one standby synchronous (`synchronous_mode`), so a commit is acknowledged
//! only once two nodes have it, and only that standby may be promoted.
//!
//! Failover is Patroni's own: [`PatroniCluster::kill_node`] kills a node's Patroni and its
//! postmaster with SIGKILL (a machine lost); once the leader key's TTL runs out, the standby
//! takes it and promotes itself. The TTL is short (10 s; Patroni's default is 30) so a test or
//! a `zodex dev fleet up --ha` try sees it within seconds.
//!
//! Binaries: Debian's `patroni` and `etcd-server` packages, and the PostgreSQL server. Patroni
//! and PostgreSQL run as the server's user when this process is root (as [`TempServer`] does).

use super::{TempError, USER, find_bin, io, on_path, server_user};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use zodex_sql::Backend;

use crate::{PgSettings, PgStore};

/// The scope (cluster name) in etcd.
const SCOPE: &str = "zodex";
/// How long the leader key lives without its holder renewing it: the longest a lost leader
/// blocks a promotion.
const TTL_SECONDS: u32 = 10;
/// How long starting the cluster may take (etcd, the first node's initdb, the standbys'
/// base backups, the synchronous standby chosen).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// How the cluster replicates.
#[derive(Debug, Clone, Copy)]
pub struct PatroniOptions {
    /// PostgreSQL nodes (2 or 3).
    pub nodes: usize,
    /// Patroni's `synchronous_mode`: a commit waits for the synchronous standby. Off, a
    /// failover may lose commits the clients were told of (what the docs warn about).
    pub synchronous: bool,
}

impl Default for PatroniOptions {
    fn default() -> Self {
        Self {
            nodes: 2,
            synchronous: true,
        }
    }
}

/// Where a cluster's parts listen, kept in `DIR/cluster.json` so the same cluster can be
/// started again (its nodes keep their data and ports) or attached to by another process.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Layout {
    etcd_client: u16,
    etcd_peer: u16,
    /// Per node: its PostgreSQL port and its Patroni REST API port.
    nodes: Vec<(u16, u16)>,
    synchronous: bool,
}

const LAYOUT: &str = "cluster.json";

/// One PostgreSQL node and the Patroni process managing it.
struct Node {
    name: String,
    pg_port: u16,
    config: PathBuf,
    data: PathBuf,
    patroni: Option<Child>,
}

/// A running cluster: etcd and a Patroni per node. Stopped when dropped.
pub struct PatroniCluster {
    dir: PathBuf,
    etcd: Option<Child>,
    nodes: Vec<Node>,
    run_as: Option<(u32, u32)>,
    patroni_bin: PathBuf,
    options: PatroniOptions,
    /// Left running when dropped ([`keep_running`](Self::keep_running)).
    kept: bool,
}

impl PatroniCluster {
    /// Starts etcd and `options.nodes` Patroni nodes under `dir` (short: the sockets live
    /// there), waits for a leader (and a synchronous standby when asked), and creates `db`.
    /// A cluster made in `dir` before is started again as it was (`options` are then its own).
    pub fn start(dir: &Path, db: &str, options: PatroniOptions) -> Result<Self, TempError> {
        let patroni_bin = on_path("patroni").ok_or(TempError::MissingPackage {
            name: "patroni",
            package: "patroni",
        })?;
        let etcd_bin = on_path("etcd").ok_or(TempError::MissingPackage {
            name: "etcd",
            package: "etcd-server",
        })?;
        // The server's own bin directory (a `postgres` on PATH may be a link to it): Patroni
        // runs pg_controldata, pg_rewind and the rest from there.
        let postgres = find_bin("postgres")?;
        let bin_dir = postgres
            .canonicalize()
            .unwrap_or(postgres)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let dir = dir
            .canonicalize()
            .map_err(io(format!("cannot resolve {}", dir.display())))?;
        let run_as = server_user()?;
        hand_over(&dir, run_as)?;
        let port = || super::free_port().map_err(io("cannot find a free port"));
        let layout = match read_layout(&dir) {
            Some(layout) => layout,
            None => {
                let mut nodes = Vec::new();
                for _ in 0..options.nodes.max(1) {
                    nodes.push((port()?, port()?));
                }
                let layout = Layout {
                    etcd_client: port()?,
                    etcd_peer: port()?,
                    nodes,
                    synchronous: options.synchronous,
                };
                let text = serde_json::to_string_pretty(&layout).unwrap_or_default();
                std::fs::write(dir.join(LAYOUT), text)
                    .map_err(io(format!("cannot write {LAYOUT}")))?;
                layout
            }
        };
        let options = PatroniOptions {
            nodes: layout.nodes.len(),
            synchronous: layout.synchronous,
        };
        let (client, peer) = (layout.etcd_client, layout.etcd_peer);
        let etcd_dir = dir.join("etcd");
        let etcd_log = log_file(&dir.join("etcd.log"))?;
        let etcd = Command::new(&etcd_bin)
            .args(["--name", "e1", "--data-dir"])
            .arg(&etcd_dir)
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=e1=http://127.0.0.1:{peer}"))
            .stdout(Stdio::null())
            .stderr(etcd_log)
            // Its own process group: a terminal's Ctrl-C or hang-up is not the cluster's.
            .process_group(0)
            .spawn()
            .map_err(io(format!("cannot run {}", etcd_bin.display())))?;

        let mut cluster = Self::of_layout(&dir, &layout, patroni_bin, run_as);
        cluster.etcd = Some(etcd);
        for (node, &(_, rest_port)) in cluster.nodes.iter().zip(&layout.nodes) {
            let yaml = node_config(&dir, node, rest_port, client, &bin_dir, options);
            std::fs::write(&node.config, yaml)
                .map_err(io(format!("cannot write {}", node.config.display())))?;
        }
        hand_over(&dir, run_as)?;
        for i in 0..cluster.nodes.len() {
            cluster.start_node(i)?;
        }
        cluster.wait_ready(START_TIMEOUT)?;
        let leader = cluster
            .leader()
            .ok_or_else(|| cluster.failed("no leader"))?;
        let admin = cluster.connect(leader, "postgres")?;
        let found = admin.query(
            "SELECT COUNT(*) FROM pg_database WHERE datname = ?1",
            &[&db],
        )?;
        if found[0].get::<i64>(0)? == 0 {
            admin.batch(&format!("CREATE DATABASE \"{db}\""))?;
        }
        Ok(cluster)
    }

    /// The cluster running in `dir` (made by [`start`](Self::start), perhaps by another
    /// process), to ask and act on; dropping it stops nothing.
    pub fn attach(dir: &Path) -> Result<Self, TempError> {
        let layout = read_layout(dir).ok_or_else(|| TempError::Failed {
            what: "finding the cluster".into(),
            output: format!(
                "{} has no {LAYOUT}: no cluster was made there",
                dir.display()
            ),
        })?;
        let patroni_bin = on_path("patroni").ok_or(TempError::MissingPackage {
            name: "patroni",
            package: "patroni",
        })?;
        let mut cluster = Self::of_layout(dir, &layout, patroni_bin, server_user()?);
        cluster.kept = true;
        Ok(cluster)
    }

    fn of_layout(
        dir: &Path,
        layout: &Layout,
        patroni_bin: PathBuf,
        run_as: Option<(u32, u32)>,
    ) -> Self {
        let nodes = (1..=layout.nodes.len())
            .zip(&layout.nodes)
            .map(|(n, &(pg_port, _))| Node {
                name: format!("node{n}"),
                pg_port,
                config: dir.join(format!("node{n}.yml")),
                data: dir.join(format!("data{n}")),
                patroni: None,
            })
            .collect();
        PatroniCluster {
            dir: dir.to_path_buf(),
            etcd: None,
            nodes,
            run_as,
            patroni_bin,
            options: PatroniOptions {
                nodes: layout.nodes.len(),
                synchronous: layout.synchronous,
            },
            kept: false,
        }
    }

    /// The multi-host URL for `db` that reaches whichever node is the primary
    /// (`target_session_attrs=read-write`), as the cluster's owner.
    pub fn url(&self, db: &str) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.pg_port))
            .collect();
        format!(
            "postgres://{USER}@{}/{db}?target_session_attrs=read-write",
            hosts.join(",")
        )
    }

    /// One node's own URL for `db` (whatever its role).
    pub fn node_url(&self, node: usize, db: &str) -> String {
        format!(
            "postgres://{USER}@127.0.0.1:{}/{db}",
            self.nodes[node].pg_port
        )
    }

    /// The node that is the primary now (accepts writes), if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| self.role(i) == Some(Role::Primary))
    }

    /// Waits until a node other than `old` is the primary (and, in synchronous mode with a
    /// standby left, no commit can be acknowledged by one node alone); the new leader.
    pub fn wait_for_new_leader(&self, old: usize, within: Duration) -> Result<usize, TempError> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(leader) = self.leader().filter(|&l| l != old) {
                return Ok(leader);
            }
            if Instant::now() > deadline {
                return Err(self.failed("no standby was promoted"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The leader's machine is lost ([`kill_node`](Self::kill_node)), a standby is promoted
    /// by Patroni, and the lost node is started again to rejoin as a standby: what `zodex dev
    /// fleet failover` shows. The old leader, the new one, and how long the promotion took.
    pub fn lose_leader(&mut self, within: Duration) -> Result<(usize, usize, Duration), TempError> {
        let old = self
            .leader()
            .ok_or_else(|| self.failed("no node is the leader now"))?;
        let killed_at = Instant::now();
        self.kill_node(old)?;
        let new = self.wait_for_new_leader(old, within)?;
        let took = killed_at.elapsed();
        self.start_node(old)?;
        Ok((old, new, took))
    }

    /// Node `node`'s name (`node1`, …), as Patroni and its configuration file call it.
    pub fn node_name(&self, node: usize) -> &str {
        &self.nodes[node].name
    }

    /// Kills node `node`'s Patroni and its postmaster with SIGKILL: the machine is lost.
    pub fn kill_node(&mut self, node: usize) -> Result<(), TempError> {
        let postmaster = postmaster_pid(&self.nodes[node].data);
        match self.nodes[node].patroni.take() {
            Some(mut patroni) => {
                let _ = patroni.kill();
                let _ = patroni.wait();
            }
            // Started by another process: found by its configuration file.
            None => {
                for pid in pids_with_arg(&self.nodes[node].config) {
                    signal(pid, "KILL");
                }
            }
        }
        if let Some(pid) = postmaster {
            signal(pid, "KILL");
        }
        Ok(())
    }

    /// Starts node `node`'s Patroni again: it rejoins as a standby of the current leader.
    pub fn start_node(&mut self, node: usize) -> Result<(), TempError> {
        let n = &self.nodes[node];
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.out", n.name)))
            .map_err(io("cannot open a node's log"))?;
        let mut command = super::run_as(self.run_as, &self.patroni_bin);
        command
            .arg(&n.config)
            .env("HOME", &self.dir)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(io("cannot copy a file handle"))?)
            .stderr(out)
            .process_group(0);
        for var in ["PGDATA", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE"] {
            command.env_remove(var);
        }
        let child = command
            .spawn()
            .map_err(io(format!("cannot run {}", self.patroni_bin.display())))?;
        self.nodes[node].patroni = Some(child);
        Ok(())
    }

    /// The directory holding etcd, the nodes' data, configurations and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many nodes the cluster has.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Leaves the cluster running after this value is gone (`zodex dev fleet up --ha`);
    /// [`stop_dir`](Self::stop_dir) stops it later.
    pub fn keep_running(mut self) {
        self.kept = true;
    }

    /// Stops a cluster left running in `dir`: each node's Patroni (which stops its
    /// PostgreSQL), then etcd. True when anything was running.
    pub fn stop_dir(dir: &Path) -> bool {
        let mut stopped = false;
        let configs = std::fs::read_dir(dir).into_iter().flatten().flatten();
        for entry in configs {
            let path = entry.path();
            let is_node = path.extension().is_some_and(|e| e == "yml");
            if !is_node {
                continue;
            }
            for pid in pids_with_arg(&path) {
                signal(pid, "TERM");
                stopped = true;
            }
        }
        wait_gone(dir, Duration::from_secs(30));
        for pid in pids_with_arg(&dir.join("etcd")) {
            signal(pid, "TERM");
            stopped = true;
        }
        stopped
    }

    fn role(&self, node: usize) -> Option<Role> {
        let db = self.connect(node, "postgres").ok()?;
        let row = db.query("SELECT pg_is_in_recovery()", &[]).ok()?;
        let in_recovery: bool = row.first()?.get(0).ok()?;
        Some(if in_recovery {
            Role::Standby
        } else {
            Role::Primary
        })
    }

    /// A leader, and every other node streaming from it (synchronously when asked).
    fn wait_ready(&mut self, within: Duration) -> Result<(), TempError> {
        let deadline = Instant::now() + within;
        let wanted = self.nodes.len() as i64 - 1;
        let sql = if self.options.synchronous {
            "SELECT COUNT(*) FILTER (WHERE state = 'streaming'), \
                    COUNT(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication"
        } else {
            "SELECT COUNT(*) FILTER (WHERE state = 'streaming'), 1::bigint FROM pg_stat_replication"
        };
        loop {
            let ready = self.leader().is_some_and(|leader| {
                self.connect(leader, "postgres")
                    .and_then(|db| Ok(db.query(sql, &[])?))
                    .ok()
                    .and_then(|rows| {
                        let row = rows.first()?;
                        Some((row.get::<i64>(0).ok()?, row.get::<i64>(1).ok()?))
                    })
                    .is_some_and(|(streaming, sync)| streaming >= wanted && sync >= 1)
            });
            if ready {
                return Ok(());
            }
            let exited = self.nodes.iter_mut().any(|n| {
                n.patroni
                    .as_mut()
                    .is_some_and(|p| p.try_wait().ok().flatten().is_some())
            });
            if exited {
                return Err(self.failed("a Patroni node stopped while the cluster came up"));
            }
            if Instant::now() > deadline {
                return Err(self.failed("the cluster did not come up"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn connect(&self, node: usize, db: &str) -> Result<crate::PgBackend, TempError> {
        let mut settings = PgSettings::new(self.node_url(node, db));
        settings.pool_size = 1;
        settings.connect_timeout = Duration::from_secs(2);
        Ok(PgStore::connect(&settings)?.backend())
    }

    /// What to read when something did not come up: the tail of each node's log.
    fn failed(&self, what: &str) -> TempError {
        let mut output = String::new();
        for node in &self.nodes {
            let out = self.dir.join(format!("{}.out", node.name));
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(8).collect();
            output.push_str(&format!("\n{} says:\n", out.display()));
            for line in tail.into_iter().rev() {
                output.push_str(line);
                output.push('\n');
            }
        }
        TempError::Failed {
            what: what.into(),
            output,
        }
    }
}

impl Drop for PatroniCluster {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        for node in &mut self.nodes {
            if let Some(patroni) = &node.patroni {
                signal(patroni.id() as i32, "TERM");
            }
        }
        for node in &mut self.nodes {
            if let Some(mut patroni) = node.patroni.take() {
                let _ = patroni.wait();
            }
            // A postmaster left by a killed Patroni.
            if let Some(pid) = postmaster_pid(&node.data) {
                signal(pid, "QUIT");
            }
        }
        if let Some(mut etcd) = self.etcd.take() {
            let _ = etcd.kill();
            let _ = etcd.wait();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Primary,
    Standby,
}

/// One node's Patroni configuration.
fn node_config(
    dir: &Path,
    node: &Node,
    rest_port: u16,
    etcd_port: u16,
    bin_dir: &Path,
    options: PatroniOptions,
) -> String {
    let (name, pg_port) = (&node.name, node.pg_port);
    let (dir, data, bin) = (dir.display(), node.data.display(), bin_dir.display());
    format!(
        r#"scope: {SCOPE}
name: {name}
restapi:
  listen: 127.0.0.1:{rest_port}
  connect_address: 127.0.0.1:{rest_port}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: {TTL_SECONDS}
    loop_wait: 1
    retry_timeout: 3
    synchronous_mode: {synchronous}
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 200
        wal_log_hints: "on"
  initdb:
    - encoding: UTF8
    - no-locale
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg_port}
  connect_address: 127.0.0.1:{pg_port}
  data_dir: {data}
  pgpass: {dir}/{name}.pgpass
  bin_dir: {bin}
  authentication:
    superuser: {{username: {USER}, password: unused-trust-on-loopback}}
    replication: {{username: replicator, password: unused-trust-on-loopback}}
    rewind: {{username: {USER}, password: unused-trust-on-loopback}}
  parameters:
    unix_socket_directories: {dir}
"#,
        synchronous = options.synchronous,
    )
}

fn read_layout(dir: &Path) -> Option<Layout> {
    let text = std::fs::read_to_string(dir.join(LAYOUT)).ok()?;
    serde_json::from_str(&text).ok()
}

fn log_file(path: &Path) -> Result<std::fs::File, TempError> {
    std::fs::File::create(path).map_err(io(format!("cannot create {}", path.display())))
}

fn postmaster_pid(data: &Path) -> Option<i32> {
    std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

fn signal(pid: i32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Processes whose command line holds `arg` (from /proc).
fn pids_with_arg(arg: &Path) -> Vec<i32> {
    let arg = arg.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            cmdline
                .split(|b| *b == 0)
                .any(|part| part == arg)
                .then_some(pid)
        })
        .collect()
}

/// Waits until no node's Patroni or postmaster runs in `dir`.
fn wait_gone(dir: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    let running = || {
        entries.iter().any(|p| {
            let postmaster = p.join("PG_VERSION").exists() && p.join("postmaster.pid").exists();
            let patroni = p.extension().is_some_and(|e| e == "yml") && !pids_with_arg(p).is_empty();
            postmaster || patroni
        })
    };
    while Instant::now() < deadline && running() {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The directory and what is in it (not etcd's data: etcd runs as this process's user) are
/// given to the server's user, whom Patroni runs as.
fn hand_over(dir: &Path, run_as: Option<(u32, u32)>) -> Result<(), TempError> {
    let Some((uid, gid)) = run_as else {
        return Ok(());
    };
    let etcd = dir.join("etcd");
    for path in walkdir(dir).into_iter().filter(|p| !p.starts_with(&etcd)) {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(io(format!(
            "cannot hand {} to the server's user",
            path.display()
        )))?;
    }
    Ok(())
}

/// `dir` and everything under it.
fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        if all[i].is_dir()
            && let Ok(entries) = std::fs::read_dir(&all[i])
        {
            all.extend(entries.flatten().map(|e| e.path()));
        }
        i += 1;
    }
    all
}
