//! The operator's registry of sprites (`$ZODEX_HOME/sprites.toml`): each sprite's name and the
//! command that reaches its `zodex-prd admin`. Updates hold a file lock and replace the file
//! atomically, so concurrent commands never lose an update.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const SPRITE_ENV: &str = "ZODEX_SPRITE";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpriteEntry {
    pub name: String,
    /// The full argv that runs `zodex-prd admin` for this sprite. A first element of exactly
    /// `zodex-prd` means the binary beside `zodex` (local sprites). Empty for a fleet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admin_command: Vec<String>,
    /// A fleet's service, reached over mutual TLS with the operator's own certificate instead
    /// of an admin command (`zodex fleet operator add`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetReach>,
    /// The edge Worker in front of the sprite, once `zodex sprite proxy deploy` deployed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerRecord>,
}

/// How the operator reaches a fleet's service: its replicas, and the directory of the
/// operator's own key (0600), certificate and the fleet's CA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetReach {
    /// `https://HOST:PORT`, one per replica, tried in turn.
    pub services: Vec<String>,
    pub dir: PathBuf,
}

/// What the registry keeps of a sprite's edge Worker (no credential: Cloudflare's token stays
/// in the operator's environment or wrangler's own login).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerRecord {
    /// The Worker's name at Cloudflare (`zodex-SPRITE` unless chosen).
    pub name: String,
    /// Where it answers, `https://NAME.SUBDOMAIN.workers.dev` or a custom domain.
    pub url: String,
    /// The sprite origin it forwards to, `https://HOST[:PORT]`.
    pub origin: String,
    /// The build deployed (`operator::worker::build_id` of the zodex that deployed it).
    pub build: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    #[serde(default)]
    sprites: Vec<SpriteEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "invalid sprite name `{0}`: use 1–63 lower-case letters, digits, `-` or `_`, starting with a letter or digit"
    )]
    BadName(String),
    #[error(
        "a sprite named `{0}` is already registered; remove it first with `zodex sprite remove {0}`"
    )]
    Exists(String),
    #[error(
        "no sprite named `{name}`; registered: {known}. Add one with `zodex sprite add NAME --exec CMD` or `--local`"
    )]
    Unknown { name: String, known: String },
    #[error(
        "no sprite is registered; add one with `zodex sprite add NAME --exec 'sprite exec -s NAME --'` or `zodex sprite add NAME --local`, or run `zodex dev up`"
    )]
    Empty,
    #[error("several sprites are registered ({0}); choose one with --sprite NAME or ZODEX_SPRITE")]
    Ambiguous(String),
    #[error(
        "this registry reaches fleet `{name}` already, with the identity in {dir}; it is kept (one entry per fleet, and an operator's entry is their own). To use another identity, `zodex sprite remove {name}` first"
    )]
    FleetExists { name: String, dir: PathBuf },
    #[error(
        "`{0}` is a sprite in this registry; a fleet of the same name needs the name: `zodex sprite remove {0}` first, or use another registry (ZODEX_HOME)"
    )]
    SpriteNamedLikeFleet(String),
    #[error("--exec `{0}` could not be split into words (check its quotes)")]
    BadExec(String),
    #[error("registry {path}: {message}")]
    File { path: PathBuf, message: String },
}

pub struct Registry {
    path: PathBuf,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// The admin command for a sprite reached through `exec_prefix` (e.g. `sprite exec -s NAME --`),
/// with the sprite's own configuration path when it is not the default one: it is a path on the
/// sprite, passed to every admin request as `--config PATH`.
pub fn exec_admin_command(
    exec_prefix: &str,
    remote_config: Option<&Path>,
) -> Result<Vec<String>, RegistryError> {
    let mut argv =
        shell_words::split(exec_prefix).map_err(|_| RegistryError::BadExec(exec_prefix.into()))?;
    if argv.is_empty() {
        return Err(RegistryError::BadExec(exec_prefix.into()));
    }
    argv.extend(["zodex-prd".to_string(), "admin".to_string()]);
    if let Some(config) = remote_config {
        argv.extend(["--config".to_string(), config.display().to_string()]);
    }
    Ok(argv)
}

/// The admin command for a sprite on this machine, optionally with its configuration file.
pub fn local_admin_command(config: Option<&Path>) -> Vec<String> {
    let mut argv = vec!["zodex-prd".to_string(), "admin".to_string()];
    if let Some(config) = config {
        argv.extend(["--config".to_string(), config.display().to_string()]);
    }
    argv
}

impl Registry {
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The operator's registry under [`super::zodex_home`].
    pub fn default_location() -> Self {
        Self::at(super::zodex_home().join("sprites.toml"))
    }

