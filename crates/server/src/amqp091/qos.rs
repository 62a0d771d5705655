//! basic.qos accounting for one channel, turned into core consumer credit.
//!
//! The core counts credit per consumer; 0-9-1 limits unacknowledged deliveries per consumer
//! (`global = false`) or across the channel (`global = true`). For every consumer we track
//! the credit we believe the core still holds for it (granted minus deliveries seen) and its
//! unacknowledged deliveries, and after each settlement compute the credit to top up so that
//! `unacked + credit` never exceeds the limits. A delivery still in the outbox when seen later
//! is already counted in `credit`, so the sums are exact, never over the limit.
//!
//! Limits are captured when a consumer starts, as RabbitMQ does for per-consumer prefetch;
//! a later basic.qos affects later consumers. `prefetch_size` is per consumer only.

use ferry_core::ConsumerId;

const UNLIMITED: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    pub prefetch_count: u16,
    pub prefetch_size: u32,
    pub global_count: u16,
}

#[derive(Debug, Clone)]
struct Slot {
    id: ConsumerId,
    /// no-ack consumers are never limited (RabbitMQ ignores prefetch for them).
    no_ack: bool,
    count_limit: u32,
    byte_limit: u32,
    in_global: bool,
    unacked: u32,
    unacked_bytes: u64,
    credit: u32,
    credit_bytes: u64,
    /// Unlimited dimensions are granted `u32::MAX` once; the core never charges those.
    granted_once: bool,
    /// Its consume-ok waits behind held replies: no credit until it has gone out.
    unannounced: bool,
}

impl Slot {
    fn load(&self) -> u32 {
        self.unacked.saturating_add(self.credit)
    }

    fn own_room(&self) -> Option<u32> {
        (self.count_limit > 0).then(|| self.count_limit.saturating_sub(self.load()))
    }
}

#[derive(Debug, Default)]
pub struct Qos {
    pub settings: Settings,
    slots: Vec<Slot>,
    paused: bool,
}

/// Credit to add to one consumer in the core: (messages, bytes).
pub type Grant = (ConsumerId, u32, u32);

impl Qos {
    pub fn add_consumer(&mut self, id: ConsumerId, no_ack: bool) {
        self.slots.push(Slot {
            id,
            no_ack,
            count_limit: u32::from(self.settings.prefetch_count),
            byte_limit: self.settings.prefetch_size,
            in_global: self.settings.global_count > 0,
            unacked: 0,
            unacked_bytes: 0,
            credit: 0,
            credit_bytes: 0,
            granted_once: false,
            unannounced: false,
        });
    }

