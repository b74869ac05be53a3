//! Pushing to GitHub: the verified pack passed through as it is ([`push_leased`] over
//! [`super::receive_pack`]) when that is sound, else `git push --porcelain` from the mirror with
//! the quarantine's objects visible ([`git_push`]); every update leased on the value the
//! decision saw either way; then the mirror's own ref moved to match.
//!
//! The pack goes through as it is only when GitHub can take it as it is and it carries nothing
//! but what the allowed updates need: every update of the request was allowed, or the allowed
//! updates' tips reach every object of the pack the mirror does not already have (a refused
//! ref's own commits would otherwise reach GitHub unasked), GitHub
//! advertised the capabilities the push needs (`report-status`, `ofs-delta`, `atomic` when git
//! asked for it), and every prerequisite of the bundle — the bases of its thin pack — is
//! reachable from a tip GitHub advertised in this same session. Otherwise `git push` packs what
//! GitHub lacks against what it has.

use super::git;
use super::import_error::ImportError;
use super::receive_pack::{ReceivePackError, RefCommand, Session};
use super::{Quarantine, SharedQuarantine};
use std::collections::HashMap;
use std::path::Path;
use zodex_github::Token;
use zodex_types::{ObjectId, RefChange, RefName};

/// One ref update as it is pushed to GitHub, leased on the change's old value (the value the
/// decision saw at GitHub; a creation's lease is that the ref must not exist). An update's
/// `force` is a non-fast-forward the decision allowed.
#[derive(Debug, Clone)]
pub struct LeasedUpdate {
    pub dst: RefName,
    pub change: RefChange,
}

impl LeasedUpdate {
    /// The new value, as git names it (`None`: deleted).
    fn new_hex(&self) -> Option<String> {
        self.change.new_id().map(|id| id.to_string())
    }
}

/// How a push reached GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The verified pack, sent as it is over receive-pack.
    PassedThrough,
    /// `git push` from the mirror, for the reason given.
    Repacked(String),
}

/// What GitHub said of each ref pushed, by ref name (its words for a refusal). The one name
/// for per-ref results inside the publisher; `protocol::RefResult` is what the agent is told.
pub type RefOutcomes = HashMap<RefName, crate::pktline::Status>;

/// Each ref's outcome, or one error for all of them.
pub type Pushed = Result<RefOutcomes, PushError>;

/// Why a push reached no ref at GitHub (one error for all of them).
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(transparent)]
    ReceivePack(#[from] ReceivePackError),
    /// GitHub's words (`unpack <reason>`).
    #[error("GitHub could not store the pack ({0}); nothing was pushed; push again")]
    Unpack(String),
    #[error("the push to GitHub failed: {0}; push again")]
    Task(tokio::task::JoinError),
    #[error("cannot run git: {0}")]
    RunGit(std::io::Error),
    /// git's standard error, the token scrubbed out.
    #[error("pushing to GitHub failed: {0}")]
    GitPush(String),
}

