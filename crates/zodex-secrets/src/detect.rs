//! One window's findings before they are named: which rules run, their matches, the secret in
//! each, the entropy and allowlist checks. Secrets stay ranges of the blob here; `scan.rs`
//! turns them into fingerprints.
//!
//! The steps follow gitleaks' `detectRule`: the match with its newlines trimmed; the secret
//! is `secretGroup`, or else the first capture group that matched something, or else the
//! whole match; a rule with `entropy` drops a secret whose Shannon entropy is not above it
//! (computed over bytes, which is gitleaks' figure for ASCII); the global allowlists, then the
//! rule's; last, a `generic` rule's finding is dropped where another rule found a secret
//! containing it on the same line. Gitleaks' in-file `gitleaks:allow` comment is not honoured:
//! the pushed content is what is checked, so it cannot vouch for itself (an operator allows a
//! finding by its fingerprint instead).

use std::ops::Range;

use regex::bytes::CaptureLocations;

use crate::allowlist::Subject;
use crate::rules::{Rule, Rules};
use crate::window::{Window, newlines};

/// A match that survived every check: its rule, where it starts, its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub rule: usize,
    pub at: usize,
    /// Lines from the window's start to `at`.
    pub line: usize,
    pub secret: Range<usize>,
}

/// The per-blob state of a scan: which rules apply to the path, where each rule's last match
/// ended (so a window resumes a rule where the previous one left it, and a match that runs
/// into the overlap is not found twice).
pub(crate) struct Detector<'r> {
    rules: &'r Rules,
    path: &'r str,
    applies: Vec<bool>,
    active: Vec<bool>,
    resume: Vec<usize>,
}

impl<'r> Detector<'r> {
    pub(crate) fn new(rules: &'r Rules, path: &'r str) -> Detector<'r> {
        let applies = rules
            .rules
            .iter()
            .map(|r| {
                r.regex.is_some()
                    && r.path.as_ref().is_none_or(|p| p.is_match(path.as_bytes()))
                    && !r.allowlists.iter().any(|a| a.allows_path(path))
            })
            .collect();
        let n = rules.rules.len();
        Detector {
            rules,
            path,
            applies,
            active: vec![false; n],
            resume: vec![0; n],
        }
    }

    /// Appends the window's candidates to `out`, in the order they start.
    pub(crate) fn window(&mut self, bytes: &[u8], w: Window, out: &mut Vec<Candidate>) {
        let first = out.len();
        let hay = &bytes[..w.end];
        self.rules
            .prefilter
            .activate(&hay[w.start..], &mut self.active);
        for (i, rule) in self.rules.rules.iter().enumerate() {
            let Some(regex) = rule
                .regex
                .as_ref()
                .filter(|_| self.active[i] && self.applies[i])
            else {
                continue;
            };
            let mut locs = regex.capture_locations();
            let mut pos = w.start.max(self.resume[i]);
            while pos < w.owned_end {
                let Some(from) = lead_from(rule, hay, pos, w) else {
                    break;
                };
                let Some(m) = regex.captures_read_at(&mut locs, hay, from) else {
                    break;
                };
                if m.start() >= w.owned_end {
                    break;
                }
                pos = if m.is_empty() { m.end() + 1 } else { m.end() };
                self.resume[i] = m.end();
                if let Some(c) = self.check(i, rule, hay, w, m.range(), &locs) {
                    out.push(c);
                }
            }
        }
        let found = &mut out[first..];
        found.sort_by_key(|c| (c.at, c.rule));
        let mut at = w.start;
        let mut line = 0;
        for c in found.iter_mut() {
            line += newlines(&hay[at..c.at]);
            at = c.at;
            c.line = line;
        }
        let kept = drop_generic_duplicates(self.rules, hay, &out[first..]);
        out.truncate(first);
        out.extend(kept);
    }

    /// The candidate a match makes, or `None` when a check drops it.
    fn check(
        &self,
        i: usize,
        rule: &Rule,
        hay: &[u8],
        w: Window,
        whole: Range<usize>,
        locs: &CaptureLocations,
    ) -> Option<Candidate> {
        let matched = trim_newlines(hay, whole);
        let secret = if locs.len() < 2 {
            matched.clone()
        } else if let Some(group) = rule.secret_group {
            locs.get(group)
                .map_or(matched.start..matched.start, |(s, e)| s..e)
        } else {
            (1..locs.len())
                .filter_map(|g| locs.get(g))
                .find(|(s, e)| e > s)
                .map_or(matched.clone(), |(s, e)| s..e)
        };
        if let Some(threshold) = rule.entropy
            && entropy(&hay[secret.clone()]) <= threshold
        {
            return None;
        }
        let line_start = hay[w.start..matched.start]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(w.start, |at| w.start + at + 1);
        let line_end = hay[matched.end..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(hay.len(), |at| matched.end + at);
        let subject = Subject {
            path: self.path,
            secret: &hay[secret.clone()],
            matched: &hay[matched.clone()],
            line: &hay[line_start..line_end.max(matched.end)],
        };
        let allowed = self.rules.global.iter().chain(&rule.allowlists);
        if allowed.into_iter().any(|a| a.allows_finding(&subject)) {
            return None;
        }
        Some(Candidate {
            rule: i,
            at: matched.start,
            line: 0,
            secret,
        })
    }
}