    /// `id` gets no credit until [`Qos::announce`]: its consume-ok is held.
    pub fn hold_back(&mut self, id: ConsumerId) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.id == id) {
            s.unannounced = true;
        }
    }

    /// `id`'s consume-ok has gone out: it may be granted credit.
    pub fn announce(&mut self, id: ConsumerId) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.id == id) {
            s.unannounced = false;
        }
    }

    pub fn remove_consumer(&mut self, id: ConsumerId) {
        self.slots.retain(|s| s.id != id);
    }

    /// A delivery to `id` was seen: one credit became one unacknowledged message.
    pub fn delivered(&mut self, id: ConsumerId, size: u64) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.id == id && !s.no_ack) {
            s.credit = s.credit.saturating_sub(1);
            s.credit_bytes = s.credit_bytes.saturating_sub(size);
            s.unacked = s.unacked.saturating_add(1);
            s.unacked_bytes = s.unacked_bytes.saturating_add(size);
        }
    }

    /// A delivery to `id` was acked, rejected, nacked or recovered.
    pub fn settled(&mut self, id: ConsumerId, size: u64) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.id == id && !s.no_ack) {
            s.unacked = s.unacked.saturating_sub(1);
            s.unacked_bytes = s.unacked_bytes.saturating_sub(size);
        }
    }

    /// channel.flow(false): the caller stops every consumer in the core; nothing is granted
    /// until [`Qos::resume`].
    pub fn pause(&mut self) {
        self.paused = true;
        for s in &mut self.slots {
            s.credit = 0;
            s.credit_bytes = 0;
            s.granted_once = false;
        }
    }

    pub fn resume(&mut self) {
        self.paused = false;
    }

    /// The credit to add now so every consumer is topped up to its limits.
    pub fn grants(&mut self) -> Vec<Grant> {
        let mut out: Vec<Grant> = Vec::new();
        if self.paused {
            return out;
        }
        for s in self.slots.iter_mut().filter(|s| !s.unannounced) {
            let first = !s.granted_once;
            s.granted_once = true;
            if s.no_ack {
                if first {
                    out.push((s.id, UNLIMITED, UNLIMITED));
                }
                continue;
            }
            let messages = match s.own_room() {
                _ if s.in_global => 0,
                Some(room) => room,
                None if first => UNLIMITED,
                None => 0,
            };
            let bytes = if s.byte_limit == 0 {
                if first {
                    UNLIMITED
                } else {
                    0
                }
            } else {
                let used = s.unacked_bytes.saturating_add(s.credit_bytes);
                u32::try_from(u64::from(s.byte_limit).saturating_sub(used)).unwrap_or(0)
            };
            if messages != UNLIMITED {
                s.credit = s.credit.saturating_add(messages);
            }
            if bytes != UNLIMITED {
                s.credit_bytes = s.credit_bytes.saturating_add(u64::from(bytes));
            }
            if messages > 0 || bytes > 0 {
                out.push((s.id, messages, bytes));
            }
        }
        self.global_grants(&mut out);
        out
    }

    /// Shares the channel-wide budget one message at a time, to the least loaded consumer.
    fn global_grants(&mut self, out: &mut Vec<Grant>) {
        let limit = u32::from(self.settings.global_count);
        let used: u32 = self
            .slots
            .iter()
            .filter(|s| s.in_global && !s.no_ack)
            .map(Slot::load)
            .fold(0, u32::saturating_add);
        let mut budget = limit.saturating_sub(used);
        while budget > 0 {
            let Some(s) = self
                .slots
                .iter_mut()
                .filter(|s| s.in_global && !s.no_ack && !s.unannounced && s.own_room() != Some(0))
                .min_by_key(|s| s.load())
            else {
                break;
            };
            s.credit += 1;
            budget -= 1;
            match out.iter_mut().find(|g| g.0 == s.id) {
                Some(g) => g.1 = g.1.saturating_add(1),
                None => out.push((s.id, 1, 0)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qos(prefetch_count: u16, global_count: u16) -> Qos {
        Qos {
            settings: Settings {
                prefetch_count,
                prefetch_size: 0,
                global_count,
            },
            ..Qos::default()
        }
    }

    #[test]
    fn held_back_consumers_get_credit_only_once_announced() {
        let mut q = qos(0, 2);
        q.add_consumer(1, false);
        q.add_consumer(2, true);
        q.hold_back(1);
        q.hold_back(2);
        assert!(q.grants().is_empty());
        q.announce(2);
        assert_eq!(q.grants(), vec![(2, UNLIMITED, UNLIMITED)]);
        q.announce(1);
        // The channel-wide budget of two goes to the one announced consumer it covers.
        assert_eq!(q.grants(), vec![(1, 2, UNLIMITED)]);
    }

    #[test]
    fn unlimited_consumers_get_unlimited_credit_once() {
        let mut q = qos(0, 0);
        q.add_consumer(1, false);
        q.add_consumer(2, true);
        assert_eq!(
            q.grants(),
            vec![(1, UNLIMITED, UNLIMITED), (2, UNLIMITED, UNLIMITED)]
        );
        q.delivered(1, 10);
        q.settled(1, 10);
        assert!(q.grants().is_empty());
    }

    #[test]
    fn per_consumer_prefetch_is_refilled_one_per_ack() {
        let mut q = qos(2, 0);
        q.add_consumer(7, false);
        assert_eq!(q.grants(), vec![(7, 2, UNLIMITED)]);
        q.delivered(7, 5);
        q.delivered(7, 5);
        assert!(q.grants().is_empty());
        q.settled(7, 5);
        assert_eq!(q.grants(), vec![(7, 1, 0)]);
        assert!(q.grants().is_empty());
    }

    #[test]
    fn a_later_qos_does_not_change_existing_consumers() {
        let mut q = qos(1, 0);
        q.add_consumer(1, false);
        q.settings.prefetch_count = 5;
        q.add_consumer(2, false);
        assert_eq!(q.grants(), vec![(1, 1, UNLIMITED), (2, 5, UNLIMITED)]);
    }

    #[test]
    fn global_prefetch_is_shared_by_load() {
        let mut q = qos(0, 3);
        q.add_consumer(1, false);
        q.add_consumer(2, false);
        let g = q.grants();
        let total: u32 = g.iter().map(|g| g.1).sum();
        assert_eq!(total, 3);
        // Consumer 1 got two (it was first among equals twice), consumer 2 one.
        q.delivered(1, 1);
        q.delivered(1, 1);
        q.delivered(2, 1);
        assert!(q.grants().iter().all(|g| g.1 == 0));
        q.settled(2, 1);
        assert_eq!(q.grants().iter().map(|g| g.1).sum::<u32>(), 1);
    }

    #[test]
    fn byte_limits_refill_by_size() {
        let mut q = Qos {
            settings: Settings {
                prefetch_count: 0,
                prefetch_size: 100,
                global_count: 0,
            },
            ..Qos::default()
        };
        q.add_consumer(1, false);
        assert_eq!(q.grants(), vec![(1, UNLIMITED, 100)]);
        q.delivered(1, 60);
        q.settled(1, 60);
        assert_eq!(q.grants(), vec![(1, 0, 60)]);
    }

    #[test]
    fn paused_grants_nothing_then_regrants_from_scratch() {
        let mut q = qos(2, 0);
        q.add_consumer(1, false);
        q.grants();
        q.delivered(1, 1);
        q.pause();
        q.settled(1, 1);
        assert!(q.grants().is_empty());
        q.resume();
        assert_eq!(q.grants(), vec![(1, 2, UNLIMITED)]);
    }
}
