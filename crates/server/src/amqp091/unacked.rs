//! Delivery-tag bookkeeping for one channel: tags are handed out in increasing order, so the
//! outstanding ones live in a deque sorted by tag and `multiple` settles a prefix.
//!
//! How long the oldest delivery has waited for its acknowledgement (RabbitMQ's consumer
//! timeout) is known from marks, not from a clock read per delivery: each periodic check
//! notes the next tag and the time, so every tag below it was handed out before then.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A tag the peer named that is not outstanding: 0-9-1 makes that a 406 channel error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown delivery tag {0}")]
pub struct UnknownTag(pub u64);

/// Marks kept at most. A channel whose oldest delivery never times out (its timeout off)
/// while checks run often (another channel's short timeout) would otherwise gain a mark per
/// check for as long as it holds that delivery.
const MAX_MARKS: usize = 64;

/// Drops every other mark but the newest. A dropped mark only makes the deliveries it
/// covered count from a later one, so a timeout may fire later, never earlier.
fn thin(marks: &mut VecDeque<(u64, Instant)>) {
    let newest = marks.pop_back();
    let mut i = 0;
    marks.retain(|_| {
        i += 1;
        i % 2 == 1
    });
    marks.extend(newest);
}

#[derive(Debug)]
pub struct Unacked<T> {
    next_tag: u64,
    items: VecDeque<(u64, T)>,
    /// (next tag, time) at past checks, oldest first: tags below it were out by then.
    marks: VecDeque<(u64, Instant)>,
}

impl<T> Default for Unacked<T> {
    fn default() -> Self {
        Unacked {
            next_tag: 1,
            items: VecDeque::new(),
            marks: VecDeque::new(),
        }
    }
}

