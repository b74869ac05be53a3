//! Tests of the pack pre-scan: packs built by hand (bombs, lies, truncations), a real pack made
//! by git, and arbitrary bytes (it never panics).

use super::*;
use proptest::prelude::*;
use std::io::{BufReader, Read, Write};

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut w = gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::BEST);
    w.write_all(data).unwrap();
    w.flush().unwrap();
    w.into_inner()
}

/// An entry header: type and size varint.
fn entry_header(kind: u8, size: u64) -> Vec<u8> {
    let mut out = vec![(kind << 4) | (size & 0x0f) as u8];
    let mut rest = size >> 4;
    while rest != 0 {
        *out.last_mut().unwrap() |= 0x80;
        out.push((rest & 0x7f) as u8);
        rest >>= 7;
    }
    out
}

fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn ofs(mut distance: u64) -> Vec<u8> {
    let mut out = vec![(distance & 0x7f) as u8];
    distance >>= 7;
    while distance != 0 {
        distance -= 1;
        out.insert(0, 0x80 | (distance & 0x7f) as u8);
        distance >>= 7;
    }
    out
}

/// A pack of `entries` (each already encoded), with a zero trailer (the scan does not check
/// the checksum).
pub(crate) fn pack(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"PACK".to_vec();
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(e);
    }
    out.extend_from_slice(&[0u8; 20]);
    out
}

/// An entry of `kind` holding `data`, compressed.
pub(crate) fn whole(kind: u8, data: &[u8]) -> Vec<u8> {
    let mut e = entry_header(kind, data.len() as u64);
    e.extend(zlib(data));
    e
}

/// Counts the bytes the scan pulled from the input.
struct Counting<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

fn run(bytes: &[u8]) -> Result<PackSummary, ScanError> {
    scan(&mut BufReader::new(bytes), bytes.len() as u64)
}

#[test]
fn ordinary_entries_pass_and_are_counted() {
    let blob = whole(3, b"hello\n");
    let tree = whole(2, b"");
    let bytes = pack(&[blob, tree, whole(1, b"tree x\n\nmsg\n")]);
    let summary = run(&bytes).unwrap();
    assert_eq!(summary.entries, 3);
    assert_eq!(summary.ref_deltas, 0);
    assert_eq!(summary.inflated_bytes, 6 + 12);
}

#[test]
fn a_blob_declared_over_the_limit_is_refused_from_its_header_without_inflating() {
    // A 2 GiB blob declared, followed by a megabyte of junk that is never read.
    let mut bomb = entry_header(3, 2 << 30);
    bomb.extend(vec![0x55u8; 1 << 20]);
    let bytes = pack(&[bomb]);
    let read = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut input = BufReader::with_capacity(
        64,
        Counting {
            inner: &bytes[..],
            read: read.clone(),
        },
    );
    let err = scan(&mut input, bytes.len() as u64).unwrap_err();
    assert_eq!(
        err,
        ScanError::TooLarge {
            offset: 12,
            kind: Declared::Blob,
            size: 2 << 30
        }
    );
    assert!(read.get() <= 64 * 2, "read {} bytes", read.get());
}

#[test]
fn a_pack_that_would_inflate_past_the_total_is_refused_before_the_entry_that_passes_it() {
    let blob = whole(3, &[0u8; 1000]);
    let three = pack(&[blob.clone(), blob.clone(), blob.clone()]);
    let mut input = &three[..];
    assert_eq!(
        scan_within(&mut input, three.len() as u64, 3000)
            .unwrap()
            .inflated_bytes,
        3000
    );
    let mut input = &three[..];
    let err = scan_within(&mut input, three.len() as u64, 2999).unwrap_err();
    let third = 12 + 2 * blob.len() as u64;
    assert_eq!(
        err,
        ScanError::InflatesTooMuch {
            offset: third,
            limit: 2999
        }
    );
    const { assert!(MAX_INFLATED_TOTAL >= 32 * 128 * 1024 * 1024) };
}

