//! Pushes whose bundle arrives as a stream ([`zodex_protocol::STREAMED_BUNDLE`]): the pack is
//! passed on to GitHub while it lands ([`crate::publish::forward`]), so GitHub
//! checks the objects while the agent is still packing them, as with a plain `git push`.
//!
//! The order of a streamed push, and why it is safe:
//! 1. The request was admitted on what it declares, like any push ([`Pipeline::admit`]).
//! 2. A token is minted for this step without `workflows`, and the receive-pack request opens
//!    with one command per update, `old` = GitHub's value (GitHub refuses a ref that moved
//!    since): the value `list for-push` read moments ago — the request then opens while the
//!    mirror fetches what the decisions read and step 4 runs — else the value of the mirror,
//!    fetched first.
//! 3. The pack follows as it lands, all but its 20-byte checksum.
//! 4. Once the bundle is whole it is imported and verified, and every update decided on it
//!    (while the request opens: the decisions do not depend on it, nor it on them),
//!    exactly as for a bundle that was spooled first.
//! 5. Only when every update was allowed as the commands already say (same old and new ids,
//!    nothing touching workflows, every prerequisite at GitHub) does the checksum go; GitHub
//!    then stores the pack and moves the refs. Otherwise the request is cut before the
//!    checksum, GitHub keeps nothing, and the decided updates are pushed the ordinary way
//!    ([`Pipeline::send_decided`]) with a token minted for what they need.

use super::super::Failure;
use super::super::mirror::OpenMirror;
use super::Pipeline;
use super::step_token::StepToken;
use super::types::{Admission, Decided, DecidedAt, LockedMirror, PushMode, each_failed};
use crate::github::GitHub;
use crate::github::TokenUse;
use crate::publish::SharedQuarantine;
use crate::publish::Spooled;
use crate::publish::forward::{Spooling, Verdict, pack_stream};
use crate::publish::receive_pack::RefCommand;
use crate::publish::upload::{PassThroughError, StreamedPush, bases_at_github_owned};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use zodex_engine::{ObjectId, RefChange, RefName, RepoName};
use zodex_protocol::{AgentRequest, ErrorKind, PushOutcome, PushUpdate, Response};

/// The whole bundle, or why it did not arrive.
// String: the text the agent is answered with (a usage error); the daemon's spool error,
// rendered where the daemon hands it over (the host does not reach into the daemon).
pub type Arrival = Result<Spooled, String>;

/// A bundle the daemon is still receiving.
pub struct Incoming {
    /// A read handle on the spool file being written.
    pub file: std::fs::File,
    /// How much of it is there.
    pub spooling: watch::Receiver<Spooling>,
    /// The whole bundle, or why it did not arrive.
    pub spooled: oneshot::Receiver<Arrival>,
}

/// Why a streamed pack is not passed on as it arrived (it is then cut before its checksum, and
/// the decided updates are pushed the ordinary way). Only logged.
#[derive(Debug, thiserror::Error)]
enum NotForwarded {
    #[error("cannot read the spool file: {0}")]
    SpoolFile(std::io::Error),
    /// The message of the failure minting this step's token.
    #[error("{0}")]
    Token(String),
    #[error(transparent)]
    PassThrough(#[from] PassThroughError),
    #[error("an update was refused")]
    Refused,
    #[error("an update touches workflows (the token needs workflows: write)")]
    Workflows,
    #[error("the decided updates are not the commands sent")]
    NotTheCommands,
    #[error("the bundle has no header")]
    NoHeader,
    #[error("the bundle has no pack")]
    NoPack,
    #[error("checking the bundle's bases failed: {0}")]
    BaseCheck(tokio::task::JoinError),
    #[error("GitHub ended the request before the pack did")]
    EndedEarly,
}

impl Incoming {
    /// Waits for the whole bundle.
    async fn whole(spooled: oneshot::Receiver<Arrival>) -> Result<Spooled, Failure> {
        match spooled.await {
            Ok(Ok(spooled)) => Ok(spooled),
            Ok(Err(message)) => Err(Failure::new(ErrorKind::Usage, message)),
            Err(_) => Err(Failure::new(
                ErrorKind::Internal,
                "the bundle's receiver stopped; nothing was pushed; see the zodex-prd log",
            )),
        }
    }
}

/// Where a streamed pack goes, on which of GitHub's ref values (each command's old id).
struct ForwardTo<'a> {
    github: &'a Arc<GitHub>,
    repo: &'a RepoName,
    url: String,
    refs: &'a HashMap<RefName, ObjectId>,
    now: i64,
}

/// The pack on its way to GitHub, and the token it goes with.
struct Forward {
    push: StreamedPush,
    token: StepToken,
    commands: Vec<RefCommand>,
    /// How long minting and opening the request took, and what they asked of GitHub (they
    /// run beside the stages of the log's `stages`).
    opened: String,
}

