//! `git-remote-zodex`: git's remote-helper protocol (gitremote-helpers(7)) for pushes that go
//! through `zodex-prd`. The agent's git config rewrites push URLs to
//! `zodex::https://github.com/OWNER/NAME`; git then runs this helper, which answers
//! `capabilities`, `option`, `list for-push` (the publisher's mirror) and `push` — every ref
//! update of one `git push` in one bundle, each decided separately, each answered `ok` or
//! `error` so git prints the usual per-ref summary.

use super::bundle::{self, BundleBuildError};
use super::client::{self, ClientError};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use zodex_protocol::{AgentRequest, ErrorKind, PushOutcome, PushUpdate, Response};
use zodex_types::RepoName;
use zodex_types::repo::repo_of_url;
use zodex_types::{ObjectId, RefName};

#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("{0} does not name a GitHub repository as https://HOST/OWNER/NAME")]
    Url(String),
    #[error("git sent `{0}`, which this helper does not understand")]
    Protocol(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Bundle(#[from] BundleBuildError),
    #[error("zodex-prd refused: {0}")]
    Refused(String),
    /// zodex-prd could not do it, for a reason not a refusal (GitHub failing, its own error).
    #[error("{0}")]
    Failed(String),
    #[error("talking to git failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Each destination ref with `Ok` or the reason git prints.
type RefAnswers = Vec<(String, zodex_types::GitStatus)>;

/// What the options and the ref list established for the next push batch.
#[derive(Default)]
struct Session {
    progress: bool,
    atomic: bool,
    dry_run: bool,
    /// `--force-with-lease` values git gave, by the ref name as git wrote it.
    leases: HashMap<String, ObjectId>,
    remote_refs: Option<HashMap<String, String>>,
}

pub struct Helper {
    repo: RepoName,
    socket: PathBuf,
    workdir: PathBuf,
    session: Session,
}

impl Helper {
    /// A helper for `url` (the part after `zodex::`).
    pub fn new(url: &str, socket: PathBuf, workdir: PathBuf) -> Result<Self, HelperError> {
        let repo = repo_of_url(url).ok_or_else(|| HelperError::Url(url.to_string()))?;
        Ok(Self {
            repo,
            socket,
            workdir,
            session: Session::default(),
        })
    }

    /// Serves git until it closes stdin.
    pub fn run(
        &mut self,
        input: &mut impl BufRead,
        out: &mut impl Write,
    ) -> Result<(), HelperError> {
        let mut line = String::new();
        loop {
            line.clear();
            if input.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let command = line.trim_end_matches(['\n', '\r']);
            match command {
                "" => return Ok(()),
                "capabilities" => {
                    out.write_all(b"push\noption\n\n")?;
                }
                "list for-push" | "list" => {
                    let refs = self.list()?;
                    for (name, oid) in &refs {
                        writeln!(out, "{oid} {name}")?;
                    }
                    writeln!(out)?;
                    self.session.remote_refs = Some(refs.into_iter().collect());
                }
                _ if command.starts_with("option ") => {
                    let answer = self.option(&command["option ".len()..]);
                    writeln!(out, "{answer}")?;
                }
                _ if command.starts_with("push ") => {
                    let mut specs = vec![command["push ".len()..].to_string()];
                    loop {
                        line.clear();
                        if input.read_line(&mut line)? == 0 {
                            break;
                        }
                        let next = line.trim_end_matches(['\n', '\r']);
                        match next.strip_prefix("push ") {
                            Some(spec) => specs.push(spec.to_string()),
                            None if next.is_empty() => break,
                            None => return Err(HelperError::Protocol(next.to_string())),
                        }
                    }
                    for (dst, result) in self.push(&specs)? {
                        match result {
                            Ok(()) => writeln!(out, "ok {dst}")?,
                            Err(why) => writeln!(out, "error {dst} {}", why.replace('\n', " "))?,
                        }
                    }
                    writeln!(out)?;
                }
                other => return Err(HelperError::Protocol(other.to_string())),
            }
            out.flush()?;
        }
    }

    fn option(&mut self, text: &str) -> &'static str {
        let (name, value) = text.split_once(' ').unwrap_or((text, ""));
        match name {
            "progress" => {
                self.session.progress = value == "true";
                "ok"
            }
            "verbosity" | "followtags" => "ok",
            "atomic" => {
                self.session.atomic = value == "true";
                "ok"
            }
            "dry-run" => {
                self.session.dry_run = value == "true";
                "ok"
            }
            "cas" => {
                let value = unquote(value);
                match value.rsplit_once(':') {
                    Some((name, oid)) => match ObjectId::parse(oid) {
                        Ok(oid) => {
                            self.session.leases.insert(name.to_string(), oid);
                            "ok"
                        }
                        Err(_) => "error cas needs REF:OID",
                    },
                    None => "error cas needs REF:OID",
                }
            }
            _ => "unsupported",
        }
    }

    fn call(
        &self,
        request: &AgentRequest,
        bundle: Option<(&Path, u64)>,
    ) -> Result<Response, HelperError> {
        let total = bundle.map_or(0, |b| b.1);
        let show = self.session.progress
            && super::progress::Progress::for_stderr() == super::progress::Progress::Redraw
            && total >= 8 << 20;
        let response = client::call_with_bundle(&self.socket, request, bundle, |sent, total| {
            if show {
                eprint!(
                    "\rzodex: sending {} / {} MiB to zodex-prd",
                    sent >> 20,
                    total >> 20
                );
                if sent == total {
                    eprintln!();
                }
            }
        });
        answered(response)
    }

    /// Sends `request` with a bundle streamed as pack-objects writes it.
    fn call_streamed(
        &self,
        request: &AgentRequest,
        bundle: bundle::Streaming,
    ) -> Result<Response, HelperError> {
        answered(client::call_with_stream(
            &self.socket,
            request,
            bundle,
            |_| {},
        ))
    }

    fn list(&self) -> Result<Vec<(String, String)>, HelperError> {
        let response = self.call(
            &AgentRequest::ListRefs {
                repo: self.repo.to_string(),
            },
            None,
        )?;
        let refs: Vec<zodex_protocol::ListedRef> = response
            .answer()
            .map_err(|e| HelperError::Refused(format!("unreadable ref list: {e}")))?;
        Ok(refs
            .into_iter()
            .map(|r| (r.name.to_string(), r.oid.to_string()))
            .collect())
    }

    /// One push batch: resolve sources, build one bundle, send, map the answers.
    fn push(&mut self, specs: &[String]) -> Result<RefAnswers, HelperError> {
        let remote = match self.session.remote_refs.clone() {
            Some(refs) => refs,
            None => self.list()?.into_iter().collect(),
        };
        let mut updates = Vec::new();
        let mut tips = Vec::new();
        let mut local_errors = Vec::new();
        for spec in specs {
            let (force, spec) = match spec.strip_prefix('+') {
                Some(rest) => (true, rest),
                None => (false, spec.as_str()),
            };
            let Some((src, dst)) = spec.split_once(':') else {
                return Err(HelperError::Protocol(format!("push {spec}")));
            };
            // Refused here as zodex-prd would refuse it: a name git should not have sent.
            let name = match RefName::parse(dst) {
                Ok(name) => name,
                Err(e) => {
                    local_errors.push((dst.to_string(), Err(e.to_string())));
                    continue;
                }
            };
            let new = if src.is_empty() {
                None
            } else {
                let resolved =
                    bundle::git_output(&self.workdir, &["rev-parse", "--verify", "--quiet", src]);
                match resolved
                    .ok()
                    .and_then(|oid| ObjectId::parse(oid.trim()).ok())
                {
                    Some(oid) => Some(oid),
                    None => {
                        local_errors.push((
                            dst.to_string(),
                            Err(format!("src refspec {src} does not match any object")),
                        ));
                        continue;
                    }
                }
            };
            if let Some(oid) = &new {
                tips.push((oid.to_string(), dst.to_string()));
            }
            updates.push(PushUpdate {
                dst: name,
                new,
                force,
                lease: self.session.leases.get(dst).copied(),
            });
        }
        if updates.is_empty() {
            return Ok(local_errors);
        }
        let haves: Vec<String> = remote.values().cloned().collect();
        // The pack goes to zodex-prd as it is written, and from there on to GitHub; past the
        // ceiling it stops, and zodex-prd keeps nothing.
        let streaming = bundle::start(&self.workdir, &tips, &haves, self.session.progress)?;
        let request = AgentRequest::Push {
            repo: self.repo.to_string(),
            updates: updates.clone(),
            atomic: self.session.atomic,
            dry_run: self.session.dry_run,
        };
        let answer = match streaming {
            Some(bundle) => self.call_streamed(&request, bundle),
            None => self.call(&request, None),
        };
        let outcome: PushOutcome = match answer {
            Ok(response) => response
                .answer()
                .map_err(|e| HelperError::Refused(format!("unreadable push answer: {e}")))?,
            Err(HelperError::Refused(why) | HelperError::Failed(why)) => {
                // Refused as a whole (before the body): every ref gets the reason.
                let mut all = local_errors;
                all.extend(
                    updates
                        .iter()
                        .map(|u| (u.dst.to_string(), Err(why.clone()))),
                );
                return Ok(all);
            }
            // The connection broke after the request left: GitHub may have the update or
            // not, and only GitHub can say which. Each ref says so and what is safe to do.
            Err(HelperError::Client(ClientError::Io(e))) => {
                let mut all = local_errors;
                all.extend(
                    updates
                        .iter()
                        .map(|u| (u.dst.to_string(), Err(cut_mid_push(u.dst.as_str(), &e)))),
                );
                return Ok(all);
            }
            Err(e) => return Err(e),
        };
        let mut results = local_errors;
        for result in outcome.results {
            let answer = if result.ok {
                Ok(())
            } else {
                Err(result.message.unwrap_or_else(|| "refused".into()))
            };
            results.push((result.dst.to_string(), answer));
        }
        // The answered leases and refs are used up; git lists again for another batch.
        self.session.remote_refs = None;
        self.session.leases.clear();
        Ok(results)
    }
}

/// What a ref is told when the connection to zodex-prd broke before its answer.
fn cut_mid_push(dst: &str, e: &std::io::Error) -> String {
    format!(
        "the connection to zodex-prd broke before its answer ({e}): the update of {dst} may or may not have reached GitHub. \
         `git ls-remote origin {dst}` shows what GitHub has now; pushing the same commits again is safe (each update is leased on what GitHub had)"
    )
}

/// The answer to a request, a refusal or failure turned into the helper's error.
fn answered(response: Result<Response, ClientError>) -> Result<Response, HelperError> {
    let response = response?;
    if !response.ok {
        let error = response.error.unwrap_or_else(|| zodex_protocol::WireError {
            kind: zodex_protocol::ErrorKind::Internal,
            message: "no reason given".into(),
            policies: vec![],
            unblock: None,
        });
        let mut message = error.message;
        if let Some(unblock) = error.unblock.filter(|u| !message.contains(u.as_str())) {
            message.push_str(&format!("; {unblock}"));
        }
        return Err(match error.kind {
            ErrorKind::Denied | ErrorKind::Usage | ErrorKind::Forbidden => {
                HelperError::Refused(message)
            }
            _ => HelperError::Failed(message),
        });
    }
    Ok(response)
}

/// Undoes git's C-style quoting of an option value (only used when the value needs it).
fn unquote(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_the_session_and_unknown_ones_are_unsupported() {
        let mut helper = Helper::new(
            "https://github.com/demo/app.git",
            PathBuf::from("/nonexistent"),
            PathBuf::from("."),
        )
        .unwrap();
        assert_eq!(helper.option("atomic true"), "ok");
        assert!(helper.session.atomic);
        assert_eq!(
            helper.option(&format!("cas \"refs/heads/main:{}\"", ObjectId::ZERO)),
            "ok"
        );
        assert_eq!(helper.session.leases["refs/heads/main"], ObjectId::ZERO);
        assert_eq!(
            helper.option("cas \"refs/heads/main:main\""),
            "error cas needs REF:OID"
        );
        assert_eq!(helper.option("dry-run true"), "ok");
        assert!(helper.session.dry_run);
        assert_eq!(helper.option("push-option x"), "unsupported");
        assert!(Helper::new("/local/path", PathBuf::new(), PathBuf::new()).is_err());
    }

    #[test]
    fn capabilities_are_push_and_option() {
        let mut helper = Helper::new(
            "https://github.com/demo/app",
            PathBuf::from("/nonexistent"),
            PathBuf::from("."),
        )
        .unwrap();
        let mut out = Vec::new();
        helper.run(&mut &b"capabilities\n\n"[..], &mut out).unwrap();
        assert_eq!(out, b"push\noption\n\n");
    }
}
