//! Secrets never leave (issue "Policy as product"): the publisher scans the blobs a push adds
//! with gitleaks' rules before any token exists; a finding refuses the push naming its rule,
//! path, line and fingerprint, and the secret itself appears in no message, audit row, sink
//! or log. An operator allows one finding by its fingerprint for one grant. Real git,
//! `git-remote-zodex`, devhub and a JSON Lines audit sink.

use crate::support;

use std::path::Path;
use std::time::Duration;
use support::devhub::{commit_file, git_ok};
use support::rig::{Rig, stderr, text};

const HOUR: Duration = Duration::from_secs(3600);

/// Real-looking secrets, made at run time (no literal secret sits in the repository, where
/// scanners of this very code would find it).
struct Secrets {
    aws: String,
    github: String,
    key_body: String,
}

impl Secrets {
    fn new() -> Self {
        let alphabet: Vec<char> = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".chars().collect();
        let pick = |seed: usize, n: usize, set: &[char]| -> String {
            (0..n)
                .map(|i| set[(seed * 31 + i * 17 + i * i * 7) % set.len()])
                .collect()
        };
        let alnum: Vec<char> = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
            .chars()
            .collect();
        let base64: Vec<char> = alnum.iter().copied().chain(['+', '/']).collect();
        let body: Vec<String> = (0..6).map(|line| pick(line + 3, 64, &base64)).collect();
        Self {
            aws: ["AK", "IA", &pick(5, 16, &alphabet)].concat(),
            github: ["gh", "p_", &pick(7, 36, &alnum)].concat(),
            key_body: body.join("\n"),
        }
    }

    /// A file carrying all three, each on a line of its own.
    fn file(&self) -> String {
        let (begin, end) = (
            ["-----BEGIN RSA ", "PRIVATE KEY-----"].concat(),
            ["-----END RSA ", "PRIVATE KEY-----"].concat(),
        );
        format!(
            "# deploy settings\naws_access_key_id = {}\ntoken = \"{}\"\n{begin}\n{}\n{end}\n",
            self.aws, self.github, self.key_body
        )
    }

    /// Whether `text` holds any of them (or a recognisable part of the key).
    fn leaked_in(&self, text: &str) -> bool {
        let key_line = self.key_body.lines().next().unwrap();
        [self.aws.as_str(), self.github.as_str(), key_line]
            .iter()
            .any(|s| text.contains(s))
    }
}

fn sink_config(dir: &Path) -> (String, std::path::PathBuf) {
    let jsonl = dir.join("audit.jsonl");
    let extra = format!(
        "\n[[audit_sinks]]\nname = \"file\"\nkind = \"jsonl\"\npath = \"{}\"\n",
        jsonl.display()
    );
    (extra, jsonl)
}

