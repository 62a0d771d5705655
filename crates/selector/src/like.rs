//! LIKE patterns: `_` is any one character, `%` any run of characters (including none), and
//! the optional escape character makes the character after it literal.
//!
//! Matching walks the pattern and the value together and, on a mismatch, retries from the
//! most recent `%` one character further on. Only the latest `%` ever needs retrying (an
//! earlier one could only absorb text the later one can absorb as well), so the work is at
//! most pattern length × value length and nothing allocates, whatever a peer puts in the
//! pattern. That product can still be large (a long pattern against a long property, under
//! the queue's lock), so a match gets a budget of steps linear in both lengths; one that
//! needs more (only a pathological pattern does) is given up as unknown.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Elem {
    Char(char),
    One,
    Any,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LikePattern {
    elems: Vec<Elem>,
}

/// The pattern's last character is its escape character, so there is nothing to escape.
#[derive(Debug, PartialEq)]
pub(crate) struct DanglingEscape;

impl LikePattern {
    pub(crate) fn compile(pattern: &str, escape: Option<char>) -> Result<Self, DanglingEscape> {
        let mut elems = Vec::with_capacity(pattern.len());
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            let elem = if Some(c) == escape {
                // Any character may follow the escape (as ActiveMQ allows), not only `_`, `%`
                // and the escape itself.
                Elem::Char(chars.next().ok_or(DanglingEscape)?)
            } else {
                match c {
                    '_' => Elem::One,
                    '%' => Elem::Any,
                    c => Elem::Char(c),
                }
            };
            // `%%` means the same as `%` and would only add retry points.
            if !(elem == Elem::Any && elems.last() == Some(&Elem::Any)) {
                elems.push(elem);
            }
        }
        Ok(LikePattern { elems })
    }

    /// Whether the whole of `value` matches; `None` if that took more than [`budget`].
    pub(crate) fn matches(&self, value: &str) -> Option<bool> {
        self.matches_within(value, budget(self.elems.len(), value.len()))
    }

    fn matches_within(&self, value: &str, mut steps: usize) -> Option<bool> {
        let mut p = 0;
        let mut v = 0;
        // Where the latest `%` resumes in the pattern, and how much of the value it has
        // absorbed so far.
        let mut retry: Option<(usize, usize)> = None;
        loop {
            steps = steps.checked_sub(1)?;
            let next = next_char(value, v);
            match (self.elems.get(p), next) {
                (None, None) => return Some(true),
                (Some(Elem::Any), _) => {
                    p += 1;
                    retry = Some((p, v));
                    continue;
                }
                (Some(Elem::One), Some(c)) => {
                    p += 1;
                    v += c.len_utf8();
                    continue;
                }
                (Some(Elem::Char(want)), Some(c)) if *want == c => {
                    p += 1;
                    v += c.len_utf8();
                    continue;
                }
                _ => {}
            }
            let Some((resume, absorbed)) = retry else {
                return Some(false);
            };
            let Some(c) = next_char(value, absorbed) else {
                return Some(false);
            };
            let absorbed = absorbed + c.len_utf8();
            retry = Some((resume, absorbed));
            p = resume;
            v = absorbed;
        }
    }
}

/// Steps a match may take: enough for any pattern whose retries stay short (every real
/// one), linear in the pattern's and the value's lengths.
fn budget(pattern: usize, value: usize) -> usize {
    16usize
        .saturating_mul(pattern.saturating_add(value))
        .saturating_add(4096)
}

