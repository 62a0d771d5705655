//! What a session's end or a consumer's cancel does to queues: exclusive queues are released
//! or deleted, auto-delete queues go with their last consumer.

use std::sync::Arc;

use super::Broker;
use crate::queue::{AutoDelete, Drained, OwnerGone, Queue};
use crate::{ConsumerId, OwnerId};

impl Broker {
    /// The session `owner` ended: its exclusive auto-delete queues are deleted (0-10: "MUST be
    /// deleted when the session closes"; with `qpid.auto_delete_timeout`, that long after, if
    /// still unused); its other exclusive queues stay but lose their owner (qpidd's
    /// behaviour; 0-10 only requires exclusivity until the declaring session closes).
    /// Consumers must be cancelled and unsettled deliveries released separately.
    pub fn release_owner(&self, owner: OwnerId) {
        let mut deleted: Vec<(Arc<Queue>, Drained)> = Vec::new();
        {
            let mut reg = self.registry.write();
            let mut later = false;
            let doomed: Vec<Arc<Queue>> = reg
                .queues
                .values()
                .filter(|q| match q.owner_gone(owner) {
                    OwnerGone::Delete => true,
                    OwnerGone::DeleteLater => {
                        later = true;
                        false
                    }
                    OwnerGone::NotOwned | OwnerGone::Released => false,
                })
                .cloned()
                .collect();
            if later {
                // A timed auto-delete: the housekeeping has a new deadline to keep.
                self.expiry_changed.notify_one();
            }
            for q in doomed {
                if let Ok(d) = q.drain_if(|_, _| Ok(())) {
                    self.unlink_queue(&mut reg, &q, None);
                    deleted.push((q, d));
                }
            }
        }
        for (q, d) in deleted {
            self.finish_delete(&q, d);
        }
    }

    /// Cancels a consumer; returns whether it existed. A non-exclusive auto-delete queue is
    /// deleted when its last consumer goes, if it ever had one (0-10 queue.declare
    /// auto-delete), or that long after with `qpid.auto_delete_timeout`.
    pub fn cancel_consumer(&self, queue: &Arc<Queue>, consumer: ConsumerId) -> bool {
        let (removed, auto_delete) = queue.remove_consumer(consumer);
        if removed && (queue.expires().is_some() || auto_delete == AutoDelete::Later) {
            // Unused from now: its x-expires deadline starts, or its timed auto-delete.
            self.expiry_changed.notify_one();
        }
        if auto_delete == AutoDelete::Now {
            let drained = {
                let mut reg = self.registry.write();
                match queue.drain_if_auto_delete_due() {
                    Ok(d) => {
                        self.unlink_queue(&mut reg, queue, None);
                        Some(d)
                    }
                    Err(_) => None,
                }
            };
            if let Some(d) = drained {
                self.finish_delete(queue, d);
            }
        }
        removed
    }
}
