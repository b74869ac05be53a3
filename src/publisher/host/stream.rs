//! Pushes whose bundle arrives as a stream ([`crate::protocol::STREAMED_BUNDLE`]): the pack is
//! passed on to GitHub while it lands ([`crate::publisher::publish::forward`]), so GitHub
//! checks the objects while the agent is still packing them, as with a plain `git push`.
//!
//! The order of a streamed push, and why it is safe:
//! 1. The request was admitted on what it declares, like any push ([`Host::admit`]).
//! 2. The mirror is fetched (GitHub's refs: each command's old id), a token is minted for
//!    this step without `workflows`, and the receive-pack request opens with one command per
//!    update, `old` = the mirror's value (GitHub refuses a ref that moved since).
//! 3. The pack follows as it lands, all but its 20-byte checksum.
//! 4. Once the bundle is whole it is imported and verified, and every update decided on it,
//!    exactly as for a bundle that was spooled first.
//! 5. Only when every update was allowed as the commands already say (same old and new ids,
//!    nothing touching workflows, every prerequisite at GitHub) does the checksum go; GitHub
//!    then stores the pack and moves the refs. Otherwise the request is cut before the
//!    checksum, GitHub keeps nothing, and the decided updates are pushed the ordinary way
//!    ([`Host::send_decided`]) with a token minted for what they need.

use super::mirror::OpenMirror;
use super::push::{Admission, Decided, DecidedAt, PushMode, Spooled, Stages, each_failed};
use super::{Failure, Host};
use crate::engine::RepoName;
use crate::protocol::{AgentRequest, ErrorKind, PushOutcome, PushUpdate, Response};
use crate::publisher::github::{GitHub, TokenUse};
use crate::publisher::publish::Quarantine;
use crate::publisher::publish::forward::{Spooling, Verdict, pack_stream};
use crate::publisher::publish::receive_pack::RefCommand;
use crate::publisher::publish::upload::{StreamedPush, bases_at_github};
use tokio::sync::{oneshot, watch};

/// A bundle the daemon is still receiving.
pub struct Incoming {
    /// A read handle on the spool file being written.
    pub file: std::fs::File,
    /// How much of it is there.
    pub spooling: watch::Receiver<Spooling>,
    /// The whole bundle, or why it did not arrive.
    pub spooled: oneshot::Receiver<Result<Spooled, String>>,
}

impl Incoming {
    /// Waits for the whole bundle.
    fn whole(self) -> Result<Spooled, Failure> {
        match self.spooled.blocking_recv() {
            Ok(Ok(spooled)) => Ok(spooled),
            Ok(Err(message)) => Err(Failure::new(ErrorKind::Usage, message)),
            Err(_) => Err(Failure::new(
                ErrorKind::Internal,
                "the bundle's receiver stopped; nothing was pushed; see the zodex-prd log",
            )),
        }
    }
}

/// The pack on its way to GitHub, and the token it goes with.
struct Forward<'h> {
    push: StreamedPush,
    token: super::step_token::StepToken<'h>,
    commands: Vec<RefCommand>,
}

impl Host {
    /// Handles a push or publish whose bundle is still arriving: a push of new ids, not a dry
    /// run, nothing refused on admission, is passed on as it lands; anything else waits for
    /// the whole bundle and is handled as [`Host::publish`] does.
    pub fn publish_streamed(
        &self,
        request: AgentRequest,
        admission: Admission,
        incoming: Incoming,
    ) -> Response {
        match request {
            AgentRequest::Push {
                repo,
                updates,
                atomic,
                dry_run: false,
            } if admission.refused_none() && updates.iter().all(|u| u.new.is_some()) => self
                .push_streamed(&repo, updates, atomic, admission, incoming)
                .map(Response::ok)
                .unwrap_or_else(Failure::into_response),
            request => match incoming.whole() {
                Ok(spooled) => self.publish(request, admission, Some(spooled)),
                Err(failure) => failure.into_response(),
            },
        }
    }

    fn push_streamed(
        &self,
        repo: &str,
        updates: Vec<PushUpdate>,
        atomic: bool,
        admission: Admission,
        incoming: Incoming,
    ) -> Result<PushOutcome, Failure> {
        self.on_locked_mirror(repo, |github, repo, mirror, clock| {
            self.stream_on(
                github,
                repo,
                mirror,
                (updates, atomic),
                admission,
                incoming,
                clock,
            )
        })
    }

