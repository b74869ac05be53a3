//! The state one running devhub shares between its API and git servers: the description (on
//! disk, cached here), live tokens, pending faults, rate-limit windows and counters.

use super::api::shapes::Urls;
use super::config::DevHubConfig;
use super::error::DevHubError;
use super::faults::Faults;
use super::git::Git;
use super::model::{Description, Repo};
use super::tokens::TokenStore;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

pub(crate) struct Hub {
    pub config: DevHubConfig,
    pub git: Git,
    pub urls: Urls,
    pub description: RwLock<Description>,
    pub tokens: Mutex<TokenStore>,
    pub faults: Mutex<Faults>,
    pub rate: Mutex<HashMap<String, RateWindow>>,
    pub admin_key: String,
    pub api_requests: AtomicU64,
    pub git_requests: AtomicU64,
    /// Seconds this devhub's clock runs ahead of the system's: a test moves it forward
    /// ([`super::RunningDevHub::advance_clock`]) instead of sleeping until a token expires.
    pub clock_offset: AtomicI64,
    /// Serialises changes to refs and to the description (PRs, ref deletion).
    pub writes: tokio::sync::Mutex<()>,
}

/// One identity's primary rate-limit window (an hour from its first request).
#[derive(Debug, Clone, Copy)]
pub struct RateWindow {
    pub started: i64,
    pub used: u32,
}

impl Hub {
    pub fn new(
        config: DevHubConfig,
        description: Description,
        urls: Urls,
        admin_key: String,
    ) -> Self {
        Self {
            git: Git::new(config.git.clone()),
            config,
            urls,
            description: RwLock::new(description),
            tokens: Mutex::default(),
            faults: Mutex::default(),
            rate: Mutex::default(),
            admin_key,
            api_requests: AtomicU64::new(0),
            git_requests: AtomicU64::new(0),
            clock_offset: AtomicI64::new(0),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// This devhub's time: the system's, plus the offset a test gave it.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::seconds(self.clock_offset.load(Ordering::Relaxed))
    }

    pub fn read<R>(&self, f: impl FnOnce(&Description) -> R) -> R {
        f(&self.description.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Changes the description and writes it to disk; on a write error the change is undone.
    pub fn update<R>(&self, f: impl FnOnce(&mut Description) -> R) -> Result<R, DevHubError> {
        let mut guard = self.description.write().unwrap_or_else(|e| e.into_inner());
        let before = guard.clone();
        let result = f(&mut guard);
        if let Err(e) = guard.save(&self.config.dir) {
            *guard = before;
            return Err(e);
        }
        Ok(result)
    }

    /// Re-reads `devhub.json` (after a [`super::Setup`] changed it while running).
    pub fn reload(&self) -> Result<(), DevHubError> {
        let fresh = Description::load(&self.config.dir)?;
        *self.description.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    pub fn repo_path(&self, repo: &Repo) -> PathBuf {
        self.config.repos_dir().join(repo.relative_path())
    }
}
