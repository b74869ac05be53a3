//! `zodex-prd targets list|add|remove` (as root; `zodex sprite targets` runs it through the
//! transport): the repositories (`OWNER/REPO`) and owners (`OWNER/*`) in the `[[targets]]` of
//! an installed sprite's `zodex.toml`, changed without the App keys or any other install flag.
//! A change is written beside and renamed into place, and the publisher, which reads its
//! targets at start, is restarted; nothing changes when the list is already as asked.
//!
//! Whether the Apps cover each target is not decided here: the operator asks the publisher
//! (`CheckCoverage`) for every one of them afterwards.

use super::layout::InstallRecord;
use super::sprite_config::target_spec;
use super::{InstallError, control_and_wait, services};
use serde::{Deserialize, Serialize};
use std::path::Path;
use zodex_config::Config;
use zodex_engine::targets::TargetSpec;

/// The sprite's targets after a `targets` command, and whether it changed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetList {
    pub targets: Vec<String>,
    pub changed: bool,
}

/// How a target is written: `OWNER/REPO` or `OWNER/*`.
pub fn target_text(spec: &TargetSpec) -> String {
    match (&spec.repo, &spec.owner) {
        (Some(repo), _) => repo.clone(),
        (None, Some(owner)) => format!("{owner}/*"),
        (None, None) => String::new(),
    }
}

/// The targets of the configuration at `config_path`.
pub fn list(config_path: &Path) -> Result<TargetList, InstallError> {
    let config = Config::load(config_path).map_err(|e| InstallError::Failed(e.to_string()))?;
    Ok(TargetList {
        targets: config.targets.iter().map(target_text).collect(),
        changed: false,
    })
}

/// `targets` with `add` appended (those not there yet) and `remove` taken out, in order.
/// Removing a target the list does not hold is refused, and nothing changes.
pub fn edited(
    targets: &[TargetSpec],
    add: &[String],
    remove: &[String],
) -> Result<Vec<TargetSpec>, InstallError> {
    let mut out = targets.to_vec();
    for text in remove {
        let spec = target_spec(text)?;
        let before = out.len();
        out.retain(|t| target_text(t) != target_text(&spec));
        if out.len() == before {
            return Err(InstallError::Failed(format!(
                "`{text}` is not a target of this sprite (its targets: {}); nothing was changed",
                if targets.is_empty() {
                    "none".to_string()
                } else {
                    targets
                        .iter()
                        .map(target_text)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
    }
    for text in add {
        let spec = target_spec(text)?;
        if !out.iter().any(|t| target_text(t) == target_text(&spec)) {
            out.push(spec);
        }
    }
    Ok(out)
}

/// Adds and removes targets of the installed sprite whose configuration is `config_path`,
/// restarting the publisher when that changed them.
pub fn change(
    config_path: &Path,
    add: &[String],
    remove: &[String],
) -> Result<TargetList, InstallError> {
    let record = InstallRecord::beside(config_path)?;
    let mut config = Config::load(config_path).map_err(|e| InstallError::Failed(e.to_string()))?;
    let targets = edited(&config.targets, add, remove)?;
    let changed = targets != config.targets;
    if changed {
        config.targets = targets;
        config
            .targets()
            .map_err(|e| InstallError::Failed(format!("targets: {e}")))?;
        super::sprite_config::write_config(config_path, &config)?;
        control_and_wait(&record, services::Action::Restart, &["zodex-prd"])?;
    }
    Ok(TargetList {
        targets: config.targets.iter().map(target_text).collect(),
        changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(texts: &[&str]) -> Vec<TargetSpec> {
        texts.iter().map(|t| target_spec(t).unwrap()).collect()
    }

    fn texts(specs: &[TargetSpec]) -> Vec<String> {
        specs.iter().map(target_text).collect()
    }

    #[test]
    fn adding_appends_what_is_new_and_removing_takes_out_what_is_there() {
        let now = specs(&["acme/app", "acme/*"]);
        let add = ["acme/lib".to_string(), "acme/app".to_string()];
        assert_eq!(
            texts(&edited(&now, &add, &[]).unwrap()),
            ["acme/app", "acme/*", "acme/lib"]
        );
        let remove = ["acme/*".to_string()];
        assert_eq!(texts(&edited(&now, &[], &remove).unwrap()), ["acme/app"]);
        assert_eq!(edited(&now, &[], &[]).unwrap(), now);
    }

    #[test]
    fn removing_a_target_that_is_not_there_changes_nothing_and_names_the_targets() {
        let now = specs(&["acme/app"]);
        let err = edited(&now, &["acme/lib".into()], &["acme/other".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`acme/other` is not a target of this sprite (its targets: acme/app)"),
            "{err}"
        );
        let err = edited(&now, &["nonsense".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("OWNER/REPO"), "{err}");
    }
}
