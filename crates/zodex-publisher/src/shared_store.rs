//! The state database as the async host shares it: a set of stores (SQLite: its one
//! connection; PostgreSQL: one per connection of the pool, `[store] pool_size`), each used by
//! one task at a time, run on a blocking thread (`run`) or, from code already on one, right
//! there (`with`). On PostgreSQL a replica's reads run side by side (a status, an admission,
//! the facts of a decision); writes still go one at a time across every replica, by the
//! database's write lock.

use std::sync::{Arc, Condvar, Mutex};
use zodex_engine::store::Store;

#[derive(Clone)]
pub struct SharedStore(Arc<Stores>);

struct Stores {
    free: Mutex<Vec<Store>>,
    returned: Condvar,
}

impl SharedStore {
    /// One store, used by one task at a time (SQLite's one writer, a test's store).
    pub fn new(store: Store) -> Self {
        Self::of(vec![store])
    }

    /// Several stores on the same database, each used by one task at a time.
    pub fn of(stores: Vec<Store>) -> Self {
        assert!(
            !stores.is_empty(),
            "a shared store needs at least one store"
        );
        Self(Arc::new(Stores {
            free: Mutex::new(stores),
            returned: Condvar::new(),
        }))
    }

    /// Runs `f` on a free store here (waiting for one): for code already on a blocking
    /// thread. The store goes back when `f` returns or panics — a panic cannot leave a
    /// transaction open (the store rolls it back), so the store stays usable.
    pub fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let mut lent = Lent {
            stores: &self.0,
            store: Some(self.take()),
        };
        f(lent.store.as_mut().expect("lent until dropped"))
    }

    fn take(&self) -> Store {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(store) = free.pop() {
                return store;
            }
            free = self
                .0
                .returned
                .wait(free)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Runs `f` on a free store on a blocking thread; a panic in it goes on in the caller.
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

/// A store lent to one task, given back when dropped (also while unwinding).
struct Lent<'a> {
    stores: &'a Stores,
    store: Option<Store>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            let mut free = self.stores.free.lock().unwrap_or_else(|p| p.into_inner());
            free.push(store);
            self.stores.returned.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn each_store_serves_one_task_at_a_time_and_comes_back_after_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let open = |n: usize| Store::open(&dir.path().join(format!("s{n}.db"))).unwrap();
        let shared = SharedStore::of(vec![open(0), open(1)]);
        let (inside, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    shared.with(|_| {
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        // Long enough for the other threads to queue for the two stores.
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                });
            }
        });
        assert!(
            most.load(Ordering::SeqCst) <= 2,
            "never more tasks than stores"
        );
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.with(|_| panic!("a task fails"))
        }));
        assert!(panicked.is_err());
        // Both stores are back, the one the panicking task held too.
        assert_eq!(shared.0.free.lock().unwrap().len(), 2);
    }
}