/// Where to look for a rule's next match at or after `pos`, or `None` when there is none in
/// the window. Most rules: `pos`. A rule with a [`Lead`](crate::rules::Lead) (`[\\w.-]{0,N}?`
/// then the rest): the rest is found first, with its own literal prefilter, and the match starts
/// at most `N` bytes before it, so the full regex reads only from there. The match found is
/// the same (see `pattern::lead`); the work is not: the template's lazy prefix defeats the
/// `regex` crate's prefilters and made the generic rule cost as much as all others together.
fn lead_from(rule: &Rule, hay: &[u8], pos: usize, w: Window) -> Option<usize> {
    let Some(lead) = &rule.lead else {
        return Some(pos);
    };
    let rest = lead.rest.find_at(hay, pos)?;
    let from = pos.max(rest.start().saturating_sub(lead.reach));
    (from < w.owned_end).then_some(from)
}

/// The match without the newlines at its ends, as gitleaks reports it.
fn trim_newlines(hay: &[u8], mut r: Range<usize>) -> Range<usize> {
    while r.start < r.end && hay[r.start] == b'\n' {
        r.start += 1;
    }
    while r.end > r.start && hay[r.end - 1] == b'\n' {
        r.end -= 1;
    }
    r
}

/// Shannon entropy of `bytes`, in bits per byte.
pub(crate) fn entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let n = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Gitleaks' `filter`: a generic rule's finding goes where a specific rule found, on the same
/// line, a secret that contains it.
fn drop_generic_duplicates(rules: &Rules, hay: &[u8], found: &[Candidate]) -> Vec<Candidate> {
    let rule = |c: &Candidate| &rules.rules[c.rule];
    let contains = |outer: &[u8], inner: &[u8]| {
        inner.is_empty() || outer.windows(inner.len()).any(|w| w == inner)
    };
    found
        .iter()
        .filter(|c| {
            !rule(c).generic
                || !found.iter().any(|other| {
                    other.line == c.line
                        && other.rule != c.rule
                        && !rule(other).generic
                        && contains(&hay[other.secret.clone()], &hay[c.secret.clone()])
                })
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_is_shannons() {
        assert_eq!(entropy(b""), 0.0);
        assert_eq!(entropy(b"aaaa"), 0.0);
        assert!((entropy(b"abcd") - 2.0).abs() < 1e-9);
        assert!((entropy(b"aabb") - 1.0).abs() < 1e-9);
    }

    /// Every match of a led rule, found the led way (`lead_from`) and the plain way.
    fn led_and_plain(rule: &Rule, hay: &[u8]) -> (Vec<Range<usize>>, Vec<Range<usize>>) {
        let regex = rule.regex.as_ref().unwrap();
        let plain = regex.find_iter(hay).map(|m| m.range()).collect();
        let w = Window {
            start: 0,
            owned_end: hay.len(),
            end: hay.len(),
        };
        let (mut led, mut pos) = (Vec::new(), 0);
        while pos < hay.len() {
            let Some(m) = lead_from(rule, hay, pos, w).and_then(|from| regex.find_at(hay, from))
            else {
                break;
            };
            pos = if m.is_empty() { m.end() + 1 } else { m.end() };
            led.push(m.range());
        }
        (led, plain)
    }

    proptest::proptest! {
        #[test]
        fn a_led_rule_finds_what_its_plain_regex_finds(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("api_key = "), proptest::strategy::Just("adafruit_token: \""),
                    proptest::strategy::Just("my.secret.name="), proptest::strategy::Just("\n"),
                    proptest::strategy::Just("okta "), proptest::strategy::Just("\" "),
                    proptest::strategy::Just("9fQ2xZ7LmA0pR4tY8wK3vB6nC1dE5gH0jIkL"),
                    proptest::strategy::Just("abc"), proptest::strategy::Just("--TOKEN=="),
                ],
                0..60,
            ),
        ) {
            let hay = pieces.concat();
            let rules = Rules::shipped();
            for rule in rules.rules.iter().filter(|r| r.lead.is_some()) {
                let (led, plain) = led_and_plain(rule, hay.as_bytes());
                proptest::prop_assert_eq!(led, plain, "{}", rule.id);
            }
        }
    }

    #[test]
    fn the_name_led_template_rules_have_a_lead() {
        let rules = Rules::shipped();
        let led = rules.rules.iter().filter(|r| r.lead.is_some()).count();
        assert!(led > 90, "{led}");
        let generic = rules
            .rules
            .iter()
            .find(|r| r.id == "generic-api-key")
            .unwrap();
        let hay = b"x = 1\nthe.api_key = \"9fQ2xZ7LmA0pR4tY8wK3vB6nC1dE5gH0jIkL\"\n";
        let (led, plain) = led_and_plain(generic, hay);
        assert_eq!((led.len(), &led), (1, &plain));
    }

    #[test]
    fn newlines_are_trimmed_from_a_match() {
        assert_eq!(trim_newlines(b"\nab\n\n", 0..5), 1..3);
        assert_eq!(trim_newlines(b"\n\n", 0..2), 2..2);
    }
}