/// Why the verified pack cannot go to GitHub as it is (it is repacked with `git push`
/// instead); nothing was sent yet.
#[derive(Debug, thiserror::Error)]
pub enum PassThroughError {
    #[error("a ref of the request was refused, and the pack carries its objects")]
    RefRefused,
    #[error(transparent)]
    Session(#[from] ReceivePackError),
    #[error("GitHub did not advertise {0}")]
    Capability(&'static str),
    #[error("a base of the bundle is not reachable from a ref GitHub advertised")]
    BaseUnreachable,
    #[error("checking the bundle's bases: {0}")]
    BaseCheck(ImportError),
}

/// Where a push goes: the mirror it is made from, GitHub's URL, and GitHub's ref values the
/// decisions saw (what the commits pushed are new against).
pub struct Target<'a> {
    pub mirror: &'a Path,
    pub url: &'a str,
    pub github_tips: Vec<String>,
}

/// Pushes `updates` leased on the values decided: the verified pack passed through when that
/// is sound (see the module's documentation), else [`git_push`]. `whole_request`: every update
/// of the request was allowed (none refused), so the pack carries only what these need;
/// otherwise the pack is held against these updates' tips first.
pub async fn push_leased(
    target: &Target<'_>,
    quarantine: &SharedQuarantine,
    updates: &[LeasedUpdate],
    atomic: bool,
    token: &Token,
    whole_request: bool,
) -> (Pushed, Route) {
    let (mirror, url) = (target.mirror, target.url);
    let started = std::time::Instant::now();
    let fits = whole_request || {
        let tips: Vec<String> = updates.iter().filter_map(LeasedUpdate::new_hex).collect();
        let held = quarantine.clone();
        blocking(move || {
            let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
            held.with(|q| q.check_reach(&tips).is_ok())
        })
        .await
    };
    let session = match fits {
        false => Err(PassThroughError::RefRefused),
        true => pass_through(mirror, url, quarantine, updates, atomic, token).await,
    };
    let (pushed, route) = match session {
        Ok(pushed) => (pushed, Route::PassedThrough),
        Err(why) => {
            let (mirror, url, held) = (mirror.to_path_buf(), url.to_string(), quarantine.clone());
            let (updates, token) = (updates.to_vec(), token.clone());
            let github = target.github_tips.clone();
            let pushed = blocking(move || {
                held.with(|q| {
                    // `git push` from a shallow mirror would read the cut as the history's end.
                    if let Err(e) = super::shallow::deepen(&mirror, &url, &token) {
                        tracing::warn!(error = %e, "deepening the mirror before git push failed");
                    }
                    fetch_edge_trees(&mirror, &url, q, &updates, &github, &token);
                    git_push(&mirror, &url, q, &updates, atomic, &token)
                })
            })
            .await;
            (pushed, Route::Repacked(why.to_string()))
        }
    };
    match &route {
        Route::PassedThrough => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "the verified pack passed through to GitHub"
        ),
        Route::Repacked(why) => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            reason = %why,
            "pushed with git push (the pack was not passed through)"
        ),
    }
    (pushed, route)
}

/// The receive-pack session; `Err` (why) when the pack cannot go through as it is and nothing
/// was sent yet.
async fn pass_through(
    mirror: &Path,
    url: &str,
    quarantine: &SharedQuarantine,
    updates: &[LeasedUpdate],
    atomic: bool,
    token: &Token,
) -> Result<Pushed, PassThroughError> {
    let session = Session::new(url, token)?;
    let advertised = session.advertisement().await?;
    let (pack, mut bases) = quarantine.with(|q| {
        let pack = q.pack_file().map(Path::to_path_buf);
        let prerequisites = q.header.iter().flat_map(|h| h.prerequisites.clone());
        (pack, prerequisites.collect::<Vec<String>>())
    });
    let capabilities = capabilities(&advertised, atomic, pack.is_some())?;
    // What GitHub must already have: the bundle's prerequisites, and without a pack the new
    // tips themselves.
    if pack.is_none() {
        bases.extend(updates.iter().filter_map(LeasedUpdate::new_hex));
    }
    let tips: Vec<String> = advertised.tips().into_iter().map(str::to_string).collect();
    let (held, at) = (quarantine.clone(), mirror.to_path_buf());
    blocking(move || held.with(|q| bases_at_github_owned(q, &at, &bases, &tips))).await?;
    let commands: Vec<RefCommand> = updates
        .iter()
        .map(|u| RefCommand {
            dst: u.dst.clone(),
            change: u.change,
        })
        .collect();
    let report = session
        .push(&commands, &capabilities, pack.as_deref())
        .await;
    Ok(outcomes(report, updates.iter().map(|u| &u.dst)))
}

/// Runs git or gix work (walks, `git push`) on a blocking thread.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("a blocking push step was cancelled: {e}"),
    }
}

/// [`bases_at_github`] on owned lists, for a blocking thread.
pub fn bases_at_github_owned(
    quarantine: &Quarantine,
    mirror: &Path,
    bases: &[String],
    advertised: &[String],
) -> Result<(), PassThroughError> {
    let bases: Vec<&str> = bases.iter().map(String::as_str).collect();
    let advertised: Vec<&str> = advertised.iter().map(String::as_str).collect();
    bases_at_github(quarantine, mirror, &bases, &advertised)
}

