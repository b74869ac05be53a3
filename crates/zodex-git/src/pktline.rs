//! The text of git's receive-pack protocol (smart HTTP, v0/v1) as the publisher speaks it:
//! pkt-lines, the ref advertisement of `info/refs?service=git-receive-pack`, the command list
//! of a push, and the `report-status` answer. No I/O here; [`super::receive_pack`] sends it.

use std::collections::{BTreeSet, HashMap};
use zodex_types::{ObjectId, RefChange, RefName};

/// The largest pkt-line payload git accepts (65520 bytes with the length).
const MAX_PKT_PAYLOAD: usize = 65516;

/// GitHub's refs and capabilities, as its receive-pack advertised them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advertisement {
    /// Ref name to object id.
    pub refs: HashMap<String, String>,
    /// Objects GitHub has without a ref of this repository naming them (`.have` lines).
    pub haves: Vec<String>,
    pub capabilities: BTreeSet<String>,
}

impl Advertisement {
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    /// Every object id advertised: ref tips and `.have`s.
    pub fn tips(&self) -> Vec<&str> {
        let mut tips: Vec<&str> = self
            .refs
            .values()
            .chain(self.haves.iter())
            .map(String::as_str)
            .collect();
        tips.sort_unstable();
        tips.dedup();
        tips
    }
}

/// One ref command: the change's old value is what the ref must hold at GitHub (none: it must
/// not exist), its new value what it becomes (none: deleted); either absent is written
/// [`ObjectId::ZERO`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefCommand {
    pub dst: RefName,
    pub change: RefChange,
}

/// GitHub's `report-status`: whether it unpacked the pack, and each ref's outcome in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub unpack: Status,
    pub refs: HashMap<RefName, Status>,
}

/// One line of `report-status`: `ok`, or GitHub's own words for a refusal.
pub use zodex_types::GitStatus as Status;

/// Why an answer from GitHub is not git's smart protocol (pkt-lines, an advertisement, a
/// report).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PktError {
    #[error("a truncated pkt-line length")]
    TruncatedLength,
    #[error("{0:?} is not a pkt-line length")]
    BadLength(String),
    #[error("pkt-line length {0} is reserved")]
    ReservedLength(usize),
    #[error("pkt-line length {0}")]
    TooLong(usize),
    #[error("a truncated pkt-line")]
    Truncated,
    #[error("no `{0}` line")]
    NoServiceLine(String),
    #[error("no flush after the service line")]
    NoFlushAfterService,
    #[error("a ref line is not UTF-8")]
    RefLineNotUtf8,
    #[error("{0:?} is not a ref line")]
    NotRefLine(String),
    #[error("{0:?} is not an object id")]
    NotObjectId(String),
    #[error("no refs and no capabilities")]
    NoRefs,
    #[error("unexpected report line {0:?}")]
    UnexpectedReportLine(String),
    #[error("no `unpack` line")]
    NoUnpackLine,
}

/// One pkt-line: four hex digits of length (itself included), then the payload.
fn pkt_line(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
    out.extend_from_slice(payload);
}

/// The commands as pkt-lines, capabilities after a NUL on the first, then a flush.
pub fn command_lines(commands: &[RefCommand], capabilities: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, c) in commands.iter().enumerate() {
        let mut line = format!(
            "{} {} {}",
            c.change.old_id().unwrap_or(ObjectId::ZERO),
            c.change.new_id().unwrap_or(ObjectId::ZERO),
            c.dst
        )
        .into_bytes();
        if i == 0 {
            line.push(0);
            line.extend_from_slice(capabilities.join(" ").as_bytes());
        }
        line.push(b'\n');
        pkt_line(&mut out, &line);
    }
    out.extend_from_slice(b"0000");
    out
}

