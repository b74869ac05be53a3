//! The two services of a sprite — `zodex-prd serve` as the publisher, `zodex-agent serve` as the
//! agent — as systemd units and as a plain supervisor script, and their control: start, stop,
//! restart, status (found in `/proc`, whichever manager runs them) and logs.
//!
//! The agent service is the one a hostile command runs under. Under systemd its cgroup bounds
//! memory and tasks and `KillMode=control-group` ends every process of every session with it.
//! Without systemd the script bounds the agent user's processes with RLIMIT_NPROC and, when it
//! stops the service, kills every process of the agent user until none is left (a fork storm
//! that ignores SIGHUP included).

use super::InstallError;
use super::layout::{InstallRecord, Layout, PublisherMode, SERVICES, ServiceManager};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The systemd unit of `service`.
pub fn unit(record: &InstallRecord, service: &str) -> String {
    let layout = &record.layout;
    let config = layout.config();
    // Started again every 2 s for as long as it exits, as the supervisor script does: never
    // given up on after a burst ("start request repeated too quickly"), so `status` reads a
    // crash loop as restarting, with its last error, the same under both managers.
    let forever = "StartLimitIntervalSec=0\n";
    let common = "NoNewPrivileges=yes\nPrivateTmp=yes\nProtectSystem=strict\nProtectKernelTunables=yes\nProtectKernelModules=yes\nProtectControlGroups=yes\nRestart=on-failure\nRestartSec=2\n";
    match service {
        "zodex-prd" => format!(
            "# Written by `zodex-prd install`; a rerun rewrites it.\n\
             [Unit]\nDescription={description}\n\
             After=network-online.target\nWants=network-online.target\n{forever}\n\
             [Service]\nType=simple\nUser={user}\nGroup={user}\n\
             Environment=ZODEX_CONFIG={config}\n\
             ExecStart={bin} {subcommand} --config {config}\n\
             {common}\
             ReadWritePaths={state} {sockets} {mcp}{keys}\n\
             ProtectHome=yes\nMemoryMax=2G\nTasksMax=256\nUMask=0077\n\n\
             [Install]\nWantedBy=multi-user.target\n",
            description = match record.publisher_mode {
                PublisherMode::Serve => "Zodex publisher (decides and makes every GitHub write)",
                PublisherMode::Service =>
                    "Zodex fleet service replica (decides and makes every GitHub write of its sprites)",
                PublisherMode::Relay =>
                    "Zodex relay (this fleet sprite's agent socket, passed to the fleet's service)",
            },
            subcommand = record.publisher_mode.subcommand(),
            // A relay renews its certificate in its key directory.
            keys = match record.publisher_mode {
                PublisherMode::Serve | PublisherMode::Service => String::new(),
                PublisherMode::Relay => format!(" {}", layout.keys_dir.display()),
            },
            user = record.publisher_user,
            config = config.display(),
            bin = layout.binary("zodex-prd").display(),
            state = layout.state_dir.display(),
            sockets = layout.socket_dir.display(),
            mcp = layout.mcp_dir.display(),
        ),
        _ => format!(
            "# Written by `zodex-prd install`; a rerun rewrites it.\n\
             [Unit]\nDescription=Zodex agent (the MCP tools, as the agent user)\n\
             After=network-online.target zodex-prd.service\nWants=network-online.target\n{forever}\n\
             [Service]\nType=simple\nUser={user}\n\
             Environment=ZODEX_CONFIG={config} PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin\n\
             WorkingDirectory=~\n\
             ExecStart={bin} serve --config {config}\n\
             {common}\
             ReadWritePaths={home} {agent_state} /tmp\n\
             KillMode=control-group\nMemoryMax={memory}M\nTasksMax={tasks}\n\n\
             [Install]\nWantedBy=multi-user.target\n",
            user = record.agent_user,
            config = config.display(),
            bin_dir = layout.bin_dir.display(),
            bin = layout.binary("zodex-agent").display(),
            home = record.agent_home.display(),
            agent_state = layout.agent_state_dir.display(),
            memory = record.agent_memory_max_mib,
            tasks = record.agent_tasks_max,
        ),
    }
}

