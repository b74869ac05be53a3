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
