//! Repository names as GitHub spells them, and the one key Zodex files them under.
//!
//! GitHub treats owner and repository names case-insensitively, so `Acme/App` and `acme/app`
//! are one repository: [`RepoName::key`] is the lower-cased form used everywhere (state,
//! Cedar entity ids, audit rows), while [`RepoName`]'s `Display` keeps the spelling the user
//! typed for messages.

use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid repository `{input}`: {reason}; write it as OWNER/NAME, e.g. acme/app (letters, digits, `-` in the owner; letters, digits, `.`, `_`, `-` in the name)"
)]
pub struct RepoNameError {
    pub input: String,
    pub reason: &'static str,
}

/// The `owner/name` a git URL path names (`demo/app.git`, `demo/app`, `/demo/app.git/`), if
/// any: what git's credential helper is given with `useHttpPath`, read the same way by the
/// agent's helper and by the publisher that answers it.
pub fn repo_of_path(path: &str) -> Option<String> {
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let mut parts = path.split('/');
    let (owner, name) = (parts.next()?, parts.next()?);
    if owner.is_empty() || name.is_empty() || parts.next().is_some() {
        return None;
    }
    Some(format!("{owner}/{name}"))
}

/// The host (lower-cased, with its port, without any `user@`) and the path of a git remote URL:
/// `https://host/o/r(.git)`, `ssh://git@host/o/r(.git)`, or the scp-like `git@host:o/r(.git)`.
/// The one reader of remote URLs: `publish-pr`'s origin, `git-remote-zodex`'s URL and the
/// credential helper's served host all go through it.
pub fn split_remote_url(url: &str) -> Option<(String, &str)> {
    let url = url.trim();
    let (authority, path) = if let Some((_, rest)) = url.split_once("://") {
        rest.split_once('/').unwrap_or((rest, ""))
    } else {
        let (authority, path) = url.split_once(':')?;
        if authority.contains('/') {
            return None;
        }
        (authority, path)
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() {
        return None;
    }
    Some((host.to_ascii_lowercase(), path))
}

/// The repository a remote URL names (see [`split_remote_url`] and [`repo_of_path`]).
pub fn repo_of_url(url: &str) -> Option<RepoName> {
    let (_, path) = split_remote_url(url)?;
    RepoName::parse(&repo_of_path(path)?).ok()
}

/// A validated `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoName {
    owner: String,
    name: String,
}