/// The fingerprints a refusal names (`fingerprint zsf1-…`).
fn fingerprints(said: &str) -> Vec<String> {
    let mut found: Vec<String> = said
        .split("fingerprint ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect()
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn a_push_carrying_secrets_is_refused_without_repeating_them_and_allowed_by_fingerprint() {
    let sinks = tempfile::tempdir().unwrap();
    let (extra, jsonl) = sink_config(sinks.path());
    let rig = Rig::start_with(HOUR, &extra);
    let secrets = Secrets::new();
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    git_ok(&app, &["checkout", "-q", "-b", "deploy"]);
    commit_file(
        &app,
        "config/deploy.env",
        secrets.file().as_bytes(),
        "deploy",
    );
    rig.grant_push("demo/app");

    let push = rig.agent_git(&app, &["push", "origin", "deploy"]);
    assert!(!push.status.success(), "{}", text(&push));
    let said = stderr(&push);
    assert!(said.contains("no-secrets"), "{said}");
    for (rule, line) in [
        ("aws-access-token", 2),
        ("github-pat", 3),
        ("private-key", 4),
    ] {
        assert!(
            said.contains(&format!("{rule} at config/deploy.env:{line}")),
            "the refusal names {rule} at line {line}: {said}"
        );
    }
    let found = fingerprints(&said);
    assert_eq!(found.len(), 3, "{said}");
    assert!(said.contains("--allow-secret zsf1-"), "{said}");
    assert_eq!(rig.remote_sha("app", "refs/heads/deploy"), None);

    // Allowed by their fingerprints, for this grant: pushed.
    let allow: Vec<String> = found.iter().map(|f| format!("\"{f}\"")).collect();
    rig.admin_ok(&format!(
        r#"{{"op":"grant_push","repo":"demo/app","ttl":{{"seconds":3600}},"allow_secrets":[{}]}}"#,
        allow.join(",")
    ));
    let push = rig.agent_git(&app, &["push", "origin", "deploy"]);
    assert!(push.status.success(), "{}\n{}", text(&push), rig.log());
    assert_eq!(
        rig.remote_sha("app", "refs/heads/deploy"),
        Some(support::devhub::rev_parse(&app, "HEAD"))
    );

    // Nothing anyone reads afterwards holds a secret: the messages, the audit, the sink, the log.
    let audit = rig
        .admin_ok(r#"{"op":"audit","repo":"demo/app"}"#)
        .to_string();
    assert!(
        audit.contains("aws-access-token"),
        "the audit names the rule"
    );
    support::wait::eventually(
        "the sink has the push's rows",
        Duration::from_secs(10),
        || std::fs::read_to_string(&jsonl).is_ok_and(|t| t.contains("github-pat")),
    );
    let sink = std::fs::read_to_string(&jsonl).unwrap();
    for (what, text) in [
        ("the refusal", said.as_str()),
        ("the audit", audit.as_str()),
        ("the sink", sink.as_str()),
        ("the log", rig.log().as_str()),
    ] {
        assert!(!secrets.leaked_in(text), "{what} repeats a secret");
    }
}

#[test]
fn one_allowed_finding_does_not_let_another_through() {
    let rig = Rig::start(HOUR);
    let secrets = Secrets::new();
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    git_ok(&app, &["checkout", "-q", "-b", "two"]);
    commit_file(&app, "a.env", secrets.file().as_bytes(), "secrets");
    rig.grant_push("demo/app");
    let push = rig.agent_git(&app, &["push", "origin", "two"]);
    let found = fingerprints(&stderr(&push));
    assert_eq!(found.len(), 3, "{}", stderr(&push));
    rig.admin_ok(&format!(
        r#"{{"op":"grant_push","repo":"demo/app","ttl":{{"seconds":3600}},"allow_secrets":["{}"]}}"#,
        found[0]
    ));
    let push = rig.agent_git(&app, &["push", "origin", "two"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(stderr(&push).contains("no-secrets"), "{}", stderr(&push));
    assert_eq!(rig.remote_sha("app", "refs/heads/two"), None);
}

/// A later commit deleting the secret does not unpublish it: history keeps the first.
#[test]
fn a_secret_removed_by_a_later_commit_of_the_same_push_is_still_refused() {
    let rig = Rig::start(HOUR);
    let secrets = Secrets::new();
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    git_ok(&app, &["checkout", "-q", "-b", "oops"]);
    commit_file(&app, "settings.env", secrets.file().as_bytes(), "settings");
    commit_file(&app, "settings.env", b"# nothing here\n", "remove them");
    rig.grant_push("demo/app");
    let push = rig.agent_git(&app, &["push", "origin", "oops"]);
    assert!(!push.status.success(), "{}", text(&push));
    assert!(
        stderr(&push).contains("github-pat at settings.env:3"),
        "{}",
        stderr(&push)
    );
    assert_eq!(rig.remote_sha("app", "refs/heads/oops"), None);
}

#[test]
fn a_pull_request_carrying_a_secret_is_refused_and_nothing_is_pushed() {
    let rig = Rig::start(HOUR);
    let secrets = Secrets::new();
    let work = tempfile::tempdir().unwrap();
    let app = rig.clone(work.path(), "app");
    commit_file(
        &app,
        "vendor/lib/settings.py",
        secrets.file().as_bytes(),
        "settings",
    );
    let out = rig.agent(
        &app,
        &["publish-pr", "--repo", "demo/app", "--title", "Settings"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = stderr(&out);
    assert!(said.contains("pr-no-secrets"), "{said}");
    assert!(
        said.contains("github-pat at vendor/lib/settings.py:3"),
        "a vendored path is scanned too: {said}"
    );
    assert!(!secrets.leaked_in(&said));
    assert!(rig.pulls("app").is_empty());
    assert_eq!(
        rig.branches("app"),
        "refs/heads/main",
        "no branch left behind"
    );
}

#[test]
fn a_bad_fingerprint_is_refused_with_what_to_type() {
    let rig = Rig::start(HOUR);
    let answer = rig.admin(
        r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"allow_secrets":["not-a-fingerprint"]}"#,
    );
    assert_eq!(answer["ok"], false, "{answer}");
    assert!(answer.to_string().contains("zsf1-"), "{answer}");
    let answer = rig.admin(
        r#"{"op":"grant_push","repo":"demo/app","ttl":{"seconds":3600},"allow_paths":["../x"]}"#,
    );
    assert_eq!(answer["ok"], false, "{answer}");
}
