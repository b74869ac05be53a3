//! Removes terminal escape sequences and control characters from a byte stream, so the model
//! sees plain text.
//!
//! Works on raw bytes before UTF-8 decoding and keeps its state between calls, so a sequence
//! split across two reads is still removed. Removed: CSI (`ESC [ … final`), OSC (`ESC ] … BEL`
//! or `ESC \`), DCS/SOS/PM/APC strings, charset selects (`ESC ( B`) and other two- and
//! three-byte escapes, and C0 controls other than `\t`, `\n` and `\r`. `\r\n` (any number of
//! CRs before a LF) becomes `\n`; a lone `\r` is kept. A backspace erases the previous
//! character when it is still in the buffer (so `man`-style overstrike `X\bX` reads `X`).
//! Bytes ≥ 0x80 in text pass through untouched (8-bit C1 controls are not interpreted: in
//! UTF-8 they are continuation bytes). It does not emulate a screen: cursor movement is
//! dropped, not applied.

/// Longest CSI sequence accepted; a longer one is treated as garbage and abandoned.
const MAX_CSI: usize = 64;
/// Longest OSC/DCS string swallowed; past this the string is abandoned and text resumes.
const MAX_STRING: usize = 4096;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const BS: u8 = 0x08;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Plain text.
    Ground,
    /// One or more `\r` seen; waiting to know whether a `\n` follows.
    Cr,
    /// After `ESC`.
    Escape,
    /// After `ESC` and an intermediate byte (`(`, `#`, `%`, …): one final byte follows.
    EscIntermediate,
    /// Inside `ESC [`.
    Csi,
    /// Inside an OSC (`osc`: BEL also ends it) or DCS/SOS/PM/APC string.
    Str { osc: bool },
    /// `ESC` inside a string: `\` ends the string.
    StrEsc,
}

/// Incremental escape-sequence stripper.
#[derive(Debug)]
pub(crate) struct AnsiStripper {
    state: State,
    /// Bytes consumed by the current CSI or string.
    seq_len: usize,
}

/// True for bytes that leave the fast path in `State::Ground`: C0 controls other than `\n`
/// and `\t`, and DEL. Arithmetic rather than a table, so block scans vectorise.
#[inline(always)]
fn is_special(b: u8) -> bool {
    (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f
}

/// Length of the leading run of `bytes` without special bytes. Scans 32-byte blocks without
/// branching inside a block (vectorised), then the block that holds the special byte.
fn plain_run(bytes: &[u8]) -> usize {
    const BLOCK: usize = 32;
    let mut start = 0;
    for block in bytes.chunks_exact(BLOCK) {
        if block.iter().fold(false, |any, &b| any | is_special(b)) {
            break;
        }
        start += BLOCK;
    }
    start
        + bytes[start..]
            .iter()
            .position(|&b| is_special(b))
            .unwrap_or(bytes.len() - start)
}

impl Default for AnsiStripper {
    fn default() -> Self {
        Self::new()
    }
}

impl AnsiStripper {
    pub(crate) fn new() -> Self {
        Self {
            state: State::Ground,
            seq_len: 0,
        }
    }

    /// Appends the text of `input` to `out`, dropping escape sequences.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            if self.state == State::Ground {
                let run = plain_run(&input[i..]);
                out.extend_from_slice(&input[i..i + run]);
                i += run;
                if i == input.len() {
                    break;
                }
            }
            if self.step(input[i], out) {
                i += 1;
            }
        }
    }

    /// Ends the stream: a pending `\r` is emitted, an unfinished sequence is dropped.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        if self.state == State::Cr {
            out.push(b'\r');
        }
        self.state = State::Ground;
        self.seq_len = 0;
    }

    /// Handles one byte outside the ground fast path. Returns `false` when the byte must be
    /// looked at again in the new state.
    fn step(&mut self, b: u8, out: &mut Vec<u8>) -> bool {
        match self.state {
            State::Ground => {
                match b {
                    b'\r' => self.state = State::Cr,
                    ESC => self.state = State::Escape,
                    BS => erase_last_char(out),
                    b'\n' | b'\t' => out.push(b),
                    _ if b >= 0x20 && b != 0x7f => out.push(b),
                    _ => {} // other C0 controls and DEL
                }
                true
            }
            State::Cr => match b {
                b'\r' => true,
                b'\n' => {
                    out.push(b'\n');
                    self.state = State::Ground;
                    true
                }
                _ => {
                    out.push(b'\r');
                    self.state = State::Ground;
                    false
                }
            },
            State::Escape => {
                self.seq_len = 0;
                match b {
                    b'[' => self.state = State::Csi,
                    b']' => self.state = State::Str { osc: true },
                    b'P' | b'X' | b'^' | b'_' => self.state = State::Str { osc: false },
                    0x20..=0x2f => self.state = State::EscIntermediate,
                    ESC => {}
                    0x30..=0x7e => self.state = State::Ground,
                    _ => {
                        self.state = State::Ground;
                        return false;
                    }
                }
                true
            }
            State::EscIntermediate => match b {
                0x20..=0x2f => true,
                0x30..=0x7e => {
                    self.state = State::Ground;
                    true
                }
                _ => {
                    self.state = State::Ground;
                    false
                }
            },
            State::Csi => {
                self.seq_len += 1;
                match b {
                    0x20..=0x3f if self.seq_len <= MAX_CSI => true,
                    0x40..=0x7e | CAN | SUB => {
                        self.state = State::Ground;
                        true
                    }
                    ESC => {
                        self.state = State::Escape;
                        true
                    }
                    _ => {
                        self.state = State::Ground;
                        false
                    }
                }
            }
            State::Str { osc } => {
                self.seq_len += 1;
                match b {
                    BEL if osc => self.state = State::Ground,
                    CAN | SUB => self.state = State::Ground,
                    ESC => self.state = State::StrEsc,
                    _ if self.seq_len > MAX_STRING => {
                        self.state = State::Ground;
                        return false;
                    }
                    _ => {}
                }
                true
            }
            State::StrEsc => {
                if b == b'\\' {
                    self.state = State::Ground;
                    true
                } else {
                    self.state = State::Escape;
                    false
                }
            }
        }
    }
}

