//! What GitHub (the devhub) holds, as the attacks check it did not change.

use super::super::devhub::git_ok;
use super::Sprite;
use std::path::PathBuf;

/// What GitHub (the devhub) holds: every ref of every repository, the pull requests, and the
/// number of live installation tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubSide {
    pub refs: String,
    pub pulls: usize,
    pub tokens_live: usize,
}

impl Sprite {
    pub fn bare(&self, repo: &str) -> PathBuf {
        self.demo()
            .hub
            .dir()
            .join("repos/demo")
            .join(format!("{repo}.git"))
    }

    pub fn github(&self) -> GithubSide {
        let demo = self.demo();
        let mut refs = String::new();
        for repo in ["app", "lib", "trunk", "other"] {
            refs.push_str(&format!("[{repo}]\n"));
            refs.push_str(&git_ok(
                &self.bare(repo),
                &["for-each-ref", "--format=%(refname) %(objectname)"],
            ));
        }
        GithubSide {
            refs,
            pulls: demo.hub.description().pulls.len(),
            tokens_live: demo.hub.stats().tokens_live,
        }
    }

    /// Nothing changed at GitHub since `before`: the same refs and pull requests, and no token
    /// more alive than then.
    #[track_caller]
    pub fn assert_github_unchanged(&self, before: &GithubSide) {
        let now = self.github();
        assert_eq!(
            now.refs,
            before.refs,
            "refs changed at GitHub\nzodex-prd: {}",
            self.log()
        );
        assert_eq!(now.pulls, before.pulls, "a pull request appeared");
        assert!(
            now.tokens_live <= before.tokens_live,
            "{} live tokens now, {} before",
            now.tokens_live,
            before.tokens_live
        );
    }

    /// The id `rev` names at GitHub in `demo/<repo>` (`None`: no such ref).
    pub fn remote_sha(&self, repo: &str, rev: &str) -> Option<String> {
        let out =
            super::super::devhub::git(&self.bare(repo), &["rev-parse", "--verify", "--quiet", rev]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Whether GitHub's `demo/<repo>` holds object `oid` at all.
    pub fn remote_has(&self, repo: &str, oid: &str) -> bool {
        super::super::devhub::git(&self.bare(repo), &["cat-file", "-e", oid])
            .status
            .success()
    }
}
