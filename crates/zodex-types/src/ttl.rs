//! The TTL grammar used everywhere a lifetime is typed by a person: `30s`, `45m`, `2h`, `1d`, and
//! combinations such as `1h30m`. Zero, negatives, empty input, unknown units and overflow are
//! refused with a message that shows the accepted forms.

use std::time::Duration;

/// The accepted forms, shown in every error so the user can correct the input at once.
pub const TTL_FORMS: &str = "use a number followed by s, m, h or d, e.g. 30s, 45m, 2h, 1d or 1h30m";

/// The longest TTL an agent's request may end in when the operator did not choose the terms
/// (`max_request_ttl`'s default): four hours covers a long working session, and a grant the
/// operator approved in passing and forgot is over before the next day's work starts.
pub const DEFAULT_MAX_REQUEST_TTL_SECONDS: i64 = 4 * 3600;

/// Longest lifetime we accept: ten years. Anything longer is almost certainly a typo, and it
/// keeps every later `now + ttl` far away from overflow.
const MAX_SECONDS: u64 = 10 * 366 * 24 * 3600;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TtlError {
    #[error("empty duration: {TTL_FORMS}")]
    Empty,
    #[error("invalid duration `{input}`: {reason}; {TTL_FORMS}")]
    Invalid { input: String, reason: &'static str },
}

/// Parses a TTL such as `1h30m` into a duration.
pub fn parse_ttl(input: &str) -> Result<Duration, TtlError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(TtlError::Empty);
    }
    let invalid = |reason| TtlError::Invalid {
        input: input.to_string(),
        reason,
    };
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut last_unit_rank = u8::MAX;
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let (seconds_per_unit, rank) = match ch {
            'd' => (86_400u64, 3u8),
            'h' => (3_600, 2),
            'm' => (60, 1),
            's' => (1, 0),
            '-' => return Err(invalid("negative durations are not allowed")),
            _ => return Err(invalid("unknown unit or character")),
        };
        if digits.is_empty() {
            return Err(invalid("a unit must follow a number"));
        }
        if rank >= last_unit_rank {
            return Err(invalid("units must go from largest to smallest, each once"));
        }
        last_unit_rank = rank;
        let value: u64 = digits.parse().map_err(|_| invalid("number too large"))?;
        digits.clear();
        total = value
            .checked_mul(seconds_per_unit)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| invalid("duration too long"))?;
    }
    if !digits.is_empty() {
        if total == 0 && digits.bytes().all(|b| b == b'0') {
            return Err(invalid("a duration must be longer than zero"));
        }
        return Err(invalid("a number needs a unit"));
    }
    if total == 0 {
        return Err(invalid("a duration must be longer than zero"));
    }
    if total > MAX_SECONDS {
        return Err(invalid("duration too long (at most ten years)"));
    }
    Ok(Duration::from_secs(total))
}

/// Formats a duration the way people type it back (`1h30m`, `45s`), for status output.
pub fn format_duration(duration: Duration) -> String {
    let mut secs = duration.as_secs();
    if secs == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_each_unit_and_combinations() {
        assert_eq!(parse_ttl("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_ttl("45m"), Ok(Duration::from_secs(45 * 60)));
        assert_eq!(parse_ttl("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_ttl("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_ttl("1d2h3m4s"), Ok(Duration::from_secs(93_784)));
    }

    #[test]
    fn refuses_zero_negative_empty_unknown_and_overflow() {
        for bad in [
            "",
            " ",
            "0",
            "0s",
            "0h0m",
            "-5m",
            "5",
            "5x",
            "m",
            "1m1h",
            "1h1h",
            "1.5h",
            "5 m",
            "99999999999999999999s",
            "4000000d",
        ] {
            let err = parse_ttl(bad).expect_err(bad);
            assert!(err.to_string().contains("1h30m"), "{bad}: {err}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["30s", "45m", "2h", "1d", "1h30m", "1d2h3m4s"] {
            assert_eq!(format_duration(parse_ttl(text).unwrap()), text);
        }
    }
}
