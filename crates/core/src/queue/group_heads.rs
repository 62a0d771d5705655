//! The next message of each message group. A group's messages go in order, so only its
//! first queued message, its head, may be delivered or got. Dispatch and gets on a group
//! queue look at the heads, in queue order, instead of walking every message: a group
//! whose owner is busy may hold any number of messages without slowing the others down.
//!
//! Messages leave a queue by many paths (expiry, limits, browse-then-acquire, purges).
//! Only the walks that take a head tell this index; any other departure is noticed when
//! the departed position comes up as a head and is found gone from the queue (positions are
//! never reused, so a listed position is either still queued or gone for good, unless
//! released back into its place, which [`GroupHeads::put_back`] records). So that a queue
//! nobody walks (no consumers, messages expiring or dropped by its limits) does not list
//! its history, the lists are compacted once they list more than twice what is queued.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// One group's listed positions, with its name (the key, shared with its head's entry).
#[derive(Debug)]
struct Listed {
    name: Arc<[u8]>,
    positions: VecDeque<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct GroupHeads {
    /// Each group's queued positions, ascending. May list positions that have left the
    /// queue (see the module's notes). A group with none stays, so that a group whose
    /// messages are taken as they come is not made and dropped per message; compaction
    /// drops such groups once they outnumber what is queued.
    members: HashMap<Arc<[u8]>, Listed, foldhash::fast::RandomState>,
    /// The first listed position of every group, and its group.
    heads: BTreeMap<u64, Arc<[u8]>>,
    /// Positions listed in all.
    listed: usize,
}

impl GroupHeads {
    /// A new message of `group` at `position`, after every position listed.
    pub(crate) fn push(&mut self, position: u64, group: &[u8]) {
        self.listed += 1;
        match self.members.get_mut(group) {
            Some(listed) => {
                if listed.positions.is_empty() {
                    self.heads.insert(position, listed.name.clone());
                }
                listed.positions.push_back(position);
            }
            None => {
                let name: Arc<[u8]> = Arc::from(group);
                self.heads.insert(position, name.clone());
                let listed = Listed {
                    name: name.clone(),
                    positions: VecDeque::from([position]),
                };
                self.members.insert(name, listed);
            }
        }
    }

    /// A message of `group` put back in its place (released): listed again unless it still
    /// was, and its group's head if it is now the first.
    pub(crate) fn put_back(&mut self, position: u64, group: &[u8]) {
        let Some(listed) = self.members.get_mut(group) else {
            self.push(position, group);
            return;
        };
        let list = &mut listed.positions;
        let Err(at) = list.binary_search(&position) else {
            return;
        };
        list.insert(at, position);
        self.listed += 1;
        if at == 0 {
            if let Some(&old) = list.get(1) {
                self.heads.remove(&old);
            }
            self.heads.insert(position, listed.name.clone());
        }
    }

    /// The shared name of `group`, if it is listed.
    pub(crate) fn name(&self, group: &[u8]) -> Option<Arc<[u8]>> {
        self.members.get(group).map(|listed| listed.name.clone())
    }

    /// The group of the head at `position`, if one is there.
    pub(crate) fn group_at(&self, position: u64) -> Option<&[u8]> {
        self.heads.get(&position).map(|name| &**name)
    }

    /// The first head after position `cursor`: it may have left the queue (then
    /// [`GroupHeads::advance`] past it).
    pub(crate) fn next_after(&self, cursor: u64) -> Option<u64> {
        self.heads
            .range((Bound::Excluded(cursor), Bound::Unbounded))
            .next()
            .map(|(position, _)| *position)
    }

    /// The head at `head` has left the queue: its group's next position still `queued`
    /// becomes the group's head.
    pub(crate) fn advance(&mut self, head: u64, queued: impl Fn(u64) -> bool) {
        let Some(group) = self.heads.remove(&head) else {
            return;
        };
        let Some(list) = self.members.get_mut(&group).map(|l| &mut l.positions) else {
            return;
        };
        while list.front().is_some_and(|&p| p == head || !queued(p)) {
            list.pop_front();
            self.listed -= 1;
        }
        shrink_if_sparse(list);
        if let Some(&next) = list.front() {
            self.heads.insert(next, group);
        }
    }

    /// Drops the positions no longer `queued`, and the groups left without any, once more
    /// than twice the `queue_len` (plus some slack) positions or groups are listed:
    /// amortised over the pushes that listed them.
    pub(crate) fn compact_if_stale(&mut self, queue_len: usize, queued: impl Fn(u64) -> bool) {
        let bound = 2 * queue_len + 64;
        if self.listed <= bound && self.members.len() <= bound {
            return;
        }
        self.heads.clear();
        self.members.retain(|_, listed| {
            listed.positions.retain(|&p| queued(p));
            shrink_if_sparse(&mut listed.positions);
            if let Some(&head) = listed.positions.front() {
                self.heads.insert(head, listed.name.clone());
            }
            !listed.positions.is_empty()
        });
        self.listed = self.members.values().map(|l| l.positions.len()).sum();
    }