/// The supervisor script for machines without systemd (POSIX sh, run as root).
pub fn supervisor_script(record: &InstallRecord) -> String {
    let layout = &record.layout;
    let q = |p: &Path| shell_quote(&p.display().to_string());
    format!(
        r#"#!/bin/sh
# Written by `zodex-prd install`: runs Zodex's services on a machine without systemd.
# Usage: zodex-supervise start|stop|restart|status [zodex-prd|zodex-agent]   (as root)
# Each service runs as its own user, restarted when it exits; `stop` of the agent service
# also ends every process of the agent user, so no session outlives it.
set -u
umask 027
BIN={bin}
CONFIG={config}
RUN={run}
LOG={log}
PRD_USER={prd_user}
AGENT_USER={agent_user}
AGENT_HOME={agent_home}
AGENT_TASKS={tasks}

launch() {{
  case "$1" in
  zodex-prd)
    exec setpriv --reuid="$PRD_USER" --regid="$(id -g "$PRD_USER")" --init-groups --no-new-privs \
      env -i HOME=/ PATH="$BIN:/usr/local/bin:/usr/bin:/bin" ZODEX_CONFIG="$CONFIG" \
      "$BIN/zodex-prd" {prd_subcommand} --config "$CONFIG" ;;
  zodex-agent)
    cd "$AGENT_HOME" || exit 1
    exec prlimit --nproc="$AGENT_TASKS" -- \
      setpriv --reuid="$AGENT_USER" --regid="$(id -g "$AGENT_USER")" --init-groups --no-new-privs \
      env -i HOME="$AGENT_HOME" USER="$AGENT_USER" LOGNAME="$AGENT_USER" SHELL=/bin/bash \
        PATH="$BIN:/usr/local/bin:/usr/bin:/bin" ZODEX_CONFIG="$CONFIG" \
      "$BIN/zodex-agent" serve --config "$CONFIG" ;;
  esac
}}

running() {{
  # A pid file left by a boot before may name a pid some other process has now.
  [ -f "$RUN/$1.pid" ] && pid=$(cat "$RUN/$1.pid") && kill -0 "$pid" 2>/dev/null &&
    grep -q zodex-supervise "/proc/$pid/cmdline" 2>/dev/null
}}

logfile() {{
  # The publisher's log is root's and the publisher's group's only, never the agent's.
  log="$LOG/$1.log"
  if [ "$1" = zodex-prd ]; then owner=$PRD_USER; else owner=$AGENT_USER; fi
  touch "$log" && chgrp "$(id -g "$owner")" "$log" && chmod 640 "$log"
}}

start_one() {{
  if running "$1"; then echo "$1: running"; return 0; fi
  rm -f "$RUN/$1.stopping"
  logfile "$1" || return 1
  (
    child=
    trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; [ -n "$child" ] && wait "$child"; exit 0' TERM INT
    while :; do
      launch "$1" </dev/null >>"$LOG/$1.log" 2>&1 &
      child=$!
      wait "$child"
      status=$?
      [ -f "$RUN/$1.stopping" ] && exit 0
      echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) zodex-supervise: $1 exited with $status; restarting in 2s" >>"$LOG/$1.log"
      sleep 2
    done
  ) </dev/null >/dev/null 2>&1 &
  echo $! >"$RUN/$1.pid"
  echo "$1: started"
}}

sweep_agent() {{
  # Every process of the agent user: sessions and whatever they started, detached or not.
  i=0
  while pgrep -u "$AGENT_USER" >/dev/null 2>&1; do
    pkill -KILL -u "$AGENT_USER" 2>/dev/null
    i=$((i + 1))
    if [ "$i" -ge 200 ]; then echo "zodex-agent: processes of $AGENT_USER survive; kill them by hand" >&2; return 1; fi
    sleep 0.05
  done
}}

stop_one() {{
  if running "$1"; then
    touch "$RUN/$1.stopping"
    kill -TERM "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      # The loop did not end in 10 s: end it and whatever the service left running.
      kill -KILL "$pid" 2>/dev/null
      [ "$1" = zodex-prd ] && pkill -KILL -u "$PRD_USER" 2>/dev/null
    fi
  fi
  rm -f "$RUN/$1.pid"
  if [ "$1" = zodex-agent ]; then sweep_agent || return 1; fi
  echo "$1: stopped"
}}

status_one() {{
  if running "$1"; then echo "$1: running"; else echo "$1: stopped"; return 3; fi
}}

