//! The rules' `keywords` prefilter: which rules run on a window.
//!
//! As in gitleaks, a rule with keywords runs only where one of them occurs, case-insensitively
//! (the keywords are lowercased and matched ASCII-case-insensitively, so nothing is copied to
//! lowercase it); a rule without keywords runs everywhere. One Aho-Corasick automaton holds
//! every rule's keywords, so a window is read once whatever the number of rules. Occurrences are
//! found overlapping (`key` inside `-----begin private key` still counts for both rules).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, BuildError, MatchKind};

#[derive(Debug)]
pub(crate) struct Prefilter {
    automaton: AhoCorasick,
    /// For each keyword (the automaton's pattern ids), the rules that name it.
    rules_of: Vec<Vec<usize>>,
    /// Rules with no keyword: they run on every window.
    unkeyed: Vec<usize>,
    /// How many rules have keywords: once all are active the search can stop.
    keyed: usize,
}

impl Prefilter {
    /// Builds the prefilter over the rules' keyword lists, in rule order.
    pub(crate) fn new<'a>(
        keywords: impl Iterator<Item = &'a [String]>,
    ) -> Result<Prefilter, BuildError> {
        let mut words: Vec<String> = Vec::new();
        let mut rules_of: Vec<Vec<usize>> = Vec::new();
        let (mut unkeyed, mut keyed) = (Vec::new(), 0);
        for (rule, list) in keywords.enumerate() {
            if list.is_empty() {
                unkeyed.push(rule);
                continue;
            }
            keyed += 1;
            for word in list {
                let word = word.to_lowercase();
                match words.iter().position(|w| *w == word) {
                    Some(at) => rules_of[at].push(rule),
                    None => {
                        words.push(word);
                        rules_of.push(vec![rule]);
                    }
                }
            }
        }
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            // A DFA: the fastest search, and a few hundred keywords keep it small.
            .kind(Some(AhoCorasickKind::DFA))
            .build(&words)?;
        Ok(Prefilter {
            automaton,
            rules_of,
            unkeyed,
            keyed,
        })
    }

    /// Marks in `active` (one flag per rule, cleared here) the rules to run on `window`.
    pub(crate) fn activate(&self, window: &[u8], active: &mut [bool]) {
        active.fill(false);
        for &rule in &self.unkeyed {
            active[rule] = true;
        }
        let mut seen = vec![false; self.rules_of.len()];
        let mut on = 0;
        for hit in self.automaton.find_overlapping_iter(window) {
            let word = hit.pattern().as_usize();
            if std::mem::replace(&mut seen[word], true) {
                continue;
            }
            for &rule in &self.rules_of[word] {
                if !std::mem::replace(&mut active[rule], true) {
                    on += 1;
                }
            }
            if on == self.keyed {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefilter(lists: &[&[&str]]) -> Prefilter {
        let owned: Vec<Vec<String>> = lists
            .iter()
            .map(|l| l.iter().map(|w| w.to_string()).collect())
            .collect();
        Prefilter::new(owned.iter().map(Vec::as_slice)).unwrap()
    }

    #[test]
    fn a_rule_runs_where_one_of_its_keywords_is_in_any_case() {
        let p = prefilter(&[&["ghp_"], &["akia", "asia"], &[]]);
        let mut active = vec![false; 3];
        p.activate(b"x = 'AKIA...'", &mut active);
        assert_eq!(active, [false, true, true]);
        p.activate(b"token: ghp_...", &mut active);
        assert_eq!(active, [true, false, true]);
    }

    #[test]
    fn overlapping_keywords_each_count() {
        let p = prefilter(&[&["-----begin"], &["begin private"]]);
        let mut active = vec![false; 2];
        p.activate(b"-----BEGIN PRIVATE KEY-----", &mut active);
        assert_eq!(active, [true, true]);
    }
}