    /// Each listed group's positions still `queued`, for management (groups with none are
    /// left out).
    pub(crate) fn counts(
        &self,
        queued: impl Fn(u64) -> bool,
    ) -> impl Iterator<Item = (&[u8], u64)> {
        self.members.values().filter_map(move |listed| {
            let n = listed.positions.iter().filter(|&&p| queued(p)).count() as u64;
            (n > 0).then_some((&*listed.name, n))
        })
    }

    /// The queue was emptied.
    pub(crate) fn clear(&mut self) {
        self.members.clear();
        self.heads.clear();
        self.listed = 0;
    }

    #[cfg(test)]
    pub(crate) fn listed(&self) -> usize {
        self.listed
    }
}

/// A group that held many messages and holds few gives the room back (halving, so the
/// cost is amortised over the pops that emptied it).
fn shrink_if_sparse(list: &mut VecDeque<u64>) {
    if list.capacity() > 64 && list.len() * 4 < list.capacity() {
        list.shrink_to(list.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(h: &GroupHeads) -> Vec<u64> {
        let mut out = Vec::new();
        let mut cursor = 0;
        while let Some(p) = h.next_after(cursor) {
            out.push(p);
            cursor = p;
        }
        out
    }

    #[test]
    fn only_each_groups_first_message_is_a_head() {
        let mut h = GroupHeads::default();
        for (p, g) in [(1, "A"), (2, "A"), (3, "B"), (4, "A"), (5, "B"), (6, "C")] {
            h.push(p, g.as_bytes());
        }
        assert_eq!(heads(&h), [1, 3, 6]);
        // A's head left: its next message is A's head.
        h.advance(1, |p| p != 1);
        assert_eq!(heads(&h), [2, 3, 6]);
        // Released back into its place: A's head again.
        h.put_back(1, b"A");
        assert_eq!(heads(&h), [1, 3, 6]);
        h.put_back(1, b"A");
        assert_eq!(h.listed, 6, "listed once");
    }

    #[test]
    fn a_queue_nobody_walks_lists_what_it_holds_not_its_history() {
        let mut h = GroupHeads::default();
        // Each message leaves (dropped by a limit, say) once the next comes: one queued.
        for p in 1..=10_000u64 {
            h.push(p, if p % 2 == 0 { b"A" } else { b"B" });
            h.compact_if_stale(1, |q| q == p);
            assert!(h.listed <= 2 + 64 + 1, "{} listed at {p}", h.listed);
        }
        // Stale heads may stay listed (within the bound) until a walk passes them.
        let mut cursor = 0;
        while let Some(p) = h.next_after(cursor) {
            if p == 10_000 {
                cursor = p;
            } else {
                h.advance(p, |q| q == 10_000);
            }
        }
        assert_eq!((heads(&h), h.listed), (vec![10_000], 1));
    }

    #[test]
    fn positions_that_left_by_other_paths_are_skipped_when_they_come_up() {
        let mut h = GroupHeads::default();
        for p in 1..=5 {
            h.push(p, b"A");
        }
        let queued = |p: u64| p == 4 || p == 5;
        h.advance(1, queued);
        assert_eq!(heads(&h), [4], "2 and 3 went meanwhile");
        h.advance(4, |p| p == 5);
        h.advance(5, |_| false);
        assert_eq!((heads(&h), h.listed), (vec![], 0));
        // Back after its group emptied, and after it was forgotten.
        h.put_back(3, b"A");
        assert_eq!(heads(&h), [3]);
        h.advance(3, |_| false);
        h.compact_if_stale(0, |_| false);
        assert_eq!(h.members.len(), 1, "kept under the bound");
        for (i, g) in (0..64).map(|i| format!("g{i}")).enumerate() {
            h.push(10 + i as u64, g.as_bytes());
            h.advance(10 + i as u64, |_| false);
        }
        h.compact_if_stale(0, |_| false);
        assert!(h.members.is_empty(), "groups left empty are forgotten");
        h.put_back(3, b"A");
        assert_eq!(heads(&h), [3]);
    }

    #[test]
    fn a_deep_group_gives_its_room_back_as_it_drains() {
        let mut h = GroupHeads::default();
        for p in 1..=100_000 {
            h.push(p, b"A");
        }
        for p in 1..=99_990 {
            h.advance(p, |q| q > p);
        }
        let list = &h.members[&b"A"[..]].positions;
        assert_eq!(list.len(), 10);
        assert!(list.capacity() <= 64, "{}", list.capacity());
    }

    #[test]
    fn a_release_behind_the_head_keeps_the_head() {
        let mut h = GroupHeads::default();
        h.push(1, b"A");
        h.push(3, b"A");
        h.put_back(2, b"A");
        assert_eq!(heads(&h), [1]);
        h.advance(1, |_| true);
        assert_eq!(heads(&h), [2]);
    }
}
