//! A fleet's service host (`install --service --fleet NAME --store-url URL …`): one replica of
//! the fleet's service, laid out as a sprite is but without an agent — the publisher user, its
//! state and admin socket, the App keys (0600, the publisher's, from stdin), the PostgreSQL
//! password in a file only the publisher reads, the fleet's CA (made by the publisher user
//! itself with `zodex-prd fleet init` when absent, so `ca.key` is its own from the first byte),
//! a configuration with `[fleet]`, `[store]` and `[github]` and no `agent_uid`, and
//! `zodex-prd serve` under systemd or the supervisor script (never both). The first operator
//! enrols through this host's admin command (docs/fleet.md, "From nothing to a fleet").

use super::layout::{InstallRecord, Layout, PublisherMode, ServiceManager};
use super::system::{self, Account, Steps};
use super::{InstallError, InstallOptions, InstallReport, KeyUpload, write_record};
use nix::unistd::{Gid, Uid};
use serde::Deserialize;
use std::path::PathBuf;
use zodex_config::{Config, FleetConfig, StoreConfig};
use zodex_publisher::fleet::FleetCaTransfer;

/// What makes an install a fleet service host's.
#[derive(Debug, Clone)]
pub struct ServiceInstall {
    /// The fleet's name (a DNS label): its CA's trust domain.
    pub fleet: String,
    /// This replica's name in its server certificate (default `service`).
    pub replica: Option<String>,
    /// Where members connect (mutual TLS), e.g. `0.0.0.0:7443`.
    pub listen: std::net::SocketAddr,
    /// The names members reach this replica by (its certificate answers to them).
    pub hosts: Vec<String>,
    /// The shared PostgreSQL store, as the publisher's role, without a password.
    pub store_url: String,
}

/// What a service install reads on stdin (`--keys-stdin`): one JSON object, every field
/// optional; the App keys as a sprite's install takes them, the store's password, and the
/// fleet's CA carried from another replica (`zodex-prd fleet export-ca`'s `fleet_ca`).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSecrets {
    #[serde(default)]
    pub writer_key: Option<String>,
    #[serde(default)]
    pub reader_key: Option<String>,
    #[serde(default)]
    pub store_password: Option<String>,
    #[serde(default)]
    pub fleet_ca: Option<FleetCaTransfer>,
}

impl std::fmt::Debug for ServiceSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceSecrets(..)")
    }
}

/// The store's password file, beside the App keys (the publisher's, 0600).
pub fn password_file(layout: &Layout) -> PathBuf {
    layout.keys_dir.join("store-password")
}

/// The fleet's CA directory (`ca.pem`, and `ca.key` the publisher's only).
pub fn ca_dir(layout: &Layout) -> PathBuf {
    layout.config_dir.join("fleet-ca")
}

