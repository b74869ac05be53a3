//! Shared helpers for devhub tests: a seeded devhub on a background runtime, App JWTs, token
//! minting, a blocking HTTP client and git runs with controlled credentials.

use reqwest::blocking::Client;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use zodex::devhub::keys::{KeyPair, generate_key_pair};
use zodex::devhub::{
    BackgroundDevHub, DEMO_OWNER, DemoSeed, DevHub, DevHubConfig, start_in_background,
};

/// Three key pairs per test binary (key generation is the slow part): reader, writer, stranger.
pub fn keys() -> &'static [KeyPair; 3] {
    static KEYS: OnceLock<[KeyPair; 3]> = OnceLock::new();
    KEYS.get_or_init(|| {
        [
            generate_key_pair().unwrap(),
            generate_key_pair().unwrap(),
            generate_key_pair().unwrap(),
        ]
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKind {
    Reader,
    Writer,
}

/// A seeded devhub in a temporary directory, stopped when dropped.
pub struct Demo {
    pub hub: BackgroundDevHub,
    pub seed: DemoSeed,
    pub dir: tempfile::TempDir,
    pub client: Client,
}

/// A response: status, headers and the body (as JSON when it parses, else a string).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

impl Demo {
    pub fn start() -> Self {
        Self::start_with(|config| config)
    }

    pub fn start_with(configure: impl FnOnce(DevHubConfig) -> DevHubConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let [reader, writer, _] = keys();
        let seed = DevHub::seed_demo(dir.path(), &reader.public_pem, &writer.public_pem).unwrap();
        let hub = start_in_background(configure(DevHubConfig::new(dir.path()))).unwrap();
        Self {
            hub,
            seed,
            dir,
            client: Client::builder().build().unwrap(),
        }
    }

    pub fn app_id(&self, kind: AppKind) -> u64 {
        match kind {
            AppKind::Reader => self.seed.reader_app_id,
            AppKind::Writer => self.seed.writer_app_id,
        }
    }

    pub fn installation_id(&self, kind: AppKind) -> u64 {
        match kind {
            AppKind::Reader => self.seed.reader_installation_id,
            AppKind::Writer => self.seed.writer_installation_id,
        }
    }

    /// An App JWT as a GitHub client makes it (`iat` = now − 60 s, `exp` = now + 9 min).
    pub fn jwt(&self, kind: AppKind) -> String {
        let now = chrono::Utc::now().timestamp();
        self.jwt_with(kind, now - 60, now + 540)
    }

    pub fn jwt_with(&self, kind: AppKind, iat: i64, exp: i64) -> String {
        let key = match kind {
            AppKind::Reader => &keys()[0],
            AppKind::Writer => &keys()[1],
        };
        sign(
            key,
            json!({"iss": self.app_id(kind).to_string(), "iat": iat, "exp": exp}),
        )
    }

    /// The publisher's GitHub client acting as the demo's two Apps, talking to `api_url` (the
    /// devhub itself, or a proxy in front of it), with short retry back-offs.
    pub fn publisher_client(&self, api_url: &str) -> zodex::publisher::github::GitHub {
        use zodex::engine::store::App;
        use zodex::publisher::github::{AppKey, GitHub, RetryPolicy};
        let [reader, writer, _] = keys();
        let reader = AppKey::from_pem(
            App::Reader,
            self.seed.reader_app_id,
            reader.private_pem.as_bytes(),
        )
        .unwrap();
        let writer = AppKey::from_pem(
            App::Writer,
            self.seed.writer_app_id,
            writer.private_pem.as_bytes(),
        )
        .unwrap();
        GitHub::new(api_url, self.hub.git_url(), reader, writer)
            .unwrap()
            .with_retry_policy(RetryPolicy {
                base_backoff: std::time::Duration::from_millis(20),
                ..RetryPolicy::default()
            })
    }

    /// One REST request with `Authorization: Bearer <auth>` when given.
    pub fn api(&self, method: &str, path: &str, auth: Option<&str>, body: Option<Value>) -> Reply {
        let url = format!("{}{path}", self.hub.api_url());
        let mut request = self
            .client
            .request(method.parse().unwrap(), url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .header("user-agent", "zodex-devhub-tests");
        if let Some(auth) = auth {
            request = request.header("authorization", format!("Bearer {auth}"));
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Reply {
            status,
            headers,
            body,
        }
    }

    /// `POST /app/installations/{id}/access_tokens` with `body`.
    pub fn mint_reply(&self, kind: AppKind, body: Value) -> Reply {
        let path = format!(
            "/app/installations/{}/access_tokens",
            self.installation_id(kind)
        );
        self.api("POST", &path, Some(&self.jwt(kind)), Some(body))
    }

    /// A token for one repository of `demo` with `permissions`.
    pub fn token(&self, kind: AppKind, repo: &str, permissions: Value) -> String {
        let reply = self.mint_reply(
            kind,
            json!({"repositories": [repo], "permissions": permissions}),
        );
        assert_eq!(reply.status, 201, "{:?}", reply.body);
        reply.body["token"].as_str().unwrap().to_string()
    }

    /// `<git_url>/demo/<repo>.git` with the token as Basic credentials (or none).
    pub fn git_url(&self, repo: &str, token: Option<&str>) -> String {
        let base = self.hub.git_url();
        match token {
            Some(token) => {
                base.replacen("http://", &format!("http://x-access-token:{token}@"), 1)
                    + &format!("/{DEMO_OWNER}/{repo}.git")
            }
            None => format!("{base}/{DEMO_OWNER}/{repo}.git"),
        }
    }
}

pub fn sign(key: &KeyPair, claims: Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(key.private_pem.as_bytes()).unwrap();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )
    .unwrap()
}

/// Runs git with no inherited credential helper, no prompt, no global configuration, and a
/// fixed identity.
pub fn git(dir: &Path, args: &[&str]) -> Output {
    git_command(dir)
        .args(["-c", "credential.helper=", "-c", "protocol.version=2"])
        .args(args)
        .output()
        .unwrap()
}

/// A `git` in `dir` that reads no user or system configuration, never prompts and commits as
/// a fixed test identity; callers add their own `-c` options and arguments. Nothing `GIT_*`
/// of the environment the tests run in reaches it (`GIT_DIR` from a hook, say).
pub fn git_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    without_git_env(&mut command);
    command
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@zodex.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@zodex.invalid")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::null());
    command
}

/// Keeps every `GIT_*` variable of the tests' environment (`GIT_DIR` from a hook, say) from
/// `command`: git, and the Zodex binaries that run git, see only what the test sets.
pub fn without_git_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GIT_") {
            command.env_remove(name);
        }
    }
    command
}

/// [`git`] that must succeed; returns stdout.
#[track_caller]
pub fn git_ok(dir: &Path, args: &[&str]) -> String {
    let output = git(dir, args);
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// [`git`] that must fail; returns stderr.
#[track_caller]
/// The object id `rev` names in `dir`.
pub fn rev_parse(dir: &Path, rev: &str) -> String {
    git_ok(dir, &["rev-parse", rev]).trim().to_string()
}

pub fn git_fails(dir: &Path, args: &[&str]) -> String {
    let output = git(dir, args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "git {args:?} succeeded: {stderr}");
    stderr
}

/// Writes `path` in the work tree `dir` and commits it.
pub fn commit_file(dir: &Path, path: &str, content: &[u8], message: &str) {
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, content).unwrap();
    git_ok(dir, &["add", path]);
    git_ok(dir, &["commit", "--quiet", "-m", message]);
}

/// Whether the git repository at `dir` stores object `oid` (reachable or not).
pub fn stores(dir: &Path, oid: &str) -> bool {
    git(dir, &["cat-file", "-e", oid]).status.success()
}
