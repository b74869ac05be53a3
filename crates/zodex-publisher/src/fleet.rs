//! The fleet's service side (`[fleet]`): the CA this publisher signs members' certificates
//! with, and the registry requests an operator sends (enrol, remove, list). The relay and the
//! service's mutual-TLS listener build on this (docs/fleet.md).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use zodex_config::FleetConfig;
use zodex_fleet::{FleetCa, Identity, Name, Role};

/// Member certificates last this long unless `[fleet] member_ttl_hours` says otherwise.
pub const DEFAULT_MEMBER_TTL_HOURS: u32 = 24;
/// A replica's server certificate, made afresh (with a fresh key, kept in memory) at every
/// start, lasts this long.
const SERVICE_CERT_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
/// The names a replica's certificate answers to when `[fleet] hosts` names none.
const DEFAULT_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why the fleet's CA cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FleetSetupError {
    #[error(
        "cannot read the fleet's CA at {path}: {source}; make it with `zodex-prd fleet init --dir {dir}` or point [fleet] ca_dir at it"
    )]
    Read {
        path: PathBuf,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the fleet's CA key {path} is readable by others (mode {mode:o}); anyone who reads it can admit any sprite: `chmod 600 {path}`"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("the fleet's CA at {dir}: {source}")]
    Fleet {
        dir: PathBuf,
        source: zodex_fleet::FleetError,
    },
    #[error(
        "{dir} holds another CA than the one given: this host is already a replica of another fleet (or of this one with another CA); nothing was changed. Carry the CA from a replica of the fleet you mean, or remove {dir} if nothing trusts it"
    )]
    OtherCa { dir: PathBuf },
    #[error("cannot write the fleet's CA in {dir}: {source}")]
    Write {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// The fleet's CA as it passes from one replica to the next: `zodex-prd fleet export-ca`
/// prints it as `{"fleet_ca": …}`, `install --service --keys-stdin` and `fleet import-ca` read
/// it. Its `Debug` shows neither field.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetCaTransfer {
    pub certificate_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for FleetCaTransfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetCaTransfer(..)")
    }
}

/// Stdin that is not `export-ca`'s JSON: which field, or where, never a value (it may be the
/// key).
#[derive(Debug, thiserror::Error)]
#[error(
    "stdin is not `zodex-prd fleet export-ca`'s JSON ({{\"fleet_ca\": {{\"certificate_pem\": …, \"key_pem\": …}}}}): {0}"
)]
pub struct NotCaTransfer(String);

impl FleetCaTransfer {
    /// `export-ca`'s output (`{"fleet_ca": {…}}`), or the object inside it.
    pub fn from_json(input: &str) -> Result<Self, NotCaTransfer> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wrapped {
            fleet_ca: FleetCaTransfer,
        }
        let wrong = |e: serde_json::Error| {
            // Only serde's messages that name a field: its others may quote a value, which
            // here could be the key.
            let said = e.to_string();
            let e = match said.starts_with("unknown field") || said.starts_with("missing field") {
                true => said,
                false => format!("line {}, column {}", e.line(), e.column()),
            };
            NotCaTransfer(e)
        };
        match serde_json::from_str::<Wrapped>(input) {
            Ok(wrapped) => Ok(wrapped.fleet_ca),
            Err(_) => serde_json::from_str::<FleetCaTransfer>(input).map_err(wrong),
        }
    }
}

/// What [`FleetService::import`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// The CA's files were written.
    Written,
    /// The directory held this CA already; nothing changed.
    AlreadyThere,
}

/// `ca.pem` and `ca.key` (0600, created with that mode) of `ca` in `dir` (made 0700 if
/// missing); never over files that are there.
fn write_new(dir: &Path, ca: &FleetCa) -> Result<(), FleetSetupError> {
    let write_err = |source| FleetSetupError::Write {
        dir: dir.to_path_buf(),
        source,
    };
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(write_err)?;
    let create = |file: &str, mode: u32, text: &str| {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(dir.join(file))
            .and_then(|mut f| f.write_all(text.as_bytes()))
    };
    create("ca.key", 0o600, ca.key_pem()).map_err(write_err)?;
    create("ca.pem", 0o644, ca.cert_pem()).map_err(write_err)?;
    Ok(())
}

/// The service's signing side, and what this replica saw of the members.
pub struct FleetService {
    ca: FleetCa,
    member_ttl: Duration,
    ca_dir: PathBuf,
    /// `[fleet] replica`: the name this replica answers as.
    replica: String,
    /// The whole configuration, for the checks `fleet_doctor` makes of this replica's ground.
    config: Option<zodex_config::Config>,
    /// When this replica started serving (Unix seconds, the host's clock).
    up_since: i64,
    /// When each member's request was last admitted here (Unix seconds), since start: in
    /// memory, so a request costs no write.
    seen: std::sync::Mutex<std::collections::HashMap<(Role, String), i64>>,
}