/// Installs (or brings up to date) a service host. Idempotent, as a sprite's install is.
pub(super) async fn run(
    options: &InstallOptions,
    service: &ServiceInstall,
    secrets: ServiceSecrets,
) -> Result<InstallReport, InstallError> {
    let layout = Layout::under(&options.prefix);
    check(options, service)?;
    if let Some(carried) = &secrets.fleet_ca {
        check_carried_ca(&layout, service, carried)?;
    }
    let keys = match (secrets.writer_key, secrets.reader_key) {
        (Some(writer_key), Some(reader_key)) => Some(KeyUpload {
            writer_key,
            reader_key,
        }),
        (None, None) => None,
        _ => {
            return Err(InstallError::Failed(
                "send both App keys on stdin (writer_key and reader_key), or neither".into(),
            ));
        }
    };
    if let Some(candidate) = super::github_check::candidate(options, &layout, keys.as_ref()) {
        // New keys or App ids are proven against GitHub before anything changes.
        super::github_check::require(super::github_check::check(&candidate).await)?;
    }
    let mut steps = Steps::default();
    let publisher = system::ensure_user(
        &Account {
            name: &options.publisher_user,
            home: &layout.state_dir,
            create_home: false,
            shell: "/usr/sbin/nologin",
            primary_group: None,
        },
        &mut steps,
    )?;
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    let own = (publisher.uid, publisher.gid);
    for dir in [
        &layout.config_dir,
        &layout.bin_dir,
        &layout.lib_dir,
        &layout.log_dir,
    ] {
        system::ensure_dir(dir, root.0, root.1, 0o755, &mut steps)?;
    }
    for dir in [&layout.keys_dir, &layout.state_dir] {
        system::ensure_dir(dir, own.0, own.1, 0o700, &mut steps)?;
    }
    // No agent here: the socket directory and the audit's files are the publisher's alone.
    system::ensure_dir(&layout.socket_dir, own.0, own.1, 0o750, &mut steps)?;
    system::ensure_dir(&layout.audit_log_dir(), own.0, own.1, 0o750, &mut steps)?;
    system::ensure_log(&layout.log("zodex-prd"), publisher.gid, &mut steps)?;
    let with_apps = options.reader_app_id.is_some() || keys.is_some();
    if with_apps || layout.key("writer").exists() {
        super::install_keys(&layout, keys.as_ref(), &publisher, &mut steps)?;
    }
    let password = store_password(&layout, secrets.store_password, &publisher, &mut steps)?;
    let from = options.binaries.join("zodex-prd");
    if !from.is_file() {
        return Err(InstallError::Failed(format!(
            "{} is missing; pass --binaries DIR holding zodex-prd",
            from.display()
        )));
    }
    system::ensure_copy(&from, &layout.binary("zodex-prd"), &mut steps)?;
    ensure_ca(
        &layout,
        service,
        &publisher,
        secrets.fleet_ca.as_ref(),
        &mut steps,
    )?;
    // The service proves its policies as it starts, as a sprite's publisher does.
    let solver = super::ensure_solver(&layout, &mut steps);

    let config = service_config(options, service, &layout, publisher.uid.as_raw(), password)?;
    let config_changed = super::write_config(&layout, &config, &mut steps)?;
    let manager = super::chosen_manager(options);
    let (record, units_verified) = record_and_service(options, &layout, manager, &mut steps)?;
    let changed = steps.changed();
    if options.start {
        super::start_services(&record, manager, changed || config_changed, &mut steps)?;
    }
    let proofs = match options.start {
        true => Some(super::doctor::proofs(&config).await),
        false => None,
    };
    Ok(InstallReport {
        config: layout.config(),
        changed,
        steps: steps.0,
        services: super::services::status(&record),
        self_check: Vec::new(),
        units_verified,
        solver: Some(solver),
        proofs,
        fleet_request: None,
    })
}

/// The install record and the one service manager's files (a systemd unit, or the supervisor
/// script): a supervised host has no unit that could start a second copy, and a systemd host
/// no script. Returns the record and, under systemd, what `systemd-analyze verify` said.
fn record_and_service(
    options: &InstallOptions,
    layout: &Layout,
    manager: ServiceManager,
    steps: &mut Steps,
) -> Result<(InstallRecord, Option<String>), InstallError> {
    let root = (Uid::from_raw(0), Gid::from_raw(0));
    let record = InstallRecord {
        version: env!("CARGO_PKG_VERSION").to_string(),
        layout: layout.clone(),
        // No agent on a service host: the record's agent fields name nothing.
        agent_user: String::new(),
        publisher_user: options.publisher_user.clone(),
        socket_group: String::new(),
        agent_home: layout.state_dir.clone(),
        service_manager: manager,
        mcp_listen: String::new(),
        agent_tasks_max: options.agent_tasks_max,
        agent_memory_max_mib: options.agent_memory_max_mib,
        publisher_mode: PublisherMode::Service,
    };
    write_record(layout, &record, steps)?;
    // The manager chosen, and only it: a supervised host has no unit that could start a
    // second copy, and a systemd host no script.
    let units_verified = match manager {
        ServiceManager::Systemd => {
            system::ensure_dir(&layout.unit_dir, root.0, root.1, 0o755, steps)?;
            system::ensure_file(
                &layout.unit("zodex-prd"),
                super::services::unit(&record, "zodex-prd").as_bytes(),
                root.0,
                root.1,
                0o644,
                steps,
            )?;
            super::services::verify_units(layout).map(|r| match r {
                Ok(()) => "systemd-analyze verify: ok".to_string(),
                Err(e) => format!("systemd-analyze verify: {e}"),
            })
        }
        ServiceManager::Supervisor => {
            system::ensure_file(
                &layout.supervisor(),
                super::services::supervisor_script(&record).as_bytes(),
                root.0,
                root.1,
                0o755,
                steps,
            )?;
            None
        }
    };
    Ok((record, units_verified))
}

