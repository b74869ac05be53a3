//! The text helpers of a session's output stream: the tail kept of un-returned text, and
//! counting chars and lines without a second pass.
//!
//! Pure functions and one small buffer; no I/O.

/// The latest `keep` chars of a text stream, trimmed lazily (amortised O(1) per char).
#[derive(Debug)]
pub(crate) struct Tail {
    pub(super) buf: String,
    chars: usize,
    keep: usize,
}

impl Tail {
    pub(crate) fn new(keep: usize) -> Self {
        Self {
            buf: String::new(),
            chars: 0,
            keep,
        }
    }

    pub(crate) fn push(&mut self, text: &str) {
        self.push_counted(text, text.chars().count());
    }

    /// `push` for a `text` known to have `n` chars.
    pub(crate) fn push_counted(&mut self, text: &str, n: usize) {
        if self.keep == 0 || text.is_empty() {
            return;
        }
        if n >= self.keep {
            self.buf.clear();
            self.buf.push_str(last_chars(text, n, self.keep));
            self.chars = self.keep;
            return;
        }
        self.buf.push_str(text);
        self.chars += n;
        if self.chars > 2 * self.keep {
            let start = last_chars(&self.buf, self.chars, self.keep).len();
            let cut = self.buf.len() - start;
            self.buf.drain(..cut);
            self.chars = self.keep;
        }
    }

    pub(crate) fn latest(&self) -> &str {
        last_chars(&self.buf, self.chars, self.keep)
    }

    pub(crate) fn clear(&mut self) {
        self.buf = String::new();
        self.chars = 0;
    }
}

/// Chars and `\n`s in `text`, in one pass (byte-sized counters per block, so it vectorises).
pub(crate) fn count_chars_and_newlines(text: &str) -> (u64, u64) {
    let (mut chars, mut newlines) = (0u64, 0u64);
    for block in text.as_bytes().chunks(255) {
        let (mut c, mut n) = (0u8, 0u8);
        for &b in block {
            // Every byte except UTF-8 continuation bytes (0b10xx_xxxx) starts a char.
            c += u8::from((b as i8) >= -0x40);
            n += u8::from(b == b'\n');
        }
        chars += u64::from(c);
        newlines += u64::from(n);
    }
    (chars, newlines)
}

/// The last `keep` chars of `text`, which has `total` chars (walks `keep` chars from the end).
fn last_chars(text: &str, total: usize, keep: usize) -> &str {
    if total <= keep {
        return text;
    }
    if keep == 0 {
        return "";
    }
    if text.len() == total {
        return &text[total - keep..]; // all ASCII: chars are bytes
    }
    match text.char_indices().rev().nth(keep - 1) {
        Some((idx, _)) => &text[idx..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_std_definitions() {
        let text = "héllo\n✓😀\n".repeat(100) + "tail";
        let (chars, newlines) = count_chars_and_newlines(&text);
        assert_eq!(chars, text.chars().count() as u64);
        assert_eq!(newlines, text.matches('\n').count() as u64);
    }

    #[test]
    fn last_chars_counts_from_the_end() {
        assert_eq!(last_chars("héllo", 5, 3), "llo");
        assert_eq!(last_chars("héllo", 5, 4), "éllo");
        assert_eq!(last_chars("héllo", 5, 9), "héllo");
        assert_eq!(last_chars("héllo", 5, 0), "");
        assert_eq!(last_chars("hello", 5, 2), "lo");
    }

    #[test]
    fn tail_keeps_the_latest_chars_across_many_pushes() {
        let mut tail = Tail::new(4);
        for c in "abcdefghijklmnop".chars() {
            tail.push(&c.to_string());
        }
        assert_eq!(tail.latest(), "mnop");
        tail.push("xy");
        assert_eq!(tail.latest(), "opxy");
        assert!(tail.buf.len() <= 8 * 4);
        tail.push("0123456789");
        assert_eq!(tail.latest(), "6789");
    }
}
