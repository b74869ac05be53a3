//! Human output: text from the sprite made safe for a terminal, and (in `answers`) the
//! publisher's typed answers rendered as short, readable text.
//!
//! Much of what is shown was written by the agent (reasons, repository and ref names, error
//! messages the daemon relays). Every such string goes through [`safe`] before it reaches a
//! terminal, so a control sequence or a bidi override cannot rewrite what the operator sees;
//! `--json` output goes through [`safe_json`].

use crate::engine::ttl::format_duration;
use crate::protocol::Response;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

mod answers;
pub mod shadow;
mod verbs;
pub use answers::*;
pub use verbs::Verbs;

/// Characters a terminal would act on or that reorder the text around them: C0 controls
/// (newline and tab included: one value stays on one line), DEL, C1 controls, the bidi
/// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), the bidi marks
/// (U+061C, U+200E, U+200F), zero-width characters (U+200B–U+200D, U+FEFF) and the Unicode
/// line and paragraph separators (U+2028, U+2029).
pub fn is_unsafe_char(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{feff}')
}

/// `text` made safe to print: every [`is_unsafe_char`] is shown as a visible escape (`\r`,
/// `\n`, `\t`, `\x1b`, `\u{202e}`), and a backslash as `\\` so an escape cannot be forged.
/// Text with nothing to escape is returned as is.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || is_unsafe_char(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 && is_unsafe_char(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text with every non-ASCII [`is_unsafe_char`] (and DEL) written as a `\uXXXX` escape:
/// the same JSON value, but nothing in it a terminal acts on. serde_json already escapes the
/// C0 controls inside strings; the characters replaced here can only occur inside strings.
pub fn safe_json(json: String) -> String {
    if !json.chars().any(|c| c as u32 >= 0x7f && is_unsafe_char(c)) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c as u32 >= 0x7f && is_unsafe_char(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value pretty-printed for a terminal (see [`safe_json`]).
pub fn json_pretty(value: &impl serde::Serialize) -> String {
    safe_json(serde_json::to_string_pretty(value).unwrap_or_default())
}

/// `2026-11-30 03:10:00 UTC`
pub fn time(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| unix.to_string())
}

fn left(seconds: Option<i64>) -> String {
    match seconds {
        Some(s) if s > 0 => format!("{} left", format_duration(Duration::from_secs(s as u64))),
        Some(_) => "expired".to_string(),
        None => "no TTL".to_string(),
    }
}

pub fn error_text(response: &Response) -> String {
    let Some(error) = &response.error else {
        return "error: the publisher answered without a result".to_string();
    };
    let mut out = format!("error: {}", safe(&error.message));
    if let Some(unblock) = &error.unblock {
        let _ = write!(out, "\n  next: {}", safe(unblock));
    }
    out
}

/// The line under a partial listing that says how to see the rest.
pub fn more_rows(next_before: i64) -> String {
    format!("Older rows exist: run the same command with `--before {next_before}` to see them.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn safe_escapes_every_class_visibly_and_leaves_plain_text_alone() {
        assert!(matches!(safe("demo/app fix CI"), Cow::Borrowed(_)));
        assert_eq!(safe("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(safe("\u{1b}[2K\u{0}\u{7}"), "\\x1b[2K\\x00\\x07");
        assert_eq!(safe("x\u{7f}y"), "x\\x7fy");
        assert_eq!(safe("\u{9b}31m\u{85}"), "\\x9b31m\\x85");
        for c in ['\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}'] {
            assert_eq!(safe(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
        for c in [
            '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{200f}', '\u{2028}',
        ] {
            assert_eq!(safe(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
        // A literal backslash cannot pose as an escape; other text (accents, CJK) stays.
        assert_eq!(safe("\\x1b é 漢"), "\\\\x1b é 漢");
        for text in [
            "\u{1b}]0;t\u{7}",
            "\u{202e}ppa/omed",
            "a\u{9d}b",
            "\u{2069}",
        ] {
            assert!(!safe(text).chars().any(is_unsafe_char), "{text:?}");
        }
    }

    #[test]
    fn safe_json_is_the_same_value_without_raw_controls() {
        let value = json!({"reason": "\u{202e}x\u{9b}y\u{7f}\u{1b}z", "n": 1});
        let text = json_pretty(&value);
        assert!(
            !text.chars().any(|c| c != '\n' && is_unsafe_char(c)),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }

    /// An answer of another shape (a publisher of another version) is said to be one, never
    /// printed as an empty line.
    #[test]
    fn an_answer_of_another_shape_names_the_version_mismatch() {
        let response = Response::ok(json!({"identifier": 1}));
        let error = response
            .answer::<crate::protocol::answers::Grant>()
            .unwrap_err()
            .to_string();
        assert!(error.contains("install matching"), "{error}");
    }
}