    /// A streamed push, its mirror fetched and locked.
    #[allow(clippy::too_many_arguments)]
    fn stream_on(
        &self,
        github: &GitHub,
        repo: &RepoName,
        mirror: &OpenMirror,
        (updates, atomic): (Vec<PushUpdate>, bool),
        admission: Admission,
        incoming: Incoming,
        clock: &mut Stages,
    ) -> Result<PushOutcome, Failure> {
        let now = self.now();
        // Every return before the verdict drops `verdict` unset: the stream then ends in an
        // error, and GitHub keeps nothing.
        let (verdict, verdict_rx) = watch::channel(Verdict::Pending);
        let pack = incoming
            .file
            .try_clone()
            .map(|file| pack_stream(file, incoming.spooling.clone(), verdict_rx));
        let runtime = tokio::runtime::Handle::current();
        // Opening the request (a token, GitHub's refs) and importing and deciding the bundle
        // do not wait for each other: a small bundle is whole before the request is open.
        let (forward, decided) = std::thread::scope(|scope| {
            let opening = scope.spawn(|| {
                let _runtime = runtime.enter();
                let pack = pack.map_err(|e| format!("cannot read the spool file: {e}"))?;
                self.start_forward(github, repo, mirror, &updates, atomic, pack, now)
            });
            let decided = incoming.whole().and_then(|spooled| {
                let at = DecidedAt {
                    github,
                    repo,
                    mirror,
                    bytes: i64::try_from(spooled.len).unwrap_or(i64::MAX),
                    now,
                };
                let (quarantine, decided, at) =
                    self.import_and_decide(at, updates.clone(), admission, Some(&spooled), clock)?;
                Ok((quarantine, decided, at))
            });
            let forward = opening
                .join()
                .unwrap_or_else(|_| Err("opening the request failed".to_string()));
            (forward, decided)
        });
        let (quarantine, decided, at) = decided?;
        let forward = forward.and_then(|f| match commits(&f, &decided, &quarantine, mirror) {
            Ok(pack_offset) => Ok((f, pack_offset)),
            Err(why) => {
                verdict.send_replace(Verdict::Abort);
                settle(f);
                Err(why)
            }
        });
        let (forward, pack_offset) = match forward {
            Ok(ready) => ready,
            Err(why) => {
                tracing::info!(reason = %why, "the pack was not passed on as it arrived; pushing the decided updates now");
                let mode = PushMode {
                    atomic,
                    dry_run: false,
                };
                return self.send_decided(at, quarantine, decided, mode, clock);
            }
        };
        verdict.send_replace(Verdict::Commit { pack_offset });
        let dsts: Vec<&str> = forward.commands.iter().map(|c| c.dst.as_str()).collect();
        let pushed = forward.push.finish(&runtime, dsts.into_iter());
        clock.mark("push");
        let token_sha = forward.token.token().sha256();
        forward.token.revoke();
        let outcomes = pushed.unwrap_or_else(|message| each_failed(&decided.allowed, &message));
        let results = self.record_pushed(
            github,
            repo,
            mirror,
            quarantine,
            decided.allowed,
            &outcomes,
            &token_sha,
        )?;
        clock.mark("record");
        tracing::info!(repo = %repo, bytes = at.bytes, stages = %clock, "push handled (the pack was passed on as it arrived)");
        Ok(PushOutcome {
            repo: repo.to_string(),
            results,
        })
    }

    /// Mints this step's token and opens the receive-pack request, its pack read from the
    /// spool file as it lands. `Err` says why the pack cannot go this way (nothing was sent).
    #[allow(clippy::too_many_arguments)]
    fn start_forward<'h>(
        &'h self,
        github: &'h GitHub,
        repo: &RepoName,
        mirror: &OpenMirror,
        updates: &[PushUpdate],
        atomic: bool,
        pack: impl futures_util::Stream<Item = std::io::Result<tokio_util::bytes::Bytes>>
        + Send
        + 'static,
        now: i64,
    ) -> Result<Forward<'h>, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "no runtime to pass the pack on with".to_string())?;
        let commands: Vec<RefCommand> = updates
            .iter()
            .map(|u| RefCommand {
                dst: u.dst.clone(),
                old: mirror.refs.get(&u.dst).cloned(),
                new: u.new.clone(),
            })
            .collect();
        let token = self
            .mint_for_step(github, repo, TokenUse::Push { workflows: false }, None, now)
            .map_err(|f| f.0.message)?;
        let push = StreamedPush::start(
            &runtime,
            &mirror.url,
            token.token(),
            commands.clone(),
            atomic,
            pack,
        )?;
        Ok(Forward {
            push,
            token,
            commands,
        })
    }
}

/// Whether the pack already on its way may be completed: every update allowed exactly as its
/// command says, none touching workflows (the token has no `workflows`), every prerequisite of
/// the bundle at GitHub, and GitHub still listening. `Ok` is where the verified pack starts.
fn commits(
    forward: &Forward<'_>,
    decided: &Decided,
    quarantine: &Quarantine,
    mirror: &OpenMirror,
) -> Result<u64, String> {
    if !decided.refused.is_empty() {
        return Err("an update was refused".into());
    }
    if decided.workflows {
        return Err("an update touches workflows (the token needs workflows: write)".into());
    }
    let same = decided.allowed.len() == forward.commands.len()
        && decided
            .allowed
            .iter()
            .zip(&forward.commands)
            .all(|(a, c)| a.update.dst == c.dst && a.update.new == c.new && a.old == c.old);
    if !same {
        return Err("the decided updates are not the commands sent".into());
    }
    let Some(header) = &quarantine.header else {
        return Err("the bundle has no header".into());
    };
    if quarantine.pack_file().is_none() {
        return Err("the bundle has no pack".into());
    }
    let bases: Vec<&str> = header.prerequisites.iter().map(String::as_str).collect();
    let tips: Vec<&str> = forward.push.advertised.iter().map(String::as_str).collect();
    bases_at_github(quarantine, &mirror.path, &bases, &tips)?;
    if forward.push.ended_early() {
        return Err("GitHub ended the request before the pack did".into());
    }
    Ok(header.pack_offset)
}

/// Drops an aborted request at once (its body ends in an error: the checksum never goes), and
/// revokes its token.
fn settle(forward: Forward<'_>) {
    forward.push.abandon();
    forward.token.revoke();
}