/// Refuses what a service host cannot be, before anything changes.
fn check(options: &InstallOptions, service: &ServiceInstall) -> Result<(), InstallError> {
    zodex_fleet::Name::parse(&service.fleet)
        .map_err(|e| InstallError::Failed(format!("--fleet: {e}")))?;
    if let Some(replica) = &service.replica {
        zodex_fleet::Name::parse(replica)
            .map_err(|e| InstallError::Failed(format!("--replica: {e}")))?;
    }
    if !(service.store_url.starts_with("postgres://")
        || service.store_url.starts_with("postgresql://"))
    {
        return Err(InstallError::Failed(
            "--store-url: a fleet's replicas share PostgreSQL: postgres://zodex_publisher@HOST/DB (its password on stdin, `store_password`)".into(),
        ));
    }
    if url_has_password(&service.store_url) {
        return Err(InstallError::Failed(
            "--store-url carries a password, which would be in argv and in the readable configuration: send it on stdin as `store_password` with --keys-stdin".into(),
        ));
    }
    if options.relay.is_some() {
        return Err(InstallError::Failed(
            "a host is a fleet's service or one of its sprites, not both: leave out --sprite"
                .into(),
        ));
    }
    Ok(())
}

/// Whether `postgres://USER:PASSWORD@…` names a password.
fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    rest.split_once('@')
        .is_some_and(|(user, _)| user.contains(':'))
}

/// The store's password file: written from stdin (0600, the publisher's), else kept; none
/// when neither (peer or trust authentication).
fn store_password(
    layout: &Layout,
    password: Option<String>,
    publisher: &nix::unistd::User,
    steps: &mut Steps,
) -> Result<Option<PathBuf>, InstallError> {
    let path = password_file(layout);
    match password {
        Some(password) => {
            let line = password.trim();
            if line.is_empty() || line.contains('\n') {
                return Err(InstallError::Failed(
                    "store_password must be one non-empty line".into(),
                ));
            }
            system::ensure_file(
                &path,
                format!("{line}\n").as_bytes(),
                publisher.uid,
                publisher.gid,
                0o600,
                steps,
            )?;
            Ok(Some(path))
        }
        None if path.is_file() => {
            let changed = system::set_owner_mode(&path, publisher.uid, publisher.gid, 0o600)?;
            steps.record(format!("{} kept", path.display()), changed);
            Ok(Some(path))
        }
        None => Ok(None),
    }
}

