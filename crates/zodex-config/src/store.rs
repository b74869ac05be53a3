//! `[store]`: where the publisher keeps its state. Absent: one SQLite file in `state_dir`, the
//! embedded default. With `url = "postgres://…"`: a PostgreSQL database that several
//! publishers may share.
//!
//! `zodex.toml` is readable by the agent, so the URL may not carry a password: it comes from
//! `password_file` (read by the publisher user only) or `$ZODEX_STORE_PASSWORD`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The environment variable a PostgreSQL password may come from when no file is named.
pub const STORE_PASSWORD_ENV: &str = "ZODEX_STORE_PASSWORD";

/// The `[store]` table as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://USER@HOST:PORT/DB` (or a Unix socket: `postgres://USER@%2Frun%2Fpostgresql/DB`).
    pub url: String,
    /// A file holding the password (one line), readable by the publisher user only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// Connections each publisher keeps at most (default 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_size: Option<u32>,
    /// How long a request waits for a free connection before it is refused as busy, in
    /// milliseconds (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// Where the state lives, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    Postgres(PostgresLocation),
}

/// A PostgreSQL store as the publisher connects to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresLocation {
    pub url: String,
    pub password_file: Option<PathBuf>,
    pub pool_size: usize,
    pub wait: std::time::Duration,
}

impl PostgresLocation {
    /// The password: `password_file`'s first line, else `$ZODEX_STORE_PASSWORD`, else none
    /// (trust or peer authentication). The error names the file, never its content.
    pub fn password(&self) -> Result<Option<String>, StoreSettingError> {
        match &self.password_file {
            Some(path) => read_password(path).map(Some),
            None => Ok(std::env::var(STORE_PASSWORD_ENV)
                .ok()
                .filter(|p| !p.is_empty())),
        }
    }
}

fn read_password(path: &Path) -> Result<String, StoreSettingError> {
    let text = std::fs::read_to_string(path).map_err(|e| StoreSettingError::PasswordFile {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    let line = text.lines().next().unwrap_or_default().to_string();
    if line.is_empty() {
        return Err(StoreSettingError::PasswordFile {
            path: path.to_path_buf(),
            why: "it is empty".into(),
        });
    }
    Ok(line)
}

/// What is wrong with `[store]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreSettingError {
    #[error(
        "[store] url must start with postgres:// or postgresql:// (remove [store] to keep the state in SQLite)"
    )]
    Scheme,
    #[error(
        "[store] url carries a password, and zodex.toml is readable by the agent: remove it from the URL and put it in [store] password_file (mode 0600, the publisher user's) or ${STORE_PASSWORD_ENV}"
    )]
    PasswordInUrl,
    #[error("[store] pool_size must be 1 to 256 (default 8)")]
    PoolSize,
    #[error("[store] wait_ms must be 10 to 600000 (default 5000)")]
    Wait,
    #[error(
        "[store] password_file {path}: {why}; write the PostgreSQL password on its first line, readable by the publisher user only"
    )]
    PasswordFile { path: PathBuf, why: String },
}

impl StoreConfig {
    /// The checked location of a `[store]` table.
    pub fn location(&self) -> Result<StoreLocation, StoreSettingError> {
        let rest = self
            .url
            .strip_prefix("postgres://")
            .or_else(|| self.url.strip_prefix("postgresql://"))
            .ok_or(StoreSettingError::Scheme)?;
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if let Some((user_info, _)) = authority.rsplit_once('@')
            && user_info.contains(':')
        {
            return Err(StoreSettingError::PasswordInUrl);
        }
        if self.url.contains("password=") {
            return Err(StoreSettingError::PasswordInUrl);
        }
        let pool_size = self.pool_size.unwrap_or(8);
        if !(1..=256).contains(&pool_size) {
            return Err(StoreSettingError::PoolSize);
        }
        let wait_ms = self.wait_ms.unwrap_or(5_000);
        if !(10..=600_000).contains(&wait_ms) {
            return Err(StoreSettingError::Wait);
        }
        Ok(StoreLocation::Postgres(PostgresLocation {
            url: self.url.clone(),
            password_file: self.password_file.clone(),
            pool_size: pool_size as usize,
            wait: std::time::Duration::from_millis(wait_ms),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(url: &str) -> StoreConfig {
        StoreConfig {
            url: url.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_url_is_checked_and_never_carries_a_password() {
        assert!(matches!(
            table("postgres://zodex@db.internal:5432/zodex").location(),
            Ok(StoreLocation::Postgres(_))
        ));
        assert!(matches!(
            table("postgresql://zodex@%2Ftmp%2Fpg/zodex").location(),
            Ok(StoreLocation::Postgres(_))
        ));
        assert_eq!(
            table("postgres://zodex:hunter2@db/zodex").location(),
            Err(StoreSettingError::PasswordInUrl)
        );
        assert_eq!(
            table("postgres://zodex@db/zodex?password=hunter2").location(),
            Err(StoreSettingError::PasswordInUrl)
        );
        assert_eq!(
            table("mysql://zodex@db/zodex").location(),
            Err(StoreSettingError::Scheme)
        );
        let message = StoreSettingError::PasswordInUrl.to_string();
        assert!(message.contains("password_file"), "{message}");
    }

    #[test]
    fn the_password_comes_from_its_file_and_an_error_never_shows_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        let StoreLocation::Postgres(mut location) = StoreConfig {
            url: "postgres://zodex@db/zodex".into(),
            password_file: Some(file.clone()),
            ..Default::default()
        }
        .location()
        .unwrap() else {
            panic!("a postgres location")
        };
        assert_eq!(location.password().unwrap().as_deref(), Some("s3cret"));
        location.password_file = Some(dir.path().join("missing"));
        let err = location.password().unwrap_err().to_string();
        assert!(err.contains("missing") && !err.contains("s3cret"), "{err}");
    }
}