services=${{2:-{all}}}
case "${{1:-}}" in
start) for s in $services; do start_one "$s"; done ;;
stop) rc=0; for s in $services; do stop_one "$s" || rc=1; done; exit $rc ;;
restart) for s in $services; do stop_one "$s"; start_one "$s"; done ;;
status) rc=0; for s in $services; do status_one "$s" || rc=3; done; exit $rc ;;
*) echo "usage: $0 start|stop|restart|status [zodex-prd|zodex-agent]" >&2; exit 2 ;;
esac
"#,
        bin = q(&layout.bin_dir),
        config = q(&layout.config()),
        run = q(&layout.lib_dir),
        log = q(&layout.log_dir),
        prd_user = shell_quote(&record.publisher_user),
        agent_user = shell_quote(&record.agent_user),
        agent_home = q(&record.agent_home),
        tasks = record.agent_tasks_max,
        prd_subcommand = record.publisher_mode.subcommand(),
        all = shell_quote(&record.services().join(" ")),
    )
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Whether systemd runs this machine (the way `sd_booted` tells).
pub fn systemd_booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// What to do with the services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Action {
    Start,
    Stop,
    Restart,
}

impl Action {
    pub fn word(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Restart => "restart",
        }
    }
}

/// Starts, stops or restarts `services` (both when empty) through the installed manager.
pub fn control(
    record: &InstallRecord,
    action: Action,
    services: &[&str],
) -> Result<String, InstallError> {
    let all: Vec<&str> = if services.is_empty() {
        record.services().to_vec()
    } else {
        services.to_vec()
    };
    let output = match record.service_manager {
        ServiceManager::Systemd => {
            let mut args = vec![action.word()];
            args.extend(all.iter().copied());
            Command::new("systemctl").args(&args).output()
        }
        ServiceManager::Supervisor => Command::new("/bin/sh")
            .arg(record.layout.supervisor())
            .arg(action.word())
            .arg(all.join(" "))
            .output(),
    }
    .map_err(|e| InstallError::step("cannot run the service manager", e))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(InstallError::Failed(format!(
            "{} {} failed: {}",
            action.word(),
            all.join(" "),
            text.trim()
        )))
    }
}

/// One running service as `/proc` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceState {
    pub service: String,
    pub running: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<u64>,
    /// The version of the binary installed on disk (`--version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_version: Option<String>,
    /// The running process's binary was replaced on disk since it started: a restart loads
    /// the new one.
    #[serde(default)]
    pub stale_binary: bool,
    /// Its manager started it again in the last minute (it exited, or keeps exiting): how
    /// often, and the errors of its last start. Absent when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<Restarts>,
}

impl ServiceState {
    /// Up and staying up.
    pub fn healthy(&self) -> bool {
        self.running && !self.crash_looping()
    }

    /// It keeps exiting and being started again: started again in the last minute, and not
    /// up and answering now (a start refused at once runs for a moment between two restarts).
    pub fn crash_looping(&self) -> bool {
        self.restarts.as_ref().is_some_and(|r| r.looping)
    }
}

/// How often a service was started again in the last minute, and why it last ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Restarts {
    pub last_minute: u32,
    /// It is not answering now (not running, or running without answering yet): it keeps
    /// exiting. False once it is up again.
    pub looping: bool,
    /// The errors of its last start that ended, the cause first (`error: ` taken off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_errors: Vec<String>,
}

/// The state of both services: each found as the process running
/// `<bin_dir>/<service> serve --config <config>`.
pub fn status(record: &InstallRecord) -> Vec<ServiceState> {
    record
        .services()
        .iter()
        .map(|service| {
            let installed_version = binary_version(&record.layout.binary(service));
            let process = running(record, service);
            let restarts = restarts(record, service).map(|mut r| {
                r.looping =
                    !(process.as_ref().is_some_and(|p| !p.stale) && answers(record, service));
                r
            });
            match process {
                Some(process) => ServiceState {
                    service: service.to_string(),
                    running: true,
                    pid: Some(process.pid),
                    user: nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(process.uid))
                        .ok()
                        .flatten()
                        .map(|u| u.name),
                    uptime_seconds: process.uptime_seconds,
                    installed_version,
                    stale_binary: process.stale,
                    restarts,
                },
                None => ServiceState {
                    service: service.to_string(),
                    running: false,
                    pid: None,
                    user: None,
                    uptime_seconds: None,
                    installed_version,
                    stale_binary: false,
                    restarts,
                },
            }
        })
        .collect()
}

/// The restarts of `service` in the last minute, while its manager still runs it.
fn restarts(record: &InstallRecord, service: &str) -> Option<Restarts> {
    if !supervised(record, service) {
        return None;
    }
    let log = recent_log(record, service)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    let last_minute = super::crashes::restarts_since(&log, now - 60);
    (last_minute > 0).then(|| Restarts {
        last_minute,
        looping: true,
        last_errors: super::crashes::last_errors(&log),
    })
}

