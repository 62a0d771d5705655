//! Counters for management, kept where they cost nothing on the message path: a queue's
//! under the lock it already holds, an exchange's in per-thread stripes (no two threads
//! write one cache line, no lock, no allocation), a connection's stored once per read batch
//! by its own task.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What happened to a queue's messages since it was created. Plain integers: every change
/// happens under the queue's lock.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueCounters {
    /// Messages stored (publishes, dead letters arriving; not recovered ones).
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    /// Deliveries that acquired a message (consumers and gets).
    pub delivered: u64,
    /// ...of which redeliveries.
    pub redelivered: u64,
    /// Deliveries to browsers (the message stays).
    pub browsed: u64,
    /// Settled: accepted / acknowledged.
    pub acked: u64,
    /// Settled: rejected (dead-lettered or dropped).
    pub rejected: u64,
    /// Given back by consumers (released, requeued, their session ended).
    pub released: u64,
    /// Dropped when their time to live ran out.
    pub expired: u64,
    /// Dropped from the head for the queue's length limit (ring, drop-head).
    pub overflowed: u64,
    /// Superseded in a last-value queue.
    pub replaced: u64,
    /// Removed by purges.
    pub purged: u64,
    /// Taken off by management to be routed elsewhere (qpidd's reroute and move).
    pub rerouted: u64,
    /// Dropped by a topic subscription's selector (see `ConsumerFilter::drop_unmatched`).
    pub unselected: u64,
    /// Publishes refused for the queue's limit (reject policy).
    pub refused: u64,
    /// Of `enqueued`, those a transaction's commit stored.
    pub enqueued_txn: u64,
    pub enqueued_txn_bytes: u64,
    /// Accepted or rejected by a transaction's commit.
    pub dequeued_txn: u64,
    pub dequeued_txn_bytes: u64,
    /// Held (queued or acquired) when the queue was deleted, and dropped with it...
    pub abandoned: u64,
    /// ...or sent on to its alternate exchange (qpidd's `abandoned` and `abandonedViaAlt`).
    pub abandoned_via_alternate: u64,
}

impl QueueCounters {
    pub fn add(&mut self, o: &QueueCounters) {
        self.enqueued += o.enqueued;
        self.enqueued_bytes += o.enqueued_bytes;
        self.delivered += o.delivered;
        self.redelivered += o.redelivered;
        self.browsed += o.browsed;
        self.acked += o.acked;
        self.rejected += o.rejected;
        self.released += o.released;
        self.expired += o.expired;
        self.overflowed += o.overflowed;
        self.replaced += o.replaced;
        self.purged += o.purged;
        self.rerouted += o.rerouted;
        self.refused += o.refused;
        self.enqueued_txn += o.enqueued_txn;
        self.enqueued_txn_bytes += o.enqueued_txn_bytes;
        self.dequeued_txn += o.dequeued_txn;
        self.dequeued_txn_bytes += o.dequeued_txn_bytes;
        self.abandoned += o.abandoned;
        self.abandoned_via_alternate += o.abandoned_via_alternate;
    }

    /// Messages that left the queue for good, however they went.
    pub fn dequeued(&self) -> u64 {
        self.acked
            + self.rejected
            + self.expired
            + self.overflowed
            + self.replaced
            + self.purged
            + self.rerouted
            + self.unselected
    }
}

/// Stripes of a striped counter: more than the threads that usually publish at once, few
/// enough to keep an exchange small (one cache line a stripe).
const STRIPES: usize = 8;

/// One cache line of counters, so stripes written by different threads never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Stripe([AtomicU64; 4]);

thread_local! {
    /// This thread's stripe, given out round-robin as threads first publish.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

fn my_stripe() -> usize {
    STRIPE.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
            s.set(i);
        }
        i
    })
}

/// What an exchange received and what it could not route.
#[derive(Debug, Default)]
pub struct ExchangeCounters {
    stripes: [Stripe; STRIPES],
}

