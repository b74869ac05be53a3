//! One async lock per repository, made on first use: work on one repository (a mirror's
//! fetch and push, a write token's issuance) is serialised, other repositories go on, and a
//! request waiting for another's GitHub call holds no thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct RepoLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl RepoLocks {
    /// Waits for the lock of `key` (a repository's lower-cased key); it is held until the
    /// guard goes. A repository's entry goes when no one holds or waits for its lock.
    pub async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
            all.retain(|_, lock| Arc::strong_count(lock) > 1);
            all.entry(key.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::RepoLocks;

    #[tokio::test]
    async fn one_repository_waits_and_another_does_not() {
        let locks = RepoLocks::default();
        let held = locks.lock("demo/app").await;
        let other = tokio::time::timeout(std::time::Duration::from_secs(1), locks.lock("demo/web"));
        assert!(other.await.is_ok(), "another repository must not wait");
        let same = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            locks.lock("demo/app"),
        );
        assert!(same.await.is_err(), "the same repository must wait");
        drop(held);
        let again = tokio::time::timeout(std::time::Duration::from_secs(1), locks.lock("demo/app"));
        assert!(again.await.is_ok(), "the lock is free once its guard went");
        // Entries nobody holds are dropped, so the map stays as small as the work in flight.
        let _held = locks.lock("demo/other").await;
        assert_eq!(locks.0.lock().unwrap().len(), 1);
    }
}