impl std::fmt::Debug for FleetService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetService")
            .field("fleet", self.ca.fleet())
            .field("member_ttl", &self.member_ttl)
            .finish_non_exhaustive()
    }
}

impl FleetService {
    /// Loads `[fleet]`'s CA; a key others can read refuses start.
    pub fn load(config: &FleetConfig) -> Result<Self, FleetSetupError> {
        let dir = &config.ca_dir;
        let fleet_err = |source| FleetSetupError::Fleet {
            dir: dir.clone(),
            source,
        };
        let fleet = Name::parse(&config.name).map_err(fleet_err)?;
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path).map_err(|source| FleetSetupError::Read {
                path,
                dir: dir.clone(),
                source,
            })
        };
        let key_path = dir.join("ca.key");
        if let Ok(meta) = std::fs::metadata(&key_path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(FleetSetupError::Exposed {
                    path: key_path,
                    mode,
                });
            }
        }
        let ca = FleetCa::load(&fleet, &read("ca.pem")?, &read("ca.key")?).map_err(fleet_err)?;
        let hours = config.member_ttl_hours.unwrap_or(DEFAULT_MEMBER_TTL_HOURS);
        Ok(Self {
            ca,
            member_ttl: Duration::from_secs(u64::from(hours.max(1)) * 3600),
            ca_dir: dir.clone(),
            replica: config.replica.clone().unwrap_or_else(|| "service".into()),
            config: None,
            up_since: 0,
            seen: Default::default(),
        })
    }

    /// This service serving `config` from `now` (what `fleet_doctor` checks).
    pub fn serving(self, config: &zodex_config::Config, now: i64) -> Self {
        Self {
            config: Some(config.clone()),
            up_since: now,
            ..self
        }
    }

    pub fn up_since(&self) -> i64 {
        self.up_since
    }

    pub fn config(&self) -> Option<&zodex_config::Config> {
        self.config.as_ref()
    }

    pub fn replica(&self) -> &str {
        &self.replica
    }

    pub fn ca_key_path(&self) -> PathBuf {
        self.ca_dir.join("ca.key")
    }

    pub fn member_ttl_seconds(&self) -> i64 {
        i64::try_from(self.member_ttl.as_secs()).unwrap_or(i64::MAX)
    }

    /// Notes that member `role`/`name` was admitted at `now`.
    pub fn saw(&self, role: Role, name: &str, now: i64) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.insert((role, name.to_string()), now);
    }

    /// When member `role`/`name` was last admitted here, if since start.
    pub fn last_seen(&self, role: Role, name: &str) -> Option<i64> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(&(role, name.to_string())).copied()
    }

    /// Makes a new CA for `fleet` in `dir` (`ca.pem`, and `ca.key` with mode 0600); refuses to
    /// replace one that is there.
    pub fn init(dir: &Path, fleet: &str) -> Result<(), FleetSetupError> {
        let fleet_err = |source| FleetSetupError::Fleet {
            dir: dir.to_path_buf(),
            source,
        };
        let name = Name::parse(fleet).map_err(fleet_err)?;
        let ca = FleetCa::create(&name).map_err(fleet_err)?;
        write_new(dir, &ca)
    }

    /// Installs in `dir` the CA of `fleet` carried from another of its replicas (`zodex-prd
    /// fleet export-ca`), as [`init`](Self::init) writes a new one: `ca.key` 0600 from its
    /// first byte, this user's. Checked first (this fleet's, its key the one its certificate
    /// holds); a directory already holding this CA is left as it is, and one holding another
    /// is refused with nothing changed.
    pub fn import(
        dir: &Path,
        fleet: &str,
        cert_pem: &str,
        key_pem: &str,
    ) -> Result<Imported, FleetSetupError> {
        let fleet_err = |source| FleetSetupError::Fleet {
            dir: dir.to_path_buf(),
            source,
        };
        let name = Name::parse(fleet).map_err(fleet_err)?;
        let ca = FleetCa::import(&name, cert_pem, key_pem).map_err(fleet_err)?;
        match std::fs::read_to_string(dir.join("ca.pem")) {
            Ok(there) if ca.is_certificate(&there) => return Ok(Imported::AlreadyThere),
            Ok(_) => {
                return Err(FleetSetupError::OtherCa {
                    dir: dir.to_path_buf(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(FleetSetupError::Read {
                    path: dir.join("ca.pem"),
                    dir: dir.to_path_buf(),
                    source,
                });
            }
        }
        write_new(dir, &ca)?;
        Ok(Imported::Written)
    }

    /// The CA's certificate and key (PEM), for `zodex-prd fleet export-ca`: read as
    /// [`load`](Self::load) reads them, so an exposed key is refused here too.
    pub fn export(config: &FleetConfig) -> Result<(String, String), FleetSetupError> {
        let service = Self::load(config)?;
        Ok((
            service.ca.cert_pem().to_owned(),
            service.ca.key_pem().to_owned(),
        ))
    }

    pub fn fleet(&self) -> &Name {
        self.ca.fleet()
    }

    /// The listener's TLS: a server certificate for this replica (`[fleet] replica`, answering
    /// as `[fleet] hosts`), issued now by the fleet's CA with a key that never leaves memory,
    /// and client certificates required from the same CA.
    pub fn server_tls(
        &self,
        config: &FleetConfig,
    ) -> Result<std::sync::Arc<rustls::ServerConfig>, zodex_fleet::FleetError> {
        let replica = Name::parse(config.replica.as_deref().unwrap_or("service"))?;
        let hosts: Vec<String> = if config.hosts.is_empty() {
            DEFAULT_HOSTS.iter().map(|h| h.to_string()).collect()
        } else {
            config.hosts.clone()
        };
        let (cert, key) = self.ca.issue_service(&replica, &hosts, SERVICE_CERT_TTL)?;
        zodex_fleet::tls::server_config(self.ca.cert_pem(), &cert, &key)
    }

    /// When a member certificate signed at `now` (Unix seconds) expires, as the registry
    /// records it.
    pub fn expiry_from(&self, now: i64) -> i64 {
        now.saturating_add(self.member_ttl_seconds())
    }

    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The CA key's signature over `message` (an audit checkpoint's signed text).
    pub fn sign_message(&self, message: &[u8]) -> Result<String, zodex_fleet::FleetError> {
        self.ca.sign_message(message)
    }

    /// Signs a member's certificate request for `role`/`name`; the request must ask for exactly
    /// that identity and prove its key. Returns the identity and the certificate.
    pub fn sign(
        &self,
        role: Role,
        name: &str,
        request_pem: &str,
    ) -> Result<(Identity, String), zodex_fleet::FleetError> {
        let identity = Identity::new(self.fleet(), role, &Name::parse(name)?);
        let pem = self.ca.issue(request_pem, &identity, self.member_ttl)?;
        Ok((identity, pem))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA carried in: written as `init` writes one (key 0600); the same CA again changes
    /// nothing; another CA, or another fleet's, is refused and the files stay as they were.
    #[test]
    fn import_writes_a_carried_ca_once_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        FleetService::init(&first, "acme").unwrap();
        let read = |dir: &Path, file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
        let (cert, key) = (read(&first, "ca.pem"), read(&first, "ca.key"));
        let imported = FleetService::import(&second, "acme", &cert, &key).unwrap();
        assert_eq!(imported, Imported::Written);
        assert_eq!(
            (read(&second, "ca.pem"), read(&second, "ca.key")),
            (cert.clone(), key.clone())
        );
        let mode = std::fs::metadata(second.join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = FleetService::import(&second, "acme", &cert, &key).unwrap();
        assert_eq!(again, Imported::AlreadyThere);

        let other = dir.path().join("other");
        FleetService::init(&other, "acme").unwrap();
        let err = FleetService::import(
            &second,
            "acme",
            &read(&other, "ca.pem"),
            &read(&other, "ca.key"),
        )
        .unwrap_err();
        assert!(matches!(err, FleetSetupError::OtherCa { .. }), "{err}");
        let err =
            FleetService::import(&dir.path().join("fresh"), "globex", &cert, &key).unwrap_err();
        assert!(err.to_string().contains("fleet \"acme\""), "{err}");
        // A message about what stdin held never quotes it.
        let err = FleetCaTransfer::from_json(&serde_json::to_string(&key).unwrap()).unwrap_err();
        assert!(!err.to_string().contains("PRIVATE"), "{err}");
        let err = FleetCaTransfer::from_json(r#"{"certificate_pem": "x"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field `key_pem`"), "{err}");
        assert!(!dir.path().join("fresh").exists());
        assert_eq!(
            (read(&second, "ca.pem"), read(&second, "ca.key")),
            (cert, key)
        );
    }

    #[test]
    fn init_makes_a_private_key_and_load_refuses_an_exposed_one() {
        let dir = tempfile::tempdir().unwrap();
        let ca_dir = dir.path().join("ca");
        FleetService::init(&ca_dir, "acme").unwrap();
        let mode = std::fs::metadata(ca_dir.join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Never replaced.
        assert!(FleetService::init(&ca_dir, "acme").is_err());
        let config = FleetConfig {
            name: "acme".into(),
            ca_dir: ca_dir.clone(),
            member_ttl_hours: None,
            listen: None,
            replica: None,
            hosts: Vec::new(),
        };
        let service = FleetService::load(&config).unwrap();
        assert_eq!(service.fleet().as_str(), "acme");
        assert!(!format!("{service:?}").contains("PRIVATE"));
        std::fs::set_permissions(
            ca_dir.join("ca.key"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        let err = FleetService::load(&config).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        let missing = FleetConfig {
            ca_dir: dir.path().join("none"),
            ..config
        };
        let err = FleetService::load(&missing).unwrap_err();
        assert!(err.to_string().contains("zodex-prd fleet init"), "{err}");
    }
}
