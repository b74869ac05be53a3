//! The state database as the async host shares it: one SQLite connection behind a lock, its
//! work run on a blocking thread (`run`) or, from code already on one, right there (`with`).

use std::sync::{Arc, Mutex};
use zodex_engine::store::Store;

#[derive(Clone)]
pub struct SharedStore(Arc<Mutex<Store>>);

impl SharedStore {
    pub fn new(store: Store) -> Self {
        Self(Arc::new(Mutex::new(store)))
    }

    /// Runs `f` on the store here: for code already on a blocking thread.
    pub fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        // A panic while holding the lock cannot leave a half-written transaction (SQLite rolls
        // it back), so a poisoned lock is safe to keep using.
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs `f` on the store on a blocking thread; a panic in it goes on in the caller.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> T + Send + 'static,
    ) -> T {
        let store = self.clone();
        match tokio::task::spawn_blocking(move || store.with(f)).await {
            Ok(value) => value,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a state database task was cancelled: {e}"),
        }
    }
}
