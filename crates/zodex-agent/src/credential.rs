//! The git credential helper protocol (`git help credential`), as `zodex-agent credential`
//! speaks it: `key=value` lines up to a blank line or end of input, `capability[]` lines,
//! unknown keys ignored, lines over 64 KiB and requests over 1 MiB refused; a refused `get` is
//! answered `quit=1`. [`serve`] is the helper itself: which requests are this sprite's (its
//! configured git host), the question to `zodex-prd`, and the lines git gets back; deciding is
//! the publisher's, printing the CLI's.
//!
//! Architecture invariant: nothing here writes a token anywhere but the reply meant for git's
//! stdout.

use std::io::BufRead;
use std::path::Path;
use zodex_config::Config;
use zodex_protocol::{AgentRequest, CredentialGrant};
use zodex_types::repo::split_remote_url;

/// The longest line accepted (git's own limit is lower).
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// The most one request may hold, all lines together (git sends a few hundred bytes).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// What git asked about. Only the keys the helper uses are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialRequest {
    pub protocol: Option<String>,
    pub host: Option<String>,
    pub path: Option<String>,
    pub username: Option<String>,
    pub capabilities: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("a credential line is over {MAX_LINE_BYTES} bytes; refusing it")]
    LineTooLong,
    #[error("the credential request is over {MAX_REQUEST_BYTES} bytes; refusing it")]
    RequestTooLong,
    #[error("a credential line is not `key=value`")]
    NotKeyValue,
    #[error("the credential input is not UTF-8")]
    NotUtf8,
    #[error("reading the credential input failed: {0}")]
    Io(String),
}

/// Reads one request: lines up to a blank line or end of input.
pub fn read_request<R: BufRead>(input: &mut R) -> Result<CredentialRequest, ProtocolError> {
    let mut request = CredentialRequest::default();
    let mut total = 0usize;
    loop {
        let mut line = Vec::new();
        let n = std::io::Read::take(&mut *input, MAX_LINE_BYTES as u64 + 2)
            .read_until(b'\n', &mut line)
            .map_err(|e| ProtocolError::Io(e.to_string()))?;
        if n == 0 {
            break;
        }
        total += n;
        if total > MAX_REQUEST_BYTES {
            return Err(ProtocolError::RequestTooLong);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > MAX_LINE_BYTES {
            return Err(ProtocolError::LineTooLong);
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(ProtocolError::LineTooLong);
        }
        if line.is_empty() {
            break;
        }
        let line = String::from_utf8(line).map_err(|_| ProtocolError::NotUtf8)?;
        let (key, value) = line.split_once('=').ok_or(ProtocolError::NotKeyValue)?;
        let value = value.to_string();
        match key {
            "protocol" => request.protocol = Some(value),
            "host" => request.host = Some(value),
            "path" => request.path = Some(value),
            "username" => request.username = Some(value),
            "capability[]" => request.capabilities.push(value),
            // url= is git's shorthand; password, wwwauth[], state[] and the rest are not
            // needed to answer.
            _ => {}
        }
    }
    Ok(request)
}

/// The answer to a `get` the publisher refused: git stops there, asking no further helper and
/// prompting for nothing (gitcredentials(7), `quit`), so the helper's one line on stderr is
/// not followed by git's `could not read Username … terminal prompts disabled`.
pub const REFUSAL: &str = "quit=1\n";

/// A credential to give git.
#[derive(Clone, PartialEq, Eq)]
pub struct CredentialAnswer {
    pub username: String,
    pub password: String,
    /// Unix seconds.
    pub password_expiry_utc: i64,
}

impl std::fmt::Debug for CredentialAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialAnswer")
            .field("username", &self.username)
            .field("password_expiry_utc", &self.password_expiry_utc)
            .finish_non_exhaustive()
    }
}

impl CredentialAnswer {
    /// The answer's lines, in git's format.
    pub fn to_lines(&self) -> String {
        format!(
            "username={}\npassword={}\npassword_expiry_utc={}\n",
            self.username, self.password, self.password_expiry_utc
        )
    }
}

/// The `owner/name` a credential `path` names: one grammar for both sides, in the engine's
/// repository names.
pub use zodex_types::repo::repo_of_path;

/// What the helper gives back: the lines for git's stdout (empty: git falls through to its next
/// helper), a line for stderr, and whether the helper itself failed.
#[derive(Default)]
pub struct Reply {
    pub stdout: String,
    pub diagnostic: Option<String>,
    pub failed: bool,
}

impl Reply {
    fn say(message: impl Into<String>) -> Self {
        Self {
            diagnostic: Some(message.into()),
            ..Self::default()
        }
    }
}