/// Removes the last UTF-8 character of `out`, unless `out` is empty or ends a line.
fn erase_last_char(out: &mut Vec<u8>) {
    if out.last() == Some(&b'\n') {
        return;
    }
    while let Some(b) = out.pop() {
        if b & 0xc0 != 0x80 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(input: &[u8]) -> String {
        let mut s = AnsiStripper::new();
        let mut out = Vec::new();
        s.feed(input, &mut out);
        s.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn strip_bytewise(input: &[u8]) -> String {
        let mut s = AnsiStripper::new();
        let mut out = Vec::new();
        for b in input {
            s.feed(std::slice::from_ref(b), &mut out);
        }
        s.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn removes_sgr_and_cursor_sequences() {
        assert_eq!(strip(b"\x1b[31mred\x1b[0m plain\n"), "red plain\n");
        assert_eq!(strip(b"a\x1b[2K\x1b[1;1Hb\x1b[?25l"), "ab");
    }

    #[test]
    fn removes_osc_with_bel_or_st_and_hyperlinks() {
        assert_eq!(strip(b"\x1b]0;title\x07text"), "text");
        assert_eq!(strip(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\!"), "link!");
        assert_eq!(strip(b"\x1bP1$r0m\x1b\\ok"), "ok");
    }

    #[test]
    fn removes_charset_selects_and_short_escapes() {
        assert_eq!(strip(b"\x1b(Bx\x1b)0y\x1b7z\x1b8\x1b=\x1b>"), "xyz");
        assert_eq!(strip(b"\x1b#8e"), "e");
    }

    #[test]
    fn crlf_becomes_lf_and_lone_cr_stays() {
        assert_eq!(strip(b"a\r\nb\r\r\nc"), "a\nb\nc");
        assert_eq!(strip(b"10%\r20%\n"), "10%\r20%\n");
        assert_eq!(strip(b"end\r"), "end\r");
    }

    #[test]
    fn drops_control_chars_but_keeps_tabs_and_utf8() {
        assert_eq!(strip(b"a\x07b\x00c\td\x7f"), "abc\td");
        assert_eq!(strip("héllo ✓\n".as_bytes()), "héllo ✓\n");
    }

    #[test]
    fn backspace_applies_overstrike() {
        assert_eq!(strip(b"b\x08bo\x08ol\x08ld"), "bold");
        assert_eq!(strip(b"_\x08X"), "X");
        assert_eq!(strip("é\x08e".as_bytes()), "e");
        assert_eq!(strip(b"a\n\x08b"), "a\nb");
    }

    #[test]
    fn sequences_split_across_feeds_are_removed() {
        let input = b"\x1b[38;5;196mred\x1b[0m\r\n\x1b]0;t\x07ok\x1b(B\n";
        assert_eq!(strip_bytewise(input), strip(input));
        assert_eq!(strip(input), "red\nok\n");
    }

    #[test]
    fn unterminated_string_gives_up_after_a_bound() {
        let mut input = b"\x1b]".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_STRING + 10));
        let out = strip(&input);
        assert!(!out.is_empty() && out.len() < 20, "{}", out.len());
    }

    #[test]
    fn plain_run_finds_the_first_special_byte_in_any_block() {
        let mut text = vec![b'a'; 100];
        assert_eq!(plain_run(&text), 100);
        for pos in [0, 31, 32, 33, 63, 64, 99] {
            text[pos] = 0x1b;
            assert_eq!(plain_run(&text), pos);
            text[pos] = b'\n';
            assert_eq!(plain_run(&text), 100);
            text[pos] = b'a';
        }
        text[70] = 0x7f;
        assert_eq!(plain_run(&text), 70);
        assert_eq!(plain_run("é✓\t".as_bytes()), 6);
    }

    #[test]
    fn malformed_csi_resumes_text() {
        assert_eq!(strip(b"\x1b[12\nnext"), "\nnext");
    }
}
