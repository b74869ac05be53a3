//! `scan` on the shipped rules. Every secret-looking string is built here from pieces, so this
//! file does not trip secret scanners itself.

use proptest::prelude::*;

use super::*;
use crate::window::{OVERLAP, WINDOW, windows};

/// Deterministic pseudo-random characters from `alphabet` (a tiny LCG: no dependency).
fn chars(seed: u64, n: usize, alphabet: &[u8]) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            alphabet[((state >> 33) % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn aws_key_id() -> String {
    ["AK", "IA", "Z7QX", "M3KR", "T6WP", "B2NY"].concat()
}

fn aws_secret_line() -> String {
    format!("aws_secret_access_key = \"{}\"", chars(7, 40, ALNUM))
}

fn github_token(seed: u64) -> String {
    format!("{}{}", ["gh", "p_"].concat(), chars(seed, 36, ALNUM))
}

/// A PEM private key block: BEGIN and END lines around 26 lines of base64.
fn pem_block() -> String {
    let dashes = "-----";
    let mut block = format!("{dashes}{} RSA PRIVATE KEY{dashes}\n", "BEGIN");
    for line in 0..26 {
        block.push_str(&chars(100 + line, 64, BASE64));
        block.push('\n');
    }
    block.push_str(&format!("{dashes}{} RSA PRIVATE KEY{dashes}\n", "END"));
    block
}

/// `(rule, line)` of each finding.
fn found(path: &str, text: &[u8]) -> Vec<(String, u32)> {
    let result = scan(Rules::shipped(), path, text, &Limits::default());
    assert_eq!(result.skipped, None);
    result
        .findings
        .into_iter()
        .map(|f| (f.rule, f.line))
        .collect()
}

fn pairs(expected: &[(&str, u32)]) -> Vec<(String, u32)> {
    expected.iter().map(|(r, l)| (r.to_string(), *l)).collect()
}

#[test]
fn each_secret_is_found_with_its_rule_and_line() {
    let text = format!(
        "# deployment settings\naws_access_key_id = \"{}\"\n{}\n\ntoken: {}\n{}",
        aws_key_id(),
        aws_secret_line(),
        github_token(1),
        pem_block()
    );
    assert_eq!(
        found("deploy/settings.txt", text.as_bytes()),
        pairs(&[
            ("aws-access-token", 2),
            ("generic-api-key", 3),
            ("github-pat", 5),
            ("private-key", 6),
        ])
    );
}

/// Filler lines of about `width` bytes, none of which a rule takes.
fn filler(lines: usize, width: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "let value_{i} = compute({});{}\n",
                i % 97,
                " ".repeat(width)
            )
        })
        .collect()
}

#[test]
fn a_secret_deep_in_a_large_file_is_found_on_its_line() {
    let mut text = filler(6999, 240);
    text.push_str(&format!("ghtoken = {}\n", github_token(2)));
    text.push_str(&filler(1000, 240));
    assert!(text.len() > 2 << 20, "{}", text.len());
    assert!(windows(text.as_bytes()).count() > 4);
    assert_eq!(
        found("src/big.rs", text.as_bytes()),
        pairs(&[("github-pat", 7000)])
    );
}

#[test]
fn a_key_block_across_a_window_boundary_is_found_once() {
    // The block starts about 1 KiB before the first window's end and runs past it.
    let mut text = String::new();
    let mut lines = 0;
    while text.len() < WINDOW - 1024 {
        text.push_str(&filler(1, 10));
        lines += 1;
    }
    let at = text.len();
    text.push_str(&pem_block());
    text.push_str(&filler(lines, 10));
    let first = windows(text.as_bytes()).next().unwrap();
    assert!(
        at < first.owned_end && at + pem_block().len() > first.owned_end,
        "the block straddles the boundary"
    );
    assert!(pem_block().len() < OVERLAP);
    let line = u32::try_from(lines + 1).unwrap();
    assert_eq!(
        found("id_rsa", text.as_bytes()),
        pairs(&[("private-key", line)])
    );
}

#[test]
fn a_binary_blob_is_skipped_by_gits_rule() {
    let mut blob = vec![0u8, 1, 2];
    blob.extend_from_slice(github_token(3).as_bytes());
    let result = scan(Rules::shipped(), "a.bin.dat", &blob, &Limits::default());
    assert_eq!(result.skipped, Some(Skipped::Binary));
    assert!(result.findings.is_empty());

    // A NUL past the first 8000 bytes does not make it binary.
    let mut late = filler(400, 20).into_bytes();
    late.push(0);
    late.extend_from_slice(format!("\ntoken = {}\n", github_token(3)).as_bytes());
    assert!(late.iter().position(|&b| b == 0).unwrap() >= BINARY_PROBE);
    assert_eq!(found("a.txt", &late), pairs(&[("github-pat", 402)]));
}

#[test]
fn text_that_is_not_utf8_is_scanned_as_bytes() {
    let mut blob = b"caf\xe9 \xff\xfe\n".to_vec();
    blob.extend_from_slice(format!("x = \"{}\" ", github_token(4)).as_bytes());
    blob.extend_from_slice(b"\xe9\n");
    assert_eq!(found("latin1.txt", &blob), pairs(&[("github-pat", 2)]));
}