/// Splits `bytes` into pkt-lines; `None` stands for a flush packet.
fn pkt_lines(mut bytes: &[u8]) -> Result<Vec<Option<&[u8]>>, PktError> {
    let mut lines = Vec::new();
    while !bytes.is_empty() {
        let Some(head) = bytes.get(..4) else {
            return Err(PktError::TruncatedLength);
        };
        let len = std::str::from_utf8(head)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| PktError::BadLength(String::from_utf8_lossy(head).into_owned()))?;
        match len {
            0 => {
                lines.push(None);
                bytes = &bytes[4..];
            }
            1..=3 => return Err(PktError::ReservedLength(len)),
            _ if len - 4 > MAX_PKT_PAYLOAD => return Err(PktError::TooLong(len)),
            _ => {
                let Some(payload) = bytes.get(4..len) else {
                    return Err(PktError::Truncated);
                };
                lines.push(Some(payload.strip_suffix(b"\n").unwrap_or(payload)));
                bytes = &bytes[len..];
            }
        }
    }
    Ok(lines)
}

/// Reads an `info/refs` answer for `git-receive-pack` (smart HTTP, protocol v0/v1).
pub fn parse_advertisement(body: &[u8]) -> Result<Advertisement, PktError> {
    parse_advertisement_of("git-receive-pack", body)
}

/// [`parse_advertisement`] of `service`'s answer (`git-upload-pack`: the refs a read token
/// sees, in protocol v0, peeled tags as `^{}` entries).
pub fn parse_advertisement_of(service: &str, body: &[u8]) -> Result<Advertisement, PktError> {
    let lines = pkt_lines(body)?;
    let mut lines = lines.into_iter().peekable();
    // `# service=…`, a flush, then the refs (a dumb server sends none of it).
    let first = format!("# service={service}");
    match lines.next() {
        Some(Some(line)) if line == first.as_bytes() => {}
        _ => return Err(PktError::NoServiceLine(first)),
    }
    if lines.next() != Some(None) {
        return Err(PktError::NoFlushAfterService);
    }
    if lines.peek() == Some(&Some(b"version 1".as_slice())) {
        lines.next();
    }
    let mut advertisement = Advertisement::default();
    let mut first = true;
    for line in lines {
        let Some(line) = line else { break };
        let line = if first {
            first = false;
            let (refline, caps) = match line.iter().position(|&b| b == 0) {
                Some(nul) => (&line[..nul], &line[nul + 1..]),
                None => (line, &b""[..]),
            };
            let caps = String::from_utf8_lossy(caps);
            advertisement.capabilities = caps
                .split(' ')
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            refline
        } else {
            line
        };
        let text = std::str::from_utf8(line).map_err(|_| PktError::RefLineNotUtf8)?;
        let Some((oid, name)) = text.split_once(' ') else {
            return Err(PktError::NotRefLine(text.to_string()));
        };
        if ObjectId::parse(oid).is_err() {
            return Err(PktError::NotObjectId(oid.to_string()));
        }
        match name {
            // An empty repository: capabilities only.
            "capabilities^{}" => {}
            ".have" => advertisement.haves.push(oid.to_string()),
            _ => {
                advertisement.refs.insert(name.to_string(), oid.to_string());
            }
        }
    }
    if first {
        return Err(PktError::NoRefs);
    }
    Ok(advertisement)
}

/// Reads a `report-status` answer (without side-band).
pub fn parse_report(body: &[u8]) -> Result<Report, PktError> {
    let mut unpack = None;
    let mut refs = HashMap::new();
    for line in pkt_lines(body)? {
        let Some(line) = line else { break };
        let text = String::from_utf8_lossy(line);
        if let Some(status) = text.strip_prefix("unpack ") {
            unpack = Some(if status == "ok" {
                Ok(())
            } else {
                Err(status.to_string())
            });
        } else if let Some(name) = text.strip_prefix("ok ") {
            refs.insert(report_ref(name, &text)?, Ok(()));
        } else if let Some(rest) = text.strip_prefix("ng ") {
            let (name, reason) = rest.split_once(' ').unwrap_or((rest, "rejected"));
            refs.insert(report_ref(name, &text)?, Err(reason.to_string()));
        } else {
            return Err(PktError::UnexpectedReportLine(text.into_owned()));
        }
    }
    let unpack = unpack.ok_or(PktError::NoUnpackLine)?;
    Ok(Report { unpack, refs })
}