impl RepoName {
    /// Parses `owner/name`, accepting a trailing `.git` and nothing else extra.
    pub fn parse(input: &str) -> Result<Self, RepoNameError> {
        let err = |reason| RepoNameError {
            input: input.escape_debug().to_string(),
            reason,
        };
        if input.chars().any(|c| c.is_control()) {
            return Err(err("control characters are not allowed"));
        }
        if input.chars().any(char::is_whitespace) {
            return Err(err("spaces are not allowed"));
        }
        let trimmed = input.strip_suffix(".git").unwrap_or(input);
        let mut parts = trimmed.split('/');
        let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err("expected exactly one `/` between owner and name"));
        };
        validate_owner(owner).map_err(err)?;
        validate_name(name).map_err(err)?;
        Ok(Self {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The case-folded `owner/name`: the one key for this repository everywhere.
    pub fn key(&self) -> String {
        format!("{}/{}", self.owner, self.name).to_ascii_lowercase()
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// GitHub owners (users and organisations): 1–39 ASCII letters, digits and single hyphens, not
/// starting or ending with a hyphen.
pub fn validate_owner(owner: &str) -> Result<(), &'static str> {
    if owner.is_empty() {
        return Err("the owner is empty");
    }
    if owner.len() > 39 {
        return Err("the owner is longer than 39 characters");
    }
    if !owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err("the owner may hold only letters, digits and `-`");
    }
    if owner.starts_with('-') || owner.ends_with('-') {
        return Err("the owner may not start or end with `-`");
    }
    if owner.contains("--") {
        return Err("the owner may not hold `--`");
    }
    Ok(())
}

/// GitHub repository names: 1–100 ASCII letters, digits, `.`, `_`, `-`; never `.` or `..`, and
/// never ending in `.git` (GitHub strips it, so no repository is called that: `a/x.git.git`
/// would otherwise display as `a/x.git` and read back as `a/x`) or `.wiki` (a repository's wiki).
pub fn validate_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("the name is empty");
    }
    if name.len() > 100 {
        return Err("the name is longer than 100 characters");
    }
    if name == "." || name == ".." || name.contains("..") {
        return Err("the name may not be `.` or hold `..`");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err("the name may hold only letters, digits, `.`, `_` and `-`");
    }
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".git") || lower.ends_with(".wiki") {
        return Err("the name may not end in `.git` (after the one that is dropped) or `.wiki`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_split_into_host_and_repository() {
        for (url, host) in [
            ("https://github.com/Demo/App.git", "github.com"),
            ("https://x-access-token@GitHub.com/demo/app", "github.com"),
            ("http://127.0.0.1:8080/demo/app.git/", "127.0.0.1:8080"),
            ("ssh://git@github.com/demo/app.git", "github.com"),
            ("git@github.com:demo/app.git", "github.com"),
            ("github.com:demo/app", "github.com"),
        ] {
            assert_eq!(
                split_remote_url(url).map(|(h, _)| h),
                Some(host.into()),
                "{url}"
            );
            assert_eq!(
                repo_of_url(url).map(|r| r.key()),
                Some("demo/app".into()),
                "{url}"
            );
        }
        assert_eq!(
            split_remote_url("https://127.0.0.1:9/").unwrap().0,
            "127.0.0.1:9"
        );
        for url in [
            "",
            "demo/app",
            "/tmp/repo",
            "https:///demo/app",
            "https://h/demo",
            "file:///a/b/c",
        ] {
            assert_eq!(repo_of_url(url), None, "{url}");
        }
    }

    #[test]
    fn case_folds_to_one_key_and_strips_dot_git() {
        let a = RepoName::parse("Acme/App").unwrap();
        let b = RepoName::parse("acme/app.git").unwrap();
        assert_eq!(a.key(), "acme/app");
        assert_eq!(a.key(), b.key());
        assert_eq!(a.to_string(), "Acme/App");
        assert_eq!(RepoName::parse("a-b/x_y.z").unwrap().name(), "x_y.z");
    }

    #[test]
    fn refuses_malformed_names() {
        for bad in [
            "",
            "acme",
            "acme/",
            "/app",
            "acme/app/extra",
            "acme/../x",
            "acme/..",
            "ac me/app",
            "acme/ap p",
            "acme/app\n",
            "acme/a\u{7}p",
            "-acme/app",
            "acme-/app",
            "ac--me/app",
            "acme/app!",
            "a/b/c.git",
            "acme/.git",
            &format!("{}/x", "a".repeat(40)),
        ] {
            let err = RepoName::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("OWNER/NAME"), "{bad}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_and_keys_are_lowercase(input in "\\PC{0,60}") {
            if let Ok(name) = RepoName::parse(&input) {
                proptest::prop_assert_eq!(name.key(), name.key().to_ascii_lowercase());
                proptest::prop_assert!(!name.key().contains(".."));
            }
        }
    }

    #[test]
    fn refuses_names_github_never_gives_a_repository() {
        // GitHub strips a `.git` ending and reserves `.wiki`: `a/x.git.git` once displayed as
        // `a/x.git` and read back as `a/x` (found by tests/it/parser_properties.rs).
        for bad in [
            "a/x.git.git",
            "a/x.GIT",
            "a/x.wiki",
            "a/X.Wiki.git",
            "a/.wiki",
        ] {
            let err = RepoName::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("`.wiki`"), "{bad}: {err}");
        }
        assert_eq!(RepoName::parse("a/x.gitx").unwrap().name(), "x.gitx");
        assert_eq!(RepoName::parse("a/wiki.git").unwrap().name(), "wiki");
    }
}
