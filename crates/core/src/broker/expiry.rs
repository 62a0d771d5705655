//! Housekeeping by the clock, driven by ferryd's periodic task: `x-expires` queues deleted
//! when unused, expired messages swept off, and the heads of dead-lettering queues watched
//! closely so a delay queue delivers on time.

use std::sync::{Arc, Weak};

use tokio::sync::futures::Notified;

use super::Broker;
use crate::message::now_ms;
use crate::queue::Queue;

impl Broker {
    /// Deletes the `x-expires` queues that have been unused (no consumers, no basic.get, no
    /// redeclare) for their expiry time, as RabbitMQ does; their messages are dropped like
    /// those of any deleted RabbitMQ-style queue, their consumers (none) need no notice.
    /// Returns the earliest deadline still pending, in milliseconds since the epoch, for
    /// the caller to come back then.
    pub fn expire_unused_queues(&self) -> Option<u64> {
        self.expire_unused_queues_at(now_ms())
    }

    /// [`Broker::expire_unused_queues`] as of `now` (milliseconds since the epoch); also
    /// deletes auto-delete queues whose `qpid.auto_delete_timeout` ran out unused.
    pub fn expire_unused_queues_at(&self, now: u64) -> Option<u64> {
        let queues: Vec<Arc<Queue>> = {
            let mut list = self.expiring.lock();
            list.retain(|w| w.upgrade().is_some_and(|q| !q.is_deleted()));
            list.iter().filter_map(Weak::upgrade).collect()
        };
        let mut next: Option<u64> = None;
        for q in queues {
            match q.unused_deadline() {
                Some(at) if at <= now => {
                    let drained = {
                        let mut reg = self.registry.write();
                        match q.drain_if_expired(now) {
                            Ok(d) => {
                                self.unlink_queue(&mut reg, &q, None);
                                Some(d)
                            }
                            Err(_) => None,
                        }
                    };
                    match drained {
                        Some(d) => {
                            tracing::debug!(
                                queue = q.name(),
                                "deleting unused queue (x-expires or timed auto-delete)"
                            );
                            self.finish_delete(&q, d);
                        }
                        // Used again meanwhile: look again at its new deadline.
                        None => next = Some(next.map_or(now, |n| n.min(now))),
                    }
                }
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        next
    }

    /// Resolves when an `x-expires` queue was declared or lost its last consumer, so a
    /// deadline earlier than the one [`Broker::expire_unused_queues`] last returned may
    /// exist, when a dead-lettering queue took a message that will expire (see
    /// [`Broker::expire_heads`]), or when a distributed transaction branch got a deadline
    /// earlier than [`Broker::expire_dtx_branches`] last returned. A change before the call
    /// is not lost (one stored permit).
    pub fn queue_expiry_changed(&self) -> Notified<'_> {
        self.expiry_changed.notified()
    }

    /// Times out the distributed transaction branches whose deadline passed (see
    /// `DtxManager::expire_due`); returns the earliest deadline left, in milliseconds since
    /// the epoch.
    pub fn expire_dtx_branches(&self) -> Option<u64> {
        self.dtx.expire_due(now_ms())
    }

    /// Dead-letters the expired messages at the heads of dead-lettering queues; returns
    /// whether any of them still holds messages that will expire, so the caller knows to
    /// come back soon (the full sweep of [`Broker::purge_expired`] is only periodic).
    pub fn expire_heads(&self) -> bool {
        let queues = self.dead_lettering_queues();
        let now = now_ms();
        let mut more = false;
        for q in &queues {
            // Every queue must be looked at: no short-circuit.
            more |= q.expire_head(now);
        }
        more
    }

    /// The live queues that dead-letter the RabbitMQ way; forgets deleted ones.
    pub(super) fn dead_lettering_queues(&self) -> Vec<Arc<Queue>> {
        let mut list = self.dead_lettering.lock();
        list.retain(|w| w.upgrade().is_some_and(|q| !q.is_deleted()));
        list.iter().filter_map(Weak::upgrade).collect()
    }

    /// Drops expired messages from every queue; returns how many. Called periodically so
    /// memory stays bounded on queues nobody consumes from. Also frees what queues kept for
    /// publishes that stopped coming (`Queue::sweep_graveyard`).
    pub fn purge_expired(&self) -> u64 {
        let queues: Vec<Arc<Queue>> = self.registry.read().queues.values().cloned().collect();
        let now = now_ms();
        queues
            .iter()
            .map(|q| {
                // Bounds in time what queues whose publishers stopped keep for them to free.
                q.sweep_graveyard();
                q.purge_expired(now)
            })
            .sum()
    }
}
