//! `zodex-prd uninstall` (as root; `zodex sprite uninstall` runs it through the transport):
//! stops both services and removes what `install` put on the sprite — units, supervisor
//! script, binaries, configuration and App keys, sockets, the MCP key's hash, logs. The
//! publisher's state (the audit, grants, mirrors) and the agent's MCP history are kept unless
//! `purge`, which also removes them and the two accounts and their group. It never removes
//! the agent's home (the agent's work) nor a file of the operator's own beside the
//! configuration (policies): those are listed as kept.
//!
//! The MCP endpoint's OAuth grants end with the installation (unless `keep_oauth`): every
//! refresh-token family is revoked and the signing key retired, so a token issued before is
//! refused by any later installation; the evidence stays. The configuration is kept as a copy
//! beside the state, since a new setup writes a fresh one (its `[[audit_sinks]]` and `[mcp]`
//! included), and the log directory (service logs, audit sink files) stays unless `purge`.
//!
//! What it did is said path by path, so the operator knows what is gone and what remains.

use super::layout::{InstallRecord, RECORD_FILE, SERVICES, SPRITE_BINARIES, ServiceManager};
use super::{InstallError, services};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What an uninstall removed and what it left in place.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UninstallReport {
    pub removed: Vec<String>,
    pub kept: Vec<String>,
    /// The fleet the sprite was a member of (its configuration had `[relay]`): what installs
    /// it again is `zodex fleet enroll`, not `zodex sprite setup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
}

impl UninstallReport {
    fn remove_file(&mut self, path: &Path) -> Result<(), InstallError> {
        match std::fs::remove_file(path) {
            Ok(()) => self.removed.push(path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(InstallError::step(
                    format!("cannot remove {}", path.display()),
                    e,
                ));
            }
        }
        Ok(())
    }

    fn remove_tree(&mut self, path: &Path) -> Result<(), InstallError> {
        match std::fs::symlink_metadata(path) {
            Err(_) => Ok(()),
            Ok(meta) if meta.is_dir() => {
                std::fs::remove_dir_all(path).map_err(|e| {
                    InstallError::step(format!("cannot remove {}", path.display()), e)
                })?;
                self.removed.push(format!("{}/", path.display()));
                Ok(())
            }
            Ok(_) => self.remove_file(path),
        }
    }

    /// Removes `dir` when it is empty; else says what is left in it.
    fn remove_if_empty(&mut self, dir: &Path, why: &str) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let left: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if left.is_empty() {
            if std::fs::remove_dir(dir).is_ok() {
                self.removed.push(format!("{}/", dir.display()));
            }
        } else {
            self.kept
                .push(format!("{}/ ({why}: {})", dir.display(), left.join(", ")));
        }
    }
}

/// The name of the configuration's copy kept in the state directory.
pub const CONFIG_COPY: &str = "zodex.toml.uninstalled";

/// Stops the services and removes the installation of `record`; see the module comment.
/// The fleet a sprite's configuration relays to, read from the certificate beside it (its
/// `[relay] dir`): `Some` for a fleet sprite, also when the name cannot be read (`"?"`).
fn fleet_of(config: &Path) -> Option<String> {
    let relay = zodex_config::Config::load(config).ok()?.relay?;
    let named = std::fs::read_to_string(relay.dir.join(zodex_fleet::MemberFiles::CERT))
        .ok()
        .and_then(|pem| zodex_fleet::tls::certificates(&pem).ok())
        .and_then(|chain| zodex_fleet::Identity::of_certificate(&chain[0]).ok())
        .map(|identity| identity.fleet.to_string());
    Some(named.unwrap_or_else(|| "?".to_string()))
}

