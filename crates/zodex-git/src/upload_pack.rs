//! Commits fetched by id over git's protocol v2 (`POST git-upload-pack`, `command=fetch`) on
//! the sessions' pooled connection (issue 38): `git fetch` opens a connection of its own, asks
//! for the capabilities, then negotiates — four round trips and more across an ocean, on the
//! path of a push right after another client's. Here it is one request on a connection
//! already open: the wanted ids, every commit the mirror has as a `have`, `done`.
//!
//! The pack GitHub sends is demultiplexed to a file beside the mirror and indexed by
//! `git index-pack --promisor` (it verifies every object as `git fetch` does; the mirror stays a
//! partial clone whose missing objects are GitHub's). The caller checks afterwards that every
//! wanted object is there, and on any error fetches with `git fetch` instead: this is a faster
//! way to the same objects, never a different fact.
//!
//! Only for a mirror that is whole (not shallow): a shallow mirror's cut has to be told to
//! GitHub (`shallow` lines), which `git fetch` does.

use super::git::{self, GitError};
use super::receive_pack::{ReceivePackError, Session, full_body};
use http::header::{ACCEPT, CONTENT_TYPE};
use http_body_util::BodyExt;
use std::io::Write;
use std::path::Path;
use zodex_github::Token;

const WHAT: &str = "fetching commits by id";

/// Why the fetch over the pooled connection did not bring the objects (the caller then runs
/// `git fetch`).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Session(#[from] ReceivePackError),
    #[error("GitHub's answer is not protocol v2's fetch ({0})")]
    Answer(&'static str),
    /// GitHub's words (an `ERR` line, or the error band).
    #[error("GitHub refused the fetch: {0}")]
    Refused(String),
    #[error("writing the fetched pack: {0}")]
    Spool(std::io::Error),
    #[error(transparent)]
    Index(#[from] GitError),
}

/// What to fetch: `wants` (object ids) and the filter, and what the mirror already has
/// (`haves`: commits, so GitHub sends only the history beyond them).
pub struct Wanted<'a> {
    pub wants: &'a [String],
    pub haves: &'a [String],
    pub filter: &'a str,
}

/// Fetches `wanted` from the repository at `url` into the whole (unshallow) mirror at
/// `mirror`; see the module's documentation.
pub async fn fetch_into(
    mirror: &Path,
    url: &str,
    token: &Token,
    wanted: Wanted<'_>,
) -> Result<(), FetchError> {
    if wanted.wants.is_empty() {
        return Ok(());
    }
    let session = Session::new(url, token)?;
    let request = http::Request::post(format!("{}/git-upload-pack", session.url()))
        .header(CONTENT_TYPE, "application/x-git-upload-pack-request")
        .header(ACCEPT, "application/x-git-upload-pack-result")
        .header("git-protocol", "version=2");
    let mut body = session
        .send(WHAT, request, full_body(request_lines(&wanted)))
        .await?;
    let spool = tempfile::Builder::new()
        .prefix("fetched-")
        .tempfile_in(mirror)
        .map_err(FetchError::Spool)?;
    let mut file = std::io::BufWriter::new(spool.as_file());
    let mut reader = Demux::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| session.transport(WHAT, e))?;
        if let Ok(data) = frame.into_data() {
            reader.feed(&data, &mut file)?;
        }
        if reader.done {
            break;
        }
    }
    if !reader.done {
        return Err(FetchError::Answer("it ended before the pack's end"));
    }
    file.flush().map_err(FetchError::Spool)?;
    drop(file);
    let (at, pack) = (mirror.to_path_buf(), spool.path().to_path_buf());
    tokio::task::spawn_blocking(move || index(&at, &pack))
        .await
        .map_err(|e| FetchError::Spool(std::io::Error::other(e)))??;
    Ok(())
}

/// The request: `command=fetch`, its arguments, `done` (one round: GitHub computes the pack
/// from the haves it knows, none of the back and forth of a negotiation).
fn request_lines(wanted: &Wanted<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    pkt(&mut out, "command=fetch\n");
    pkt(
        &mut out,
        &format!("agent=zodex-prd/{}\n", env!("CARGO_PKG_VERSION")),
    );
    out.extend_from_slice(b"0001");
    pkt(&mut out, "ofs-delta\n");
    pkt(&mut out, "no-progress\n");
    pkt(&mut out, &format!("filter {}\n", wanted.filter));
    for want in wanted.wants {
        pkt(&mut out, &format!("want {want}\n"));
    }
    for have in wanted.haves {
        pkt(&mut out, &format!("have {have}\n"));
    }
    pkt(&mut out, "done\n");
    out.extend_from_slice(b"0000");
    out
}

fn pkt(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(format!("{:04x}", line.len() + 4).as_bytes());
    out.extend_from_slice(line.as_bytes());
}

