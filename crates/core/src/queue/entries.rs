//! The available messages of a queue, in delivery order: one FIFO for an ordinary queue, or
//! one FIFO per priority level for a priority queue (`x-max-priority`, `qpid.priorities`).
//! Ordinary queues pay one well-predicted branch per operation for the choice.

use std::collections::vec_deque::{self, VecDeque};

use super::state::Entry;

/// How message priorities map onto a priority queue's levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PriorityLevels {
    levels: usize,
    /// Priorities up to this one share the lowest level.
    first: u8,
}

impl PriorityLevels {
    /// RabbitMQ's `x-max-priority`: one level per priority 0..=max; higher priorities count as
    /// `max`.
    pub(crate) fn up_to(max: u8) -> PriorityLevels {
        PriorityLevels {
            levels: usize::from(max) + 1,
            first: 0,
        }
    }

    /// qpidd's `qpid.priorities` (`x-qpid-priorities`): `n` levels spread over the 0-10
    /// priorities 0..=9 centred on the default 4, as the 0-10 spec's
    /// priority-level-implementation rule and qpidd do; more than ten levels add nothing.
    pub(crate) fn spread(n: u8) -> PriorityLevels {
        let n = n.clamp(1, 10);
        PriorityLevels {
            levels: usize::from(n),
            first: 5 - n.div_ceil(2),
        }
    }

    fn level(&self, priority: u8) -> usize {
        usize::from(priority.saturating_sub(self.first)).min(self.levels - 1)
    }

    pub(crate) fn levels(&self) -> usize {
        self.levels
    }
}

/// qpidd's fair share (`qpid.fairshare`): each level delivers at most its limit in a round,
/// highest level first, then yields to the levels below; a round ends when every level
/// with messages has had its share, so lower levels are not starved by a busy higher one.
#[derive(Debug)]
struct Fairshare {
    /// Per level; 0: no limit.
    limits: Vec<u32>,
    /// Delivered from each level this round.
    taken: Vec<u32>,
}

#[derive(Debug)]
pub(crate) enum Entries {
    Fifo(VecDeque<Entry>),
    Priority(Levels),
}

#[derive(Debug)]
pub(crate) struct Levels {
    map: PriorityLevels,
    /// Index = level; the highest non-empty level delivers first.
    fifos: Vec<VecDeque<Entry>>,
    len: usize,
    fairshare: Option<Fairshare>,
}

impl Levels {
    fn fifo_for(&mut self, e: &Entry) -> &mut VecDeque<Entry> {
        let level = self.map.level(e.priority());
        &mut self.fifos[level]
    }

    /// The level to deliver from next, and whether that starts a new fair-share round.
    #[inline]
    fn next_level(&self) -> Option<(usize, bool)> {
        let highest = self.fifos.iter().rposition(|f| !f.is_empty())?;
        let Some(share) = &self.fairshare else {
            return Some((highest, false));
        };
        let within = (0..=highest).rev().find(|&l| {
            let limit = share.limits.get(l).copied().unwrap_or(0);
            !self.fifos[l].is_empty()
                && (limit == 0 || share.taken.get(l).copied().unwrap_or(0) < limit)
        });
        Some(within.map_or((highest, true), |l| (l, false)))
    }

    fn top(&self) -> Option<&VecDeque<Entry>> {
        let (level, _) = self.next_level()?;
        self.fifos.get(level)
    }

    #[inline]
    fn pop(&mut self) -> Option<Entry> {
        let (level, new_round) = self.next_level()?;
        if let Some(share) = self.fairshare.as_mut() {
            if new_round {
                share.taken.iter_mut().for_each(|t| *t = 0);
            }
            if let Some(t) = share.taken.get_mut(level) {
                *t += 1;
            }
        }
        let e = self.fifos.get_mut(level)?.pop_front()?;
        self.len -= 1;
        Some(e)
    }
}

/// Puts an entry back in position order, ahead of anything newer.
fn insert_by_position(fifo: &mut VecDeque<Entry>, e: Entry) {
    let idx = fifo.partition_point(|x| x.position < e.position);
    fifo.insert(idx, e);
}

/// Where the entry at `position` is in a level (kept in position order).
fn index_of(fifo: &VecDeque<Entry>, position: u64) -> Option<usize> {
    fifo.binary_search_by_key(&position, |e| e.position).ok()
}

fn entry_mut(fifo: &mut VecDeque<Entry>, position: u64) -> Option<&mut Entry> {
    let i = index_of(fifo, position)?;
    fifo.get_mut(i)
}

fn remove_by_position(fifo: &mut VecDeque<Entry>, position: u64) -> Option<Entry> {
    let idx = index_of(fifo, position)?;
    fifo.remove(idx)
}

