//! A constant-memory walk over a bundle's pack, before anything indexes it: what every entry
//! declares is held against the size limits, and every zlib stream is inflated into a small
//! buffer that is counted and thrown away, so a pack of 2 MiB that declares a 2 GiB blob is
//! refused from its header, and a stream that inflates past what its entry declared is refused
//! after at most one byte too many. Memory stays at a few buffers whatever the pack declares.
//!
//! The walk follows git's pack format (gitformat-pack(5)): `PACK`, version 2 or 3, the number
//! of entries; each entry a type and size varint (4 bits, then 7-bit groups), an OFS-delta's
//! base distance or a REF-delta's 20-byte base id, then a zlib stream; a 20-byte trailer. A
//! delta's data opens with two varints, its base size and its result size: only those first
//! bytes are needed to refuse a small delta whose result would be huge.
//!
//! What the walk does not check (object hashes, the trailer's checksum, whether an OFS-delta's
//! base really starts an entry) is left to gix-pack, which indexes the pack in a child process
//! under memory limits ([`super::indexer`]).

use gix::zlib::{Decompress, FlushDecompress, Status};
use std::io::BufRead;

/// The largest object of any kind a pack may declare, and the largest blob: GitHub refuses
/// files over 100 MiB.
pub const MAX_BLOB_BYTES: u64 = 100 * 1024 * 1024;
/// The largest commit, tree or tag: the publisher reads these itself (history, workflow paths),
/// so they are held to a size that keeps its memory small. Real ones are kilobytes.
pub const MAX_METADATA_BYTES: u64 = 4 * 1024 * 1024;
/// The largest delta data: all-literal instructions for a result of [`MAX_BLOB_BYTES`] take
/// one opcode per 127 bytes, plus the two size varints.
pub const MAX_DELTA_BYTES: u64 = MAX_BLOB_BYTES + MAX_BLOB_BYTES / 64;

/// The most a whole pack may inflate to (the sum of what its entries declare). Memory stays
/// constant whatever a pack declares, but inflating is work: a 128 MiB bundle of well-compressed
/// 100 MiB blobs would otherwise cost minutes of CPU. Real source pushes inflate a few times
/// their size; 4 GiB is 32 times the bundle ceiling.
pub const MAX_INFLATED_TOTAL: u64 = 4 * 1024 * 1024 * 1024;

const HEADER_BYTES: u64 = 12;
const TRAILER_BYTES: u64 = 20;
/// The smallest possible entry: one header byte and an empty zlib stream (2 header bytes, one
/// deflate byte, 4 checksum bytes). Bounds the entry count a pack of a given length can hold.
const MIN_ENTRY_BYTES: u64 = 8;
/// Inflated bytes are counted in chunks of this size and discarded.
const CHUNK: usize = 32 * 1024;

/// What an oversized entry declared itself to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    Commit,
    Tree,
    Blob,
    Tag,
    /// A delta's data (its instructions).
    DeltaData,
    /// The object a delta builds (its type is the base's, unknown here).
    DeltaResult,
}

impl Declared {
    /// A metadata object (commit, tree, tag), held to [`MAX_METADATA_BYTES`].
    pub fn is_metadata(self) -> bool {
        matches!(self, Self::Commit | Self::Tree | Self::Tag)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Commit => "commit",
            Self::Tree => "tree",
            Self::Blob => "blob",
            Self::Tag => "tag",
            Self::DeltaData => "delta",
            Self::DeltaResult => "delta's result",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("it does not start with `PACK` and version 2 or 3")]
    NotAPack,
    #[error("its header declares {count} entries, more than its {len} bytes can hold")]
    TooManyEntries { count: u32, len: u64 },
    #[error("it ends inside the entry at byte {offset}")]
    Truncated { offset: u64 },
    #[error("the entry at byte {offset}: {message}")]
    Corrupt { offset: u64, message: String },
    #[error("the entry at byte {offset} inflates past the {declared} bytes it declares")]
    InflatesPastDeclared { offset: u64, declared: u64 },
    #[error("the entry at byte {offset} inflates to {actual} bytes but declares {declared}")]
    InflatesShort {
        offset: u64,
        declared: u64,
        actual: u64,
    },
    #[error("the entry at byte {offset} declares a {} of {size} bytes", .kind.name())]
    TooLarge {
        offset: u64,
        kind: Declared,
        size: u64,
    },
    #[error(
        "its entries declare more than {limit} bytes in all once inflated (the entry at byte {offset} passes it)"
    )]
    InflatesTooMuch { offset: u64, limit: u64 },
    #[error("{count} entries end {extra} bytes before the trailer")]
    TrailingBytes { count: u32, extra: u64 },
    #[error("reading it failed: {0}")]
    Io(String),
}

