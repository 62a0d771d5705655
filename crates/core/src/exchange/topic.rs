//! Topic matching: a trie over `.`-separated words with `*` (exactly one word) and `#` (zero
//! or more words).
//!
//! Words: an empty routing or binding key has zero words; otherwise the key splits on every
//! `.`, so `a..b` has an empty middle word and `a.` ends with one. Hence `#` matches the empty
//! key while `*` does not.
//!
//! Patterns are normalised on insert: runs of wildcards become their `*`s followed by at most
//! one `#` (`#.#` → `#`, `#.*` → `*.#`). That keeps matching from revisiting the same suffixes
//! through adjacent `#`s.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use super::Destination;

/// Binding keys longer than this (in words) are refused: matching and trie edits recurse once
/// per pattern word, and real protocols cap keys at 255 bytes anyway.
pub(crate) const MAX_PATTERN_WORDS: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word<'a> {
    Lit(&'a [u8]),
    Star,
    Hash,
}

fn normalize(key: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    if key.is_empty() {
        return out;
    }
    let (mut stars, mut hash) = (0usize, false);
    let flush = |out: &mut Vec<Word<'_>>, stars: &mut usize, hash: &mut bool| {
        out.extend(std::iter::repeat(Word::Star).take(*stars));
        if *hash {
            out.push(Word::Hash);
        }
        *stars = 0;
        *hash = false;
    };
    for w in key.split('.') {
        match w {
            "*" => stars += 1,
            "#" => hash = true,
            lit => {
                flush(&mut out, &mut stars, &mut hash);
                out.push(Word::Lit(lit.as_bytes()));
            }
        }
    }
    flush(&mut out, &mut stars, &mut hash);
    out
}

/// Splits off the first word of what remains of a routing key. `None` means no words remain.
fn next_word(rest: Option<&[u8]>) -> Option<(&[u8], Option<&[u8]>)> {
    let s = rest?;
    Some(match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    })
}

#[derive(Debug)]
struct Node<T> {
    words: HashMap<Box<[u8]>, Node<T>>,
    star: Option<Box<Node<T>>>,
    hash: Option<Box<Node<T>>>,
    /// Destinations whose pattern ends here; may repeat when two keys normalise alike.
    queues: Vec<T>,
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Node {
            words: HashMap::new(),
            star: None,
            hash: None,
            queues: Vec::new(),
        }
    }
}

impl<T: Destination> Node<T> {
    fn is_empty(&self) -> bool {
        self.queues.is_empty()
            && self.words.is_empty()
            && self.star.is_none()
            && self.hash.is_none()
    }

