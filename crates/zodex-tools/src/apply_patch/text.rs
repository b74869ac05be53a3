//! The line model of a text file being updated: its lines without their endings, each line's own
//! ending (LF or CRLF), the ending new lines get, and a UTF-8 byte order mark if there was one.
//!
//! Untouched and context lines keep their exact bytes; added lines take the file's dominant
//! ending; a last line without a newline gets one, as Codex does.
//!
//! Not here: deciding which lines change (that is `update`).

/// A file's text split into lines.
pub(crate) struct TextFile<'a> {
    bom: bool,
    /// Line contents without their endings.
    pub lines: Vec<&'a str>,
    /// Each line's ending: `"\n"`, `"\r\n"`, or `""` for a last line without newline.
    endings: Vec<&'static str>,
    /// The ending given to added lines and to a last line that had none.
    eol: &'static str,
}

/// One line of the result: a line of the original (by index) or a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'p> {
    Original(usize),
    New(&'p str),
}

impl<'a> TextFile<'a> {
    pub fn parse(text: &'a str) -> Self {
        let (bom, body) = match text.strip_prefix('\u{FEFF}') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let mut lines = Vec::new();
        let mut endings = Vec::new();
        let (mut crlf, mut lf) = (0usize, 0usize);
        for raw in body.split_inclusive('\n') {
            if let Some(line) = raw.strip_suffix("\r\n") {
                crlf += 1;
                lines.push(line);
                endings.push("\r\n");
            } else if let Some(line) = raw.strip_suffix('\n') {
                lf += 1;
                lines.push(line);
                endings.push("\n");
            } else {
                lines.push(raw);
                endings.push("");
            }
        }
        let eol = if crlf > lf { "\r\n" } else { "\n" };
        TextFile {
            bom,
            lines,
            endings,
            eol,
        }
    }

    /// Builds the new text from `pieces`; every line, including the last, ends with a newline.
    pub fn render<'p>(
        &self,
        pieces: impl IntoIterator<Item = Piece<'p>>,
        size_hint: usize,
    ) -> String {
        let mut out = String::with_capacity(size_hint);
        if self.bom {
            out.push('\u{FEFF}');
        }
        for piece in pieces {
            match piece {
                Piece::Original(i) => {
                    out.push_str(self.lines[i]);
                    out.push_str(match self.endings[i] {
                        "" => self.eol,
                        ending => ending,
                    });
                }
                Piece::New(text) => {
                    out.push_str(text);
                    out.push_str(self.eol);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(text: &str) -> String {
        let file = TextFile::parse(text);
        file.render((0..file.lines.len()).map(Piece::Original), text.len())
    }

    #[test]
    fn keeps_each_line_ending_and_adds_a_final_newline() {
        assert_eq!(roundtrip("a\nb\n"), "a\nb\n");
        assert_eq!(roundtrip("a\r\nb\r\n"), "a\r\nb\r\n");
        assert_eq!(roundtrip("a\r\nb\nc\r\n"), "a\r\nb\nc\r\n");
        assert_eq!(roundtrip("a\nb"), "a\nb\n");
        assert_eq!(roundtrip("a\r\nb"), "a\r\nb\r\n");
        assert_eq!(roundtrip(""), "");
        assert_eq!(roundtrip("\u{FEFF}x\n"), "\u{FEFF}x\n");
    }

    #[test]
    fn new_lines_take_the_dominant_ending() {
        let file = TextFile::parse("a\r\nb\r\nc\n");
        assert_eq!(file.lines, vec!["a", "b", "c"]);
        let out = file.render([Piece::Original(0), Piece::New("x"), Piece::Original(2)], 0);
        assert_eq!(out, "a\r\nx\r\nc\n");
        assert_eq!(TextFile::parse("\u{FEFF}a\n").lines, vec!["a"]);
    }
}