impl Pipeline {
    /// Handles a push or publish whose bundle is still arriving: a push of new ids, not a dry
    /// run, nothing refused on admission, is passed on as it lands; anything else waits for
    /// the whole bundle and is handled as [`Pipeline::publish`] does.
    pub async fn publish_streamed(
        self: &Arc<Self>,
        request: AgentRequest,
        admission: Admission,
        incoming: Incoming,
    ) -> Response {
        if let Err(refused) = self.core.audit_gate().await {
            return refused.into_response();
        }
        match request {
            AgentRequest::Push {
                repo,
                updates,
                atomic,
                dry_run: false,
            } if admission.refused_none() && updates.iter().all(|u| u.new.is_some()) => self
                .push_streamed(&repo, (updates, atomic), admission, incoming)
                .await
                .map(Response::ok)
                .unwrap_or_else(Failure::into_response),
            request => match Incoming::whole(incoming.spooled).await {
                Ok(spooled) => self.publish(request, admission, Some(spooled)).await,
                Err(failure) => failure.into_response(),
            },
        }
    }

    /// A streamed push: the mirror fetched and locked, the request to GitHub opened while the
    /// bundle is imported and decided.
    async fn push_streamed(
        self: &Arc<Self>,
        repo: &str,
        (updates, atomic): (Vec<PushUpdate>, bool),
        admission: Admission,
        incoming: Incoming,
    ) -> Result<PushOutcome, Failure> {
        let now = self.core.now();
        // Every return before the verdict drops `verdict` unset: the stream then ends in an
        // error, and GitHub keeps nothing.
        let (verdict, verdict_rx) = watch::channel(Verdict::Pending);
        let pack = incoming
            .file
            .try_clone()
            .map(|file| pack_stream(file, incoming.spooling.clone(), verdict_rx));
        let name = super::super::parse_repo(repo)?;
        let github = self.core.github()?.clone();
        let to_decide = (updates.clone(), admission, incoming.spooled);
        // On the refs `list for-push` just read, the request to GitHub opens while the mirror is
        // locked and fetched (a cold mirror's first fetch of a long history, the commits another
        // client pushed) and the bundle imported and decided; without them, once the mirror is
        // fetched, beside the import and the decisions. Either way nothing reaches GitHub's refs
        // before the verdict below, given on the decisions.
        let (forward, decided) = match self.mirrors.peek_advertised(&name) {
            Some(refs) => {
                let target = ForwardTo {
                    github: &github,
                    repo: &name,
                    url: super::super::mirror::repo_url(&github, &name),
                    refs: &refs,
                    now,
                };
                let opening = async {
                    let pack = pack.map_err(NotForwarded::SpoolFile)?;
                    self.start_forward(&target, &updates, atomic, pack).await
                };
                tokio::join!(opening, self.decide_streamed(repo, None, to_decide, now))
            }
            None => {
                let locked = self.lock_mirror(repo).await?;
                let mirror = locked.mirror.clone();
                let target = ForwardTo {
                    github: &github,
                    repo: &name,
                    url: mirror.url.clone(),
                    refs: &mirror.refs,
                    now,
                };
                let opening = async {
                    let pack = pack.map_err(NotForwarded::SpoolFile)?;
                    self.start_forward(&target, &updates, atomic, pack).await
                };
                let deciding = self.decide_streamed(repo, Some(locked), to_decide, now);
                tokio::join!(opening, deciding)
            }
        };
        let (mut locked, quarantine, decided, at) = decided?;
        // What the decisions waited for the request to GitHub to open, beyond their own time.
        locked.clock.mark("opened");
        let forward = match forward {
            Ok(f) => {
                let checked = commits(&f, &decided, &quarantine, &at.mirror).await;
                self.check_commits(f, checked).await
            }
            Err(why) => Err(why),
        };
        let clock = &mut locked.clock;
        let (forward, pack_offset) = match forward {
            Ok(ready) => ready,
            Err(why) => {
                verdict.send_replace(Verdict::Abort);
                tracing::info!(reason = %why, "the pack was not passed on as it arrived; pushing the decided updates now");
                let mode = PushMode {
                    atomic,
                    dry_run: false,
                };
                return self
                    .send_decided(at, quarantine, decided, mode, clock)
                    .await;
            }
        };
        verdict.send_replace(Verdict::Commit { pack_offset });
        let pushed = forward
            .push
            .finish(forward.commands.iter().map(|c| &c.dst))
            .await;
        clock.mark("push");
        let token_sha = forward.token.token().sha256();
        // Off the path git waits for; see `StepToken::revoke_after_answer`.
        forward.token.revoke_after_answer();
        let outcomes = pushed.unwrap_or_else(|e| each_failed(&decided.allowed, &e.to_string()));
        let results = self
            .record_pushed(&at, quarantine, decided.allowed, outcomes, token_sha)
            .await?;
        clock.mark("record");
        tracing::info!(repo = %at.repo, bytes = at.bytes, stages = %clock, opening = %forward.opened, "push handled (the pack was passed on as it arrived)");
        Ok(PushOutcome {
            repo: at.repo.to_string(),
            results,
        })
    }

