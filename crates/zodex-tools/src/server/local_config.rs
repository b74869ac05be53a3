//! Local mode's settings, `$ZODEX_HOME/local/config.toml`, read by `zodex local start` and
//! changed with `zodex local config get|set`: the parts of `zodex_context` (`[context]`, as in a
//! sprite's `[mcp.context]`) and how much history is kept (`[history]`, see [`Retention`]).
//! Unknown keys are refused, in the file and on the command line.

use super::UsageError;
use super::context::ContextConfig;
use super::retention::Retention;
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalConfig {
    pub context: ContextConfig,
    pub history: Retention,
}

/// Every key `get` and `set` know, with its kind.
pub const KEYS: &[(&str, Kind)] = &[
    ("context.global_agents", Kind::Bool),
    ("context.global_skills", Kind::Bool),
    ("context.workdir_agents", Kind::Bool),
    ("context.workdir_skills", Kind::Bool),
    ("context.max_bytes", Kind::Number),
    ("history.max_age_days", Kind::Number),
    ("history.max_mib", Kind::Number),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Number,
}

fn table(path: &Path) -> anyhow::Result<toml::Table> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text
            .parse()
            .map_err(|e| UsageError(format!("{}: {e}", path.display())))?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(toml::Table::new()),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

impl LocalConfig {
    /// The settings in `path` (defaults when it does not exist).
    pub fn load(path: &Path) -> anyhow::Result<LocalConfig> {
        let table = table(path)?;
        toml::Value::Table(table)
            .try_into()
            .map_err(|e| UsageError(format!("{}: {e}", path.display())).into())
    }

    /// Every key and its effective value.
    pub fn values(&self) -> Vec<(&'static str, String)> {
        let c = &self.context;
        let h = &self.history;
        vec![
            ("context.global_agents", c.global_agents.to_string()),
            ("context.global_skills", c.global_skills.to_string()),
            ("context.workdir_agents", c.workdir_agents.to_string()),
            ("context.workdir_skills", c.workdir_skills.to_string()),
            ("context.max_bytes", c.max_bytes.to_string()),
            ("history.max_age_days", h.max_age_days.to_string()),
            ("history.max_mib", h.max_mib.to_string()),
        ]
    }

    /// The effective value of `key`.
    pub fn get(&self, key: &str) -> anyhow::Result<String> {
        self.values()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| unknown(key))
    }
}

fn unknown(key: &str) -> anyhow::Error {
    let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
    UsageError(format!(
        "unknown key `{key}`; the keys are {}",
        known.join(", ")
    ))
    .into()
}

/// Sets `key` to `value` in the file at `path` (created 0600 when missing), after checking the
/// whole file still reads; returns the new settings.
pub fn set(path: &Path, key: &str, value: &str) -> anyhow::Result<LocalConfig> {
    let kind = KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, kind)| *kind)
        .ok_or_else(|| unknown(key))?;
    let parsed = match kind {
        Kind::Bool => toml::Value::Boolean(
            value
                .parse()
                .map_err(|_| UsageError(format!("`{key}` is true or false, not `{value}`")))?,
        ),
        Kind::Number => toml::Value::Integer(
            value
                .parse::<u32>()
                .map_err(|_| UsageError(format!("`{key}` is a whole number, not `{value}`")))?
                .into(),
        ),
    };
    let (section, name) = key.split_once('.').expect("every key has a section");
    let mut table = table(path)?;
    let entry = table
        .entry(section.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(inner) = entry.as_table_mut() else {
        return Err(UsageError(format!("{}: `{section}` is not a table", path.display())).into());
    };
    inner.insert(name.to_string(), parsed);
    let config: LocalConfig = toml::Value::Table(table.clone())
        .try_into()
        .map_err(|e| UsageError(format!("{key} = {value}: {e}")))?;
    if let Some(dir) = path.parent() {
        super::create_private_dir(dir)?;
    }
    let text = toml::to_string(&table)?;
    write_private(path, &text)?;
    Ok(config)
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_writes_a_known_key_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        assert_eq!(LocalConfig::load(&path).unwrap(), LocalConfig::default());
        let config = set(&path, "history.max_age_days", "7").unwrap();
        assert_eq!(config.history.max_age_days, 7);
        let config = set(&path, "context.global_skills", "false").unwrap();
        assert!(!config.context.global_skills);
        assert_eq!(LocalConfig::load(&path).unwrap(), config);
        assert_eq!(config.get("history.max_mib").unwrap(), "64");
        assert!(set(&path, "history.max_days", "7").is_err());
        assert!(set(&path, "context.global_skills", "maybe").is_err());
        assert!(set(&path, "history.max_mib", "-1").is_err());
    }
}