    fn insert(&mut self, pattern: &[Word<'_>], queue: T) {
        match pattern.split_first() {
            None => self.queues.push(queue),
            Some((Word::Lit(w), rest)) => self
                .words
                .entry((*w).into())
                .or_default()
                .insert(rest, queue),
            Some((Word::Star, rest)) => self
                .star
                .get_or_insert_with(Box::default)
                .insert(rest, queue),
            Some((Word::Hash, rest)) => self
                .hash
                .get_or_insert_with(Box::default)
                .insert(rest, queue),
        }
    }

    /// Removes one occurrence; prunes nodes left empty.
    fn remove(&mut self, pattern: &[Word<'_>], queue_id: u64) -> bool {
        match pattern.split_first() {
            None => match self.queues.iter().position(|q| q.dest_id() == queue_id) {
                Some(i) => {
                    self.queues.swap_remove(i);
                    true
                }
                None => false,
            },
            Some((Word::Lit(w), rest)) => {
                let Some(child) = self.words.get_mut(*w) else {
                    return false;
                };
                let removed = child.remove(rest, queue_id);
                if child.is_empty() {
                    self.words.remove(*w);
                }
                removed
            }
            Some((Word::Star, rest)) => Self::remove_boxed(&mut self.star, rest, queue_id),
            Some((Word::Hash, rest)) => Self::remove_boxed(&mut self.hash, rest, queue_id),
        }
    }

    fn remove_boxed(slot: &mut Option<Box<Node<T>>>, rest: &[Word<'_>], queue_id: u64) -> bool {
        let Some(child) = slot else {
            return false;
        };
        let removed = child.remove(rest, queue_id);
        if child.is_empty() {
            *slot = None;
        }
        removed
    }

    fn route(&self, rest: Option<&[u8]>, walk: &mut Walk<'_, T>) {
        if let Some(hash) = &self.hash {
            // `#` consumes zero or more words: try every remaining suffix, once per (node,
            // suffix). Without that memo, patterns with several `#`s make matching exponential
            // in the number of words, which any client able to bind could exploit.
            let mut r = rest;
            loop {
                if walk.first_visit(hash, r) {
                    hash.route(r, walk);
                }
                match next_word(r) {
                    Some((_, tail)) => r = tail,
                    None => break,
                }
            }
        }
        match next_word(rest) {
            None => walk.out.extend(self.queues.iter().cloned()),
            Some((word, tail)) => {
                if let Some(child) = self.words.get(word) {
                    child.route(tail, walk);
                }
                if let Some(star) = &self.star {
                    star.route(tail, walk);
                }
            }
        }
    }
}

/// One routing walk: the output, plus which `#` nodes were already tried at which suffix.
struct Walk<'a, T> {
    out: &'a mut Vec<T>,
    key_len: usize,
    seen: &'a mut HashSet<(usize, usize)>,
}

impl<T> Walk<'_, T> {
    fn first_visit(&mut self, node: &Node<T>, rest: Option<&[u8]>) -> bool {
        // Suffixes of one key are identified by their length; "no words left" by key_len + 1.
        let suffix = rest.map_or(self.key_len + 1, <[u8]>::len);
        self.seen.insert((node as *const Node<T> as usize, suffix))
    }
}

thread_local! {
    /// Reused across routes so the memo does not allocate per message.
    static SEEN: Cell<HashSet<(usize, usize)>> = Cell::new(HashSet::new());
}

#[derive(Debug)]
pub(crate) struct TopicTrie<T> {
    root: Node<T>,
}

impl<T> Default for TopicTrie<T> {
    fn default() -> Self {
        TopicTrie {
            root: Node::default(),
        }
    }
}

impl<T: Destination> TopicTrie<T> {
    pub(crate) fn insert(&mut self, key: &str, queue: T) {
        self.root.insert(&normalize(key), queue);
    }

    pub(crate) fn remove(&mut self, key: &str, queue_id: u64) -> bool {
        self.root.remove(&normalize(key), queue_id)
    }

