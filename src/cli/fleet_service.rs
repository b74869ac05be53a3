//! `zodex fleet service add NAME --from EXISTING -- INSTALL_ARGS`: a further replica of the
//! fleet's service on a registered host, its CA carried from a running replica
//! (`operator::deploy::add_service_replica`). Parse, call, print.

use super::{EXIT_OK, print_failure, print_json_ok};
use crate::operator::deploy::{ServiceReplicaAdd, add_service_replica, secrets_from};
use crate::operator::registry::{Registry, SpriteEntry, exec_admin_command};
use clap::{Args, Subcommand};
use std::io::Read as _;
use std::path::PathBuf;

#[derive(Subcommand)]
pub(super) enum FleetServiceCommand {
    /// Install a replica of the service on host NAME (its registry entry, or registered here
    /// with --exec), its binaries uploaded through the exec transport. The first replica makes
    /// the fleet's CA; each further one is given the CA of the replica --from EXISTING over
    /// both transports (`zodex-prd fleet export-ca` there, its JSON into `zodex-prd install
    /// --service --keys-stdin` on NAME), through memory and pipes only. The replica's other
    /// secrets (App keys, the store's password) are read on stdin with --secrets-stdin. A
    /// host holding another CA than EXISTING's is refused, changing nothing.
    Add(ServiceAddArgs),
}

#[derive(Args)]
pub(super) struct ServiceAddArgs {
    /// The new replica's registry entry (its exec transport).
    name: String,
    /// Register NAME first, reached through this command (e.g. 'ssh root@svc2.example'), as
    /// `zodex sprite add NAME --exec CMD` does.
    #[arg(long)]
    exec: Option<String>,
    /// A running replica of the fleet (its registry entry): the CA is taken from it. Leave it
    /// out for the fleet's first replica only (which makes a new CA).
    #[arg(long)]
    from: Option<String>,
    /// Read the new replica's other secrets on stdin: one JSON object
    /// {"writer_key": PEM, "reader_key": PEM, "store_password": TEXT} (each optional).
    #[arg(long)]
    secrets_stdin: bool,
    /// Where the binaries come from (default: beside this `zodex`).
    #[arg(long)]
    binaries: Option<PathBuf>,
    /// The `zodex-prd install --service` options, after `--` (e.g. `-- --fleet acme --replica
    /// svc2 --host svc2.example --store-url postgres://zodex_publisher@db/zodex
    /// --writer-app-id 12 --reader-app-id 34 --target 'acme/*'`).
    #[arg(last = true)]
    install_args: Vec<String>,
}

pub(super) fn run(command: FleetServiceCommand, registry: &Registry, json: bool) -> i32 {
    let FleetServiceCommand::Add(args) = command;
    match add(args, registry) {
        Ok((name, report)) if json => print_json_ok(serde_json::json!({
            "replica": name,
            "install": report,
        })),
        Ok((name, report)) => {
            for step in report.steps.iter().filter(|s| s.changed) {
                println!("changed  {}", step.what);
            }
            if !report.changed {
                println!("Nothing changed on {name}: it was already as asked.");
            }
            println!(
                "{name} is a replica of the fleet. Next: its further replicas (`zodex fleet service add NAME --from {name} …`), then the first operator through it (`zodex fleet --fleet FLEET operator add YOU --service https://HOST:PORT --via {name}`, docs/fleet.md)"
            );
            EXIT_OK
        }
        Err(e) => print_failure(&e, json),
    }
}

fn add(
    args: ServiceAddArgs,
    registry: &Registry,
) -> anyhow::Result<(String, crate::install::InstallReport)> {
    let secrets = match args.secrets_stdin {
        true => {
            let mut input = String::new();
            std::io::stdin()
                .take(1 << 20)
                .read_to_string(&mut input)
                .map_err(|e| anyhow::anyhow!("reading stdin: {e}"))?;
            secrets_from(&input)?
        }
        false => Default::default(),
    };
    if let Some(exec) = &args.exec {
        registry.upsert(SpriteEntry {
            name: args.name.clone(),
            admin_command: exec_admin_command(exec, None)?,
            worker: None,
            fleet: None,
        })?;
    }
    let entry = registry.choose(Some(&args.name))?;
    let from = args
        .from
        .as_deref()
        .map(|from| registry.choose(Some(from)))
        .transpose()?;
    let options = ServiceReplicaAdd {
        binaries: args.binaries,
        secrets,
        install_args: args.install_args,
    };
    let report = add_service_replica(registry, &entry, from.as_ref(), options)?;
    Ok((args.name, report))
}