pub fn uninstall(
    record: &InstallRecord,
    purge: bool,
    keep_oauth: bool,
) -> Result<UninstallReport, InstallError> {
    let layout = &record.layout;
    let mut report = UninstallReport {
        fleet: fleet_of(&layout.config()),
        ..Default::default()
    };
    services::control(record, services::Action::Stop, &[])?;
    if !purge {
        end_oauth_grants(&layout.state_dir.join("state.db"), keep_oauth, &mut report)?;
        keep_config_copy(&layout.config(), &layout.state_dir, &mut report)?;
    }
    if record.service_manager == ServiceManager::Systemd {
        let _ = Command::new("systemctl")
            .arg("disable")
            .args(SERVICES)
            .output();
    }
    for service in SERVICES {
        report.remove_file(&layout.unit(service))?;
    }
    if record.service_manager == ServiceManager::Systemd {
        let _ = Command::new("systemctl").arg("daemon-reload").output();
    }
    report.remove_tree(&layout.lib_dir)?;
    for name in SPRITE_BINARIES {
        report.remove_file(&layout.binary(name))?;
    }
    report.remove_tree(&layout.keys_dir)?;
    report.remove_file(&layout.config())?;
    report.remove_file(&layout.config_dir.join(RECORD_FILE))?;
    report.remove_if_empty(&layout.config_dir, "not written by install");
    for dir in [&layout.socket_dir, &layout.mcp_dir] {
        report.remove_tree(dir)?;
    }
    if purge {
        report.remove_tree(&layout.log_dir)?;
    } else if layout.log_dir.exists() {
        report.kept.push(format!(
            "{}/ (service logs and audit sink files: evidence; `--purge` removes them)",
            layout.log_dir.display()
        ));
    }
    let state: [(&PathBuf, &str); 2] = [
        (
            &layout.state_dir,
            "the audit, grants and mirrors; `--purge` removes them",
        ),
        (
            &layout.agent_state_dir,
            "the agent's MCP history; `--purge` removes it",
        ),
    ];
    for (dir, what) in state {
        if purge {
            report.remove_tree(dir)?;
        } else if dir.exists() {
            report.kept.push(format!("{}/ ({what})", dir.display()));
        }
    }
    if purge {
        remove_accounts(record, &mut report);
    } else {
        report.kept.push(format!(
            "the users {} and {} and the group {} (`--purge` removes them)",
            record.agent_user, record.publisher_user, record.socket_group
        ));
    }
    if record.agent_home.exists() {
        report.kept.push(format!(
            "{}/ (the agent's home and its work; remove it yourself when you no longer need it)",
            record.agent_home.display()
        ));
    }
    Ok(report)
}

/// Ends every OAuth grant in `state_db` (see the module comment), or says they are kept.
fn end_oauth_grants(
    state_db: &Path,
    keep: bool,
    report: &mut UninstallReport,
) -> Result<(), InstallError> {
    if !state_db.exists() {
        return Ok(());
    }
    if keep {
        report.kept.push(
            "the MCP endpoint's OAuth grants and signing key (`--keep-oauth`): clients connected \
             now are served again by a new setup on this state"
                .into(),
        );
        return Ok(());
    }
    let owner = std::fs::metadata(state_db)
        .map_err(|e| InstallError::step(format!("cannot read {}", state_db.display()), e))?;
    let failed = |e: zodex_engine::store::StoreError| {
        InstallError::Failed(format!(
            "cannot end the OAuth grants in {}: {e}. Nothing else was removed; run uninstall again, or pass --keep-oauth to keep them",
            state_db.display()
        ))
    };
    let who = zodex_engine::Actor::Operator(zodex_engine::OperatorName::Uid(
        nix::unistd::getuid().as_raw(),
    ));
    let ended = {
        let mut store = zodex_engine::store::Store::open(state_db).map_err(failed)?;
        zodex_engine::mcp_oauth::end_every_grant(
            &mut store,
            &who,
            "the installation was removed",
            chrono::Utc::now().timestamp(),
        )
        .map_err(failed)?
    };
    // Opening the database as root may have made its WAL and shared-memory files: they stay
    // the publisher's, or it could not open its own state again.
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", state_db.display()));
        if side.exists() {
            use std::os::unix::fs::MetadataExt as _;
            std::os::unix::fs::chown(&side, Some(owner.uid()), Some(owner.gid())).map_err(|e| {
                InstallError::step(format!("cannot give back {}", side.display()), e)
            })?;
        }
    }
    if ended.key_retired || ended.grants_revoked > 0 {
        report.removed.push(format!(
            "the MCP endpoint's OAuth grants ({} revoked) and its signing key: every access and refresh token issued before is refused, by any later installation too (clients reconnect and are approved again)",
            ended.grants_revoked
        ));
    }
    Ok(())
}

/// Keeps a copy of the configuration beside the state: a new setup writes a fresh one.
fn keep_config_copy(
    config: &Path,
    state_dir: &Path,
    report: &mut UninstallReport,
) -> Result<(), InstallError> {
    if !config.exists() || !state_dir.is_dir() {
        return Ok(());
    }
    let copy = state_dir.join(CONFIG_COPY);
    std::fs::copy(config, &copy).map_err(|e| {
        InstallError::step(format!("cannot keep a copy of {}", config.display()), e)
    })?;
    report.kept.push(format!(
        "{} (a copy of {}: a new setup writes a fresh configuration, so add back what you set by hand — [[audit_sinks]], [mcp], [agent_limits], [policy] — from here)",
        copy.display(),
        config.display()
    ));
    Ok(())
}

/// The two accounts and the socket group (the homes stay: the agent's is its work, the
/// publisher's is the state directory, removed above).
fn remove_accounts(record: &InstallRecord, report: &mut UninstallReport) {
    for user in [&record.agent_user, &record.publisher_user] {
        match super::system::tool("userdel", &[user.as_str()]) {
            Ok(()) => report.removed.push(format!("user {user}")),
            Err(e) => report.kept.push(format!("user {user} ({e})")),
        }
    }
    let group = &record.socket_group;
    match super::system::tool("groupdel", &[group.as_str()]) {
        Ok(()) => report.removed.push(format!("group {group}")),
        Err(e) => report.kept.push(format!("group {group} ({e})")),
    }
}
