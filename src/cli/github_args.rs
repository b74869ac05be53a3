//! The arguments of the GitHub-authority verbs (`zodex sprite github …`, and `zodex fleet …`
//! with its `--sprite`/`--label` filters): parsed here, turned into admin requests by
//! `cli::zodex::github`.

use super::{repo_arg, ttl_arg};
use crate::engine::RepoName;
use crate::protocol::{ForSprites, Ttl};
use clap::{Args, Subcommand, ValueEnum};
use std::time::Duration;

#[derive(Args)]
#[group(multiple = false)]
pub(super) struct TtlArgs {
    /// How long it lasts: 30s, 45m, 2h, 1d, 1h30m.
    #[arg(long, value_parser = ttl_arg, allow_hyphen_values = true)]
    ttl: Option<Duration>,
    /// No expiry (recorded as an explicit choice).
    #[arg(long)]
    no_ttl: bool,
}

impl TtlArgs {
    /// What was asked, the publisher's default when nothing was.
    pub(super) fn resolve(&self) -> Ttl {
        self.given().unwrap_or(Ttl::Default)
    }

    pub(super) fn given(&self) -> Option<Ttl> {
        if self.no_ttl {
            Some(Ttl::NoTtl)
        } else {
            self.ttl.map(|t| Ttl::Seconds(t.as_secs() as i64))
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Via {
    /// Pushes only through git-remote-zodex, every ref decided on its own.
    Gateway,
    /// Also a one-repo write token through the credential helper (per-ref rules cannot hold).
    Token,
}

/// Which agents a grant or scope serves when the publisher serves a fleet.
#[derive(Args)]
pub(super) struct ForSpritesArgs {
    /// In a fleet: for this sprite's agent only.
    #[arg(long = "for-sprite", value_name = "NAME", conflicts_with = "for_label")]
    for_sprite: Option<String>,
    /// In a fleet: for every sprite carrying this label.
    #[arg(long = "for-label", value_name = "KEY=VALUE")]
    for_label: Option<String>,
}

/// The rows a fleet's list keeps (`zodex fleet requests|audit`): one sprite's, or those of the
/// sprites carrying a label.
#[derive(Args, Clone, Default)]
pub(super) struct SpriteFilterArgs {
    /// Only this sprite's rows: its pending requests; in the audit, what its agent did (its
    /// pushes, requests, tokens and refusals).
    #[arg(long, value_name = "NAME", conflicts_with = "label")]
    sprite: Option<String>,
    /// Only the rows of the sprites carrying this label now (`zodex fleet sprites` shows
    /// them); for requests, also the grants made for the label itself.
    #[arg(long, value_name = "KEY=VALUE")]
    label: Option<String>,
}

impl From<SpriteFilterArgs> for ForSprites {
    fn from(args: SpriteFilterArgs) -> Self {
        Self {
            sprite: args.sprite,
            label: args.label,
        }
    }
}

/// No filter: a single sprite's publisher lists every row (`zodex sprite github`).
#[derive(Args, Clone, Default)]
pub(super) struct NoFilter {}

impl From<NoFilter> for ForSprites {
    fn from(_: NoFilter) -> Self {
        Self::default()
    }
}

impl From<ForSpritesArgs> for ForSprites {
    fn from(args: ForSpritesArgs) -> Self {
        Self {
            sprite: args.for_sprite,
            label: args.for_label,
        }
    }
}

/// The verbs on a publisher's GitHub authority; `F` is what narrows a list (`requests`,
/// `audit`) to some sprites: nothing on one sprite's publisher, `--sprite`/`--label` on a
/// fleet's.
#[derive(Subcommand)]
pub(super) enum GithubCommand<F: Args + Into<ForSprites> = NoFilter> {
    /// Let the agent push to one repository (default 30m, through the gateway).
    GrantPush {
        #[arg(long, value_parser = repo_arg)]
        repo: RepoName,
        #[command(flatten)]
        ttl: TtlArgs,
        /// Allow changes under .github/workflows/.
        #[arg(long)]
        allow_workflows: bool,
        #[arg(long, value_enum, default_value = "gateway")]
        via: Via,
        /// Limit the grant to these refs (repeatable): a branch (`main`), a full ref
        /// (`refs/tags/v1`) or a prefix ending in `/*` (`feature/*`). Default: every ref.
        #[arg(long = "ref", value_name = "PATTERN")]
        refs: Vec<String>,
        /// Allow changing protected paths matching this glob (repeatable): `CODEOWNERS`,
        /// `.github/**`, `**` for any. Default: none (docs/deploy.md, section 7).
        #[arg(long = "allow-path", value_name = "PATTERN")]
        allow_paths: Vec<String>,
        /// Allow pushing the secret finding with this fingerprint (repeatable; the denial
        /// names it).
        #[arg(long = "allow-secret", value_name = "FINGERPRINT")]
        allow_secrets: Vec<String>,
        #[command(flatten)]
        to: ForSpritesArgs,
        /// In a fleet: grant even though no enrolled sprite has that name or carries that
        /// label yet (refused otherwise, so a typo does not wait silently).
        #[arg(long)]
        allow_empty: bool,
    },
    /// End every grant and pending request for a repository (in a fleet: of one sprite or
    /// label with --for-sprite/--for-label, else of every sprite).
    RevokePush {
        #[arg(long, value_parser = repo_arg)]
        repo: RepoName,
        #[command(flatten)]
        to: ForSpritesArgs,
    },
    /// Let the agent push freely for a while: to the given repositories, or to every
    /// repository the writer App is installed on (default 2h).
    Yolo {
        #[arg(long = "repo", value_parser = repo_arg)]
        repos: Vec<RepoName>,
        #[command(flatten)]
        ttl: TtlArgs,
        #[arg(long)]
        allow_workflows: bool,
        /// Limit the scope to these refs (repeatable), as for grant-push. Default: every ref.
        #[arg(long = "ref", value_name = "PATTERN")]
        refs: Vec<String>,
        /// Allow changing protected paths matching this glob (repeatable), as for grant-push.
        #[arg(long = "allow-path", value_name = "PATTERN")]
        allow_paths: Vec<String>,
        #[command(flatten)]
        to: ForSpritesArgs,
        /// As for grant-push.
        #[arg(long)]
        allow_empty: bool,
    },
    /// Back to defaults: clear every YOLO scope (explicit grants stay).
    Default,
    /// Active grants and YOLO scopes with time left, and pending requests.
    Status {
        #[command(flatten)]
        of: F,
    },
    /// Pending push requests from the agent (every page, oldest first).
    Requests {
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        of: F,
    },
    /// Approve a pending request.
    Approve {
        id: i64,
        #[command(flatten)]
        ttl: TtlArgs,
    },
    /// Refuse a pending request.
    Deny { id: i64 },
    /// The audit log (the newest 1,000 rows unless --limit says otherwise).
    Audit {
        /// Walk the audit's hash chains instead: each chain's head, and the first row that was
        /// changed, inserted, reordered or removed (exit 1 if any).
        #[arg(long, conflicts_with_all = ["since", "repo"])]
        verify: bool,
        /// Only rows newer than this (e.g. 1h, 1d).
        #[arg(long, value_parser = ttl_arg)]
        since: Option<Duration>,
        #[arg(long, value_parser = repo_arg)]
        repo: Option<RepoName>,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        of: F,
    },
}

#[derive(Args, Clone, Copy)]
pub(super) struct PageArgs {
    /// Show at most this many rows (the newest).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) limit: Option<u32>,
    /// Show only rows older than this id (printed under a partial listing).
    #[arg(long)]
    pub(super) before: Option<i64>,
}