const IN: usize = 0;
const IN_BYTES: usize = 1;
const DROPPED: usize = 2;
const DROPPED_BYTES: usize = 3;

/// [`ExchangeCounters`] summed over its stripes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeTotals {
    pub messages_in: u64,
    pub bytes_in: u64,
    /// Routed to no queue (after trying the alternate exchange).
    pub unroutable: u64,
    pub unroutable_bytes: u64,
}

impl ExchangeTotals {
    pub fn add(&mut self, o: &ExchangeTotals) {
        self.messages_in += o.messages_in;
        self.bytes_in += o.bytes_in;
        self.unroutable += o.unroutable;
        self.unroutable_bytes += o.unroutable_bytes;
    }

    pub fn messages_out(&self) -> u64 {
        self.messages_in.saturating_sub(self.unroutable)
    }
}

impl ExchangeCounters {
    /// A message published to the exchange; `routed` says whether any queue took it.
    #[inline]
    pub fn record(&self, bytes: u64, routed: bool) {
        let s = &self.stripes[my_stripe()].0;
        s[IN].fetch_add(1, Ordering::Relaxed);
        s[IN_BYTES].fetch_add(bytes, Ordering::Relaxed);
        if !routed {
            s[DROPPED].fetch_add(1, Ordering::Relaxed);
            s[DROPPED_BYTES].fetch_add(bytes, Ordering::Relaxed);
        }
    }

    pub fn totals(&self) -> ExchangeTotals {
        let sum = |i: usize| {
            self.stripes
                .iter()
                .map(|s| s.0[i].load(Ordering::Relaxed))
                .sum()
        };
        ExchangeTotals {
            messages_in: sum(IN),
            bytes_in: sum(IN_BYTES),
            unroutable: sum(DROPPED),
            unroutable_bytes: sum(DROPPED_BYTES),
        }
    }
}

/// A connection's traffic, stored by the connection's own task after each batch it handles
/// and read by management. Only that task writes, so plain stores suffice.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    frames_in: AtomicU64,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    /// Sessions (0-10) or channels (0-9-1) open now.
    channels: AtomicU64,
}

/// [`ConnectionCounters`] as last stored.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub frames_in: u64,
    /// Messages the client published.
    pub messages_in: u64,
    /// Messages written to the client: deliveries, and for 0-9-1 get-oks and returns.
    pub messages_out: u64,
    pub channels: u64,
}

impl ConnectionCounters {
    pub fn store(&self, t: Traffic) {
        self.bytes_in.store(t.bytes_in, Ordering::Relaxed);
        self.bytes_out.store(t.bytes_out, Ordering::Relaxed);
        self.frames_in.store(t.frames_in, Ordering::Relaxed);
        self.messages_in.store(t.messages_in, Ordering::Relaxed);
        self.messages_out.store(t.messages_out, Ordering::Relaxed);
        self.channels.store(t.channels, Ordering::Relaxed);
    }

    pub fn load(&self) -> Traffic {
        Traffic {
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            frames_in: self.frames_in.load(Ordering::Relaxed),
            messages_in: self.messages_in.load(Ordering::Relaxed),
            messages_out: self.messages_out.load(Ordering::Relaxed),
            channels: self.channels.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn exchange_counts_add_up_over_threads() {
        let c = Arc::new(ExchangeCounters::default());
        let threads: Vec<_> = (0..12)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        c.record(10, (i + t) % 4 != 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let totals = c.totals();
        assert_eq!(totals.messages_in, 12_000);
        assert_eq!(totals.bytes_in, 120_000);
        assert_eq!(totals.unroutable, 3_000);
        assert_eq!(totals.messages_out(), 9_000);
    }

    #[test]
    fn a_stripe_is_a_cache_line() {
        assert_eq!(std::mem::size_of::<Stripe>(), 64);
        assert_eq!(std::mem::align_of::<Stripe>(), 64);
    }
}
