//! A message's dead-lettering history, kept as RabbitMQ keeps `x-death`.

use bytes::Bytes;

/// Why a queue dead-lettered a message (RabbitMQ's reason names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeathReason {
    /// Rejected or nacked without requeue.
    Rejected,
    /// Its TTL ran out on the queue.
    Expired,
    /// Dropped from the head of a queue over its length limit.
    Maxlen,
    /// Came back to a queue more often than its `x-delivery-limit`.
    DeliveryLimit,
}

impl DeathReason {
    pub fn name(self) -> &'static str {
        match self {
            DeathReason::Rejected => "rejected",
            DeathReason::Expired => "expired",
            DeathReason::Maxlen => "maxlen",
            DeathReason::DeliveryLimit => "delivery_limit",
        }
    }
}

/// One kind of death: a message dead-lettered `count` times by one queue for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Death {
    pub queue: String,
    pub reason: DeathReason,
    pub count: u64,
    /// The exchange the message had been published to when it first died this way (a dead
    /// letter exchange if it had been dead-lettered before).
    pub exchange: Bytes,
    /// Its routing key at that time.
    pub routing_key: Bytes,
    /// When it first died this way, in milliseconds since the UNIX epoch.
    pub time: u64,
}

/// A message's dead-lettering history in neutral form. Entries are keyed by (queue, reason)
/// and kept most recent first, as RabbitMQ keeps `x-death`: a repeat increments the count of
/// its entry and moves it to the front, so a message cycling through a retry loop carries a
/// bounded history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeathHistory {
    pub entries: Vec<Death>,
    /// The very first death, which no later one replaces (`x-first-death-*`).
    pub first: Option<Death>,
}

impl DeathHistory {
    pub fn record(
        &mut self,
        queue: &str,
        reason: DeathReason,
        exchange: &[u8],
        routing_key: &[u8],
        now_ms: u64,
    ) {
        let found = self
            .entries
            .iter()
            .position(|d| d.reason == reason && d.queue == queue);
        let entry = match found {
            Some(i) => {
                let mut d = self.entries.remove(i);
                d.count = d.count.saturating_add(1);
                d
            }
            None => Death {
                queue: queue.to_owned(),
                reason,
                count: 1,
                exchange: Bytes::copy_from_slice(exchange),
                routing_key: Bytes::copy_from_slice(routing_key),
                time: now_ms,
            },
        };
        if self.first.is_none() {
            self.first = Some(entry.clone());
        }
        self.entries.insert(0, entry);
    }

    /// The most recent death.
    pub fn last(&self) -> Option<&Death> {
        self.entries.first()
    }

    /// RabbitMQ's cycle rule: dead-lettering back into a queue the message already died in
    /// is a cycle unless a consumer rejected it somewhere on the way (only a client can then
    /// break the loop, so the broker does not).
    pub fn is_cycle_into(&self, queue: &str) -> bool {
        self.entries.iter().any(|d| d.queue == queue)
            && !self
                .entries
                .iter()
                .any(|d| d.reason == DeathReason::Rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deaths_are_counted_per_queue_and_reason_most_recent_first() {
        let mut h = DeathHistory::default();
        let (ex, rk) = (Bytes::from_static(b"x"), Bytes::from_static(b"k"));
        h.record("a", DeathReason::Rejected, &ex, &rk, 1);
        h.record(
            "b",
            DeathReason::Expired,
            &Bytes::from_static(b"dlx"),
            &rk,
            2,
        );
        h.record(
            "a",
            DeathReason::Rejected,
            &Bytes::from_static(b"dlx"),
            &rk,
            3,
        );
        let seen: Vec<(&str, u64, u64)> = h
            .entries
            .iter()
            .map(|d| (d.queue.as_str(), d.count, d.time))
            .collect();
        assert_eq!(seen, [("a", 2, 1), ("b", 1, 2)]);
        // The repeated entry keeps what it recorded first.
        assert_eq!(h.last().unwrap().exchange, ex);
        let first = h.first.as_ref().unwrap();
        assert_eq!(
            (first.queue.as_str(), first.reason),
            ("a", DeathReason::Rejected)
        );
        h.record("a", DeathReason::Expired, &ex, &rk, 4);
        assert_eq!(h.entries.len(), 3);
        assert_eq!(h.last().unwrap().reason.name(), "expired");
    }

    #[test]
    fn only_reject_free_loops_are_cycles() {
        let mut h = DeathHistory::default();
        let b = Bytes::new();
        h.record("a", DeathReason::Expired, &b, &b, 0);
        assert!(h.is_cycle_into("a"));
        assert!(!h.is_cycle_into("b"));
        h.record("b", DeathReason::Rejected, &b, &b, 0);
        assert!(!h.is_cycle_into("a"));
    }
}