/// A CA carried from another replica, checked before anything changes: this fleet's, its key
/// the one its certificate holds, and the CA directory holding no other CA (a host already
/// of another fleet, or of this one with a CA of its own, is not silently switched).
fn check_carried_ca(
    layout: &Layout,
    service: &ServiceInstall,
    carried: &FleetCaTransfer,
) -> Result<(), InstallError> {
    let refused = |e: &dyn std::fmt::Display| {
        InstallError::Failed(format!("fleet_ca: {e}; nothing was changed"))
    };
    let fleet = zodex_fleet::Name::parse(&service.fleet).map_err(|e| refused(&e))?;
    let ca = zodex_fleet::FleetCa::import(&fleet, &carried.certificate_pem, &carried.key_pem)
        .map_err(|e| refused(&e))?;
    let dir = ca_dir(layout);
    match std::fs::read_to_string(dir.join("ca.pem")) {
        Ok(there) if !ca.is_certificate(&there) => Err(InstallError::Failed(
            zodex_publisher::fleet::FleetSetupError::OtherCa { dir }.to_string(),
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(InstallError::step(format!("reading {}", dir.display()), e)),
    }
}

/// The fleet's CA: when absent, written by the publisher user — carried from another replica
/// (`zodex-prd fleet import-ca`, the CA given on stdin) or made anew (`zodex-prd fleet init`)
/// — so root never writes its key; when present (checked to be the CA given, if one was), its
/// key is made the publisher's and 0600 again.
fn ensure_ca(
    layout: &Layout,
    service: &ServiceInstall,
    publisher: &nix::unistd::User,
    carried: Option<&FleetCaTransfer>,
    steps: &mut Steps,
) -> Result<(), InstallError> {
    let dir = ca_dir(layout);
    system::ensure_dir(&dir, publisher.uid, publisher.gid, 0o700, steps)?;
    let key = dir.join("ca.key");
    if dir.join("ca.pem").is_file() && key.is_file() {
        let changed = system::set_owner_mode(&key, publisher.uid, publisher.gid, 0o600)?;
        let kept = match carried {
            Some(_) => format!("fleet CA {} kept: it is the CA given", dir.display()),
            None => format!("fleet CA {} kept", dir.display()),
        };
        steps.record(kept, changed);
        return Ok(());
    }
    let text = dir.display().to_string();
    let args = ["fleet", "init", "--dir", &text, "--name", &service.fleet];
    match carried {
        Some(carried) => {
            let input = serde_json::to_vec(&serde_json::json!({ "fleet_ca": carried }))
                .map_err(|e| InstallError::Failed(format!("fleet_ca: {e}")))?;
            let args = [
                "fleet",
                "import-ca",
                "--dir",
                &text,
                "--name",
                &service.fleet,
            ];
            super::relay::as_publisher(layout, publisher, &args, Some(&input))?;
            steps.record(
                format!("fleet CA {} carried in from another replica", dir.display()),
                true,
            );
        }
        None => {
            super::relay::as_publisher(layout, publisher, &args, None)?;
            steps.record(format!("fleet CA {} made", dir.display()), true);
        }
    }
    Ok(())
}

/// The service's configuration: an existing one keeps what install does not manage; the
/// paths, the publisher's uid, `[fleet]`, `[store]`, `[github]` (when given) and the targets
/// (when given) are set. No `agent_uid`: a service has no agent.
fn service_config(
    options: &InstallOptions,
    service: &ServiceInstall,
    layout: &Layout,
    publisher_uid: u32,
    password_file: Option<PathBuf>,
) -> Result<Config, InstallError> {
    let existing = super::sprite_config::existing_config(layout)?;
    let mut config = existing.clone().unwrap_or_default();
    config.state_dir = layout.state_dir.clone();
    config.admin_socket = layout.admin_socket();
    config.agent_socket = layout.agent_socket();
    config.agent_uid = None;
    config.publisher_uid = Some(publisher_uid);
    config.relay = None;
    config.mcp = None;
    let member_ttl_hours = config.fleet.as_ref().and_then(|f| f.member_ttl_hours);
    config.fleet = Some(FleetConfig {
        name: service.fleet.clone(),
        ca_dir: ca_dir(layout),
        member_ttl_hours,
        listen: Some(service.listen),
        replica: service.replica.clone(),
        hosts: service.hosts.clone(),
    });
    let store = config.store.take().unwrap_or_default();
    config.store = Some(StoreConfig {
        url: service.store_url.clone(),
        password_file,
        ..store
    });
    if let (Some(reader), Some(writer)) = (options.reader_app_id, options.writer_app_id) {
        let (api_url, git_url) =
            super::github_urls(options.api_url.as_deref(), options.git_url.as_deref());
        config.github = Some(zodex_config::GithubConfig {
            api_url,
            git_url,
            reader: zodex_config::GithubApp {
                app_id: reader,
                private_key_file: layout.key("reader"),
            },
            writer: zodex_config::GithubApp {
                app_id: writer,
                private_key_file: layout.key("writer"),
            },
        });
    } else if options.reader_app_id.is_some() || options.writer_app_id.is_some() {
        return Err(InstallError::Failed(
            "give both --reader-app-id and --writer-app-id (or neither, to keep the installed ones)"
                .into(),
        ));
    }
    if !options.targets.is_empty() {
        config.targets = options
            .targets
            .iter()
            .map(|t| super::sprite_config::target_spec(t))
            .collect::<Result<_, _>>()?;
    }
    config
        .targets()
        .map_err(|e| InstallError::Failed(format!("--target: {e}")))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_store_url_is_found() {
        assert!(url_has_password(
            "postgres://zodex_publisher:s3cret@db/zodex"
        ));
        assert!(!url_has_password(
            "postgres://zodex_publisher@db:5432/zodex"
        ));
        assert!(!url_has_password(
            "postgres://zodex_publisher@%2Frun%2Fpostgresql/zodex"
        ));
    }
}
