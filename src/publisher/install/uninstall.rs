//! `zodex-prd uninstall` (as root; `zodex sprite uninstall` runs it through the transport):
//! stops both services and removes what `install` put on the sprite — units, supervisor
//! script, binaries, configuration and App keys, sockets, the MCP key's hash, logs. The
//! publisher's state (the audit, grants, mirrors) and the agent's MCP history are kept unless
//! `purge`, which also removes them and the two accounts and their group. It never removes
//! the agent's home (the agent's work) nor a file of the operator's own beside the
//! configuration (policies): those are listed as kept.
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

/// Stops the services and removes the installation of `record`; see the module comment.
pub fn uninstall(record: &InstallRecord, purge: bool) -> Result<UninstallReport, InstallError> {
    let layout = &record.layout;
    let mut report = UninstallReport::default();
    services::control(record, services::Action::Stop, &[])?;
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
    for dir in [&layout.socket_dir, &layout.mcp_dir, &layout.log_dir] {
        report.remove_tree(dir)?;
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