/// Whether `service` answers: the publisher on its admin socket (a relay, which has none, on
/// the agent socket it serves), the agent on its MCP address.
pub(super) fn answers(record: &InstallRecord, service: &str) -> bool {
    match (service, record.publisher_mode) {
        ("zodex-prd", PublisherMode::Serve | PublisherMode::Service) => {
            std::os::unix::net::UnixStream::connect(record.layout.admin_socket()).is_ok()
        }
        ("zodex-prd", PublisherMode::Relay) => {
            std::os::unix::net::UnixStream::connect(record.layout.agent_socket()).is_ok()
        }
        _ => std::net::TcpStream::connect(&record.mcp_listen).is_ok(),
    }
}

/// Whether the manager runs `service` (up, or between two starts), as opposed to stopped.
fn supervised(record: &InstallRecord, service: &str) -> bool {
    match record.service_manager {
        ServiceManager::Systemd => Command::new("systemctl")
            .args(["show", "--property", "ActiveState", "--value", service])
            .output()
            .is_ok_and(|out| {
                let state = String::from_utf8_lossy(&out.stdout);
                matches!(state.trim(), "active" | "activating" | "reloading")
            }),
        // The script's loop keeps its pid file until `stop` removes it.
        ServiceManager::Supervisor => {
            std::fs::read_to_string(record.layout.lib_dir.join(format!("{service}.pid")))
                .ok()
                .and_then(|pid| pid.trim().parse::<u32>().ok())
                .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
        }
    }
}

/// The end of a service's log, as [`super::crashes`] reads it: the supervisor's file (its last
/// 64 KiB), or the journal with unix times.
pub(super) fn recent_log(record: &InstallRecord, service: &str) -> Option<String> {
    match record.service_manager {
        ServiceManager::Systemd => {
            let out = Command::new("journalctl")
                .args(["--no-pager", "--output", "short-unix", "--lines", "400"])
                .args(["--unit", service])
                .output()
                .ok()?;
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        ServiceManager::Supervisor => {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = std::fs::File::open(record.layout.log(service)).ok()?;
            let len = file.metadata().ok()?.len();
            file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))
                .ok()?;
            let mut tail = Vec::new();
            file.read_to_end(&mut tail).ok()?;
            let text = String::from_utf8_lossy(&tail).into_owned();
            // From the first whole line on.
            Some(match text.split_once('\n') {
                Some((_, rest)) if len > 64 * 1024 => rest.to_string(),
                _ => text,
            })
        }
    }
}

/// The process running `service` (`<bin_dir>/<service> serve|relay --config <config>`), if any;
/// cheap enough to poll (it reads `/proc`, it runs nothing).
pub(super) fn running(record: &InstallRecord, service: &str) -> Option<Process> {
    // Only a process of the service's own user counts: the agent can start a process with any
    // command line it likes, but not as the publisher.
    let user = if service == "zodex-prd" {
        &record.publisher_user
    } else {
        &record.agent_user
    };
    let uid = nix::unistd::User::from_name(user)
        .ok()
        .flatten()?
        .uid
        .as_raw();
    let subcommand = match service {
        "zodex-prd" => record.publisher_mode.subcommand(),
        _ => "serve",
    };
    find_serve(
        &record.layout.binary(service),
        subcommand,
        &record.layout.config(),
        uid,
    )
}

/// `BINARY --version`'s version number.
pub fn binary_version(binary: &Path) -> Option<String> {
    let out = Command::new(binary)
        .arg("--version")
        .env_clear()
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().nth(1).map(str::to_string)
}

pub(super) struct Process {
    pid: i32,
    uid: u32,
    uptime_seconds: Option<u64>,
    /// The binary was replaced on disk since the process started.
    pub stale: bool,
}

fn find_serve(binary: &Path, subcommand: &str, config: &Path, uid: u32) -> Option<Process> {
    let want: Vec<String> = vec![
        binary.display().to_string(),
        subcommand.into(),
        "--config".into(),
        config.display().to_string(),
    ];
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let Ok(raw) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let argv: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv != want {
            continue;
        }
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let stale = std::fs::read_link(dir.join("exe"))
            .map(|p| p.display().to_string().ends_with(" (deleted)"))
            .unwrap_or(false);
        return Some(Process {
            pid,
            uid,
            uptime_seconds: uptime_of(&dir),
            stale,
        });
    }
    None
}