fn next_char(s: &str, at: usize) -> Option<char> {
    s.get(at..)?.chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(pattern: &str, value: &str) -> bool {
        LikePattern::compile(pattern, None)
            .expect("compiles")
            .matches(value)
            .expect("within the budget")
    }

    fn like_esc(pattern: &str, escape: char, value: &str) -> bool {
        LikePattern::compile(pattern, Some(escape))
            .expect("compiles")
            .matches(value)
            .expect("within the budget")
    }

    #[test]
    fn literal_patterns_match_whole_value() {
        assert!(like("abc", "abc"));
        assert!(!like("abc", "abcd"));
        assert!(!like("abc", "xabc"));
        assert!(!like("abc", "ab"));
        assert!(!like("abc", "ABC"));
        assert!(like("", ""));
        assert!(!like("", "a"));
    }

    #[test]
    fn underscore_is_one_character() {
        assert!(like("l_se", "lose"));
        assert!(like("l_se", "lase"));
        assert!(!like("l_se", "loose"));
        assert!(!like("l_se", "lse"));
        assert!(like("_", "é"));
        assert!(like("__", "日本"));
        assert!(!like("_", "日本"));
        assert!(!like("_", ""));
    }

    #[test]
    fn percent_is_any_run() {
        assert!(like("12%3", "123"));
        assert!(like("12%3", "12993"));
        assert!(!like("12%3", "1234"));
        assert!(!like("12%3", "12"));
        assert!(like("%", ""));
        assert!(like("%", "anything"));
        assert!(like("%%", "x"));
        assert!(like("a%", "a"));
        assert!(like("%a", "bba"));
        assert!(!like("%a", "ab"));
        assert!(like("%b%", "abc"));
        assert!(like("a%b%c", "aXbYc"));
        assert!(like("a%b%c", "abbbcbc"));
        assert!(!like("a%b%c", "acb"));
        assert!(like("%_%", "x"));
        assert!(!like("%_%", ""));
        assert!(like("%__", "ab"));
        assert!(!like("%__", "a"));
        assert!(like("%日%", "今日は"));
    }

    #[test]
    fn retries_from_latest_percent() {
        // The first try of the last `%` absorbs too little; the match needs a retry.
        assert!(like("%aab", "aaab"));
        assert!(like("%ab%ab", "xabyabab"));
        assert!(like("a%aa%aa", "aaaaa"));
        assert!(!like("a%aa%aa", "aaaa"));
        assert!(like("%a_c", "abcabc"));
        assert!(!like("%a_c", "abcab"));
    }

    #[test]
    fn escapes() {
        assert!(like_esc("\\_%", '\\', "_foo"));
        assert!(!like_esc("\\_%", '\\', "foo"));
        assert!(like_esc("100!%", '!', "100%"));
        assert!(!like_esc("100!%", '!', "1000"));
        assert!(like_esc("a!!b", '!', "a!b"));
        assert!(like_esc("!a", '!', "a"));
        // The escape character is only special where it is the escape.
        assert!(like("a!!b", "a!!b"));
        // An escaped `%` does not start retries.
        assert!(!like_esc("%x!%", '!', "x%y"));
        assert!(like_esc("%x!%", '!', "yx%"));
        // `%` can be the escape character, so `%%` is a literal percent.
        assert!(like_esc("a%%", '%', "a%"));
        assert!(!like_esc("a%%", '%', "abc"));
        assert_eq!(LikePattern::compile("abc!", Some('!')), Err(DanglingEscape));
        assert_eq!(LikePattern::compile("!!!", Some('!')), Err(DanglingEscape));
    }

    #[test]
    fn real_patterns_stay_within_the_budget() {
        // A backtracking matcher that retries every `%` takes C(n, k) steps on these; here
        // each is answered (`like` fails if the budget ran out).
        let many_a = "a".repeat(100_000);
        assert!(!like("%a%a%a%a%a%a%a%a%a%a%a%a%b", &many_a));
        assert!(!like("%a%b%c", &"ab".repeat(50_000)));
        assert!(like("%a%b%c", &format!("{}c", "ab".repeat(50_000))));
        assert!(like("%a%a%a%a%a%a%a%a%a%a%a%a", &many_a));
        assert!(!like(&"%a".repeat(500), &"a".repeat(499)));
        let text = format!("{}needle{}", "x".repeat(1 << 20), "y".repeat(1 << 20));
        assert!(like("%needle%", &text));
        assert!(like("%ne_dle%y", &text));
    }

    #[test]
    fn a_pathological_pattern_is_given_up_as_unknown() {
        // Every position retries the whole literal run: about 10^8 steps, over budget.
        let pattern = format!("%{}b", "a".repeat(1000));
        let compiled = LikePattern::compile(&pattern, None).expect("compiles");
        assert_eq!(compiled.matches(&"a".repeat(100_000)), None);
        // The same pattern against a value it fails fast on is answered.
        assert_eq!(compiled.matches("xyz"), Some(false));
    }
}