    fn file_err(&self, message: impl std::fmt::Display) -> RegistryError {
        RegistryError::File {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    pub fn list(&self) -> Result<Vec<SpriteEntry>, RegistryError> {
        Ok(self.read()?.sprites)
    }

    fn read(&self) -> Result<RegistryFile, RegistryError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => toml::from_str(&text).map_err(|e| self.file_err(e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RegistryFile::default()),
            Err(e) => Err(self.file_err(e)),
        }
    }

    /// Runs `change` on the registry under an exclusive lock and writes the result atomically.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut RegistryFile) -> Result<T, RegistryError>,
    ) -> Result<T, RegistryError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.file_err(e))?;
        let lock_file =
            File::create(self.path.with_extension("lock")).map_err(|e| self.file_err(e))?;
        let _lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| self.file_err(e))?;
        let mut file = self.read()?;
        let out = change(&mut file)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| self.file_err(e))?;
        let text = toml::to_string_pretty(&file).map_err(|e| self.file_err(e))?;
        tmp.write_all(text.as_bytes())
            .map_err(|e| self.file_err(e))?;
        tmp.persist(&self.path).map_err(|e| self.file_err(e))?;
        Ok(out)
    }

    pub fn add(&self, entry: SpriteEntry) -> Result<(), RegistryError> {
        if !valid_name(&entry.name) {
            return Err(RegistryError::BadName(entry.name));
        }
        self.update(|file| {
            if file.sprites.iter().any(|s| s.name == entry.name) {
                return Err(RegistryError::Exists(entry.name.clone()));
            }
            file.sprites.push(entry);
            Ok(())
        })
    }

    /// Adds or replaces an entry (used by `zodex dev up`, which owns the `dev` sprite).
    pub fn upsert(&self, entry: SpriteEntry) -> Result<(), RegistryError> {
        self.update(|file| {
            file.sprites.retain(|s| s.name != entry.name);
            file.sprites.push(entry);
            Ok(())
        })
    }

    /// Registers a fleet's entry, never over another: an entry of that name is replaced only
    /// when it is the same fleet reached with the same identity (an enrolment run again).
    pub fn register_fleet(&self, entry: SpriteEntry) -> Result<(), RegistryError> {
        self.update(|file| {
            fleet_free(&file.sprites, &entry)?;
            file.sprites.retain(|s| s.name != entry.name);
            file.sprites.push(entry);
            Ok(())
        })
    }

    /// Whether [`Registry::register_fleet`] would take `entry` now (asked before a key is made,
    /// so a refusal costs nothing).
    pub fn check_fleet_free(&self, entry: &SpriteEntry) -> Result<(), RegistryError> {
        fleet_free(&self.list()?, entry)
    }

    pub fn remove(&self, name: &str) -> Result<SpriteEntry, RegistryError> {
        self.update(|file| {
            let known = names(&file.sprites);
            let index =
                file.sprites
                    .iter()
                    .position(|s| s.name == name)
                    .ok_or(RegistryError::Unknown {
                        name: name.to_string(),
                        known,
                    })?;
            Ok(file.sprites.remove(index))
        })
    }

    /// Records (or, with `None`, forgets) the edge Worker of sprite `name`.
    pub fn set_worker(
        &self,
        name: &str,
        worker: Option<WorkerRecord>,
    ) -> Result<(), RegistryError> {
        self.update(|file| {
            let known = names(&file.sprites);
            let entry =
                file.sprites
                    .iter_mut()
                    .find(|s| s.name == name)
                    .ok_or(RegistryError::Unknown {
                        name: name.to_string(),
                        known,
                    })?;
            entry.worker = worker;
            Ok(())
        })
    }

    /// Picks the sprite: the one named (`--sprite`, else `$ZODEX_SPRITE`, as the command line
    /// read them), else the only one registered. Reads no environment itself, so that what a
    /// caller passes is all that decides.
    pub fn choose(&self, wanted: Option<&str>) -> Result<SpriteEntry, RegistryError> {
        let sprites = self.list()?;
        match wanted.map(String::from) {
            Some(name) => {
                sprites
                    .iter()
                    .find(|s| s.name == name)
                    .cloned()
                    .ok_or(RegistryError::Unknown {
                        name,
                        known: names(&sprites),
                    })
            }
            None => match sprites.as_slice() {
                [] => Err(RegistryError::Empty),
                [only] => Ok(only.clone()),
                many => Err(RegistryError::Ambiguous(names(many))),
            },
        }
    }
}

/// `entry` (a fleet's) may be registered among `sprites`: no entry of its name, or the same
/// fleet with the same identity directory.
fn fleet_free(sprites: &[SpriteEntry], entry: &SpriteEntry) -> Result<(), RegistryError> {
    if !valid_name(&entry.name) {
        return Err(RegistryError::BadName(entry.name.clone()));
    }
    let Some(existing) = sprites.iter().find(|s| s.name == entry.name) else {
        return Ok(());
    };
    match (&existing.fleet, &entry.fleet) {
        (Some(have), Some(want)) if have.dir == want.dir => Ok(()),
        (Some(have), _) => Err(RegistryError::FleetExists {
            name: entry.name.clone(),
            dir: have.dir.clone(),
        }),
        (None, _) => Err(RegistryError::SpriteNamedLikeFleet(entry.name.clone())),
    }
}

