//! Hostile packs and the bundles that carry them, built byte by byte (gitformat-pack(5)): a blob
//! declared (and really compressed) as gigabytes of zeros, a small delta whose result is huge,
//! a zlib stream that inflates far past what its entry declares. Shared by the end-to-end tests
//! and the push benchmark.

use std::io::Write;

pub const BLOB: u8 = 3;
const OFS_DELTA: u8 = 6;

/// An entry's type and size varint.
pub fn entry_header(kind: u8, size: u64) -> Vec<u8> {
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

/// An OFS-delta's distance back to its base, in git's encoding.
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

/// A zlib stream of `len` zero bytes, compressed as hard as zlib goes (about 1000:1).
pub fn zeros_stream(len: u64) -> Vec<u8> {
    let mut w = gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::BEST);
    let chunk = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        w.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    w.flush().unwrap();
    w.into_inner()
}

/// A zlib stream of `data`.
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut w = gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::BEST);
    w.write_all(data).unwrap();
    w.flush().unwrap();
    w.into_inner()
}

/// A version 2 pack of `entries` (each already encoded) with its SHA-1 trailer.
pub fn pack(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"PACK".to_vec();
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(e);
    }
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(&out);
    let id = hasher.try_finalize().unwrap();
    out.extend_from_slice(id.as_slice());
    out
}

/// One blob declared as `len` bytes of zeros, and really `len` zeros compressed.
pub fn zero_blob_bomb(len: u64) -> Vec<u8> {
    let mut entry = entry_header(BLOB, len);
    entry.extend(zeros_stream(len));
    pack(&[entry])
}

/// A 64 KiB blob of zeros and an OFS-delta on it of a few kilobytes whose result is `result`
/// bytes: copy instructions of 64 KiB each (a copy with no size bytes copies 0x10000).
pub fn delta_bomb(result: u64) -> Vec<u8> {
    let base = {
        let mut e = entry_header(BLOB, 65536);
        e.extend(zlib(&[0u8; 65536]));
        e
    };
    let mut data = varint(65536);
    data.extend(varint(result));
    data.extend(std::iter::repeat_n(0x80u8, result.div_ceil(65536) as usize));
    let mut delta = entry_header(OFS_DELTA, data.len() as u64);
    delta.extend(ofs(base.len() as u64));
    delta.extend(zlib(&data));
    pack(&[base, delta])
}

/// A blob that declares `declared` bytes and inflates to `actual` zeros.
pub fn lying_blob(declared: u64, actual: u64) -> Vec<u8> {
    let mut entry = entry_header(BLOB, declared);
    entry.extend(zeros_stream(actual));
    pack(&[entry])
}

/// A v2 bundle of `pack` with one prerequisite and one ref.
pub fn bundle(prerequisite: &str, tip: &str, refname: &str, pack: &[u8]) -> Vec<u8> {
    let mut out =
        format!("# v2 git bundle\n-{prerequisite} base\n{tip} {refname}\n\n").into_bytes();
    out.extend_from_slice(pack);
    out
}