impl Entries {
    pub(crate) fn new(priorities: Option<PriorityLevels>) -> Entries {
        match priorities {
            None => Entries::Fifo(VecDeque::new()),
            Some(map) => Entries::Priority(Levels {
                map,
                fifos: (0..map.levels).map(|_| VecDeque::new()).collect(),
                len: 0,
                fairshare: None,
            }),
        }
    }

    /// A priority queue's fair-share limits, per level (0: none); nothing for a FIFO.
    pub(crate) fn with_fairshare(mut self, limits: Vec<u32>) -> Entries {
        if let Entries::Priority(p) = &mut self {
            p.fairshare = Some(Fairshare {
                taken: vec![0; limits.len()],
                limits,
            });
        }
        self
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Entries::Fifo(f) => f.len(),
            Entries::Priority(p) => p.len,
        }
    }

    /// The level a message of `priority` queues at (0 in an ordinary queue).
    pub(crate) fn level_of(&self, priority: u8) -> usize {
        match self {
            Entries::Fifo(_) => 0,
            Entries::Priority(p) => p.map.level(priority),
        }
    }

    /// The oldest entry of the lowest non-empty level up to `level`: (level, position).
    pub(crate) fn lowest_up_to(&self, level: usize) -> Option<(usize, u64)> {
        match self {
            Entries::Fifo(f) => f.front().map(|e| (0, e.position)),
            Entries::Priority(p) => p
                .fifos
                .iter()
                .take(level.saturating_add(1))
                .enumerate()
                .find_map(|(l, f)| f.front().map(|e| (l, e.position))),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A newly enqueued message: behind everything of its priority.
    pub(crate) fn push_back(&mut self, e: Entry) {
        match self {
            Entries::Fifo(f) => f.push_back(e),
            Entries::Priority(p) => {
                p.fifo_for(&e).push_back(e);
                p.len += 1;
            }
        }
    }

    /// The next message to deliver.
    pub(crate) fn front(&self) -> Option<&Entry> {
        match self {
            Entries::Fifo(f) => f.front(),
            Entries::Priority(p) => p.top()?.front(),
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Entry> {
        match self {
            Entries::Fifo(f) => f.pop_front(),
            Entries::Priority(p) => p.pop(),
        }
    }

    /// A released message goes back to its old place among those of its priority.
    pub(crate) fn insert_sorted(&mut self, e: Entry) {
        match self {
            Entries::Fifo(f) => insert_by_position(f, e),
            Entries::Priority(p) => {
                insert_by_position(p.fifo_for(&e), e);
                p.len += 1;
            }
        }
    }

    pub(crate) fn remove_position(&mut self, position: u64) -> Option<Entry> {
        match self {
            Entries::Fifo(f) => remove_by_position(f, position),
            Entries::Priority(p) => {
                let e = p
                    .fifos
                    .iter_mut()
                    .find_map(|f| remove_by_position(f, position))?;
                p.len -= 1;
                Some(e)
            }
        }
    }

    /// The entry at `position`, if queued (a binary search per level).
    pub(crate) fn get(&self, position: u64) -> Option<&Entry> {
        let at = |f: &VecDeque<Entry>| index_of(f, position);
        match self {
            Entries::Fifo(f) => f.get(at(f)?),
            Entries::Priority(p) => p.fifos.iter().find_map(|f| f.get(at(f)?)),
        }
    }

    /// [`Entries::get`], to change the entry in place (its position stays).
    pub(crate) fn get_mut(&mut self, position: u64) -> Option<&mut Entry> {
        match self {
            Entries::Fifo(f) => entry_mut(f, position),
            Entries::Priority(p) => p.fifos.iter_mut().find_map(|f| entry_mut(f, position)),
        }
    }

    /// Whether the entry at `position` is queued.
    pub(crate) fn contains(&self, position: u64) -> bool {
        self.get(position).is_some()
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        match self {
            Entries::Fifo(f) => f.retain(keep),
            Entries::Priority(p) => {
                for f in &mut p.fifos {
                    f.retain(&mut keep);
                }
                p.len = p.fifos.iter().map(VecDeque::len).sum();
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            Entries::Fifo(f) => f.clear(),
            Entries::Priority(p) => {
                p.fifos.iter_mut().for_each(VecDeque::clear);
                p.len = 0;
            }
        }
    }

    /// Empties the queue, in delivery order.
    pub(crate) fn drain(&mut self) -> Vec<Entry> {
        match self {
            Entries::Fifo(f) => f.drain(..).collect(),
            Entries::Priority(p) => {
                p.len = 0;
                p.fifos.iter_mut().rev().flat_map(|f| f.drain(..)).collect()
            }
        }
    }

    /// Every entry, in delivery order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        let (fifo, levels) = match self {
            Entries::Fifo(f) => (Some(f.iter()), None),
            Entries::Priority(p) => (None, Some(p.fifos.iter().rev().flatten())),
        };
        fifo.into_iter()
            .flatten()
            .chain(levels.into_iter().flatten())
    }

    /// Every entry, in delivery order, to change in place.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        let (fifo, levels) = match self {
            Entries::Fifo(f) => (Some(f.iter_mut()), None),
            Entries::Priority(p) => (None, Some(p.fifos.iter_mut().rev().flatten())),
        };
        fifo.into_iter()
            .flatten()
            .chain(levels.into_iter().flatten())
    }

    /// Entries after position `cursor`, in position (arrival) order: what a browser has not
    /// seen yet. Priority queues are browsed in arrival order too, as qpidd does.
    pub(crate) fn after(&self, cursor: u64) -> After<'_> {
        match self {
            Entries::Fifo(f) => {
                let start = f.partition_point(|e| e.position <= cursor);
                After::Fifo(f.range(start..))
            }
            Entries::Priority(p) => After::Merge {
                next: p
                    .fifos
                    .iter()
                    .map(|f| f.partition_point(|e| e.position <= cursor))
                    .collect(),
                fifos: &p.fifos,
            },
        }
    }
}