/// `zodex-agent credential OPERATION` with git's request on `input`. Requests for another host
/// than this sprite's `[github] git_url` and operations other than `get` and `erase` get no
/// answer (git asks its next helper); a `get` that `zodex-prd` refused gets `quit=1`, so git
/// stops without prompting.
pub fn serve(config: Option<&Path>, operation: &str, input: &mut impl BufRead) -> Reply {
    let request = match read_request(input) {
        Ok(request) => request,
        Err(e) => {
            return Reply {
                failed: true,
                ..Reply::say(e.to_string())
            };
        }
    };
    if operation != "get" && operation != "erase" {
        return Reply::default();
    }
    let settings = match Config::load(&Config::resolve_path(config)) {
        Ok(settings) => settings,
        Err(e) => return Reply::say(e.to_string()),
    };
    let served = settings.git_url();
    let served_host = split_remote_url(served).map(|(host, _)| host);
    let Some(host) = request
        .host
        .as_deref()
        .filter(|h| served_host.as_deref() == Some(h.to_ascii_lowercase().as_str()))
    else {
        return Reply::default();
    };
    let Some(path) = request.path.clone() else {
        return Reply::say(
            "git did not send the repository path; run `git config --global credential.useHttpPath true`",
        );
    };
    let host = host.to_string();
    let ask = if operation == "get" {
        AgentRequest::Credential { host, path }
    } else {
        AgentRequest::CredentialErase { host, path }
    };
    let response = match super::client::call(&settings.agent_socket, &ask) {
        Ok(response) => response,
        Err(e) => return Reply::say(e.to_string()),
    };
    if let Some(error) = response.error.as_ref().filter(|_| !response.ok) {
        let message = match &error.unblock {
            Some(unblock) => format!("{}; {unblock}", error.message),
            None => error.message.clone(),
        };
        return Reply {
            stdout: if operation == "get" {
                REFUSAL.to_string()
            } else {
                String::new()
            },
            ..Reply::say(message.replace('\n', " "))
        };
    }
    if operation != "get" {
        return Reply::default();
    }
    match response.answer::<CredentialGrant>() {
        Ok(grant) => Reply {
            stdout: CredentialAnswer {
                username: grant.username,
                password: grant.password,
                password_expiry_utc: grant.password_expiry_utc,
            }
            .to_lines(),
            ..Reply::default()
        },
        Err(e) => Reply::say(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &[u8]) -> Result<CredentialRequest, ProtocolError> {
        read_request(&mut std::io::Cursor::new(text))
    }

    #[test]
    fn reads_key_values_to_a_blank_line_and_ignores_unknown_keys() {
        let request = parse(
            b"capability[]=authtype\ncapability[]=state\nprotocol=https\nhost=github.com\npath=demo/app.git\nwwwauth[]=Basic realm=\"x\"\nfuture=1\n\nhost=ignored\n",
        )
        .unwrap();
        assert_eq!(request.protocol.as_deref(), Some("https"));
        assert_eq!(request.host.as_deref(), Some("github.com"));
        assert_eq!(request.path.as_deref(), Some("demo/app.git"));
        assert_eq!(request.capabilities, vec!["authtype", "state"]);
        // End of input also ends a request.
        assert_eq!(parse(b"host=h").unwrap().host.as_deref(), Some("h"));
    }

    #[test]
    fn refuses_long_lines_and_non_key_value_lines() {
        let mut long = b"path=".to_vec();
        long.extend(std::iter::repeat_n(b'a', MAX_LINE_BYTES));
        long.push(b'\n');
        assert_eq!(parse(&long), Err(ProtocolError::LineTooLong));
        long.pop();
        assert_eq!(parse(&long), Err(ProtocolError::LineTooLong));
        assert_eq!(parse(b"nonsense\n"), Err(ProtocolError::NotKeyValue));
    }

    #[test]
    fn paths_name_one_repository() {
        assert_eq!(repo_of_path("demo/app.git").as_deref(), Some("demo/app"));
        assert_eq!(repo_of_path("/demo/app/").as_deref(), Some("demo/app"));
        assert_eq!(repo_of_path("demo"), None);
        assert_eq!(repo_of_path("demo/app/info/refs"), None);
    }

    #[test]
    fn answers_in_gits_format_and_debug_hides_the_password() {
        let answer = CredentialAnswer {
            username: "x-access-token".into(),
            password: "ghs_secret".into(),
            password_expiry_utc: 1_800_000_000,
        };
        assert_eq!(
            answer.to_lines(),
            "username=x-access-token\npassword=ghs_secret\npassword_expiry_utc=1800000000\n"
        );
        assert!(!format!("{answer:?}").contains("secret"));
    }
}
