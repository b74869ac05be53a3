//! What a service's log says about how it last ended: the errors of its last start, and how
//! often its manager started it again in the last minute. A service that refuses to start
//! (`zodex-prd serve` on a key file open to others) exits at once, and its manager starts it
//! again every 2 s: between two starts `/proc` shows no process, which is not "stopped".
//!
//! Plumbing only: each function reads log text it is given, with the time passed in, and runs
//! nothing. Both managers' logs are read: the supervisor script's file (its own lines
//! `<time> zodex-supervise: SERVICE exited with N; restarting in 2s`) and systemd's journal as
//! `journalctl -o short-unix` prints it (`<unix time> <host> systemd[1]: SERVICE.service:
//! Scheduled restart job, …`).

/// The line the supervisor script writes each time a service exits and is started again.
const SUPERVISOR_EXIT: &str = " zodex-supervise: ";
/// systemd's line when it starts a service again after it exited.
const SYSTEMD_RESTART: &str = ".service: Scheduled restart job";
/// systemd's line when a service's main process exits.
const SYSTEMD_EXIT: &str = ".service: Main process exited";

/// Whether `line` marks the end of one start of a service.
fn ends_a_start(line: &str) -> bool {
    line.contains(SUPERVISOR_EXIT) && line.contains(" exited with ") || line.contains(SYSTEMD_EXIT)
}

/// The last line marking the end of a start (with its time, so a later exit is another
/// line); `None` when the log shows none.
pub fn last_exit(log: &str) -> Option<&str> {
    log.lines().rev().find(|line| ends_a_start(line))
}

/// The message of a log line: a journal line's text after `NAME[PID]: `, else the line.
fn message(line: &str) -> &str {
    // `1764702000.123456 host zodex-prd[123]: error: …`: the third word ends with `]:`.
    let mut words = line.splitn(4, ' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some(time), Some(_host), Some(unit), Some(rest))
            if time.parse::<f64>().is_ok() && unit.ends_with("]:") =>
        {
            rest
        }
        _ => line,
    }
}

/// Whether a message is an error the service wrote: our binaries' `error: …` lines, tracing's
/// `ERROR` lines, and a panic's first line (`thread 'main' panicked at …`).
fn is_error(message: &str) -> bool {
    message.starts_with("error: ")
        || message.contains(" ERROR ")
        || message.starts_with("thread '") && message.contains(" panicked at ")
}

/// The errors the service wrote in its last start that ended (the last one, if none ended),
/// in the order written, `error: ` taken off: the first is the cause, the rest follow from it.
pub fn last_errors(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let ends: Vec<usize> = (0..lines.len())
        .filter(|&i| ends_a_start(lines[i]))
        .collect();
    let (from, to) = match ends.as_slice() {
        [] => (0, lines.len()),
        [.., before, last] => (before + 1, *last),
        [last] => (0, *last),
    };
    let mut errors: Vec<String> = lines
        .get(from..to)
        .unwrap_or_default()
        .iter()
        .map(|l| message(l))
        .filter(|m| is_error(m))
        .map(|m| m.strip_prefix("error: ").unwrap_or(m).to_string())
        .collect();
    if errors.is_empty() && !ends.is_empty() {
        // The start still running (or one that wrote nothing before it ended) may say more.
        errors = last_errors(&lines[ends[ends.len() - 1] + 1..].join("\n"));
    }
    errors
}

/// How many times the manager started the service again at or after `since` (unix seconds).
pub fn restarts_since(log: &str, since: i64) -> u32 {
    log.lines()
        .filter(|line| {
            let at = if line.contains(SUPERVISOR_EXIT) && line.contains("; restarting") {
                line.split_whitespace()
                    .next()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.timestamp())
            } else if line.contains(SYSTEMD_RESTART) {
                line.split_whitespace()
                    .next()
                    .and_then(|t| t.parse::<f64>().ok())
                    .map(|t| t as i64)
            } else {
                None
            };
            at.is_some_and(|at| at >= since)
        })
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A supervised publisher whose writer key was made 0644: three starts, each refused.
    const SUPERVISED: &str = "\
2026-12-02T10:00:00.000001Z  INFO zodex::publisher::daemon: zodex-prd serving
2026-12-02T10:00:50Z zodex-supervise: zodex-prd exited with 1; restarting in 2s
2026-12-02T10:00:52.100000Z  INFO zodex::publisher::host: opening the state
error: the writer App key /etc/zodex/keys/writer.pem is open to others (mode 644): chmod 600 /etc/zodex/keys/writer.pem
error: zodex-prd did not start: fix the above
2026-12-02T10:00:52Z zodex-supervise: zodex-prd exited with 1; restarting in 2s
2026-12-02T10:00:54.100000Z  INFO zodex::publisher::host: opening the state
error: the writer App key /etc/zodex/keys/writer.pem is open to others (mode 644): chmod 600 /etc/zodex/keys/writer.pem
error: zodex-prd did not start: fix the above
2026-12-02T10:00:54Z zodex-supervise: zodex-prd exited with 1; restarting in 2s
2026-12-02T10:00:56.100000Z  INFO zodex::publisher::host: opening the state
";

    #[test]
    fn the_cause_is_the_first_error_of_the_last_start_that_ended() {
        let errors = last_errors(SUPERVISED);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("the writer App key") && errors[0].contains("chmod 600"),
            "{errors:?}"
        );
        assert!(errors[1].starts_with("zodex-prd did not start"));
        // A log with no exit marker (a start still under way): its errors as they stand.
        assert_eq!(last_errors("INFO up\nerror: no socket\n"), ["no socket"]);
        assert!(last_errors("INFO serving\n").is_empty());
        // A start that panicked says so.
        let panicked = "INFO up\nthread 'main' (7) panicked at src/x.rs:1:2:\nno state\n\
                        2026-12-02T10:00:52Z zodex-supervise: zodex-prd exited with 101; restarting in 2s\n";
        assert_eq!(
            last_errors(panicked),
            ["thread 'main' (7) panicked at src/x.rs:1:2:"]
        );
    }

    #[test]
    fn restarts_are_counted_within_the_minute_asked_about() {
        let at = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().timestamp();
        assert_eq!(restarts_since(SUPERVISED, at("2026-12-02T10:00:00Z")), 3);
        assert_eq!(restarts_since(SUPERVISED, at("2026-12-02T10:00:51Z")), 2);
        assert_eq!(restarts_since(SUPERVISED, at("2026-12-02T10:01:00Z")), 0);
    }

    /// systemd's journal (`journalctl -o short-unix`): the same facts from its own lines.
    #[test]
    fn the_journal_says_the_same() {
        let journal = "\
1764669650.000000 box zodex-prd[10]: error: the writer App key is open to others
1764669650.100000 box systemd[1]: zodex-prd.service: Main process exited, code=exited, status=1/FAILURE
1764669652.200000 box systemd[1]: zodex-prd.service: Scheduled restart job, restart counter is at 1.
1764669652.300000 box zodex-prd[11]: 2026-12-02T10:00:52Z  INFO zodex::publisher::host: opening
1764669652.400000 box zodex-prd[11]: error: the writer App key is open to others
1764669652.500000 box systemd[1]: zodex-prd.service: Main process exited, code=exited, status=1/FAILURE
1764669654.600000 box systemd[1]: zodex-prd.service: Scheduled restart job, restart counter is at 2.
";
        assert_eq!(
            last_errors(journal),
            ["the writer App key is open to others"]
        );
        assert_eq!(restarts_since(journal, 1764669600), 2);
        assert_eq!(restarts_since(journal, 1764669653), 1);
    }
}
