//! Property tests for every parser that reads agent or GitHub input, through the library's
//! public API: the TTL grammar, repository names and the URL/path → repository parsers, the
//! socket wire (agent header, agent and admin JSON, responses), git's credential protocol, the
//! bundle header, ref-name validation (against the real `git check-ref-format`), the
//! remote-helper protocol and the patch grammar.
//!
//! Each parser must never panic on arbitrary input, must read back what its formatter writes,
//! must agree with its reference grammar, and must refuse endless input after a bounded read.
//! The fuzz targets under `fuzz/` (`scripts/fuzz`) push the same parsers much harder.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use zodex::agent::credential::{
    CredentialAnswer, CredentialRequest, MAX_LINE_BYTES, ProtocolError, read_request, repo_of_path,
};
use zodex::agent::remote_helper::Helper;
use zodex::engine::RepoName;
use zodex::engine::repo::repo_of_url;
use zodex::engine::ttl::{format_duration, parse_ttl};
use zodex::protocol::answers::GrantVia;
use zodex::protocol::bundle_header::{BundleError, MAX_HEADER_BYTES, read_header, write_header};
use zodex::protocol::{
    AGENT_HEADER_LEN, AGENT_VERSION, AdminRequest, AgentHeader, AgentRequest, ForSprites,
    MAX_REQUEST_BYTES, PushUpdate, Ttl, read_response,
};
use zodex::publisher::publish::valid_refname;
use zodex::tools::apply_patch::check_patch;

/// The TTL grammar's ceiling: ten years of 366 days.
const TEN_YEARS: u64 = 10 * 366 * 24 * 3600;

/// A reader that counts what was taken from it: endless input must be refused after a bounded
/// read, not buffered whole.
struct Counting<R> {
    inner: R,
    taken: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.taken += n as u64;
        Ok(n)
    }
}

/// `prefix`, then `unit` repeated forever.
fn endless(prefix: &'static [u8], unit: &'static [u8]) -> Counting<impl Read> {
    let cycle = std::iter::repeat(unit).flat_map(|u| u.iter().copied());
    let bytes = prefix.iter().copied().chain(cycle);
    Counting {
        inner: IterReader(bytes),
        taken: 0,
    }
}

struct IterReader<I>(I);