/// The most distinct objects a pack's REF-deltas may build on (a thin pack's bases: about one
/// per file changed).
pub const MAX_REF_BASES: usize = 65_536;

/// What the walk learned about a pack that passed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackSummary {
    pub entries: u32,
    /// REF-delta entries: their bases may be outside the pack (a thin pack).
    pub ref_deltas: u32,
    /// The distinct bases REF-deltas name (at most [`MAX_REF_BASES`]).
    pub ref_bases: std::collections::BTreeSet<[u8; 20]>,
    /// All entries' inflated bytes (delta data counted as such, not as results).
    pub inflated_bytes: u64,
}

/// Reads a pack of exactly `len` bytes (trailer included) from `input` and checks every entry.
pub fn scan(input: &mut impl BufRead, len: u64) -> Result<PackSummary, ScanError> {
    scan_within(input, len, MAX_INFLATED_TOTAL)
}

/// Walks a pack still arriving, of at most `bound` bytes, as [`scan`] does, telling `entry_end`
/// the offset just past each entry that passed (the last one's end is where the trailer
/// starts). It stops after the last entry the header declares, without reading the trailer
/// or checking what follows: that is [`scan`]'s, once the pack is whole.
pub fn walk_entries(
    input: &mut impl BufRead,
    bound: u64,
    entry_end: &mut dyn FnMut(u64),
) -> Result<PackSummary, ScanError> {
    walk(input, bound, MAX_INFLATED_TOTAL, entry_end)
}

/// [`scan`] with `max_total` inflated bytes in all (tests use a small one).
fn scan_within(
    input: &mut impl BufRead,
    len: u64,
    max_total: u64,
) -> Result<PackSummary, ScanError> {
    let mut end = 0;
    let summary = walk(input, len, max_total, &mut |at| end = at)?;
    let trailer = len - TRAILER_BYTES;
    let last = if summary.entries == 0 {
        HEADER_BYTES
    } else {
        end
    };
    if last != trailer {
        return Err(ScanError::TrailingBytes {
            count: summary.entries,
            extra: trailer - last,
        });
    }
    Ok(summary)
}