/// `Ok` when every one of `bases` (what GitHub must already have for the pack to go as it
/// is) is reachable from `advertised`, the tips GitHub advertised in this session; `Err` says
/// why the pack cannot go as it is.
pub fn bases_at_github(
    quarantine: &Quarantine,
    mirror: &Path,
    bases: &[&str],
    advertised: &[&str],
) -> Result<(), PassThroughError> {
    match quarantine.all_reachable(mirror, bases, advertised) {
        Ok(true) => Ok(()),
        Ok(false) => Err(PassThroughError::BaseUnreachable),
        Err(e) => Err(PassThroughError::BaseCheck(e)),
    }
}

/// The capabilities a push asks for, after checking GitHub advertised what it needs
/// (`report-status`, `atomic` when asked, `ofs-delta` with a pack); `Err` says what is missing.
fn capabilities(
    advertised: &super::receive_pack::Advertisement,
    atomic: bool,
    with_pack: bool,
) -> Result<Vec<String>, PassThroughError> {
    let mut needed = vec!["report-status"];
    if atomic {
        needed.push("atomic");
    }
    if with_pack {
        needed.push("ofs-delta");
    }
    if let Some(missing) = needed.iter().find(|c| !advertised.has(c)) {
        return Err(PassThroughError::Capability(missing));
    }
    let mut capabilities: Vec<String> = vec!["report-status".into()];
    if atomic {
        capabilities.push("atomic".into());
    }
    if advertised.has("quiet") {
        capabilities.push("quiet".into());
    }
    if advertised
        .capabilities
        .iter()
        .any(|c| c.starts_with("agent="))
    {
        capabilities.push(format!("agent={}", zodex_github::USER_AGENT));
    }
    Ok(capabilities)
}

/// Each ref's outcome in GitHub's report (GitHub's words for a refusal).
fn outcomes<'a>(
    report: Result<super::receive_pack::Report, ReceivePackError>,
    dsts: impl Iterator<Item = &'a RefName>,
) -> Pushed {
    let report = report?;
    if let Err(why) = &report.unpack {
        return Err(PushError::Unpack(why.clone()));
    }
    Ok(dsts
        .map(|dst| {
            let outcome = match report.refs.get(dst) {
                Some(Ok(())) => Ok(()),
                Some(Err(why)) => Err(format!("GitHub refused it: {why}")),
                None => Err("GitHub did not report this ref".to_string()),
            };
            (dst.clone(), outcome)
        })
        .collect())
}

/// A push whose pack is on its way to GitHub while its bundle still arrives (see
/// [`super::forward`]): the commands are sent, the pack follows as it lands, its checksum
/// only on the verdict.
pub struct StreamedPush {
    task: tokio::task::JoinHandle<
        Result<super::receive_pack::Report, super::receive_pack::ReceivePackError>,
    >,
    /// Every object id GitHub advertised in this session.
    pub advertised: Vec<String>,
}

impl StreamedPush {
    /// Opens the session: GitHub's refs and capabilities first (`Err` says why the pack
    /// cannot go this way; nothing was sent), then the commands and `pack`, on a task of
    /// their own.
    pub async fn start(
        url: &str,
        token: &Token,
        commands: Vec<RefCommand>,
        atomic: bool,
        pack: impl futures_util::Stream<Item = std::io::Result<tokio_util::bytes::Bytes>>
        + Send
        + 'static,
    ) -> Result<Self, PassThroughError> {
        let session = Session::new(url, token)?;
        let advertised = session.advertisement().await?;
        let capabilities = capabilities(&advertised, atomic, true)?;
        let task =
            tokio::spawn(
                async move { session.push_streamed(&commands, &capabilities, pack).await },
            );
        Ok(Self {
            task,
            advertised: advertised.tips().into_iter().map(str::to_string).collect(),
        })
    }

    /// Whether GitHub already ended the request (an error: it answers only after the pack).
    pub fn ended_early(&self) -> bool {
        self.task.is_finished()
    }

    /// Drops the request now, whatever it was doing: the connection goes, and with it any
    /// chance of GitHub reading the rest of the pack.
    pub fn abandon(self) {
        self.task.abort();
    }

