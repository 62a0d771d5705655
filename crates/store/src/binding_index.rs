//! The live binding records under each key, queue-to-exchange and exchange-to-exchange
//! alike. Under one key there is one binding per set of arguments (the `*_VARIANT` record
//! types), or a single one that the older types replace wholesale.
//!
//! Each change returns the records it displaced, for the caller to unaccount.

use std::collections::HashMap;
use std::hash::Hash;

use ferry_core::Arguments;

use crate::index::Live;

#[derive(Debug)]
pub struct BindingRecords<K> {
    by_key: HashMap<K, Vec<(Arguments, Live)>>,
}

impl<K> Default for BindingRecords<K> {
    fn default() -> Self {
        BindingRecords {
            by_key: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq> BindingRecords<K> {
    /// `BIND` / `EXCHANGE_BIND`: this binding replaces every one under the key.
    pub fn replace(&mut self, k: K, args: &Arguments, at: Live) -> Vec<Live> {
        let old = self.by_key.insert(k, vec![(args.clone(), at)]);
        old.unwrap_or_default()
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    }

    /// A `*_VARIANT` bind: replaces only the binding with the same arguments, if any.
    pub fn add(&mut self, k: K, args: &Arguments, at: Live) -> Option<Live> {
        let under_key = self.by_key.entry(k).or_default();
        match under_key.iter_mut().find(|(a, _)| a.same_entries(args)) {
            Some(same) => Some(std::mem::replace(&mut same.1, at)),
            None => {
                under_key.push((args.clone(), at));
                None
            }
        }
    }

    /// `UNBIND` / `EXCHANGE_UNBIND`: every binding under the key.
    pub fn remove_all(&mut self, k: &K) -> Vec<Live> {
        let old = self.by_key.remove(k).unwrap_or_default();
        old.into_iter().map(|(_, l)| l).collect()
    }

    /// A `*_VARIANT` unbind: the one binding with these arguments.
    pub fn remove_one(&mut self, k: &K, args: &Arguments) -> Option<Live> {
        let under_key = self.by_key.get_mut(k)?;
        let i = under_key.iter().position(|(a, _)| a.same_entries(args))?;
        let (_, old) = under_key.remove(i);
        if under_key.is_empty() {
            self.by_key.remove(k);
        }
        Some(old)
    }

    /// Compaction copied the record at (`segment`, `seq`) to `to`: the copy takes its
    /// place, found by where it is (arguments need not find themselves: see
    /// `Arguments::same_entries`). Returns the record replaced.
    pub fn relocate(&mut self, k: &K, segment: u64, seq: u64, to: Live) -> Option<Live> {
        let (_, at) = self
            .by_key
            .get_mut(k)?
            .iter_mut()
            .find(|(_, at)| at.loc.segment == segment && at.seq == seq)?;
        Some(std::mem::replace(at, to))
    }

    /// Removes the bindings of every key for which `doomed` holds.
    pub fn remove_where(&mut self, doomed: impl Fn(&K) -> bool) -> Vec<Live> {
        let mut gone = Vec::new();
        self.by_key.retain(|k, under_key| {
            let keep = !doomed(k);
            if !keep {
                gone.extend(under_key.iter().map(|(_, l)| *l));
            }
            keep
        });
        gone
    }

    /// Whether a live binding under the key is at (`segment`, `seq`).
    pub fn is_at(&self, k: &K, segment: u64, seq: u64) -> bool {
        self.by_key.get(k).is_some_and(|under_key| {
            under_key
                .iter()
                .any(|(_, l)| l.loc.segment == segment && l.seq == seq)
        })
    }

    pub fn lives(&self) -> impl Iterator<Item = &Live> {
        self.by_key.values().flatten().map(|(_, at)| at)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}