    /// The mirror locked and fetched (unless `locked` already is), then the whole bundle
    /// imported and every update decided on it, exactly as for a spooled bundle: what a
    /// streamed push does while its request to GitHub opens.
    async fn decide_streamed(
        self: &Arc<Self>,
        repo: &str,
        locked: Option<LockedMirror>,
        (updates, admission, spooled): (Vec<PushUpdate>, Admission, oneshot::Receiver<Arrival>),
        now: i64,
    ) -> Result<(LockedMirror, SharedQuarantine, Decided, DecidedAt), Failure> {
        let mut locked = match locked {
            Some(locked) => locked,
            None => self.lock_mirror(repo).await?,
        };
        let spooled = Arc::new(Incoming::whole(spooled).await?);
        locked.clock.mark("bundle");
        let bytes = i64::try_from(spooled.len).unwrap_or(i64::MAX);
        let at = locked.decided_at(&admission.principal, bytes, now);
        let (quarantine, decided) = self
            .import_and_decide(&at, updates, admission, Some(spooled), &mut locked.clock)
            .await?;
        Ok((locked, quarantine, decided, at))
    }

    /// The verdict on a request already open: `Ok` goes on with it; otherwise it is dropped
    /// at once (its body ends in an error: the checksum never goes) and its token revoked.
    async fn check_commits(
        &self,
        forward: Forward,
        checked: Result<u64, NotForwarded>,
    ) -> Result<(Forward, u64), NotForwarded> {
        match checked {
            Ok(pack_offset) => Ok((forward, pack_offset)),
            Err(why) => {
                forward.push.abandon();
                forward.token.revoke().await;
                Err(why)
            }
        }
    }

    /// Mints this step's token and opens the receive-pack request, its pack read from the
    /// spool file as it lands. `Err` says why the pack cannot go this way (nothing was sent).
    async fn start_forward(
        self: &Arc<Self>,
        at: &ForwardTo<'_>,
        updates: &[PushUpdate],
        atomic: bool,
        pack: impl futures_util::Stream<Item = std::io::Result<tokio_util::bytes::Bytes>>
        + Send
        + 'static,
    ) -> Result<Forward, NotForwarded> {
        // Every update of a streamed push has a new value (a deletion waits for the whole
        // bundle), so none is dropped here; if one were, the commands would not match the
        // decisions and the pack would not go this way.
        let commands: Vec<RefCommand> = updates
            .iter()
            .filter_map(|u| {
                let old = at.refs.get(&u.dst).copied();
                Some(RefCommand {
                    dst: u.dst.clone(),
                    change: RefChange::between(old, u.new, u.force).ok()?,
                })
            })
            .collect();
        let use_ = TokenUse::Push { workflows: false };
        let mut clock = super::types::Stages::start();
        let token = StepToken::mint(&self.credentials, at.github, at.repo, use_, None, at.now)
            .await
            .map_err(|f| NotForwarded::Token(f.0.message))?;
        clock.mark("mint");
        let push =
            StreamedPush::start(&at.url, token.token(), commands.clone(), atomic, pack).await?;
        clock.mark("open");
        Ok(Forward {
            push,
            token,
            commands,
            opened: clock.to_string(),
        })
    }
}

/// Whether the pack already on its way may be completed: every update allowed exactly as its
/// command says, none touching workflows (the token has no `workflows`), every prerequisite of
/// the bundle at GitHub, and GitHub still listening. `Ok` is where the verified pack starts.
async fn commits(
    forward: &Forward,
    decided: &Decided,
    quarantine: &SharedQuarantine,
    mirror: &OpenMirror,
) -> Result<u64, NotForwarded> {
    if !decided.refused.is_empty() {
        return Err(NotForwarded::Refused);
    }
    if decided.workflows {
        return Err(NotForwarded::Workflows);
    }
    let same = decided.allowed.len() == forward.commands.len()
        && decided.allowed.iter().zip(&forward.commands).all(|(a, c)| {
            a.dst == c.dst
                && a.change.new_id() == c.change.new_id()
                && a.change.old_id() == c.change.old_id()
        });
    if !same {
        return Err(NotForwarded::NotTheCommands);
    }
    let Some(header) = quarantine.with(|q| q.header.clone()) else {
        return Err(NotForwarded::NoHeader);
    };
    if quarantine.with(|q| q.pack_file().is_none()) {
        return Err(NotForwarded::NoPack);
    }
    let pack_offset = header.pack_offset;
    let (held, at) = (quarantine.clone(), mirror.path.clone());
    let (bases, tips) = (
        header.prerequisites.clone(),
        forward.push.advertised.clone(),
    );
    // A walk of the mirror's history: on a blocking thread.
    tokio::task::spawn_blocking(move || {
        held.with(|q| bases_at_github_owned(q, &at, &bases, &tips))
    })
    .await
    .map_err(NotForwarded::BaseCheck)??;
    if forward.push.ended_early() {
        return Err(NotForwarded::EndedEarly);
    }
    Ok(pack_offset)
}
