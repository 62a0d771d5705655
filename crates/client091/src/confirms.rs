//! Publisher confirms: which published sequence numbers the broker has acknowledged.

/// Sequence numbers start at 1 on a channel put in confirm mode, one per publish. The
/// broker acknowledges each once (`basic.ack`, or `basic.nack` if it could not take it),
/// singly or with `multiple` for everything up to a tag, in any order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmTracker {
    /// The sequence number the next publish gets.
    next: u64,
    /// Lowest sequence number not yet confirmed.
    base: u64,
    /// Confirmed flags for `base..next`; the front is always unconfirmed.
    done: std::collections::VecDeque<bool>,
    nacked: u64,
}

impl Default for ConfirmTracker {
    fn default() -> Self {
        ConfirmTracker {
            next: 1,
            base: 1,
            done: Default::default(),
            nacked: 0,
        }
    }
}

impl ConfirmTracker {
    /// Records a publish; returns its sequence number.
    pub fn published(&mut self) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.done.push_back(false);
        seq
    }

    /// Applies `basic.ack` (or `basic.nack` when `nack`) from the broker. A tag never
    /// published is a protocol error; a repeat confirmation is ignored.
    pub fn confirm(&mut self, tag: u64, multiple: bool, nack: bool) -> Result<(), String> {
        if tag >= self.next || (tag == 0 && !multiple) {
            return Err(format!(
                "confirmation of {tag}, but only {} messages were published",
                self.next - 1
            ));
        }
        // Tag 0 with `multiple` confirms everything outstanding.
        let upto = if tag == 0 { self.next - 1 } else { tag };
        if upto < self.base {
            return Ok(());
        }
        let (lo, hi) = if multiple {
            (self.base, upto)
        } else {
            (upto, upto)
        };
        for seq in lo..=hi {
            let slot = &mut self.done[(seq - self.base) as usize];
            if !*slot && nack {
                self.nacked += 1;
            }
            *slot = true;
        }
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.base += 1;
        }
        Ok(())
    }

    /// Published and not yet confirmed (counting from the oldest unconfirmed one).
    pub fn outstanding(&self) -> u64 {
        self.next - self.base
    }

    /// Messages the broker refused so far.
    pub fn nacked(&self) -> u64 {
        self.nacked
    }

    pub fn published_count(&self) -> u64 {
        self.next - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(t: &mut ConfirmTracker, n: u64) {
        for _ in 0..n {
            t.published();
        }
    }

    #[test]
    fn multiple_acks_confirm_everything_up_to_the_tag() {
        let mut t = ConfirmTracker::default();
        publish(&mut t, 10);
        assert_eq!(t.outstanding(), 10);
        t.confirm(4, true, false).unwrap();
        assert_eq!(t.outstanding(), 6);
        t.confirm(10, true, false).unwrap();
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.nacked(), 0);
    }

    #[test]
    fn single_acks_out_of_order_close_the_gap_when_it_fills() {
        let mut t = ConfirmTracker::default();
        publish(&mut t, 3);
        t.confirm(2, false, false).unwrap();
        t.confirm(3, false, false).unwrap();
        assert_eq!(t.outstanding(), 3, "1 is still open, so 1..=3 count");
        t.confirm(1, false, false).unwrap();
        assert_eq!(t.outstanding(), 0);
    }

    #[test]
    fn nacks_are_counted_once_and_repeats_ignored() {
        let mut t = ConfirmTracker::default();
        publish(&mut t, 5);
        t.confirm(2, true, true).unwrap();
        t.confirm(2, false, true).unwrap();
        t.confirm(1, true, false).unwrap();
        assert_eq!(t.nacked(), 2);
        t.confirm(0, true, false).unwrap();
        assert_eq!((t.outstanding(), t.nacked()), (0, 2));
    }

    #[test]
    fn unknown_tags_are_errors() {
        let mut t = ConfirmTracker::default();
        publish(&mut t, 2);
        assert!(t.confirm(3, false, false).is_err());
        assert!(t.confirm(0, false, false).is_err());
        assert_eq!(t.published_count(), 2);
    }
}
