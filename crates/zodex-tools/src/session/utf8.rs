//! Incremental, lossy UTF-8 decoding that never splits a character across reads.
//!
//! The caller keeps one byte buffer per stream: new bytes are appended to it, `decode_lossy`
//! moves every complete character into a `String` (invalid bytes become U+FFFD) and leaves an
//! incomplete trailing sequence (at most 3 bytes) in the buffer for the next read.

/// Decodes the complete characters at the start of `bytes` into `out` and removes them from
/// `bytes`. With `at_end`, an incomplete trailing sequence is decoded as U+FFFD too.
pub(crate) fn decode_lossy(bytes: &mut Vec<u8>, out: &mut String, at_end: bool) {
    let mut i = 0;
    while i < bytes.len() {
        match std::str::from_utf8(&bytes[i..]) {
            Ok(text) => {
                out.push_str(text);
                i = bytes.len();
            }
            Err(err) => {
                let valid = err.valid_up_to();
                if let Ok(text) = std::str::from_utf8(&bytes[i..i + valid]) {
                    out.push_str(text);
                }
                i += valid;
                match err.error_len() {
                    Some(bad) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        i += bad;
                    }
                    None if at_end => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        i = bytes.len();
                    }
                    None => break,
                }
            }
        }
    }
    bytes.drain(..i);
}

/// Hands the complete characters at the start of `bytes` to `sink` and removes them, like
/// `decode_lossy`, but without copying in the usual case of valid UTF-8 (`scratch` is used only
/// when invalid bytes must be replaced).
pub(crate) fn drain_decoded(
    bytes: &mut Vec<u8>,
    at_end: bool,
    scratch: &mut String,
    sink: impl FnOnce(&str),
) {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            sink(text);
            bytes.clear();
        }
        Err(err) if err.error_len().is_none() && !at_end => {
            let valid = err.valid_up_to();
            if let Ok(text) = std::str::from_utf8(&bytes[..valid]) {
                sink(text);
            }
            bytes.drain(..valid);
        }
        Err(_) => {
            scratch.clear();
            decode_lossy(bytes, scratch, at_end);
            sink(scratch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_split_character_for_the_next_read() {
        let text = "aé✓😀";
        let all = text.as_bytes();
        for split in 0..=all.len() {
            let mut buf = all[..split].to_vec();
            let mut out = String::new();
            decode_lossy(&mut buf, &mut out, false);
            buf.extend_from_slice(&all[split..]);
            decode_lossy(&mut buf, &mut out, false);
            assert_eq!(out, text, "split at {split}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn drain_decoded_borrows_valid_text_and_keeps_a_split_char() {
        let mut scratch = String::new();
        let mut got = String::new();
        let mut buf = "ok✓".as_bytes()[..4].to_vec();
        drain_decoded(&mut buf, false, &mut scratch, |t| got.push_str(t));
        assert_eq!((got.as_str(), buf.len()), ("ok", 2));
        buf.extend_from_slice(&"✓".as_bytes()[2..]);
        buf.extend_from_slice(b"\xff!");
        drain_decoded(&mut buf, false, &mut scratch, |t| got.push_str(t));
        assert_eq!(got, "ok✓\u{fffd}!");
        assert!(buf.is_empty());
    }

    #[test]
    fn invalid_bytes_become_replacement_chars() {
        let mut buf = b"a\xffb\xc3(".to_vec();
        let mut out = String::new();
        decode_lossy(&mut buf, &mut out, false);
        assert_eq!(out, "a\u{fffd}b\u{fffd}(");
    }

    #[test]
    fn incomplete_tail_is_replaced_at_end() {
        let mut buf = b"x\xe2\x9c".to_vec();
        let mut out = String::new();
        decode_lossy(&mut buf, &mut out, false);
        assert_eq!((out.as_str(), buf.len()), ("x", 2));
        decode_lossy(&mut buf, &mut out, true);
        assert_eq!(out, "x\u{fffd}");
        assert!(buf.is_empty());
    }
}