/// Seconds since the process started: its start time (clock ticks after boot, field 22 of
/// `stat`) against the machine's uptime.
fn uptime_of(proc_dir: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after it follow its closing paren.
    let rest = stat.rsplit_once(')')?.1;
    let start_ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)? as u64;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((uptime as u64).saturating_sub(start_ticks / ticks))
}

/// The last `lines` lines of a service's log.
pub fn logs(record: &InstallRecord, service: &str, lines: usize) -> Result<String, InstallError> {
    match record.service_manager {
        ServiceManager::Systemd => {
            let out = Command::new("journalctl")
                .args([
                    "--no-pager",
                    "--unit",
                    service,
                    "--lines",
                    &lines.to_string(),
                ])
                .output()
                .map_err(|e| InstallError::step("cannot run journalctl", e))?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        ServiceManager::Supervisor => {
            let path: PathBuf = record.layout.log(service);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| InstallError::step(format!("cannot read {}", path.display()), e))?;
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            Ok(all[from..].join("\n") + "\n")
        }
    }
}

/// What `systemd-analyze verify` said of our units: its own lines, one per problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct UnitsRejected(pub Vec<String>);

/// Checks the units with `systemd-analyze verify` where it exists; `None` when it does not.
pub fn verify_units(layout: &Layout) -> Option<Result<(), UnitsRejected>> {
    let units: Vec<PathBuf> = SERVICES.iter().map(|s| layout.unit(s)).collect();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Lines about other units of the machine are not ours to judge.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| SERVICES.iter().any(|s| l.contains(&format!("{s}.service"))))
        .collect();
    if out.status.success() && ours.is_empty() {
        Some(Ok(()))
    } else {
        Some(Err(UnitsRejected(
            ours.into_iter().map(str::to_string).collect(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/` install under systemd, as the publisher.
    fn record() -> InstallRecord {
        InstallRecord {
            version: "0".into(),
            layout: Layout::under(Path::new("/")),
            agent_user: "zodex-agent".into(),
            publisher_user: "zodex-prd".into(),
            socket_group: "zodex".into(),
            agent_home: PathBuf::from("/home/zodex-agent"),
            publisher_mode: PublisherMode::Serve,
            service_manager: ServiceManager::Systemd,
            mcp_listen: "127.0.0.1:8080".into(),
            agent_tasks_max: 1024,
            agent_memory_max_mib: 4096,
        }
    }

    /// Under systemd as under the supervisor script, a service that keeps exiting is started
    /// again every 2 s, never given up on after a burst of starts.
    #[test]
    fn both_units_restart_a_failing_service_for_as_long_as_it_fails() {
        let record = record();
        for service in SERVICES {
            let text = unit(&record, service);
            let (unit_section, service_section) = text.split_once("[Service]").unwrap();
            assert!(
                unit_section.contains("\nStartLimitIntervalSec=0\n"),
                "{service}: {text}"
            );
            assert!(
                service_section.contains("\nRestart=on-failure\nRestartSec=2\n"),
                "{service}: {text}"
            );
        }
        assert!(supervisor_script(&record).contains("restarting in 2s"));
    }

    /// A fleet sprite's publisher user runs the relay, under both managers, and may write only
    /// its key directory beside the paths the publisher has (the relay renews its certificate
    /// there); a sprite with its own publisher keeps `serve` and a read-only key directory.
    #[test]
    fn a_fleet_sprite_runs_its_relay_as_the_publisher_user() {
        let mut record = record();
        let serve = unit(&record, "zodex-prd");
        assert!(serve.contains("/zodex-prd serve --config "), "{serve}");
        assert!(!serve.contains("/etc/zodex/keys"), "{serve}");
        record.publisher_mode = PublisherMode::Relay;
        let relay = unit(&record, "zodex-prd");
        assert!(relay.contains("/zodex-prd relay --config "), "{relay}");
        assert!(relay.contains("User=zodex-prd\n"), "{relay}");
        let writable = relay
            .lines()
            .find(|l| l.starts_with("ReadWritePaths="))
            .unwrap();
        assert!(writable.ends_with(" /etc/zodex/keys"), "{writable}");
        let script = supervisor_script(&record);
        assert!(
            script.contains("\"$BIN/zodex-prd\" relay --config \"$CONFIG\""),
            "{script}"
        );
        assert!(unit(&record, "zodex-agent").contains("/zodex-agent serve --config "));
    }
}
