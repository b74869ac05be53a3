//! The text header of a git bundle (v2 and v3), read by hand: gix has no bundle reader, and the
//! format is small (gitformat-bundle(5)). What follows the header is a pack, which
//! `zodex-git`'s `import` verifies with gix-pack.
//!
//! ```text
//! # v3 git bundle\n
//! @object-format=sha1\n          (v3 capabilities; only sha1 is accepted)
//! -<oid> [comment]\n             (prerequisites: commits the receiver must already have)
//! <oid> <refname>\n              (ref tips carried by the pack)
//! \n
//! <pack data>
//! ```

use std::io::{BufRead, Read};

/// The longest header we read; a real one is a few lines per ref.
pub const MAX_HEADER_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleHeader {
    pub version: u8,
    /// Commits the pack builds on (hex object ids).
    pub prerequisites: Vec<String>,
    /// `(oid, refname)` pairs the bundle carries.
    pub refs: Vec<(String, String)>,
    /// Where the pack starts, in bytes from the start of the bundle.
    pub pack_offset: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BundleError {
    #[error("not a git bundle (it must start with `# v2 git bundle` or `# v3 git bundle`)")]
    NotABundle,
    #[error("bundle header line {line}: {message}")]
    BadLine { line: usize, message: String },
    #[error("the bundle header is longer than 1 MiB or never ends; send a bundle made by git")]
    HeaderTooLong,
    #[error("the bundle uses {0}; this publisher accepts SHA-1 repositories only")]
    UnsupportedHash(String),
    #[error(
        "the bundle's `@filter` capability (a partial bundle) is not accepted; bundle whole objects"
    )]
    Filtered,
    #[error("reading the bundle failed: {0}")]
    Io(String),
}

fn is_hex_oid(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Reads the header from `input`, leaving it positioned at the first pack byte.
pub fn read_header(input: &mut impl BufRead) -> Result<BundleHeader, BundleError> {
    let mut consumed: u64 = 0;
    // The signature line first, read on its own short leash: anything else is not a bundle.
    let mut signature = Vec::new();
    Read::take(&mut *input, 17)
        .read_until(b'\n', &mut signature)
        .map_err(|e| BundleError::Io(e.to_string()))?;
    consumed += signature.len() as u64;
    let first = match signature.strip_suffix(b"\n") {
        Some(line) => String::from_utf8_lossy(line).into_owned(),
        None => return Err(BundleError::NotABundle),
    };
    let mut line_no = 1;
    let mut next_line = |input: &mut dyn BufRead| -> Result<Option<String>, BundleError> {
        let mut buf = Vec::new();
        let mut limited = Read::take(
            &mut *input,
            MAX_HEADER_BYTES + 1 - consumed.min(MAX_HEADER_BYTES),
        );
        let n = limited
            .read_until(b'\n', &mut buf)
            .map_err(|e| BundleError::Io(e.to_string()))?;
        consumed += n as u64;
        line_no += 1;
        if consumed > MAX_HEADER_BYTES {
            return Err(BundleError::HeaderTooLong);
        }
        if n == 0 {
            return Ok(None);
        }
        if buf.last() != Some(&b'\n') {
            return Err(BundleError::BadLine {
                line: line_no,
                message: "the header ends without a newline".into(),
            });
        }
        buf.pop();
        String::from_utf8(buf)
            .map(Some)
            .map_err(|_| BundleError::BadLine {
                line: line_no,
                message: "not UTF-8".into(),
            })
    };

    let version = match Some(first.as_str()) {
        Some("# v2 git bundle") => 2,
        Some("# v3 git bundle") => 3,
        _ => return Err(BundleError::NotABundle),
    };
    let mut header = BundleHeader {
        version,
        prerequisites: Vec::new(),
        refs: Vec::new(),
        pack_offset: 0,
    };
    let mut line = 1;
    loop {
        let Some(text) = next_line(input)? else {
            return Err(BundleError::BadLine {
                line: line + 1,
                message: "the header has no blank line before the pack; the bundle is truncated"
                    .into(),
            });
        };
        line += 1;
        let bad = |message: &str| BundleError::BadLine {
            line,
            message: message.to_string(),
        };
        if text.is_empty() {
            break;
        }
        if let Some(cap) = text.strip_prefix('@') {
            if version != 3 {
                return Err(bad("capabilities are only allowed in v3 bundles"));
            }
            let (key, value) = cap.split_once('=').unwrap_or((cap, ""));
            match key {
                "object-format" if value == "sha1" => {}
                "object-format" => return Err(BundleError::UnsupportedHash(value.to_string())),
                "filter" => return Err(BundleError::Filtered),
                other => return Err(bad(&format!("unknown capability `{other}`"))),
            }
            continue;
        }
        if !header.refs.is_empty() && text.starts_with('-') {
            return Err(bad("a prerequisite after the first ref"));
        }
        if let Some(rest) = text.strip_prefix('-') {
            let oid = rest.split(' ').next().unwrap_or_default();
            if !is_hex_oid(oid) {
                return Err(bad("a prerequisite must start with a 40-digit object id"));
            }
            header.prerequisites.push(oid.to_string());
            continue;
        }
        let Some((oid, name)) = text.split_once(' ') else {
            return Err(bad("a ref line is `<oid> <refname>`"));
        };
        if !is_hex_oid(oid) {
            return Err(bad("a ref line must start with a 40-digit object id"));
        }
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(bad("a ref name may not be empty or contain spaces"));
        }
        header.refs.push((oid.to_string(), name.to_string()));
    }
    header.pack_offset = consumed;
    Ok(header)
}