/// See [`Entries::after`].
pub(crate) enum After<'a> {
    Fifo(vec_deque::Iter<'a, Entry>),
    /// A merge of the levels by position; `next[i]` indexes level `i`'s next entry.
    Merge {
        fifos: &'a [VecDeque<Entry>],
        next: Vec<usize>,
    },
}

impl<'a> Iterator for After<'a> {
    type Item = &'a Entry;

    fn next(&mut self) -> Option<&'a Entry> {
        match self {
            After::Fifo(it) => it.next(),
            After::Merge { fifos, next } => {
                let (level, e) = fifos
                    .iter()
                    .zip(next.iter())
                    .enumerate()
                    .filter_map(|(level, (f, &i))| f.get(i).map(|e| (level, e)))
                    .min_by_key(|(_, e)| e.position)?;
                next[level] += 1;
                Some(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::MessageParts;

    use bytes::Bytes;

    use super::*;
    use crate::message::Message;

    fn entry(position: u64, priority: u8) -> Entry {
        let mut m = MessageParts::new("", "", Bytes::new());
        m.priority = priority;
        Entry::resident(position, Message::from(m), false.into())
    }

    fn order(e: &Entries) -> Vec<u64> {
        e.iter().map(|e| e.position).collect()
    }

    /// What a queued message costs beyond its content: its entry here (the `VecDeque`
    /// grows by doubling, so up to twice this) and the message's own allocation beyond the
    /// content, for a 256-byte 0-10 message whose 16-byte header segment names its routing
    /// key (the memory test's), and for an on-disk stand-in its own allocation. Run with
    /// `--nocapture` for the figures; the bounds keep them from growing unnoticed.
    #[test]
    fn per_message_footprint() {
        use std::mem::size_of;
        // glibc malloc adds 8 bytes to a request and rounds the chunk up to 16.
        let chunk = |n: usize| (n + 8).div_ceil(16) * 16;
        let entry = size_of::<Entry>();
        let header = Bytes::from_static(b"\x00\x00\x00\x0c\x01\x04\x00\x01\x06memory\x00");
        let m = crate::message::MessageParts {
            routing_key: header.slice(9..15),
            header: crate::message::ProtocolHeader::Amqp010(header.clone()),
            body: Bytes::from(vec![7u8; 256]),
            ..Default::default()
        }
        .build();
        assert_eq!(m.routing_key(), b"memory");
        let content = 16 + 256;
        let allocated = m.allocated();
        let beyond = chunk(allocated) - content;
        let stand_in = size_of::<crate::queue::state::StandIn>();
        eprintln!(
            "footprint: Entry {entry} B, Message handle {} B, allocation {allocated} B for \
             {content} B of content (malloc chunk {} B: {beyond} B beyond the content), \
             on-disk StandIn {stand_in} B (malloc chunk {} B)",
            size_of::<Message>(),
            chunk(allocated),
            chunk(stand_in),
        );
        assert!(entry <= 24, "Entry grew to {entry} B");
        assert_eq!(
            allocated,
            24 + content,
            "a 24-byte head and the content, nothing else"
        );
        assert!(
            entry + beyond <= 64,
            "{entry} + {beyond} B per queued message beyond its content"
        );
        assert!(stand_in <= 24, "StandIn grew to {stand_in} B");
    }

    #[test]
    fn rabbitmq_levels_cap_at_the_maximum() {
        let map = PriorityLevels::up_to(3);
        assert_eq!([0, 1, 3, 4, 255].map(|p| map.level(p)), [0, 1, 3, 3, 3]);
    }

    #[test]
    fn qpid_levels_spread_around_the_default_priority() {
        // Two levels: 0-4 low, 5-9 high (4 is the 0-10 default priority).
        let two = PriorityLevels::spread(2);
        assert_eq!([0, 4, 5, 9].map(|p| two.level(p)), [0, 0, 1, 1]);
        // Ten levels: one per 0-10 priority.
        let ten = PriorityLevels::spread(10);
        assert_eq!([0, 4, 9].map(|p| ten.level(p)), [0, 4, 9]);
        assert_eq!(PriorityLevels::spread(200), ten);
        let three = PriorityLevels::spread(3);
        assert_eq!([0, 3, 4, 5, 9].map(|p| three.level(p)), [0, 0, 1, 2, 2]);
    }

    #[test]
    fn higher_priority_first_fifo_within_a_priority() {
        let mut e = Entries::new(Some(PriorityLevels::up_to(9)));
        for (pos, prio) in [(1, 1), (2, 5), (3, 1), (4, 9), (5, 5)] {
            e.push_back(entry(pos, prio));
        }
        assert_eq!(order(&e), [4, 2, 5, 1, 3]);
        assert_eq!(e.front().map(|e| e.position), Some(4));
        let taken: Vec<u64> = std::iter::from_fn(|| e.pop_front())
            .map(|e| e.position)
            .collect();
        assert_eq!(taken, [4, 2, 5, 1, 3]);
        assert!(e.is_empty());
    }

    #[test]
    fn released_entries_return_to_their_place_in_their_level() {
        let mut e = Entries::new(Some(PriorityLevels::up_to(9)));
        for (pos, prio) in [(1, 5), (2, 5), (3, 0)] {
            e.push_back(entry(pos, prio));
        }
        let first = e.pop_front().unwrap();
        e.push_back(entry(4, 5));
        e.insert_sorted(first);
        assert_eq!(order(&e), [1, 2, 4, 3]);
        assert_eq!(e.remove_position(2).map(|e| e.position), Some(2));
        assert_eq!(e.remove_position(2).map(|e| e.position), None);
        assert_eq!(e.len(), 3);
        e.retain(|x| x.position != 4);
        assert_eq!(order(&e), [1, 3]);
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn browsing_follows_arrival_order() {
        let mut e = Entries::new(Some(PriorityLevels::up_to(9)));
        for (pos, prio) in [(1, 1), (2, 9), (3, 1), (4, 5)] {
            e.push_back(entry(pos, prio));
        }
        let seen: Vec<u64> = e.after(1).map(|e| e.position).collect();
        assert_eq!(seen, [2, 3, 4]);
        let mut fifo = Entries::new(None);
        for pos in 1..=4 {
            fifo.push_back(entry(pos, 9 - pos as u8));
        }
        let seen: Vec<u64> = fifo.after(2).map(|e| e.position).collect();
        assert_eq!(seen, [3, 4]);
        assert_eq!(order(&fifo), [1, 2, 3, 4], "a plain queue ignores priority");
        assert_eq!(fifo.drain().len(), 4);
    }

    #[test]
    fn fair_share_gives_each_level_its_limit_in_a_round() {
        // Three levels: 2 delivers 3 a round, 1 delivers 2, 0 has no limit.
        let mut e = Entries::new(Some(PriorityLevels::up_to(2))).with_fairshare(vec![0, 2, 3]);
        for p in 1..=5 {
            e.push_back(entry(p, 2));
        }
        for p in 11..=13 {
            e.push_back(entry(p, 1));
        }
        for p in 21..=22 {
            e.push_back(entry(p, 0));
        }
        let mut got = Vec::new();
        while let Some(front) = e.front().map(|f| f.position) {
            let popped = e.pop_front().unwrap().position;
            assert_eq!(front, popped, "front names what pop takes");
            got.push(popped);
        }
        assert_eq!(got, [1, 2, 3, 11, 12, 21, 22, 4, 5, 13]);
        assert!(e.is_empty());
        // Without limits a priority queue drains strictly by level.
        let mut strict = Entries::new(Some(PriorityLevels::up_to(2)));
        for (p, prio) in [(1, 0), (2, 2), (3, 1), (4, 2)] {
            strict.push_back(entry(p, prio));
        }
        let order: Vec<u64> =
            std::iter::from_fn(|| strict.pop_front().map(|e| e.position)).collect();
        assert_eq!(order, [2, 4, 3, 1]);
    }
}