    /// Appends matching destinations; may append one more than once (the caller dedups).
    pub(crate) fn route(&self, routing_key: &[u8], out: &mut Vec<T>) {
        let rest = if routing_key.is_empty() {
            None
        } else {
            Some(routing_key)
        };
        let mut seen = SEEN.with(Cell::take);
        seen.clear();
        let mut walk = Walk {
            out,
            key_len: routing_key.len(),
            seen: &mut seen,
        };
        self.root.route(rest, &mut walk);
        SEEN.with(|c| c.set(seen));
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.root.is_empty()
    }
}

/// Whether binding key `pattern` routes `routing_key`, as the trie would: one binding checked
/// on its own (a selective queue's, see `selective`). Steps through the key once, keeping
/// which pattern positions the words so far can reach, so `#`s cost no backtracking.
pub(crate) fn pattern_matches(pattern: &str, routing_key: &[u8]) -> bool {
    let pattern = normalize(pattern);
    let mut reach = vec![false; pattern.len() + 1];
    let mut next = reach.clone();
    reach[0] = true;
    past_hashes(&pattern, &mut reach);
    let mut rest = (!routing_key.is_empty()).then_some(routing_key);
    while let Some((word, tail)) = next_word(rest) {
        next.fill(false);
        for (i, w) in pattern.iter().enumerate().filter(|&(i, _)| reach[i]) {
            match w {
                Word::Lit(lit) if *lit == word => next[i + 1] = true,
                Word::Lit(_) => {}
                Word::Star => next[i + 1] = true,
                Word::Hash => next[i] = true,
            }
        }
        past_hashes(&pattern, &mut next);
        std::mem::swap(&mut reach, &mut next);
        if !reach.contains(&true) {
            return false;
        }
        rest = tail;
    }
    reach[pattern.len()]
}

/// A `#` also matches no words: whatever reaches it reaches the position after it.
fn past_hashes(pattern: &[Word<'_>], reach: &mut [bool]) {
    for (i, w) in pattern.iter().enumerate() {
        if reach[i] && *w == Word::Hash {
            reach[i + 1] = true;
        }
    }
}

pub(crate) fn pattern_words(key: &str) -> usize {
    if key.is_empty() {
        0
    } else {
        key.split('.').count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_collapses_wildcard_runs() {
        use Word::*;
        assert_eq!(normalize("#.#"), vec![Hash]);
        assert_eq!(normalize("#.*.#.*"), vec![Star, Star, Hash]);
        assert_eq!(normalize("a.#.*.b"), vec![Lit(b"a"), Star, Hash, Lit(b"b")]);
        assert_eq!(normalize(""), Vec::<Word<'_>>::new());
        assert_eq!(normalize("a..b"), vec![Lit(b"a"), Lit(b""), Lit(b"b")]);
    }

    fn test_queue() -> std::sync::Arc<crate::queue::Queue> {
        crate::queue::Queue::new(
            "q".into(),
            &crate::queue::QueueOptions::default(),
            None,
            crate::limits::QueueLimits::default(),
        )
    }

    #[test]
    fn many_hashes_match_in_polynomial_time() {
        // Without the memo this pattern against a 120-word key takes C(120, 20) steps.
        let q = test_queue();
        let mut trie = TopicTrie::default();
        let pattern = vec!["#.a"; 20].join(".") + ".b";
        trie.insert(&pattern, q);
        let key = vec!["a"; 120].join(".");
        let mut out = Vec::new();
        trie.route(key.as_bytes(), &mut out);
        assert!(out.is_empty());
        trie.route((key + ".b").as_bytes(), &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn one_pattern_matches_exactly_what_the_trie_routes_for_it() {
        let q = test_queue();
        // Every pattern and key of up to three words over these, empty words included.
        let words = ["a", "b", "", "*", "#"];
        let mut sequences: Vec<Vec<&str>> = vec![vec![]];
        for len in 1..=3 {
            let longer: Vec<Vec<&str>> = sequences
                .iter()
                .filter(|s| s.len() == len - 1)
                .flat_map(|s| words.iter().map(move |w| [s.as_slice(), &[*w]].concat()))
                .collect();
            sequences.extend(longer);
        }
        let mut all: Vec<String> = sequences.iter().map(|s| s.join(".")).collect();
        all.sort();
        all.dedup();
        let keys: Vec<&String> = all.iter().filter(|k| !k.contains(['*', '#'])).collect();
        let mut checked = 0;
        for pattern in &all {
            let mut trie = TopicTrie::default();
            trie.insert(pattern, q.clone());
            for key in &keys {
                let mut out = Vec::new();
                trie.route(key.as_bytes(), &mut out);
                assert_eq!(
                    pattern_matches(pattern, key.as_bytes()),
                    !out.is_empty(),
                    "pattern {pattern:?}, key {key:?}"
                );
                checked += 1;
            }
        }
        assert!(checked > 5_000, "{checked}");
        assert!(pattern_matches("#.a.#", b"x.a.y"));
        assert!(!pattern_matches("*.a", b"a"));
    }

    #[test]
    fn word_splitting_keeps_empty_words() {
        let mut words = Vec::new();
        let mut r = Some(&b"a..b."[..]);
        while let Some((w, tail)) = next_word(r) {
            words.push(w);
            r = tail;
        }
        assert_eq!(words, vec![&b"a"[..], b"", b"b", b""]);
    }
}
