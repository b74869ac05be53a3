//! How a blob is cut into windows, so a scan's work per regex call is bounded and a keyword
//! switches its rules on near where it occurs, not for the whole blob.
//!
//! Window `k` reads `[start, end)` and owns the matches that start in `[start, owned_end)`;
//! the next window starts at `owned_end`. Each window reads [`OVERLAP`] bytes beyond what it
//! owns, so a match of up to `OVERLAP` bytes (a private key block of several KiB) is found
//! whole by the window it starts in, and only there. Boundaries fall just after a newline
//! when one is near, so a line is rarely cut. Nothing is copied: a window is a range.

/// The bytes a window owns (before [`OVERLAP`]).
pub const WINDOW: usize = 256 * 1024;
/// The bytes a window reads beyond what it owns: the longest match found whole wherever it
/// starts. A PEM block of an 8192-bit RSA key is about 6.5 KiB.
pub const OVERLAP: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub start: usize,
    pub owned_end: usize,
    pub end: usize,
}

/// The windows over `bytes`, in order; one (possibly empty) window for a short blob.
pub(crate) fn windows(bytes: &[u8]) -> impl Iterator<Item = Window> + '_ {
    windows_sized(bytes, WINDOW, OVERLAP)
}

pub(crate) fn windows_sized(
    bytes: &[u8],
    size: usize,
    overlap: usize,
) -> impl Iterator<Item = Window> + '_ {
    let mut start = Some(0);
    std::iter::from_fn(move || {
        let from = start?;
        if from + size + overlap >= bytes.len() {
            start = None;
            return Some(Window {
                start: from,
                owned_end: bytes.len(),
                end: bytes.len(),
            });
        }
        let cut = from + size;
        // Just after the last newline in the window's second half, if there is one.
        let floor = from + size / 2;
        let owned_end = bytes[floor..cut]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(cut, |at| floor + at + 1);
        start = Some(owned_end);
        Some(Window {
            start: from,
            owned_end,
            end: owned_end + overlap,
        })
    })
}

/// Newlines in `bytes`: lines advanced from one offset to another.
pub(crate) fn newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_blob_is_one_window() {
        let w: Vec<Window> = windows(b"abc").collect();
        assert_eq!(
            w,
            [Window {
                start: 0,
                owned_end: 3,
                end: 3
            }]
        );
        assert_eq!(windows(b"").count(), 1);
    }

    #[test]
    fn windows_own_every_byte_once_and_read_the_overlap() {
        let text: Vec<u8> = (0..10_000u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let w: Vec<Window> = windows_sized(&text, 1000, 100).collect();
        assert_eq!(w[0].start, 0);
        assert_eq!(w.last().unwrap().owned_end, text.len());
        for pair in w.windows(2) {
            assert_eq!(pair[0].owned_end, pair[1].start);
            assert_eq!(pair[0].end, pair[0].owned_end + 100);
            assert_eq!(text[pair[0].owned_end - 1], b'\n', "cut after a newline");
        }
    }

    #[test]
    fn a_blob_without_newlines_is_cut_at_the_size() {
        let text = vec![b'x'; 5000];
        let w: Vec<Window> = windows_sized(&text, 1000, 100).collect();
        assert_eq!(w[1].start, 1000);
        assert_eq!(w.last().unwrap().end, 5000);
    }
}