/// A ref a report names: only ever one of the commands, so anything else is no report.
fn report_ref(name: &str, line: &str) -> Result<RefName, PktError> {
    RefName::parse(name).map_err(|_| PktError::UnexpectedReportLine(line.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> ObjectId {
        ObjectId::parse(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn commands_are_pkt_lines_with_capabilities_on_the_first() {
        let lines = command_lines(
            &[
                RefCommand {
                    dst: RefName::branch("main").unwrap(),
                    change: RefChange::Update {
                        old: id('a'),
                        new: id('b'),
                        force: false,
                    },
                },
                RefCommand {
                    dst: RefName::branch("gone").unwrap(),
                    change: RefChange::Delete { old: id('c') },
                },
                RefCommand {
                    dst: RefName::branch("new").unwrap(),
                    change: RefChange::Create { new: id('d') },
                },
            ],
            &["report-status".into(), "atomic".into()],
        );
        let text = String::from_utf8(lines).unwrap();
        let first = format!(
            "{} {} refs/heads/main\0report-status atomic\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let zero = "0".repeat(40);
        let second = format!("{} {zero} refs/heads/gone\n", "c".repeat(40));
        let third = format!("{zero} {} refs/heads/new\n", "d".repeat(40));
        assert_eq!(
            text,
            format!(
                "{:04x}{first}{:04x}{second}{:04x}{third}0000",
                first.len() + 4,
                second.len() + 4,
                third.len() + 4
            )
        );
    }

    #[test]
    fn an_advertisement_gives_refs_haves_and_capabilities() {
        let mut body = Vec::new();
        pkt_line(&mut body, b"# service=git-receive-pack\n");
        body.extend_from_slice(b"0000");
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        pkt_line(
            &mut body,
            format!("{a} refs/heads/main\0report-status atomic ofs-delta agent=git/2\n").as_bytes(),
        );
        pkt_line(&mut body, format!("{b} .have\n").as_bytes());
        body.extend_from_slice(b"0000");
        let ad = parse_advertisement(&body).unwrap();
        assert_eq!(ad.refs.get("refs/heads/main"), Some(&a));
        assert_eq!(ad.haves, vec![b.clone()]);
        assert!(ad.has("atomic") && ad.has("report-status") && !ad.has("side-band-64k"));
        assert_eq!(ad.tips(), vec![a.as_str(), b.as_str()]);

        let mut empty = Vec::new();
        pkt_line(&mut empty, b"# service=git-receive-pack\n");
        empty.extend_from_slice(b"0000");
        pkt_line(
            &mut empty,
            format!("{} capabilities^{{}}\0report-status\n", ObjectId::ZERO).as_bytes(),
        );
        empty.extend_from_slice(b"0000");
        let ad = parse_advertisement(&empty).unwrap();
        assert!(ad.refs.is_empty() && ad.has("report-status"));

        assert!(parse_advertisement(b"<html>").is_err());
        assert!(parse_advertisement(b"").is_err());
    }

    #[test]
    fn a_report_gives_each_refs_outcome_in_githubs_words() {
        let mut body = Vec::new();
        pkt_line(&mut body, b"unpack ok\n");
        pkt_line(&mut body, b"ok refs/heads/main\n");
        pkt_line(&mut body, b"ng refs/heads/other failed to update ref\n");
        body.extend_from_slice(b"0000");
        let report = parse_report(&body).unwrap();
        assert_eq!(report.unpack, Ok(()));
        assert_eq!(report.refs["refs/heads/main"], Ok(()));
        assert_eq!(
            report.refs["refs/heads/other"],
            Err("failed to update ref".to_string())
        );
        assert!(parse_report(b"0000").is_err(), "no unpack line");
        let mut odd = Vec::new();
        pkt_line(&mut odd, b"unpack ok\n");
        pkt_line(&mut odd, b"ok refs/heads/../x\n");
        assert!(matches!(
            parse_report(&odd),
            Err(PktError::UnexpectedReportLine(_))
        ));
        assert!(parse_report(b"00zz").is_err());
    }
}