#[test]
fn what_the_rules_allow_is_not_reported() {
    // The aws-access-token rule's allowlist: a key id ending in EXAMPLE (AWS's documented one).
    let example = ["AK", "IA", "IOSFODNN7", "EXAMPLE"].concat();
    assert_eq!(
        found("README.md", format!("key_id: {example}\n").as_bytes()),
        []
    );
    // The global allowlist's paths: dependencies' lock files and vendored code.
    let token = format!("token = {}\n", github_token(5));
    let result = scan(
        Rules::shipped(),
        "web/node_modules/x/index.js",
        token.as_bytes(),
        &Limits::default(),
    );
    assert_eq!(result.skipped, Some(Skipped::AllowedPath));
    assert!(result.findings.is_empty());
    // Unless the caller does not trust the path: the pusher chose it.
    let untrusted = Limits {
        trust_paths: false,
        ..Limits::default()
    };
    let result = scan(
        Rules::shipped(),
        "web/node_modules/x/index.js",
        token.as_bytes(),
        &untrusted,
    );
    assert_eq!(result.skipped, None);
    assert_eq!(result.findings.len(), 1, "{:?}", result.findings);
    // The global allowlist's regexes: a template placeholder is no secret.
    assert_eq!(
        found("ci.yml", b"api_key = \"${{ secrets.API_KEY }}\"\n"),
        []
    );
}

#[test]
fn the_in_file_gitleaks_allow_comment_is_not_honoured() {
    let text = format!("token = {} # gitleaks:allow\n", github_token(6));
    assert_eq!(found("a.py", text.as_bytes()), pairs(&[("github-pat", 1)]));
}

#[test]
fn a_rule_on_paths_finds_a_key_store_whatever_its_content() {
    let result = scan(
        Rules::shipped(),
        "certs/client.p12",
        &[0x30, 0x82, 0, 1],
        &Limits::default(),
    );
    assert_eq!(result.skipped, Some(Skipped::Binary));
    let f = &result.findings[0];
    assert_eq!((f.rule.as_str(), f.line), ("pkcs12-file", 0));
    assert_eq!(
        f.to_string(),
        format!(
            "pkcs12-file in certs/client.p12 (fingerprint {})",
            f.fingerprint
        )
    );
}

#[test]
fn the_fingerprint_names_the_secret_not_where_it_is() {
    let token = github_token(7);
    let one = scan(
        Rules::shipped(),
        "a.py",
        format!("t = {token}\n").as_bytes(),
        &Limits::default(),
    );
    let other = format!("\n\n\n  value: {token}\n");
    let two = scan(
        Rules::shipped(),
        "b/c.yml",
        other.as_bytes(),
        &Limits::default(),
    );
    let (one, two) = (&one.findings[0], &two.findings[0]);
    assert_eq!((one.line, two.line), (1, 4));
    assert_eq!(one.fingerprint, two.fingerprint);
    assert_eq!(
        one.fingerprint,
        Fingerprint::of("github-pat", token.as_bytes())
    );
    let third = scan(
        Rules::shipped(),
        "a.py",
        format!("t = {}\n", github_token(8)).as_bytes(),
        &Limits::default(),
    );
    assert_ne!(one.fingerprint, third.findings[0].fingerprint);
    let secret_part = &token[4..];
    for shown in [format!("{one:?}"), one.to_string(), format!("{:?}", third)] {
        assert!(!shown.contains(secret_part), "{shown}");
    }
}

#[test]
fn findings_stop_at_the_cap_and_say_there_are_more() {
    let text: String = (0..25)
        .map(|i| format!("t{i} = {}\n", github_token(100 + i)))
        .collect();
    let result = scan(
        Rules::shipped(),
        "a.txt",
        text.as_bytes(),
        &Limits::default(),
    );
    assert_eq!(result.findings.len(), 20);
    assert!(result.more);
    assert_eq!(result.findings[19].line, 20);
}

#[test]
fn the_budget_stops_the_scan_and_says_so() {
    let text = format!("{}token = {}\n", filler(10, 10), github_token(9));
    let bytes = Limits {
        max_bytes: 100,
        ..Limits::default()
    };
    let result = scan(Rules::shipped(), "a.txt", text.as_bytes(), &bytes);
    let size = text.len() as u64;
    assert_eq!(
        result.skipped,
        Some(Skipped::OverBytes { scanned: 100, size })
    );
    assert!(result.findings.is_empty());
    let time = Limits {
        max_time: Some(Duration::ZERO),
        ..Limits::default()
    };
    let result = scan(Rules::shipped(), "a.txt", text.as_bytes(), &time);
    assert_eq!(
        result.skipped,
        Some(Skipped::OutOfTime { scanned: 0, size })
    );
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        scan(Rules::shipped(), "x", &bytes, &Limits::default());
    }

    #[test]
    fn random_text_with_keywords_never_panics(
        pieces in proptest::collection::vec(
            prop_oneof![
                Just("key = ".to_owned()), Just("\n".to_owned()), Just("-----BEGIN ".to_owned()),
                Just("ghp_".to_owned()), Just("AKIA".to_owned()), Just("\"".to_owned()),
                "[A-Za-z0-9+/=_.-]{1,40}",
            ],
            0..200,
        ),
        path in "[a-z/._]{0,20}",
    ) {
        scan(Rules::shipped(), &path, pieces.concat().as_bytes(), &Limits::default());
    }
}