impl<I: Iterator<Item = u8>> Read for IterReader<I> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        for slot in buf.iter_mut() {
            match self.0.next() {
                Some(b) => *slot = b,
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------- TTL

proptest! {
    #[test]
    fn ttl_never_panics_and_every_refusal_shows_the_forms(text in any::<String>()) {
        match parse_ttl(&text) {
            Ok(d) => prop_assert!(d.as_secs() > 0 && d.as_secs() <= TEN_YEARS),
            Err(e) => prop_assert!(e.to_string().contains("1h30m"), "{}", e),
        }
    }

    #[test]
    fn ttl_parse_of_a_formatted_duration_is_the_duration(secs in 1..=TEN_YEARS) {
        let d = Duration::from_secs(secs);
        prop_assert_eq!(parse_ttl(&format_duration(d)), Ok(d));
    }

    #[test]
    fn ttl_units_largest_first_add_up(
        parts in (option::of(0u64..4000), option::of(0u64..100), option::of(0u64..10_000), option::of(0u64..100_000)),
        zeros in 0usize..3,
    ) {
        let (d, h, m, s) = parts;
        let mut text = String::new();
        let mut want = 0u64;
        for (value, unit, size) in [(d, 'd', 86_400), (h, 'h', 3_600), (m, 'm', 60), (s, 's', 1)] {
            if let Some(v) = value {
                text.push_str(&format!("{}{v}{unit}", "0".repeat(zeros)));
                want += v * size;
            }
        }
        let got = parse_ttl(&text);
        if want == 0 || want > TEN_YEARS {
            prop_assert!(got.is_err(), "{} gave {:?}", text, got);
        } else {
            prop_assert_eq!(got, Ok(Duration::from_secs(want)), "{}", text);
        }
    }

    #[test]
    fn ttl_refuses_units_out_of_order(a in 1u64..100, b in 1u64..100, units in select(vec![('s', 'm'), ('m', 'h'), ('h', 'd'), ('s', 'd'), ('m', 'm')])) {
        let text = format!("{a}{}{b}{}", units.0, units.1);
        prop_assert!(parse_ttl(&text).is_err(), "{}", text);
    }
}

#[test]
fn ttl_refuses_a_number_of_ten_thousand_digits() {
    let text = format!("{}s", "9".repeat(10_000));
    assert!(
        parse_ttl(&text)
            .unwrap_err()
            .to_string()
            .contains("too large")
    );
}

// ---------------------------------------------------------------- repository names

/// The grammar Zodex documents (GitHub's, with `..` refused outright): OWNER is 1–39 letters and
/// digits in runs joined by single `-`; NAME is 1–100 of letters, digits, `.`, `_`, `-`, never
/// `.` or holding `..`, and never ending in `.git` (GitHub strips it) or `.wiki` (GitHub's
/// wikis). One trailing `.git` on the whole is accepted and dropped.
fn documented_grammar(text: &str) -> bool {
    let body = text.strip_suffix(".git").unwrap_or(text);
    let Some((owner, name)) = body.split_once('/') else {
        return false;
    };
    let owner_ok = owner.len() <= 39
        && owner
            .split('-')
            .all(|run| !run.is_empty() && run.bytes().all(|b| b.is_ascii_alphanumeric()));
    let lower = name.to_ascii_lowercase();
    let name_ok = (1..=100).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && name != "."
        && !name.contains("..")
        && !lower.ends_with(".git")
        && !lower.ends_with(".wiki");
    owner_ok && name_ok
}

/// Text near the grammar's edges: mostly its own characters, some that are never allowed.
fn repo_like() -> impl Strategy<Value = String> {
    let owner = "[a-zA-Z0-9-]{0,41}";
    let name = "[a-zA-Z0-9._-]{0,102}";
    let suffix = select(vec![
        "", "", ".git", ".wiki", ".GIT", ".git.git", "/x", " ", "é",
    ]);
    prop_oneof![
        (owner, name, suffix).prop_map(|(o, n, s)| format!("{o}/{n}{s}")),
        "[a-zA-Z0-9./_ -]{0,60}",
        any::<String>(),
    ]
}

fn valid_repo() -> impl Strategy<Value = RepoName> {
    (
        "[a-zA-Z0-9]{1,10}(-[a-zA-Z0-9]{1,10}){0,2}",
        "[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,30}",
    )
        .prop_filter_map("outside the grammar", |(o, n)| {
            RepoName::parse(&format!("{o}/{n}")).ok()
        })
}

proptest! {
    #[test]
    fn repo_names_accepted_are_exactly_the_documented_grammar(text in repo_like()) {
        let parsed = RepoName::parse(&text);
        prop_assert_eq!(parsed.is_ok(), documented_grammar(&text), "{:?}: {:?}", text, parsed);
        if let Err(e) = parsed {
            prop_assert!(e.to_string().contains("OWNER/NAME"));
        }
    }

    #[test]
    fn repo_display_parses_back_and_the_key_ignores_case(repo in valid_repo()) {
        let shown = repo.to_string();
        prop_assert_eq!(RepoName::parse(&shown), Ok(repo.clone()));
        let upper = RepoName::parse(&shown.to_ascii_uppercase()).unwrap();
        prop_assert_eq!(upper.key(), repo.key());
        prop_assert_eq!(repo.key(), shown.to_ascii_lowercase());
    }

    #[test]
    fn every_remote_url_shape_names_its_repository(repo in valid_repo(), git in any::<bool>()) {
        let dot_git = if git { ".git" } else { "" };
        for url in [
            format!("https://github.com/{repo}{dot_git}"),
            format!("http://127.0.0.1:8080/{repo}{dot_git}/"),
            format!("ssh://git@github.com/{repo}{dot_git}"),
            format!("git@github.com:{repo}{dot_git}"),
            format!("  https://github.com/{repo}{dot_git}\n"),
        ] {
            prop_assert_eq!(repo_of_url(&url).map(|r| r.key()), Some(repo.key()), "{}", url);
        }
        let path = format!("/{repo}{dot_git}/");
        prop_assert_eq!(repo_of_path(&path), Some(repo.to_string()));
    }

    #[test]
    fn url_and_path_parsers_never_panic_and_find_only_valid_names(text in any::<String>()) {
        if let Some(repo) = repo_of_url(&text) {
            prop_assert_eq!(RepoName::parse(&repo.to_string()), Ok(repo));
        }
        if let Some(path) = repo_of_path(&text) {
            prop_assert_eq!(path.matches('/').count(), 1);
            prop_assert!(!path.starts_with('/') && !path.ends_with('/'));
        }
    }

    #[test]
    fn urls_without_a_repository_path_name_none(host in "[a-z.]{1,20}", owner in "[a-z]{1,10}") {
        for url in [
            format!("https://{host}/{owner}"),
            format!("https://{host}/"),
            format!("/srv/{owner}/x"),
            format!("https:///{owner}/x"),
            format!("https://{host}/{owner}/x/y"),
        ] {
            prop_assert_eq!(repo_of_url(&url), None, "{}", url);
        }
    }
}

// ---------------------------------------------------------------- wire

fn any_ttl() -> impl Strategy<Value = Ttl> {
    prop_oneof![any::<i64>().prop_map(Ttl::Seconds), Just(Ttl::NoTtl)]
}

fn text() -> impl Strategy<Value = String> {
    any::<String>()
}

/// A ref name git accepts (what a `PushUpdate` can hold; anything else is refused as it is read).
fn ref_name() -> impl Strategy<Value = zodex::engine::RefName> {
    "refs/(heads|tags)/[a-z0-9._-]{0,8}[a-z0-9]".prop_filter_map("a name git accepts", |n| {
        zodex::engine::RefName::parse(n).ok()
    })
}

fn object_id() -> impl Strategy<Value = zodex::engine::ObjectId> {
    "[0-9a-f]{40}".prop_map(|hex| zodex::engine::ObjectId::parse(&hex).unwrap())
}

fn push_update() -> impl Strategy<Value = PushUpdate> {
    (
        ref_name(),
        option::of(object_id()),
        any::<bool>(),
        option::of(object_id()),
    )
        .prop_map(|(dst, new, force, lease)| PushUpdate {
            dst,
            new,
            force,
            lease,
        })
}

fn agent_request() -> impl Strategy<Value = AgentRequest> {
    prop_oneof![
        Just(AgentRequest::Ping),
        Just(AgentRequest::Status),
        (text(), any_ttl(), option::of(text()))
            .prop_map(|(repo, ttl, reason)| AgentRequest::RequestPush { repo, ttl, reason }),
        any::<i64>().prop_map(|id| AgentRequest::RequestState { id }),
        text().prop_map(|repo| AgentRequest::RevokePush { repo }),
        (text(), text()).prop_map(|(host, path)| AgentRequest::Credential { host, path }),
        (text(), text()).prop_map(|(host, path)| AgentRequest::CredentialErase { host, path }),
        text().prop_map(|repo| AgentRequest::ListRefs { repo }),
        (
            text(),
            vec(push_update(), 0..4),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(repo, updates, atomic, dry_run)| AgentRequest::Push {
                repo,
                updates,
                atomic,
                dry_run
            }),
        (
            text(),
            text(),
            text(),
            option::of(text()),
            any::<bool>(),
            text()
        )
            .prop_map(
                |(repo, title, body, base, draft, head)| AgentRequest::PublishPr {
                    repo,
                    title,
                    body,
                    base,
                    draft,
                    head
                }
            ),
    ]
}

fn admin_request() -> impl Strategy<Value = AdminRequest> {
    let via = prop_oneof![Just(GrantVia::Gateway), Just(GrantVia::Token)];
    prop_oneof![
        Just(AdminRequest::Ping),
        Just(AdminRequest::Default),
        Just(AdminRequest::status()),
        (
            option::of(any::<u32>()),
            option::of(any::<i64>()),
            any_for_sprites()
        )
            .prop_map(|(limit, before, of)| AdminRequest::Requests { limit, before, of }),
        (
            text(),
            any_ttl(),
            any::<bool>(),
            via,
            vec(text(), 0..3),
            any_for_sprites()
        )
            .prop_map(|(repo, ttl, allow_workflows, via, refs, to)| {
                AdminRequest::GrantPush {
                    repo,
                    ttl,
                    allow_workflows,
                    via,
                    refs,
                    to,
                    allow_paths: Vec::new(),
                    allow_secrets: Vec::new(),
                    allow_empty: false,
                }
            }),
        (text(), any_for_sprites()).prop_map(|(repo, to)| AdminRequest::RevokePush { repo, to }),
        (
            vec(text(), 0..3),
            any_ttl(),
            any::<bool>(),
            vec(text(), 0..3),
            any_for_sprites()
        )
            .prop_map(
                |(repos, ttl, allow_workflows, refs, to)| AdminRequest::Yolo {
                    repos,
                    ttl,
                    allow_workflows,
                    refs,
                    to,
                    allow_paths: Vec::new(),
                    allow_empty: false,
                }
            ),
        (any::<i64>(), option::of(any_ttl()))
            .prop_map(|(id, ttl)| AdminRequest::Approve { id, ttl }),
        any::<i64>().prop_map(|id| AdminRequest::Deny { id }),
        (
            option::of(any::<i64>()),
            option::of(text()),
            option::of(any::<u32>()),
            option::of(any::<i64>()),
            any_for_sprites()
        )
            .prop_map(|(since_seconds, repo, limit, before, of)| {
                AdminRequest::Audit {
                    since_seconds,
                    repo,
                    limit,
                    before,
                    of,
                }
            }),
        text().prop_map(|sha256| AdminRequest::SetMcpKeyHash { sha256 }),
        (text(), text(), any::<[bool; 4]>(), any::<i64>()).prop_map(
            |(repo, ref_name, f, bytes)| {
                AdminRequest::Explain {
                    repo,
                    ref_name,
                    force: f[0],
                    delete: f[1],
                    bytes,
                    touches_workflows: f[2],
                    ref_exists: f[3],
                    paths: Vec::new(),
                    of: Default::default(),
                }
            }
        ),
    ]
}

proptest! {
    #[test]
    fn agent_header_decodes_what_it_encodes_within_the_cap(metadata_len in any::<u32>(), bundle_len in any::<u64>()) {
        let header = AgentHeader { version: AGENT_VERSION, metadata_len, bundle_len };
        let decoded = AgentHeader::decode(&header.encode());
        if metadata_len as usize <= MAX_REQUEST_BYTES {
            prop_assert_eq!(decoded, Ok(header));
        } else {
            prop_assert!(decoded.unwrap_err().to_string().contains("cap"));
        }
    }

    #[test]
    fn agent_header_decode_never_panics_and_accepts_only_its_own_encoding(bytes in any::<[u8; AGENT_HEADER_LEN]>()) {
        if let Ok(header) = AgentHeader::decode(&bytes) {
            prop_assert_eq!(header.encode(), bytes);
            prop_assert_eq!(header.version, AGENT_VERSION);
        }
    }

    #[test]
    fn agent_requests_read_back_what_was_written(request in agent_request()) {
        let json = serde_json::to_vec(&request).unwrap();
        prop_assert_eq!(serde_json::from_slice::<AgentRequest>(&json).unwrap(), request);
    }

    #[test]
    fn admin_requests_read_back_what_was_written(request in admin_request()) {
        let mut line = serde_json::to_vec(&request).unwrap();
        prop_assert!(!line.contains(&b'\n'), "an admin request is one line");
        line.push(b'\n');
        prop_assert_eq!(serde_json::from_slice::<AdminRequest>(&line).unwrap(), request);
    }

    #[test]
    fn request_and_response_json_never_panics(bytes in vec(any::<u8>(), 0..300)) {
        let _ = serde_json::from_slice::<AgentRequest>(&bytes);
        let _ = serde_json::from_slice::<AdminRequest>(&bytes);
        let _ = read_response(&mut &bytes[..]);
    }
}

#[test]
fn an_endless_response_line_is_refused_after_one_mebibyte() {
    let mut input = endless(b"{\"ok\":true,\"result\":\"", b"x");
    let err = read_response(&mut input).unwrap_err();
    assert!(err.to_string().contains("not valid JSON"), "{err}");
    assert!(
        input.taken <= MAX_REQUEST_BYTES as u64 + 1,
        "{}",
        input.taken
    );
}

// ---------------------------------------------------------------- git's credential protocol

fn value() -> impl Strategy<Value = String> {
    "[^\n]{0,40}"
}

fn credential_request() -> impl Strategy<Value = CredentialRequest> {
    (
        option::of(value()),
        option::of(value()),
        option::of(value()),
        option::of(value()),
        vec(value(), 0..3),
    )
        .prop_map(
            |(protocol, host, path, username, capabilities)| CredentialRequest {
                protocol,
                host,
                path,
                username,
                capabilities,
            },
        )
}

fn credential_lines(request: &CredentialRequest) -> String {
    let mut lines = String::new();
    for capability in &request.capabilities {
        lines.push_str(&format!("capability[]={capability}\n"));
    }
    for (key, v) in [
        ("protocol", &request.protocol),
        ("host", &request.host),
        ("path", &request.path),
        ("username", &request.username),
    ] {
        if let Some(v) = v {
            lines.push_str(&format!("{key}={v}\n"));
        }
    }
    lines
}

proptest! {
    #[test]
    fn credential_requests_read_back_with_unknown_keys_ignored(
        request in credential_request(),
        unknown in vec(("[a-z_\\[\\]]{1,12}", value()), 0..3),
        blank_end in any::<bool>(),
    ) {
        let mut lines = credential_lines(&request);
        for (key, v) in &unknown {
            if !matches!(key.as_str(), "protocol" | "host" | "path" | "username" | "capability[]") {
                lines.push_str(&format!("{key}={v}\n"));
            }
        }
        if blank_end {
            lines.push_str("\nhost=after-the-blank-line\n");
        }
        prop_assert_eq!(read_request(&mut lines.as_bytes()), Ok(request));
    }

    #[test]
    fn credential_reading_never_panics(bytes in vec(any::<u8>(), 0..400)) {
        let _ = read_request(&mut &bytes[..]);
    }

    #[test]
    fn credential_answers_are_lines_git_reads_back(username in "[^\n=]{0,30}", password in "[^\n]{0,60}", expiry in any::<i64>()) {
        let answer = CredentialAnswer { username: username.clone(), password, password_expiry_utc: expiry };
        let request = read_request(&mut answer.to_lines().as_bytes()).unwrap();
        prop_assert_eq!(request.username, Some(username));
    }
}

#[test]
fn an_endless_credential_line_is_refused_after_a_bounded_read() {
    let mut input = BufReader::new(endless(b"path=", b"a"));
    assert_eq!(read_request(&mut input), Err(ProtocolError::LineTooLong));
    let taken = input.get_ref().taken;
    assert!(taken <= (MAX_LINE_BYTES + 2 + 8192) as u64, "{taken}");
}

#[test]
fn an_endless_credential_request_of_short_lines_is_refused() {
    let mut input = BufReader::new(endless(b"", b"capability[]=state\n"));
    assert_eq!(read_request(&mut input), Err(ProtocolError::RequestTooLong));
    let taken = input.get_ref().taken;
    assert!(taken <= 2 << 20, "{taken}");
}

// ---------------------------------------------------------------- bundle header

fn oid() -> impl Strategy<Value = String> {
    "[0-9a-f]{40}"
}

fn bundle_refname() -> impl Strategy<Value = String> {
    "[!-~]{1,40}".prop_filter("no leading `-`", |n| !n.starts_with('-'))
}

proptest! {
    #[test]
    fn bundle_headers_read_back_and_stop_at_the_pack(
        prerequisites in vec(oid(), 0..4),
        refs in vec((oid(), bundle_refname()), 0..4),
        pack in vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = write_header(&prerequisites, &refs);
        let header_len = bytes.len() as u64;
        bytes.extend_from_slice(&pack);
        let mut rest = &bytes[..];
        let header = read_header(&mut rest).unwrap();
        prop_assert_eq!(header.version, 2);
        prop_assert_eq!(header.prerequisites, prerequisites);
        prop_assert_eq!(header.refs, refs);
        prop_assert_eq!(header.pack_offset, header_len);
        prop_assert_eq!(rest, &pack[..]);
    }

    #[test]
    fn bundle_header_never_panics_after_either_signature(
        v3 in any::<bool>(),
        lines in vec(prop_oneof![
            "[ -~]{0,50}",
            oid().prop_map(|o| format!("-{o} comment")),
            (oid(), bundle_refname()).prop_map(|(o, n)| format!("{o} {n}")),
            Just("@object-format=sha1".to_string()),
            Just(String::new()),
        ], 0..6),
        tail in vec(any::<u8>(), 0..40),
    ) {
        let mut bytes = if v3 { b"# v3 git bundle\n".to_vec() } else { b"# v2 git bundle\n".to_vec() };
        for line in &lines {
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&tail);
        let mut rest = &bytes[..];
        if let Ok(header) = read_header(&mut rest) {
            prop_assert_eq!((bytes.len() - rest.len()) as u64, header.pack_offset);
        }
    }
}

#[test]
fn an_endless_bundle_header_is_refused_after_one_mebibyte() {
    let mut input = endless(b"# v2 git bundle\n", b"x");
    let mut reader = BufReader::new(&mut input);
    assert_eq!(
        read_header(&mut reader).unwrap_err(),
        BundleError::HeaderTooLong
    );
    drop(reader);
    assert!(
        input.taken <= MAX_HEADER_BYTES + 8192 + 17,
        "{}",
        input.taken
    );
}

// ---------------------------------------------------------------- ref names

/// Pieces that sit on every rule of git-check-ref-format(1).
const REF_PIECES: &[&str] = &[
    "a", "main", "v1.2", "-", "_", ".", "..", "/", "//", "@", "@{", "{", "}", ".lock", "lock", "~",
    "^", ":", "?", "*", "[", "]", "\\", " ", "\t", "\u{7f}", "\u{1}", "é", "#", "+", ",", "!",
];

fn git_check_ref_format(name: &str) -> bool {
    Command::new("git")
        .args(["check-ref-format", name])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git runs")
        .success()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn valid_refname_agrees_with_git_check_ref_format(
        prefix in select(vec!["refs/", "refs/heads/", "refs/tags/", "refs", "heads/", ""]),
        pieces in vec(select(REF_PIECES), 0..7),
    ) {
        let name = format!("{prefix}{}", pieces.concat());
        let git = git_check_ref_format(&name) && name.starts_with("refs/");
        prop_assert_eq!(valid_refname(&name), git, "{:?}", name);
    }
}

proptest! {
    #[test]
    fn valid_refname_never_panics(name in any::<String>()) {
        if valid_refname(&name) {
            prop_assert!(name.starts_with("refs/") && name.len() <= 1024);
        }
    }
}

#[test]
fn over_long_ref_names_are_refused() {
    let name = format!("refs/heads/{}", "a".repeat(1024));
    assert!(!valid_refname(&name));
    assert!(valid_refname(&name[..1024]));
}

// ---------------------------------------------------------------- remote helper

fn helper() -> Helper {
    Helper::new(
        "https://github.com/demo/app",
        PathBuf::from("/nonexistent/zodex-test/agent.sock"),
        PathBuf::from("/nonexistent/zodex-test"),
    )
    .unwrap()
}

proptest! {
    #[test]
    fn helper_urls_are_exactly_what_repo_of_url_accepts(url in prop_oneof![
        any::<String>(),
        "(https://|ssh://|git@)?[a-z.]{0,8}[:/][a-zA-Z./-]{0,20}",
    ]) {
        let helper = Helper::new(&url, PathBuf::new(), PathBuf::new());
        prop_assert_eq!(helper.is_ok(), repo_of_url(&url).is_some());
    }

    #[test]
    fn every_option_line_gets_exactly_one_answer(options in vec((
        prop_oneof![
            select(vec!["progress", "verbosity", "followtags", "atomic", "dry-run", "cas", "push-option", "check-connectivity"]).prop_map(str::to_string),
            "[a-z-]{1,12}",
        ],
        "[^\n\r]{0,30}",
    ), 0..8)) {
        let mut input = String::new();
        for (name, value) in &options {
            input.push_str(&format!("option {name} {value}\n"));
        }
        input.push('\n');
        let mut out = Vec::new();
        helper().run(&mut input.as_bytes(), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let answers: Vec<&str> = out.lines().collect();
        prop_assert_eq!(answers.len(), options.len(), "{}", out);
        for answer in answers {
            prop_assert!(matches!(answer, "ok" | "unsupported") || answer.starts_with("error "), "{}", answer);
        }
    }

    #[test]
    fn helper_never_panics_on_what_git_might_send(lines in vec(prop_oneof![
        Just("capabilities".to_string()),
        Just("list for-push".to_string()),
        Just("push refs/heads/main:refs/heads/main".to_string()),
        "option [a-z-]{1,10} [ -~]{0,20}",
        "[ -~]{0,30}",
    ], 0..6), tail in vec(any::<u8>(), 0..30)) {
        let mut input = lines.join("\n").into_bytes();
        input.extend_from_slice(&tail);
        let mut out = Vec::new();
        // No publisher listens: list and push end in a connection error, before any git runs.
        let _ = helper().run(&mut &input[..], &mut out);
    }
}

#[test]
fn unknown_helper_commands_are_protocol_errors() {
    let mut out = Vec::new();
    let err = helper()
        .run(&mut &b"capabilities\nfetch 0000 HEAD\n"[..], &mut out)
        .unwrap_err();
    assert!(err.to_string().contains("fetch 0000 HEAD"), "{err}");
    assert_eq!(out, b"push\noption\n\n");
}

// ---------------------------------------------------------------- patch grammar

fn patch_line() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "*** Begin Patch",
            "*** End Patch",
            "*** End of File",
            "*** Add File: a.txt",
            "*** Delete File: b.txt",
            "*** Update File: c.txt",
            "*** Move to: d.txt",
            "*** Add File:",
            "@@",
            "@@ fn main",
            "@@ -1,2 +1,3 @@ x",
            "<<'EOF'",
            "EOF",
            "",
            "  ",
        ])
        .prop_map(str::to_string),
        "[ +-][ -~]{0,12}",
        "[ -~]{0,16}",
    ]
}

proptest! {
    #[test]
    fn patch_parsing_never_panics(text in any::<String>()) {
        let _ = check_patch(&text);
    }

    #[test]
    fn patch_parsing_never_panics_on_patch_shaped_text(lines in vec(patch_line(), 0..14), crlf in any::<bool>()) {
        let text = lines.join(if crlf { "\r\n" } else { "\n" });
        match check_patch(&text) {
            Ok(ops) => prop_assert!(ops >= 1),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

fn any_for_sprites() -> impl Strategy<Value = ForSprites> {
    (option::of(text()), option::of(text()))
        .prop_map(|(sprite, label)| ForSprites { sprite, label })
}