fn names(sprites: &[SpriteEntry]) -> String {
    if sprites.is_empty() {
        return "none".to_string();
    }
    sprites
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> SpriteEntry {
        SpriteEntry {
            name: name.into(),
            admin_command: exec_admin_command(&format!("sprite exec -s {name} --"), None).unwrap(),
            worker: None,
            fleet: None,
        }
    }

    #[test]
    fn add_list_choose_remove() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::at(dir.path().join("sprites.toml"));
        assert!(matches!(registry.choose(None), Err(RegistryError::Empty)));
        registry.add(entry("one")).unwrap();
        assert_eq!(registry.choose(None).unwrap().name, "one");
        assert!(matches!(
            registry.add(entry("one")),
            Err(RegistryError::Exists(_))
        ));
        registry.add(entry("two")).unwrap();
        let err = registry.choose(None).unwrap_err().to_string();
        assert!(
            err.contains("one, two") && err.contains("--sprite"),
            "{err}"
        );
        assert_eq!(
            registry.choose(Some("two")).unwrap().admin_command,
            vec!["sprite", "exec", "-s", "two", "--", "zodex-prd", "admin"]
        );
        let err = registry.choose(Some("three")).unwrap_err().to_string();
        assert!(err.contains("registered: one, two"), "{err}");
        registry.remove("one").unwrap();
        assert_eq!(registry.list().unwrap().len(), 1);
        assert!(matches!(
            registry.add(entry("Bad Name")),
            Err(RegistryError::BadName(_))
        ));
    }

    fn fleet(name: &str, dir: &str) -> SpriteEntry {
        SpriteEntry {
            name: name.into(),
            admin_command: Vec::new(),
            worker: None,
            fleet: Some(FleetReach {
                services: vec!["https://127.0.0.1:1".into()],
                dir: dir.into(),
            }),
        }
    }

    #[test]
    fn a_fleets_entry_is_never_registered_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::at(dir.path().join("sprites.toml"));
        registry.register_fleet(fleet("acme", "/a/alice")).unwrap();
        // The same identity again: kept as it is.
        registry.register_fleet(fleet("acme", "/a/alice")).unwrap();
        // Another identity for the same fleet: refused, the first kept.
        let err = registry
            .register_fleet(fleet("acme", "/a/bob"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/a/alice") && err.contains("zodex sprite remove acme"),
            "{err}"
        );
        // Another fleet is another entry; a sprite's name is not taken over.
        registry.register_fleet(fleet("other", "/o/alice")).unwrap();
        registry.add(entry("box")).unwrap();
        assert!(matches!(
            registry.register_fleet(fleet("box", "/b")),
            Err(RegistryError::SpriteNamedLikeFleet(_))
        ));
        let dirs: Vec<_> = registry
            .list()
            .unwrap()
            .into_iter()
            .filter_map(|e| e.fleet.map(|f| (e.name, f.dir)))
            .collect();
        assert_eq!(
            dirs,
            [
                ("acme".to_string(), PathBuf::from("/a/alice")),
                ("other".to_string(), PathBuf::from("/o/alice"))
            ]
        );
    }

    #[test]
    fn concurrent_adds_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sprites.toml");
        std::thread::scope(|scope| {
            for i in 0..16 {
                let path = path.clone();
                scope.spawn(move || Registry::at(path).add(entry(&format!("s{i}"))).unwrap());
            }
        });
        assert_eq!(Registry::at(path).list().unwrap().len(), 16);
    }

    #[test]
    fn exec_prefix_is_split_like_a_shell() {
        assert_eq!(
            exec_admin_command("ssh -o 'ProxyCommand=x y' host", None).unwrap(),
            vec![
                "ssh",
                "-o",
                "ProxyCommand=x y",
                "host",
                "zodex-prd",
                "admin"
            ]
        );
        assert!(exec_admin_command("ssh 'unterminated", None).is_err());
        assert!(exec_admin_command("  ", None).is_err());
    }

    #[test]
    fn an_exec_sprites_remote_config_is_passed_to_every_admin_request() {
        assert_eq!(
            exec_admin_command(
                "sprite exec -s one --",
                Some(Path::new("/srv/zodex/zodex.toml"))
            )
            .unwrap(),
            vec![
                "sprite",
                "exec",
                "-s",
                "one",
                "--",
                "zodex-prd",
                "admin",
                "--config",
                "/srv/zodex/zodex.toml"
            ]
        );
    }
}
