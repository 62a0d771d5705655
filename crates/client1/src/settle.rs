//! Settlement books: our unsettled outgoing deliveries (by session delivery id, which
//! settled and unsettled transfers share), and the receiver's dispositions to send, merged
//! into ranges of consecutive ids.

use std::collections::VecDeque;

/// Deliveries we sent unsettled and the peer has not settled yet. Ids are assigned in
/// order; a settled transfer takes an id too, and counts as settled at once.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// The id of `slots[0]`.
    base: u32,
    /// Per id from `base`: the sending link's index, or `None` once settled. The front is
    /// always unsettled.
    slots: VecDeque<Option<u16>>,
}

impl Outgoing {
    pub fn new(first_id: u32) -> Self {
        Outgoing {
            base: first_id,
            slots: VecDeque::new(),
        }
    }

    /// Records delivery `id` (the next one) sent on `link`, unsettled or not.
    pub fn sent(&mut self, id: u32, link: u16, settled: bool) {
        if self.slots.is_empty() {
            self.base = id;
            if settled {
                self.base = id.wrapping_add(1);
                return;
            }
        }
        self.slots.push_back((!settled).then_some(link));
    }

    /// The peer settled `first..=last`; calls `settled(link)` for each of ours that was
    /// outstanding. Ids we never sent are a protocol error.
    pub fn settle(
        &mut self,
        first: u32,
        last: u32,
        mut settled: impl FnMut(u16),
    ) -> Result<(), String> {
        let span = last.wrapping_sub(first);
        if span > i32::MAX as u32 {
            return Err(format!("disposition range {first}..={last} runs backwards"));
        }
        let end = self.base.wrapping_add(self.slots.len() as u32);
        // Offsets from base, allowing for wrap-around: ids before base are settled already.
        let lo = first.wrapping_sub(self.base);
        let hi = last.wrapping_sub(self.base);
        let sent = self.slots.len() as u32;
        if hi >= sent && hi <= i32::MAX as u32 || lo >= sent && lo <= i32::MAX as u32 {
            return Err(format!(
                "disposition for deliveries {first}..={last}, but only ids before {end} were sent"
            ));
        }
        let lo = if lo > i32::MAX as u32 { 0 } else { lo };
        if hi > i32::MAX as u32 {
            // All of it lies before base: settled long ago.
            return Ok(());
        }
        for off in lo..=hi {
            if let Some(link) = self.slots[off as usize].take() {
                settled(link);
            }
        }
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base = self.base.wrapping_add(1);
        }
        Ok(())
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// Deliveries the application settled, to be written as few dispositions as possible.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ranges {
    runs: Vec<(u32, u32)>,
}

impl Ranges {
    pub fn push(&mut self, id: u32) {
        match self.runs.last_mut() {
            Some((_, last)) if last.wrapping_add(1) == id => *last = id,
            _ => self.runs.push((id, id)),
        }
    }

    /// Adds `first..=last` (consecutive ids).
    pub fn push_range(&mut self, first: u32, last: u32) {
        match self.runs.last_mut() {
            Some((_, l)) if l.wrapping_add(1) == first => *l = last,
            _ => self.runs.push((first, last)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, (u32, u32)> {
        self.runs.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settlements_in_ranges_and_out_of_order() {
        let mut o = Outgoing::new(0);
        for id in 0..10 {
            o.sent(id, (id % 2) as u16, id == 4);
        }
        let mut seen = Vec::new();
        o.settle(2, 5, |l| seen.push(l)).unwrap();
        // 4 was sent settled.
        assert_eq!(seen, vec![0, 1, 1]);
        assert!(!o.is_empty());
        o.settle(0, 1, |l| seen.push(l)).unwrap();
        o.settle(6, 9, |l| seen.push(l)).unwrap();
        assert!(o.is_empty());
        assert_eq!(seen.len(), 9);
        // Repeats of settled ids are ignored; unknown ids are errors.
        o.settle(3, 3, |_| panic!("settled twice")).unwrap();
        assert!(o.settle(10, 10, |_| {}).is_err());
        assert!(o.settle(5, 2, |_| {}).is_err());
    }

    #[test]
    fn ids_wrap_around() {
        let mut o = Outgoing::new(u32::MAX - 1);
        for id in [u32::MAX - 1, u32::MAX, 0, 1] {
            o.sent(id, 3, false);
        }
        let mut n = 0;
        o.settle(u32::MAX, 0, |_| n += 1).unwrap();
        assert_eq!(n, 2);
        o.settle(u32::MAX - 1, 1, |_| n += 1).unwrap();
        assert_eq!(n, 4);
        assert!(o.is_empty());
    }

    #[test]
    fn settled_only_traffic_keeps_nothing() {
        let mut o = Outgoing::new(0);
        for id in 0..1000 {
            o.sent(id, 0, true);
        }
        assert!(o.is_empty());
        o.sent(1000, 0, false);
        let mut n = 0;
        o.settle(1000, 1000, |_| n += 1).unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn ranges_merge_consecutive_ids() {
        let mut r = Ranges::default();
        for id in [1, 2, 3, 5, 6, 9] {
            r.push(id);
        }
        r.push_range(10, 12);
        r.push_range(20, 21);
        let got: Vec<_> = r.drain().collect();
        assert_eq!(got, vec![(1, 3), (5, 6), (9, 12), (20, 21)]);
        assert!(r.is_empty());
    }
}