impl<T> Unacked<T> {
    /// The next delivery tag, without tracking anything (no-ack deliveries use tags too).
    pub fn next_tag(&mut self) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        tag
    }

    /// The tag the next `next_tag` or `push` hands out.
    pub fn peek_tag(&self) -> u64 {
        self.next_tag
    }

    /// Allocates a tag and tracks `item` under it until settled.
    pub fn push(&mut self, item: T) -> u64 {
        let tag = self.next_tag();
        self.items.push_back((tag, item));
        tag
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Settles `tag`, or with `multiple` every outstanding tag up to it (tag 0 with `multiple`
    /// means all of them, as RabbitMQ reads it). With or without `multiple`, a non-zero `tag`
    /// that is not outstanding is an unknown tag, as in RabbitMQ, even when older tags are.
    pub fn take(&mut self, tag: u64, multiple: bool) -> Result<Vec<T>, UnknownTag> {
        Ok(self
            .take_tagged(tag, multiple)?
            .into_iter()
            .map(|(_, item)| item)
            .collect())
    }

    /// [`Unacked::take`], keeping each item's tag (a transaction may give them back).
    pub fn take_tagged(&mut self, tag: u64, multiple: bool) -> Result<Vec<(u64, T)>, UnknownTag> {
        if multiple && tag == 0 {
            return Ok(self.items.drain(..).collect());
        }
        let idx = self
            .items
            .binary_search_by_key(&tag, |(t, _)| *t)
            .map_err(|_| UnknownTag(tag))?;
        if multiple {
            return Ok(self.items.drain(..=idx).collect());
        }
        let item = self.items.remove(idx).ok_or(UnknownTag(tag))?;
        Ok(vec![item])
    }

    /// Makes taken items outstanding again under their old tags (a rolled-back transaction's
    /// acknowledgements).
    pub fn restore(&mut self, items: impl IntoIterator<Item = (u64, T)>) {
        // Both runs are sorted by tag: the stable sort merges them in linear time, where
        // inserting one by one costs the product of the two lengths.
        let mut all: Vec<(u64, T)> = std::mem::take(&mut self.items).into();
        all.extend(items);
        all.sort_by_key(|(tag, _)| *tag);
        self.items = all.into();
    }

    /// The periodic check: whether the oldest outstanding delivery has waited its timeout
    /// (`timeout_of` it; `None` waits for ever) or longer by `now`, never early and late by
    /// at most the checks' interval. Gives the timeout it exceeded. Notes `now` for later
    /// checks. As in RabbitMQ, only the oldest delivery is looked at, whatever the timeouts
    /// of newer ones.
    pub fn overdue(
        &mut self,
        now: Instant,
        timeout_of: impl FnOnce(&T) -> Option<Duration>,
    ) -> Option<Duration> {
        let Some((oldest, item)) = self.items.front() else {
            self.marks.clear();
            return None;
        };
        // A mark at or below the oldest tag says nothing about it.
        while self.marks.front().is_some_and(|&(tag, _)| tag <= *oldest) {
            self.marks.pop_front();
        }
        let overdue = match (self.marks.front(), timeout_of(item)) {
            (Some(&(_, out_by)), Some(timeout)) => {
                (now.saturating_duration_since(out_by) >= timeout).then_some(timeout)
            }
            _ => None,
        };
        if self
            .marks
            .back()
            .is_none_or(|&(tag, _)| tag < self.next_tag)
        {
            if self.marks.len() >= MAX_MARKS {
                thin(&mut self.marks);
            }
            self.marks.push_back((self.next_tag, now));
        }
        overdue
    }

    /// Everything outstanding, oldest first (channel close, basic.recover).
    pub fn take_all(&mut self) -> Vec<T> {
        self.items.drain(..).map(|(_, item)| item).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(n: u32) -> Unacked<u32> {
        let mut u = Unacked::default();
        for i in 1..=n {
            assert_eq!(u.push(i), u64::from(i));
        }
        u
    }

    #[test]
    fn single_ack_removes_only_that_tag() {
        let mut u = log(3);
        assert_eq!(u.take(2, false), Ok(vec![2]));
        assert_eq!(u.take(2, false), Err(UnknownTag(2)));
        assert_eq!(u.len(), 2);
    }

    #[test]
    fn multiple_settles_the_prefix_skipping_gaps() {
        let mut u = log(5);
        u.take(2, false).unwrap();
        // 2 is settled already: naming it is an error, though 1 is outstanding.
        assert_eq!(u.take(2, true), Err(UnknownTag(2)));
        assert_eq!(u.take(4, true), Ok(vec![1, 3, 4]));
        assert_eq!(u.take(4, true), Err(UnknownTag(4)));
        assert_eq!(u.take(9, true), Err(UnknownTag(9)));
        assert_eq!(u.take(0, true), Ok(vec![5]));
        assert_eq!(u.take(0, true), Ok(vec![]));
    }

    #[test]
    fn restored_items_keep_their_tags_and_order() {
        let mut u = log(5);
        let taken = u.take_tagged(3, true).unwrap();
        assert_eq!(taken, vec![(1, 1), (2, 2), (3, 3)]);
        u.restore(taken.into_iter().rev());
        assert_eq!(u.take(2, false), Ok(vec![2]));
        assert_eq!(u.take_all(), vec![1, 3, 4, 5]);
    }

    #[test]
    fn the_oldest_delivery_is_overdue_once_a_check_saw_it_a_timeout_ago() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let second = Duration::from_millis(1000);
        let timeout = |_: &u32| Some(second);
        let mut u = log(2);
        assert_eq!(u.overdue(at(0), timeout), None, "first check: only a mark");
        assert_eq!(u.overdue(at(999), timeout), None);
        assert_eq!(
            u.overdue(at(1000), timeout),
            Some(second),
            "out since before the first check"
        );
        // Acknowledging the old ones leaves a newer delivery, younger than every mark.
        u.push(3);
        u.take(2, true).unwrap();
        assert_eq!(
            u.overdue(at(1500), timeout),
            None,
            "3 came after the marks so far"
        );
        assert_eq!(u.overdue(at(2499), timeout), None);
        assert_eq!(u.overdue(at(2500), timeout), Some(second));
        u.take(0, true).unwrap();
        assert_eq!(u.overdue(at(9000), timeout), None, "nothing outstanding");
        assert!(u.marks.is_empty());
    }

    #[test]
    fn the_oldest_delivery_s_own_timeout_counts() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // Odd items wait under 1 s, even ones for ever.
        let timeout = |i: &u32| (i % 2 == 1).then_some(Duration::from_millis(1000));
        let mut u = log(2);
        u.take(1, false).unwrap();
        assert_eq!(u.overdue(at(0), timeout), None);
        assert_eq!(u.overdue(at(5000), timeout), None, "2 has no timeout");
        // A newer delivery with a timeout is not looked at while 2 is the oldest.
        u.push(3);
        assert_eq!(u.overdue(at(6000), timeout), None);
        assert_eq!(u.overdue(at(9000), timeout), None);
        u.take(2, false).unwrap();
        assert_eq!(
            u.overdue(at(9000), timeout),
            Some(Duration::from_millis(1000)),
            "3 was out by the check at 6000"
        );
    }

    #[test]
    fn marks_stay_bounded_while_an_undated_delivery_is_held() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // The oldest never times out; newer ones flow between checks.
        let timeout = |i: &u32| (*i > 1).then_some(Duration::from_millis(1000));
        let mut u = log(1);
        for check in 0..10_000u32 {
            u.push(check + 2);
            u.take(u64::from(check + 2), false).unwrap();
            assert_eq!(u.overdue(at(u64::from(check) * 100), timeout), None);
        }
        assert!(u.marks.len() <= MAX_MARKS, "{}", u.marks.len());
        // Once the oldest goes, a held newer one still times out, never early.
        u.push(20_000);
        u.overdue(at(1_000_000), timeout);
        u.take(1, false).unwrap();
        assert_eq!(u.overdue(at(1_000_999), timeout), None);
        assert_eq!(
            u.overdue(at(1_001_000), timeout),
            Some(Duration::from_millis(1000))
        );
    }

    #[test]
    fn marks_stay_few_however_many_checks() {
        let t0 = Instant::now();
        let mut u = log(1);
        for ms in 0..1000 {
            u.overdue(t0 + Duration::from_millis(ms), |_| {
                Some(Duration::from_secs(60))
            });
        }
        assert_eq!(u.marks.len(), 1, "no delivery since: one mark");
        u.push(2);
        u.overdue(t0 + Duration::from_secs(2), |_| {
            Some(Duration::from_secs(60))
        });
        assert_eq!(u.marks.len(), 2);
    }

    #[test]
    fn tags_keep_increasing_across_untracked_deliveries() {
        let mut u = log(1);
        assert_eq!(u.next_tag(), 2);
        assert_eq!(u.push(9), 3);
        assert_eq!(u.take(2, false), Err(UnknownTag(2)));
        assert_eq!(u.take_all(), vec![1, 9]);
    }
}