/// The walk of [`scan`] over a pack of at most `len` bytes, without the check that the
/// entries end at the trailer.
fn walk(
    input: &mut impl BufRead,
    len: u64,
    max_total: u64,
    entry_end: &mut dyn FnMut(u64),
) -> Result<PackSummary, ScanError> {
    if len < HEADER_BYTES + TRAILER_BYTES {
        return Err(ScanError::NotAPack);
    }
    let mut reader = Reader {
        inner: input,
        pos: 0,
        end: len - TRAILER_BYTES,
    };
    let mut header = [0u8; HEADER_BYTES as usize];
    reader
        .read_exact(&mut header)
        .map_err(|_| ScanError::NotAPack)?;
    let version = u32::from_be_bytes(header[4..8].try_into().expect("4 bytes"));
    if &header[..4] != b"PACK" || !(version == 2 || version == 3) {
        return Err(ScanError::NotAPack);
    }
    let count = u32::from_be_bytes(header[8..12].try_into().expect("4 bytes"));
    if u64::from(count) > (len - HEADER_BYTES - TRAILER_BYTES) / MIN_ENTRY_BYTES {
        return Err(ScanError::TooManyEntries { count, len });
    }
    let mut summary = PackSummary {
        entries: count,
        ..PackSummary::default()
    };
    let mut inflate = Decompress::new();
    let mut out = vec![0u8; CHUNK];
    for _ in 0..count {
        let entry = reader.pos;
        let (kind, declared) = read_type_and_size(&mut reader, entry)?;
        let declared_as = match kind {
            1 => Declared::Commit,
            2 => Declared::Tree,
            3 => Declared::Blob,
            4 => Declared::Tag,
            6 => {
                let distance = read_ofs_distance(&mut reader, entry)?;
                if distance == 0 || distance > entry - HEADER_BYTES {
                    return Err(corrupt(
                        entry,
                        format!("its delta base lies {distance} bytes back, outside the pack"),
                    ));
                }
                Declared::DeltaData
            }
            7 => {
                let mut base = [0u8; 20];
                reader.read_exact(&mut base).map_err(|e| e.at(entry))?;
                summary.ref_deltas += 1;
                if summary.ref_bases.insert(base) && summary.ref_bases.len() > MAX_REF_BASES {
                    return Err(corrupt(
                        entry,
                        format!(
                            "its deltas build on more than {MAX_REF_BASES} objects by id; make a self-contained bundle (zodex-agent and git-remote-zodex do)"
                        ),
                    ));
                }
                Declared::DeltaData
            }
            other => return Err(corrupt(entry, format!("unknown entry type {other}"))),
        };
        let limit = match declared_as {
            Declared::DeltaData => MAX_DELTA_BYTES,
            kind if kind.is_metadata() => MAX_METADATA_BYTES,
            _ => MAX_BLOB_BYTES,
        };
        if declared > limit {
            return Err(ScanError::TooLarge {
                offset: entry,
                kind: declared_as,
                size: declared,
            });
        }
        if summary.inflated_bytes + declared > max_total {
            return Err(ScanError::InflatesTooMuch {
                offset: entry,
                limit: max_total,
            });
        }
        inflate.reset();
        let delta = declared_as == Declared::DeltaData;
        inflate_counted(&mut reader, &mut inflate, &mut out, entry, declared, delta)?;
        summary.inflated_bytes += declared;
        entry_end(reader.pos);
    }
    Ok(summary)
}

fn corrupt(offset: u64, message: impl Into<String>) -> ScanError {
    ScanError::Corrupt {
        offset,
        message: message.into(),
    }
}

/// The walk's view of the input: a position, and an end (the trailer) it never reads past.
struct Reader<'a, R> {
    inner: &'a mut R,
    pos: u64,
    end: u64,
}

/// A read that ran out: where, for the error.
enum Short {
    Eof,
    Io(std::io::Error),
}

impl Short {
    fn at(self, entry: u64) -> ScanError {
        match self {
            Short::Eof => ScanError::Truncated { offset: entry },
            Short::Io(e) => ScanError::Io(e.to_string()),
        }
    }
}

impl<R: BufRead> Reader<'_, R> {
    /// The buffered bytes up to the end (empty at the end or at EOF).
    fn fill(&mut self) -> Result<&[u8], Short> {
        let left = usize::try_from(self.end - self.pos).unwrap_or(usize::MAX);
        if left == 0 {
            return Ok(&[]);
        }
        let buf = self.inner.fill_buf().map_err(Short::Io)?;
        let n = buf.len().min(left);
        Ok(&buf[..n])
    }

    fn consume(&mut self, n: usize) {
        self.inner.consume(n);
        self.pos += n as u64;
    }

    fn read_byte(&mut self) -> Result<u8, Short> {
        let byte = *self.fill()?.first().ok_or(Short::Eof)?;
        self.consume(1);
        Ok(byte)
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), Short> {
        for b in out.iter_mut() {
            *b = self.read_byte()?;
        }
        Ok(())
    }
}

/// The entry's type (bits 4–6 of the first byte) and declared size.
fn read_type_and_size<R: BufRead>(
    reader: &mut Reader<'_, R>,
    entry: u64,
) -> Result<(u8, u64), ScanError> {
    let mut byte = reader.read_byte().map_err(|e| e.at(entry))?;
    let kind = (byte >> 4) & 7;
    let mut size = u64::from(byte & 0x0f);
    let mut shift = 4u32;
    while byte & 0x80 != 0 {
        byte = reader.read_byte().map_err(|e| e.at(entry))?;
        let bits = u64::from(byte & 0x7f);
        if shift > 63 || (bits << shift) >> shift != bits {
            return Err(corrupt(entry, "its size does not fit in 64 bits"));
        }
        size |= bits << shift;
        shift += 7;
    }
    Ok((kind, size))
}