    /// GitHub's answer, once the verdict was given: each ref's outcome on a commit; an error
    /// on an abort (the request was cut before the pack's end).
    pub async fn finish<'a>(self, dsts: impl Iterator<Item = &'a RefName>) -> Pushed {
        match self.task.await {
            Ok(report) => outcomes(report, dsts),
            Err(e) => Err(PushError::Task(e)),
        }
    }
}

/// `git push --porcelain` from the mirror, the quarantine's objects visible, each update
/// leased on the value the decision saw. Returns each ref's outcome, or one error for all.
pub fn git_push(
    mirror: &Path,
    url: &str,
    quarantine: &Quarantine,
    updates: &[LeasedUpdate],
    atomic: bool,
    token: &Token,
) -> Pushed {
    let mut cmd = git::command(mirror);
    git::with_token(&mut cmd, token);
    cmd.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", quarantine.objects_dir())
        .args(["push", "--porcelain", "--no-verify"])
        // Not thin: a thin pack deltas against GitHub's blobs, which the partial mirror does
        // not hold (and never fetches behind our back); the bundle's objects go whole.
        .arg("--no-thin");
    if atomic {
        cmd.arg("--atomic");
    }
    for u in updates {
        // An empty expectation: the ref must not exist.
        let expected = u
            .change
            .old_id()
            .map(|old| old.to_string())
            .unwrap_or_default();
        cmd.arg(format!("--force-with-lease={}:{expected}", u.dst));
    }
    cmd.arg(url);
    for u in updates {
        match u.change {
            RefChange::Delete { .. } => cmd.arg(format!(":{}", u.dst)),
            RefChange::Update {
                new, force: true, ..
            } => cmd.arg(format!("+{new}:{}", u.dst)),
            RefChange::Create { new } | RefChange::Update { new, .. } => {
                cmd.arg(format!("{new}:{}", u.dst))
            }
        };
    }
    let output = cmd.output().map_err(PushError::RunGit)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut outcomes = HashMap::new();
    for line in stdout.lines() {
        let mut fields = line.split('\t');
        let (Some(flag), Some(refs), summary) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(dst) = refs
            .split_once(':')
            .and_then(|(_, dst)| RefName::parse(dst).ok())
        else {
            continue;
        };
        let outcome = if flag == "!" {
            Err(format!(
                "GitHub refused it: {}",
                summary.unwrap_or("rejected")
            ))
        } else {
            Ok(())
        };
        outcomes.insert(dst, outcome);
    }
    if outcomes.is_empty() {
        return Err(PushError::GitPush(git::scrub(
            &String::from_utf8_lossy(&output.stderr),
            Some(token),
        )));
    }
    Ok(outcomes)
}

/// `git push` leaves out what GitHub has by reading the trees of the commits the pushed ones
/// build on, whole; the treeless mirror fetches them first (no blob). A failure is logged and
/// left to `git push`, which names what it misses.
fn fetch_edge_trees(
    mirror: &Path,
    url: &str,
    quarantine: &Quarantine,
    updates: &[LeasedUpdate],
    github: &[String],
    token: &Token,
) {
    let tips: Vec<String> = updates.iter().filter_map(LeasedUpdate::new_hex).collect();
    let tips: Vec<&str> = tips.iter().map(String::as_str).collect();
    let github: Vec<&str> = github.iter().map(String::as_str).collect();
    match quarantine.edge_trees(mirror, &tips, &github) {
        Ok(trees) => {
            if let Err(e) = super::mirror::fetch_trees_whole(mirror, url, token, &trees) {
                tracing::warn!(error = %e, "fetching the trees git push reads failed");
            }
        }
        Err(e) => tracing::warn!(error = %e, "fetching the trees git push reads failed"),
    }
}

/// Keeps the mirror's ref where GitHub now has it (the next fetch would too): at `new`, or
/// deleted (`None`).
pub fn update_mirror_ref(mirror: &Path, dst: &RefName, new: Option<ObjectId>) {
    let mut cmd = git::command(mirror);
    match new {
        Some(new) => cmd.args(["update-ref", dst.as_str(), &new.to_string()]),
        None => cmd.args(["update-ref", "-d", dst.as_str()]),
    };
    let _ = cmd.output();
}
