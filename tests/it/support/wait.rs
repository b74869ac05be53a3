//! Waiting for something to happen, the one way the tests do it: a check asked again and again
//! until it holds ([`eventually`], [`poll`], and [`eventually_async`] for tokio tests), never a
//! fixed sleep. The pause between two looks is the only sleep here.
//!
//! `tests/session.rs` includes this file on its own (`#[path]`): it uses nothing else of the
//! harness.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// What a check may answer: `bool` (done or not) or `Option<T>` (done, with the value found).
pub trait Done {
    type Value;
    fn done(self) -> Option<Self::Value>;
}

impl Done for bool {
    type Value = ();
    fn done(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Done for Option<T> {
    type Value = T;
    fn done(self) -> Option<T> {
        self
    }
}

/// The pause after the `look`th look that found nothing: short at first (most waits end within
/// a few milliseconds), then at most 50 ms.
fn pause(look: u32) -> Duration {
    Duration::from_millis(50).min(Duration::from_millis(1 << look.min(6)))
}

/// Asks `check` until it is done, or until `timeout` has passed (`None` then). It is asked at
/// least once, and once more at the end of the time.
pub fn poll<D: Done>(timeout: Duration, mut check: impl FnMut() -> D) -> Option<D::Value> {
    let deadline = Instant::now() + timeout;
    for look in 0.. {
        if let Some(value) = check().done() {
            return Some(value);
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // The pause between two looks (the polling helpers' one sleep).
        std::thread::sleep(pause(look).min(deadline - now));
    }
    None
}

/// Asks `check` until it is done and returns what it found; panics naming `what` once
/// `timeout` has passed.
#[track_caller]
pub fn eventually<D: Done>(what: &str, timeout: Duration, check: impl FnMut() -> D) -> D::Value {
    match poll(timeout, check) {
        Some(value) => value,
        None => panic!("not within {timeout:?}: {what}"),
    }
}

/// [`eventually`], whose panic also shows `detail()`, read when it gives up (a daemon's log,
/// the last state seen).
#[track_caller]
pub fn eventually_with<D: Done>(
    what: &str,
    timeout: Duration,
    detail: impl FnOnce() -> String,
    check: impl FnMut() -> D,
) -> D::Value {
    match poll(timeout, check) {
        Some(value) => value,
        None => panic!("not within {timeout:?}: {what}\n{}", detail()),
    }
}

/// [`eventually`] for a tokio test: the pause lets the runtime go on.
pub async fn eventually_async<D: Done>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> D,
) -> D::Value {
    let deadline = tokio::time::Instant::now() + timeout;
    for look in 0.. {
        if let Some(value) = check().done() {
            return value;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            break;
        }
        // The pause between two looks (the async helper's one sleep).
        tokio::time::sleep(pause(look).min(deadline - now)).await;
    }
    panic!("not within {timeout:?}: {what}")
}

/// Runs `work` on a thread of its own and returns what it returns, or panics naming `what` when
/// it has not finished after `timeout`: a hang guard, generous on purpose — it fails a test that
/// would otherwise wait for ever, and says nothing about how fast the work is.
#[track_caller]
pub fn finishes_within<T: Send + 'static>(
    what: &str,
    timeout: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(timeout) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {timeout:?}: a hang")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}