/// Indexes the fetched pack into the mirror, marked as the promisor remote's.
fn index(mirror: &Path, pack: &Path) -> Result<(), GitError> {
    let file = std::fs::File::open(pack).map_err(|e| GitError {
        what: "index-pack".into(),
        message: e.to_string(),
    })?;
    let mut cmd = git::command(mirror);
    cmd.args(["index-pack", "--stdin", "--promisor=fetch"])
        .stdin(file);
    git::run("index-pack", &mut cmd, None).map(|_| ())
}

/// Reads the answer's pkt-lines as they come: the section header, then the pack on band 1
/// (written out), band 2 ignored (progress), band 3 GitHub's error; the flush ends it.
#[derive(Default)]
struct Demux {
    pending: Vec<u8>,
    in_pack: bool,
    done: bool,
}

impl Demux {
    fn feed(&mut self, data: &[u8], out: &mut impl Write) -> Result<(), FetchError> {
        // Taken out while its lines are read (a line borrows it; reading one changes `self`).
        let mut pending = std::mem::take(&mut self.pending);
        pending.extend_from_slice(data);
        let mut at = 0;
        while !self.done {
            let Some(head) = pending.get(at..at + 4) else {
                break;
            };
            let len = std::str::from_utf8(head)
                .ok()
                .and_then(|h| usize::from_str_radix(h, 16).ok())
                .ok_or(FetchError::Answer("a pkt-line length is not hex"))?;
            if len < 4 {
                // 0000 flush (the end, once in the pack), 0001 delimiter, 0002 response end.
                at += 4;
                if len == 0 && self.in_pack {
                    self.done = true;
                } else if len != 1 {
                    return Err(FetchError::Answer("it ended before the packfile section"));
                }
                continue;
            }
            let Some(payload) = pending.get(at + 4..at + len) else {
                break;
            };
            self.line(payload, out)?;
            at += len;
        }
        pending.drain(..at);
        self.pending = pending;
        Ok(())
    }

    fn line(&mut self, payload: &[u8], out: &mut impl Write) -> Result<(), FetchError> {
        if !self.in_pack {
            let text = String::from_utf8_lossy(payload);
            let text = text.trim_end();
            if let Some(error) = text.strip_prefix("ERR ") {
                return Err(FetchError::Refused(error.to_string()));
            }
            // Sections before the pack (acknowledgments, shallow-info) are not asked for.
            return match text {
                "packfile" => {
                    self.in_pack = true;
                    Ok(())
                }
                _ => Err(FetchError::Answer("a section other than the packfile")),
            };
        }
        match payload.split_first() {
            Some((1, pack)) => out.write_all(pack).map_err(FetchError::Spool),
            Some((2, _)) => Ok(()),
            Some((3, error)) => Err(FetchError::Refused(
                String::from_utf8_lossy(error).trim_end().to_string(),
            )),
            _ => Err(FetchError::Answer("a pack line on no known band")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(payload: &[u8]) -> Vec<u8> {
        let mut out = format!("{:04x}", payload.len() + 4).into_bytes();
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn the_request_wants_haves_and_is_done_in_one_round() {
        let wants = ["a".repeat(40)];
        let haves = ["b".repeat(40)];
        let body = request_lines(&Wanted {
            wants: &wants,
            haves: &haves,
            filter: "tree:0",
        });
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with("0012command=fetch\n"));
        assert!(text.contains("0001"));
        assert!(text.contains("0012filter tree:0\n"));
        assert!(text.contains(&format!("0032want {}\n", wants[0])));
        assert!(text.contains(&format!("0032have {}\n", haves[0])));
        assert!(text.ends_with("0009done\n0000"));
    }

    #[test]
    fn the_pack_is_band_one_across_chunks_and_the_flush_ends_it() {
        let mut answer = line(b"packfile\n");
        answer.extend(line(b"\x02counting\n"));
        answer.extend(line(b"\x01PACK-part-one"));
        answer.extend(line(b"\x01-part-two"));
        answer.extend_from_slice(b"0000");
        let mut out = Vec::new();
        let mut demux = Demux::default();
        // Cut anywhere: a chunk boundary inside a length or a payload changes nothing.
        for chunk in answer.chunks(5) {
            demux.feed(chunk, &mut out).unwrap();
        }
        assert!(demux.done);
        assert_eq!(out, b"PACK-part-one-part-two");
    }

    #[test]
    fn githubs_errors_and_other_sections_are_refusals() {
        let mut out = Vec::new();
        let err = Demux::default().feed(&line(b"ERR upload-pack: not our ref\n"), &mut out);
        assert!(matches!(err, Err(FetchError::Refused(m)) if m.contains("not our ref")));
        let mut banded = line(b"packfile\n");
        banded.extend(line(b"\x03fatal: oops\n"));
        let err = Demux::default().feed(&banded, &mut out);
        assert!(matches!(err, Err(FetchError::Refused(m)) if m == "fatal: oops"));
        let err = Demux::default().feed(&line(b"acknowledgments\n"), &mut out);
        assert!(matches!(err, Err(FetchError::Answer(_))));
        let err = Demux::default().feed(b"0000", &mut out);
        assert!(matches!(err, Err(FetchError::Answer(_))));
        assert!(out.is_empty());
    }
}
