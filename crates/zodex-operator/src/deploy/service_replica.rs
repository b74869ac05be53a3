//! `zodex fleet service add NAME [--from EXISTING] -- INSTALL_ARGS`: a replica of a fleet's
//! service, installed over its exec transport. The first makes the fleet's CA (as `install
//! --service` does where it finds none); each further one gets the CA carried from a replica
//! already running (`--from`), so the hosts are one fleet without anyone copying the CA's
//! directory by hand. The CA (its key the fleet's whole authority) passes only through this
//! process's memory and the two transports' pipes: `zodex-prd fleet export-ca` on EXISTING,
//! its JSON into `zodex-prd install --service --keys-stdin` on NAME, with whatever other
//! secrets the operator gave on stdin (the App keys, the store's password). NAME's binaries
//! are uploaded as `zodex sprite setup` uploads a sprite's.

use super::{
    DeployError, install_from, prefix_of, register_installed, run_install, upload_binaries,
};
use crate::registry::{Registry, SpriteEntry};
use crate::remote::{Reach, Stdin};
use serde_json::{Map, Value};
use std::path::PathBuf;
use zodex_install::InstallReport;
use zodex_install::layout::Layout;

/// What `zodex fleet service add` is told.
pub struct ServiceReplicaAdd {
    /// Where the binaries come from (default: beside this `zodex`).
    pub binaries: Option<PathBuf>,
    /// The other secrets, `install --service --keys-stdin`'s JSON object without `fleet_ca`
    /// (empty: the new replica has only the CA from stdin).
    pub secrets: Map<String, Value>,
    /// `zodex-prd install` options, passed as they are (`--fleet`, `--store-url`, …).
    pub install_args: Vec<String>,
}

impl std::fmt::Debug for ServiceReplicaAdd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceReplicaAdd")
            .field("install_args", &self.install_args)
            .finish_non_exhaustive()
    }
}

/// The operator's stdin as the other secrets: one JSON object, without `fleet_ca` (that comes
/// from the existing replica). Its values are never put in a message.
pub fn secrets_from(input: &str) -> Result<Map<String, Value>, DeployError> {
    let wrong = || {
        DeployError::Failed(
            "stdin must be one JSON object of the new replica's other secrets, {\"writer_key\": PEM, \"reader_key\": PEM, \"store_password\": TEXT} (each optional)".into(),
        )
    };
    let Ok(Value::Object(secrets)) = serde_json::from_str::<Value>(input) else {
        return Err(wrong());
    };
    if secrets.contains_key("fleet_ca") {
        return Err(DeployError::Failed(
            "stdin carries fleet_ca: the CA comes from the replica named by --from; leave it out"
                .into(),
        ));
    }
    Ok(secrets)
}

/// Installs replica `entry`, with the CA of replica `from` when given (else the install makes
/// the fleet's CA, or keeps the one there); the new replica's install report. The registry
/// then names `entry`'s installed `zodex-prd` and configuration.
pub fn add_service_replica(
    registry: &Registry,
    entry: &SpriteEntry,
    from: Option<&SpriteEntry>,
    mut options: ServiceReplicaAdd,
) -> Result<InstallReport, DeployError> {
    let target = Reach::of(entry)?;
    let mut secrets = std::mem::take(&mut options.secrets);
    if let Some(from) = from {
        secrets.insert("fleet_ca".into(), carried_ca(entry, from)?);
    }
    let input = Value::Object(secrets).to_string().into_bytes();
    install_replica(registry, entry, &target, &input, options)
}

/// The CA of replica `from`, for replica `entry`.
fn carried_ca(entry: &SpriteEntry, from: &SpriteEntry) -> Result<Value, DeployError> {
    if entry.name == from.name {
        return Err(DeployError::Failed(format!(
            "--from {0} names the new replica itself: name a replica already running (its registry entry, e.g. `zodex sprite add svc1 --exec 'ssh root@svc1'`)",
            from.name
        )));
    }
    export_ca(&Reach::of(from)?)
}

fn install_replica(
    registry: &Registry,
    entry: &SpriteEntry,
    target: &Reach,
    input: &[u8],
    options: ServiceReplicaAdd,
) -> Result<InstallReport, DeployError> {
    let ServiceReplicaAdd {
        binaries,
        install_args,
        ..
    } = options;
    let layout = Layout::under(&prefix_of(&install_args));
    let stage = upload_binaries(target, &layout, binaries.as_deref()).map_err(|e| {
        DeployError::Failed(format!("uploading the binaries to {}: {e}", entry.name))
    })?;
    let (prd, binaries) = install_from(&layout, stage.as_deref());
    let mut argv = vec![
        prd,
        "install".into(),
        "--json".into(),
        "--keys-stdin".into(),
        "--binaries".into(),
        binaries,
    ];
    if !install_args.iter().any(|a| a == "--service") {
        argv.push("--service".into());
    }
    argv.extend(install_args);
    // The uploaded directory is removed whatever happens.
    let installed = run_install(target, &argv, Stdin::Bytes(input));
    if let Some(dir) = &stage {
        target.unstage(dir);
    }
    let install = installed.map_err(|message| DeployError::OnSprite {
        message: format!("{}: {message}", entry.name),
        next: None,
    })?;
    register_installed(registry, entry, target, &layout, &install)?;
    Ok(install)
}

/// `zodex-prd fleet export-ca` on the existing replica: its `fleet_ca` object, in memory.
fn export_ca(source: &Reach) -> Result<Value, DeployError> {
    let ran = source.prd(&["fleet", "export-ca"], Stdin::None)?;
    if !ran.success {
        return Err(DeployError::OnSprite {
            message: format!(
                "{}: `zodex-prd fleet export-ca`: {}",
                source.sprite,
                ran.said()
            ),
            next: Some(format!(
                "check that {} is a running replica of the fleet (`zodex sprite doctor --sprite {}`), and that its zodex-prd has `fleet export-ca` (upgrade it)",
                source.sprite, source.sprite
            )),
        });
    }
    match serde_json::from_slice::<Value>(&ran.stdout) {
        Ok(Value::Object(mut exported)) if exported.contains_key("fleet_ca") => {
            Ok(exported.remove("fleet_ca").unwrap_or_default())
        }
        // Never shown: what it printed may hold the key.
        _ => Err(DeployError::Failed(format!(
            "{}: `zodex-prd fleet export-ca` did not print the fleet's CA as JSON; upgrade its zodex-prd",
            source.sprite
        ))),
    }
}