#[test]
fn the_blob_limit_is_inclusive() {
    let mut at_limit = entry_header(3, MAX_BLOB_BYTES + 1);
    at_limit.extend(zlib(b""));
    assert!(matches!(
        run(&pack(&[at_limit])),
        Err(ScanError::TooLarge { size, .. }) if size == MAX_BLOB_BYTES + 1
    ));
    // Exactly the limit is not refused for its size (it then fails for inflating short).
    let mut exact = entry_header(3, MAX_BLOB_BYTES);
    exact.extend(zlib(b"x"));
    assert!(matches!(
        run(&pack(&[exact])),
        Err(ScanError::InflatesShort { actual: 1, .. })
    ));
}

#[test]
fn commits_trees_and_tags_are_held_to_the_metadata_limit() {
    for (kind, declared) in [
        (1, Declared::Commit),
        (2, Declared::Tree),
        (4, Declared::Tag),
    ] {
        let mut e = entry_header(kind, MAX_METADATA_BYTES + 1);
        e.extend(zlib(b""));
        assert_eq!(
            run(&pack(&[e])),
            Err(ScanError::TooLarge {
                offset: 12,
                kind: declared,
                size: MAX_METADATA_BYTES + 1
            })
        );
    }
}

#[test]
fn a_stream_that_inflates_past_its_declared_size_is_refused() {
    // Declares 10 bytes, inflates to 4 MiB.
    let mut liar = entry_header(3, 10);
    liar.extend(zlib(&vec![0u8; 4 << 20]));
    assert_eq!(
        run(&pack(&[liar])),
        Err(ScanError::InflatesPastDeclared {
            offset: 12,
            declared: 10
        })
    );
}

#[test]
fn a_stream_that_inflates_short_is_refused() {
    let mut short = entry_header(3, 100);
    short.extend(zlib(b"ten bytes!"));
    assert_eq!(
        run(&pack(&[short])),
        Err(ScanError::InflatesShort {
            offset: 12,
            declared: 100,
            actual: 10
        })
    );
}

/// Delta data: base size, result size, then `copies` copy instructions of 64 KiB from offset 0.
fn delta_data(base: u64, result: u64, copies: usize) -> Vec<u8> {
    let mut d = varint(base);
    d.extend(varint(result));
    // Copies with no offset bytes (offset 0) and no size bytes (size 0x10000).
    d.extend(std::iter::repeat_n(0x80, copies));
    d
}

#[test]
fn a_small_delta_with_a_huge_result_is_refused_from_its_first_bytes() {
    let base = whole(3, &[0u8; 65536]);
    let distance = base.len() as u64;
    // 32768 copies of 64 KiB: a 2 GiB result from 32 KiB of instructions.
    let data = delta_data(65536, 2 << 30, 32768);
    let mut delta = entry_header(6, data.len() as u64);
    delta.extend(ofs(distance));
    delta.extend(zlib(&data));
    let err = run(&pack(&[base.clone(), delta])).unwrap_err();
    assert_eq!(
        err,
        ScanError::TooLarge {
            offset: 12 + distance,
            kind: Declared::DeltaResult,
            size: 2 << 30
        }
    );
    // The same as a REF-delta (a thin pack's base).
    let mut ref_delta = entry_header(7, data.len() as u64);
    ref_delta.extend([0xab; 20]);
    ref_delta.extend(zlib(&data));
    assert!(matches!(
        run(&pack(&[ref_delta])),
        Err(ScanError::TooLarge {
            kind: Declared::DeltaResult,
            ..
        })
    ));
}

#[test]
fn ordinary_deltas_pass_and_ref_deltas_are_counted() {
    let base = whole(3, &[7u8; 65536]);
    let distance = base.len() as u64;
    let data = delta_data(65536, 65536, 1);
    let mut delta = entry_header(6, data.len() as u64);
    delta.extend(ofs(distance));
    delta.extend(zlib(&data));
    let mut ref_delta = entry_header(7, data.len() as u64);
    ref_delta.extend([0xab; 20]);
    ref_delta.extend(zlib(&data));
    let summary = run(&pack(&[base, delta, ref_delta])).unwrap();
    assert_eq!(summary.entries, 3);
    assert_eq!(summary.ref_deltas, 1);
}