/// Writes a header (the agent side builds bundles with it).
pub fn write_header(prerequisites: &[String], refs: &[(String, String)]) -> Vec<u8> {
    let mut out = b"# v2 git bundle\n".to_vec();
    for oid in prerequisites {
        out.extend_from_slice(format!("-{oid}\n").as_bytes());
    }
    for (oid, name) in refs {
        out.extend_from_slice(format!("{oid} {name}\n").as_bytes());
    }
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn reads_v2_and_v3_headers_and_stops_at_the_pack() {
        let mut bytes = write_header(&[A.into()], &[(B.into(), "refs/heads/main".into())]);
        let header_len = bytes.len() as u64;
        bytes.extend_from_slice(b"PACK...");
        let mut input = &bytes[..];
        let header = read_header(&mut input).unwrap();
        assert_eq!(header.version, 2);
        assert_eq!(header.prerequisites, vec![A.to_string()]);
        assert_eq!(header.refs, vec![(B.into(), "refs/heads/main".into())]);
        assert_eq!(header.pack_offset, header_len);
        assert_eq!(input, b"PACK...");

        let v3 = format!("# v3 git bundle\n@object-format=sha1\n-{A} a commit\n{B} HEAD\n\nPACK");
        let header = read_header(&mut v3.as_bytes()).unwrap();
        assert_eq!(header.version, 3);
        assert_eq!(header.refs[0].1, "HEAD");
    }

    #[test]
    fn refuses_what_is_not_a_whole_sha1_bundle() {
        let cases = [
            ("PACK", BundleError::NotABundle),
            (
                "# v3 git bundle\n@object-format=sha256\n\n",
                BundleError::UnsupportedHash("sha256".into()),
            ),
            (
                "# v3 git bundle\n@filter=blob:none\n\n",
                BundleError::Filtered,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                read_header(&mut text.as_bytes()).unwrap_err(),
                want,
                "{text}"
            );
        }
        let truncated = format!("# v2 git bundle\n{B} refs/heads/main\n");
        assert!(matches!(
            read_header(&mut truncated.as_bytes()).unwrap_err(),
            BundleError::BadLine { .. }
        ));
        let short_oid = "# v2 git bundle\nabc refs/heads/main\n\n";
        assert!(read_header(&mut short_oid.as_bytes()).is_err());
        let endless = format!("# v2 git bundle\n{}", "x".repeat(2 << 20));
        assert_eq!(
            read_header(&mut endless.as_bytes()).unwrap_err(),
            BundleError::HeaderTooLong
        );
    }

    #[test]
    fn reads_what_git_bundle_create_writes() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["init", "-q", "-b", "main"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one",
        ]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "two",
        ]);
        git(&["bundle", "create", "-q", "b", "main~1..main"]);
        let bytes = std::fs::read(dir.path().join("b")).unwrap();
        let header = read_header(&mut &bytes[..]).unwrap();
        assert_eq!(
            header.prerequisites,
            vec![git(&["rev-parse", "main~1"]).trim().to_string()]
        );
        assert_eq!(
            header.refs,
            vec![(
                git(&["rev-parse", "main"]).trim().to_string(),
                "refs/heads/main".into()
            )]
        );
        assert_eq!(&bytes[header.pack_offset as usize..][..4], b"PACK");
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_input(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut with_magic = b"# v2 git bundle\n".to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = read_header(&mut &bytes[..]);
            let _ = read_header(&mut &with_magic[..]);
        }
    }
}
