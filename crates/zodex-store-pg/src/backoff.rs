//! Reconnecting after the database went away, without a storm: once a new connection fails,
//! this pool tries the next only after a wait that doubles (100 ms to 2 s) with jitter, and
//! every borrow within the wait is refused at once ("unreachable; try again"). A fleet's
//! replicas, which all lose their primary at the same moment, so spread their attempts
//! instead of all knocking at once; the first attempt after a failover is never delayed more
//! than the first wait.

use std::sync::Mutex;
use std::time::{Duration, Instant};

const FIRST: Duration = Duration::from_millis(100);
/// Short enough that a replica finds a promoted standby soon after it takes writes; one probe
/// a second or two per replica is no storm.
const MOST: Duration = Duration::from_secs(2);

/// When the next connection may be tried, and the wait after the next failure.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    state: Mutex<Option<Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    /// No attempt before this.
    until: Instant,
    /// The wait this window was made of: the next doubles it.
    wait: Duration,
    /// When the window was set: only an attempt begun after it (the one probe let through
    /// when it ended) makes the next wait longer, not the attempts already on their way.
    set_at: Instant,
}

impl Backoff {
    /// Whether a connection may be tried at `now`: `Err` with the wait left. When a wait has
    /// just ended, one caller is let through (the probe) and the others wait for its outcome.
    pub(crate) fn may_try(&self, now: Instant) -> Result<(), Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.as_mut() {
            None => Ok(()),
            Some(window) => match window.until.checked_duration_since(now) {
                Some(left) if !left.is_zero() => Err(left),
                _ => {
                    // The probe: the others wait as long again for what it finds.
                    window.until = now + jittered(window.wait);
                    Ok(())
                }
            },
        }
    }

    /// An attempt begun at `started` could not connect at `now`.
    pub(crate) fn failed(&self, started: Instant, now: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let wait = match *state {
            None => FIRST,
            Some(window) if started >= window.set_at => (window.wait * 2).min(MOST),
            Some(_) => return,
        };
        *state = Some(Window {
            until: now + jittered(wait),
            wait,
            set_at: now,
        });
    }

    /// A connection was made: the next failure starts from the first wait again.
    pub(crate) fn succeeded(&self) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// `wait` spread over its half to its whole, at random: two replicas that failed together try
/// again apart.
fn jittered(wait: Duration) -> Duration {
    let mut byte = [0u8; 2];
    let _ = getrandom::fill(&mut byte);
    let fraction = 0.5 + f64::from(u16::from_le_bytes(byte)) / f64::from(u16::MAX) / 2.0;
    wait.mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failed_probe_waits_longer_up_to_the_most_and_a_success_starts_over() {
        let backoff = Backoff::default();
        let began = Instant::now();
        let mut now = began + Duration::from_millis(10);
        assert_eq!(backoff.may_try(began), Ok(()), "nothing failed yet");
        backoff.failed(began, now);
        let first = backoff.may_try(now).unwrap_err();
        assert!(first <= FIRST && first >= FIRST / 2, "{first:?}");
        // Attempts already on their way when the first failed do not make it longer.
        backoff.failed(began, now);
        assert!(backoff.may_try(now).unwrap_err() <= FIRST);
        let mut last = first;
        for _ in 0..8 {
            now += MOST;
            assert_eq!(backoff.may_try(now), Ok(()), "the probe goes");
            assert!(backoff.may_try(now).is_err(), "the others wait for it");
            backoff.failed(now, now);
            last = backoff.may_try(now).unwrap_err();
            assert!(last <= MOST, "{last:?}");
        }
        assert!(last >= MOST / 2, "grown to the most: {last:?}");
        backoff.succeeded();
        assert_eq!(backoff.may_try(now), Ok(()));
    }
}