/// An OFS-delta's distance back to its base (git's offset encoding: each continuation adds one
/// before shifting, so every value has exactly one encoding).
fn read_ofs_distance<R: BufRead>(reader: &mut Reader<'_, R>, entry: u64) -> Result<u64, ScanError> {
    let mut byte = reader.read_byte().map_err(|e| e.at(entry))?;
    let mut distance = u64::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = reader.read_byte().map_err(|e| e.at(entry))?;
        distance = distance
            .checked_add(1)
            .and_then(|d| d.checked_mul(128))
            .map(|d| d | u64::from(byte & 0x7f))
            .ok_or_else(|| corrupt(entry, "its delta base distance does not fit in 64 bits"))?;
    }
    Ok(distance)
}

/// A delta's base and result sizes from the first bytes of its data; `None` until enough bytes
/// are there.
fn delta_sizes(head: &[u8]) -> Option<Result<(u64, u64), &'static str>> {
    let mut at = 0;
    let mut varint = || -> Option<Result<u64, &'static str>> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let byte = *head.get(at)?;
            at += 1;
            let bits = u64::from(byte & 0x7f);
            if shift > 63 || (bits << shift) >> shift != bits {
                return Some(Err("a delta size does not fit in 64 bits"));
            }
            value |= bits << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                return Some(Ok(value));
            }
        }
    };
    let base = match varint()? {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    let result = match varint()? {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok((base, result)))
}

/// Inflates the entry's zlib stream into `out` chunk by chunk, counting: never more than one
/// byte past `declared` is produced before the entry is refused. For a delta, the sizes at the
/// start of its data are checked as soon as they are inflated.
fn inflate_counted<R: BufRead>(
    reader: &mut Reader<'_, R>,
    inflate: &mut Decompress,
    out: &mut [u8],
    entry: u64,
    declared: u64,
    delta: bool,
) -> Result<(), ScanError> {
    let mut produced = 0u64;
    // The first bytes of a delta's data, until both size varints are read.
    let mut head = [0u8; 20];
    let mut head_len = 0usize;
    let mut sizes_checked = !delta;
    loop {
        let input = reader.fill().map_err(|e| e.at(entry))?;
        // One byte more than declared is room enough to notice a lie.
        let room = usize::try_from(declared - produced + 1)
            .unwrap_or(usize::MAX)
            .min(out.len());
        let (in_before, out_before) = (inflate.total_in(), inflate.total_out());
        let status = inflate
            .decompress(input, &mut out[..room], FlushDecompress::None)
            .map_err(|e| corrupt(entry, format!("its zlib stream is damaged ({e})")))?;
        let consumed = usize::try_from(inflate.total_in() - in_before).expect("within the input");
        let made = usize::try_from(inflate.total_out() - out_before).expect("within the room");
        let had_input = !input.is_empty();
        reader.consume(consumed);
        produced += made as u64;
        if produced > declared {
            return Err(ScanError::InflatesPastDeclared {
                offset: entry,
                declared,
            });
        }
        if !sizes_checked {
            let take = made.min(head.len() - head_len);
            head[head_len..head_len + take].copy_from_slice(&out[..take]);
            head_len += take;
            let ended = status == Status::StreamEnd;
            match delta_sizes(&head[..head_len]) {
                Some(Ok((base, result))) => {
                    for size in [base, result] {
                        if size > MAX_BLOB_BYTES {
                            return Err(ScanError::TooLarge {
                                offset: entry,
                                kind: Declared::DeltaResult,
                                size,
                            });
                        }
                    }
                    sizes_checked = true;
                }
                Some(Err(message)) => return Err(corrupt(entry, message)),
                None if ended || head_len == head.len() => {
                    return Err(corrupt(entry, "its delta data is too short for its sizes"));
                }
                None => {}
            }
        }
        match status {
            Status::StreamEnd => break,
            _ if consumed == 0 && made == 0 => {
                return Err(if had_input {
                    corrupt(entry, "its zlib stream makes no progress")
                } else {
                    ScanError::Truncated { offset: entry }
                });
            }
            _ => {}
        }
    }
    if produced != declared {
        return Err(ScanError::InflatesShort {
            offset: entry,
            declared,
            actual: produced,
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "packscan_tests.rs"]
pub(crate) mod tests;
