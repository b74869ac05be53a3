//! `git` as the publisher runs it: hermetic (no system or user configuration, no prompts, no
//! credential helpers) and with the installation token passed in the environment as an HTTP
//! header, never in argv, a URL or a file. Git does the network; gix reads the bytes.

use base64::Engine as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use zodex_github::Token;

#[derive(Debug, thiserror::Error)]
#[error("git {what} failed: {message}")]
pub struct GitError {
    pub what: String,
    pub message: String,
}

/// A `git` command in `dir` with nothing from the host's configuration.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/false")
        .env("GIT_PROTOCOL", "version=2")
        // The mirrors are partial clones: a missing object is an error, never a fetch made
        // behind our back (see `mirror.rs`).
        .env("GIT_NO_LAZY_FETCH", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .stdin(Stdio::null());
    cmd
}

/// Adds `token` as the `Authorization` header of every HTTP request (environment only).
pub fn with_token(cmd: &mut Command, token: &Token) {
    // Every git command given a token talks to GitHub: counted for the stage log.
    zodex_github::traffic::git_process();
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("x-access-token:{}", token.expose()));
    cmd.env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "http.extraHeader")
        .env(
            "GIT_CONFIG_VALUE_0",
            format!("Authorization: Basic {basic}"),
        )
        .env("GIT_CONFIG_KEY_1", "credential.helper")
        .env("GIT_CONFIG_VALUE_1", "");
}

/// Runs `cmd`; a failure carries git's stderr with any token text removed.
pub fn run(what: &str, cmd: &mut Command, token: Option<&Token>) -> Result<Output, GitError> {
    let output = cmd.output().map_err(|e| GitError {
        what: what.to_string(),
        message: format!("cannot run git: {e}; install git"),
    })?;
    if output.status.success() {
        return Ok(output);
    }
    Err(GitError {
        what: what.to_string(),
        message: scrub(&String::from_utf8_lossy(&output.stderr), token),
    })
}

/// [`run`] with `input` on git's standard input (fed from a thread: git may fill its stdout
/// before it has read all of it).
pub fn run_with_input(
    what: &str,
    cmd: &mut Command,
    input: Vec<u8>,
    token: Option<&Token>,
) -> Result<Output, GitError> {
    use std::io::Write;
    let failed = |e: std::io::Error| GitError {
        what: what.to_string(),
        message: format!("cannot run git: {e}; install git"),
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(failed)?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().map_err(failed)?;
    let _ = feeder.join();
    if output.status.success() {
        return Ok(output);
    }
    Err(GitError {
        what: what.to_string(),
        message: scrub(&String::from_utf8_lossy(&output.stderr), token),
    })
}

/// The HTTP status git reports for a failed request to GitHub (`The requested URL returned
/// error: 502`), if its message names one.
pub fn http_status(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("The requested URL returned error: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Removes a token (and its Basic form) from text that may reach a log or an answer.
pub fn scrub(text: &str, token: Option<&Token>) -> String {
    let mut text = text.trim().to_string();
    if let Some(token) = token {
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("x-access-token:{}", token.expose()));
        text = text.replace(token.expose(), "***").replace(&basic, "***");
    }
    if text.is_empty() {
        "no message".into()
    } else {
        text
    }
}

/// For tests: runs git in `dir` as [`command`] does, with a fixed author; must succeed;
/// returns its trimmed output.
#[cfg(test)]
pub(crate) fn test_git(dir: &Path, args: &[&str]) -> String {
    let out = command(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@e")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@e")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A fresh repository at `dir/full` that serves partial clones and any object by id (as
/// GitHub does), and the path its treeless bare clone (`tree:0`, a mirror's shape) will have,
/// `dir/mirror.git`: fill the repository, then [`test_treeless_clone`].
#[cfg(test)]
pub(crate) fn test_full_repo(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let full = dir.join("full");
    std::fs::create_dir_all(&full).unwrap();
    test_git(&full, &["init", "-q", "-b", "main", "."]);
    test_git(&full, &["config", "uploadpack.allowFilter", "true"]);
    test_git(&full, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    (full, dir.join("mirror.git"))
}

/// Clones `dir/full` (see [`test_full_repo`]) bare and treeless into `dir/mirror.git`.
#[cfg(test)]
pub(crate) fn test_treeless_clone(dir: &Path) {
    let url = format!("file://{}", dir.join("full").display());
    let args = [
        "clone",
        "-q",
        "--bare",
        "--filter=tree:0",
        &url,
        "mirror.git",
    ];
    test_git(dir, &args);
}

/// Fetches `ids` (trees) into the treeless clone at `mirror`, as the publisher asks GitHub.
#[cfg(test)]
pub(crate) fn test_fetch_trees(mirror: &Path, ids: &[String]) {
    let mut args = vec!["fetch", "-q", "--filter=tree:0", "origin"];
    args.extend(ids.iter().map(String::as_str));
    test_git(mirror, &args);
}

#[cfg(test)]
mod tests {
    #[test]
    fn gits_http_status_is_read_from_its_message() {
        assert_eq!(
            super::http_status(
                "fatal: unable to access 'http://127.0.0.1:1/demo/app.git/': The requested URL returned error: 502"
            ),
            Some(502)
        );
        assert_eq!(super::http_status("fatal: repository not found"), None);
    }

    use super::*;

    #[test]
    fn scrub_removes_the_token_in_both_forms() {
        let token = Token::new("ghs_secretsecret".into());
        let basic =
            base64::engine::general_purpose::STANDARD.encode("x-access-token:ghs_secretsecret");
        let text = format!("fatal: ghs_secretsecret and Basic {basic}");
        let clean = scrub(&text, Some(&token));
        assert!(!clean.contains("ghs_secret"));
        assert!(!clean.contains(&basic));
    }
}