#[test]
fn delta_data_over_its_limit_and_bases_outside_the_pack_are_refused() {
    let mut big = entry_header(7, MAX_DELTA_BYTES + 1);
    big.extend([0u8; 20]);
    assert!(matches!(
        run(&pack(&[big])),
        Err(ScanError::TooLarge {
            kind: Declared::DeltaData,
            ..
        })
    ));
    let data = delta_data(1, 1, 0);
    let mut outside = entry_header(6, data.len() as u64);
    outside.extend(ofs(13));
    outside.extend(zlib(&data));
    assert!(matches!(
        run(&pack(&[outside])),
        Err(ScanError::Corrupt { offset: 12, .. })
    ));
}

#[test]
fn broken_framing_is_refused() {
    let noise: Vec<u8> = (0..1000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let good = pack(&[whole(3, &noise)]);
    assert!(run(&good).is_ok());
    assert_eq!(run(b"JUNK"), Err(ScanError::NotAPack));
    let mut v4 = good.clone();
    v4[7] = 4;
    assert_eq!(run(&v4), Err(ScanError::NotAPack));
    // Truncated: the trailer is missing, so the entry runs into where the trailer must be.
    let truncated = &good[..good.len() - 10];
    assert!(matches!(
        run(truncated),
        Err(ScanError::Truncated { offset: 12 } | ScanError::Corrupt { .. })
    ));
    // Bytes between the last entry and the trailer.
    let mut padded = good[..good.len() - 20].to_vec();
    padded.extend([0u8; 5]);
    padded.extend([0u8; 20]);
    assert_eq!(
        run(&padded),
        Err(ScanError::TrailingBytes { count: 1, extra: 5 })
    );
    // A count the file cannot hold.
    let mut many = good.clone();
    many[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(run(&many), Err(ScanError::TooManyEntries { .. })));
    // Type 5 is reserved.
    let mut reserved = entry_header(5, 4);
    reserved.extend(zlib(b"data"));
    assert!(matches!(
        run(&pack(&[reserved])),
        Err(ScanError::Corrupt { .. })
    ));
    // A size varint longer than 64 bits.
    let mut endless = vec![0xbf];
    endless.extend([0xff; 12]);
    endless.push(0);
    assert!(matches!(
        run(&pack(&[endless])),
        Err(ScanError::Corrupt { .. })
    ));
}

#[test]
fn a_pack_made_by_git_passes() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str], input: Option<&[u8]>| {
        let mut cmd = std::process::Command::new("git");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(key);
            }
        }
        let mut child = cmd
            .current_dir(dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.unwrap_or_default()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        out.stdout
    };
    git(&["init", "-q"], None);
    // Versions of one file, so that git makes deltas.
    let mut text: Vec<u8> = (0..4000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    for round in 0..5 {
        text.extend_from_slice(format!("round {round}\n").as_bytes());
        std::fs::write(dir.path().join("f.txt"), &text).unwrap();
        git(&["add", "f.txt"], None);
        git(&["commit", "-q", "-m", &format!("r{round}")], None);
    }
    let bytes = git(
        &["pack-objects", "--revs", "--stdout", "-q"],
        Some(b"HEAD\n"),
    );
    let summary = run(&bytes).unwrap();
    assert_eq!(summary.entries, 15);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = run(&bytes);
        let mut with_header = b"PACK\0\0\0\x02".to_vec();
        with_header.extend_from_slice(&bytes);
        let _ = run(&with_header);
    }

    #[test]
    fn mutated_packs_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let data = delta_data(5, 5, 1);
        let base = whole(3, b"hello");
        let mut delta = entry_header(6, data.len() as u64);
        delta.extend(ofs(base.len() as u64));
        delta.extend(zlib(&data));
        let mut bytes = pack(&[base, whole(2, b"tree"), delta]);
        for (at, value) in flips {
            let n = bytes.len();
            bytes[at % n] ^= value;
        }
        let _ = run(&bytes);
        let _ = run(&bytes[..cut % bytes.len()]);
    }
}
