//! The git credential helper's entry, shared by `zodex-agent credential OP` and the small
//! `git-credential-zodex OP` binary git runs on every fetch (a process that links only this
//! path starts faster than the whole `zodex-agent`). Both read git's arguments by hand, without
//! clap, and hand the request to `agent::credential::serve`.

use super::EXIT_FAILURE;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

/// `git-credential-zodex [--config PATH] OP`: the whole helper.
pub fn main() -> i32 {
    super::pipe::end_quietly_when_stdout_closes();
    let mut args = std::env::args_os().skip(1).peekable();
    let words = std::iter::once(OsString::from("credential")).chain(&mut args);
    match fast_args(words) {
        Some((config, operation)) => run_as("git-credential-zodex", config, &operation),
        None => {
            eprintln!(
                "usage: git-credential-zodex [--config PATH] get|store|erase (git runs it as a credential helper)"
            );
            2
        }
    }
}

/// `credential OP`, `credential --config PATH OP` or `credential --config=PATH OP` as git runs
/// them; `None` for anything else (help, flags, extra words, non-UTF-8 operations).
pub fn fast_args(
    mut args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<(Option<PathBuf>, String)> {
    if args.next()? != "credential" {
        return None;
    }
    let mut config = None;
    let mut operation = None;
    while let Some(arg) = args.next() {
        let text = arg.to_str();
        if text == Some("--config") {
            if config.is_some() {
                return None;
            }
            config = Some(PathBuf::from(args.next()?));
        } else if let Some(path) = text.and_then(|t| t.strip_prefix("--config=")) {
            if config.is_some() || path.is_empty() {
                return None;
            }
            config = Some(PathBuf::from(path));
        } else if text.is_some_and(|t| !t.starts_with('-')) && operation.is_none() {
            operation = text.map(str::to_string);
        } else {
            return None;
        }
    }
    Some((config, operation?))
}

/// `zodex-agent credential OP`: git's credential protocol on stdin/stdout (see
/// `agent::credential::serve`).
pub fn run(config: Option<PathBuf>, operation: &str) -> i32 {
    run_as("zodex-agent credential", config, operation)
}

/// [`run`], its diagnostics prefixed with `name`.
fn run_as(name: &str, config: Option<PathBuf>, operation: &str) -> i32 {
    let reply =
        crate::agent::credential::serve(config.as_deref(), operation, &mut std::io::stdin().lock());
    if let Some(message) = &reply.diagnostic {
        eprintln!("{name}: {message}");
    }
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(reply.stdout.as_bytes())
        .and_then(|_| stdout.flush())
        .is_err()
        || reply.failed
    {
        return EXIT_FAILURE;
    }
    0
}

#[cfg(test)]
mod fast_args_tests {
    use super::fast_args;
    use std::ffi::OsString;
    use std::path::PathBuf;

    fn parse(words: &[&str]) -> Option<(Option<PathBuf>, String)> {
        fast_args(words.iter().map(OsString::from))
    }

    #[test]
    fn reads_the_command_lines_git_uses_and_leaves_the_rest_to_clap() {
        assert_eq!(parse(&["credential", "get"]), Some((None, "get".into())));
        assert_eq!(
            parse(&["credential", "--config", "/etc/z.toml", "erase"]),
            Some((Some("/etc/z.toml".into()), "erase".into()))
        );
        assert_eq!(
            parse(&["credential", "get", "--config=/z.toml"]),
            Some((Some("/z.toml".into()), "get".into()))
        );
        for other in [
            &["credential"][..],
            &["credential", "--help"],
            &["credential", "get", "store"],
            &["credential", "--config"],
            &["credential", "--config=", "get"],
            &["credential", "--config", "a", "--config", "b", "get"],
            &["serve", "get"],
            &[],
        ] {
            assert_eq!(parse(other), None, "{other:?}");
        }
    }
}
