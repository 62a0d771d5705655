//! Consumer records kept inside a queue's state, so dispatch needs only the queue lock.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::message::{Message, MessageFilter};
use crate::queue::flow::Window;
use crate::queue::outbox::{Again, Outbox, OutboxItem};
use crate::queue::window::SettleWindow;
use crate::queue::Queue;
use crate::{ConnectionId, ConsumerId, OwnerId};

/// What a protocol layer supplies to subscribe.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub id: ConsumerId,
    pub outbox: Arc<Outbox>,
    pub owner: OwnerId,
    /// The consumer's connection: an exclusive consumer's own messages are kept out of a
    /// no-local queue.
    pub connection: ConnectionId,
    /// Destination (0-10) or consumer tag (0-9-1), echoed in each delivery.
    pub tag: Bytes,
    /// False browses: the consumer sees messages without removing them.
    pub acquire: bool,
    pub exclusive: bool,
    /// Shared cap on this consumer's (and its session's) deliveries awaiting settlement.
    pub window: Option<Arc<SettleWindow>>,
    /// Only the messages this matches (a JMS selector); `None` takes any.
    pub filter: Option<ConsumerFilter>,
    /// How long its deliveries may wait for their acknowledgement before its protocol
    /// layer takes them back (0-9-1's consumer timeout): for management, the core keeps no
    /// clock on deliveries.
    pub ack_timeout: Option<Duration>,
}

/// A consumer's filter (see [`ConsumerSpec::filter`]).
#[derive(Debug, Clone)]
pub struct ConsumerFilter {
    pub matches: Arc<dyn MessageFilter>,
    /// The consumer is the only reader its queue will ever have (a topic subscription's
    /// own queue): what it does not match is dropped as it is passed over, rather than
    /// kept for nobody.
    pub drop_unmatched: bool,
}

/// `u32::MAX` is unlimited credit, as 0-10's 0xFFFFFFFF.
pub(crate) const UNLIMITED: u32 = u32::MAX;

/// qpidd's `CreditBalance::grant`: a grant of [`UNLIMITED`] makes credit unlimited, and
/// finite grants add up to one short of it, so summing them never turns into "unlimited"
/// (which would also take the consumer's deliveries out of its settlement window).
fn add_capped(balance: u32, grant: u32) -> u32 {
    if balance == UNLIMITED || grant == UNLIMITED {
        UNLIMITED
    } else {
        balance.saturating_add(grant).min(UNLIMITED - 1)
    }
}

#[derive(Debug)]
pub(crate) struct Consumer {
    pub(crate) spec: ConsumerSpec,
    /// What may be delivered now: the credit balance, or in window mode what the window has
    /// left (kept here, derived from `flow`, so dispatch reads one pair either way).
    pub(crate) credit_messages: u32,
    pub(crate) credit_bytes: u32,
    /// 0-10 window flow mode (`flow` then holds the window); otherwise credit mode.
    pub(crate) window_mode: bool,
    flow: Window,
    /// Browsers: highest position already shown. Consumers with a filter: every queued
    /// message up to here has been looked at and not matched.
    pub(crate) cursor: u64,
    /// Deliveries made during one dispatch pass, handed to the outbox in one push. Kept here so
    /// its capacity is reused across passes.
    pub(crate) staged: Vec<OutboxItem>,
    pub(crate) staged_bytes: u64,
    /// Outbox room left in the current dispatch pass (items, bytes).
    pub(crate) room: (usize, u64),
    /// This pass's walk over the queue (a browser's, or a filter's) stopped at its bound
    /// with more to look at: the connection's writer dispatches again after its next take,
    /// as for a full outbox, so the walk goes on in slices with the lock let go between.
    pub(crate) walk_cut: bool,
}

impl Consumer {
    pub(crate) fn new(spec: ConsumerSpec) -> Consumer {
        Consumer {
            spec,
            credit_messages: 0,
            credit_bytes: 0,
            window_mode: false,
            flow: Window::default(),
            cursor: 0,
            staged: Vec::new(),
            staged_bytes: 0,
            room: (usize::MAX, u64::MAX),
            walk_cut: false,
        }
    }

    /// Whether this consumer takes `message` (see [`ConsumerSpec::filter`]).
    #[inline]
    pub(crate) fn wants(&self, message: &Message) -> bool {
        self.spec
            .filter
            .as_ref()
            .map_or(true, |f| f.matches.matches(message))
    }

    /// An acquiring consumer with a filter: served by its own walk of the queue.
    #[inline]
    pub(crate) fn is_filtered_acquirer(&self) -> bool {
        self.spec.acquire && self.spec.filter.is_some()
    }

    /// An exclusive subscription: an acquiring consumer that asked to be the only one.
    pub(crate) fn is_exclusive(&self) -> bool {
        self.spec.exclusive && self.spec.acquire
    }

    #[inline]
    pub(crate) fn has_credit_for(&self, size: u64) -> bool {
        self.room.0 > 0
            && self.room.1 > 0
            && self.credit_messages > 0
            && (self.credit_bytes == UNLIMITED || size <= u64::from(self.credit_bytes))
    }

    /// Whether deliveries to this consumer count against its settlement window: only while its
    /// credit is unlimited. Finite credit is the client's own bound on what it leaves unsettled.
    #[inline]
    pub(crate) fn windowed(&self) -> bool {
        self.spec.window.is_some() && self.credit_messages == UNLIMITED
    }

    /// Takes a settlement-window slot for one delivery when [`Consumer::windowed`] (always
    /// succeeds otherwise). Called only for the consumer about to be charged for a delivery;
    /// charging leaves unlimited credit unlimited, so `windowed` still holds after it.
    #[inline]
    pub(crate) fn reserve(&self, queue: &Arc<Queue>) -> bool {
        match &self.spec.window {
            Some(w) if self.windowed() => w.try_take(queue),
            _ => true,
        }
    }

    /// Starts a dispatch pass: how much the connection's outbox can take now.
    pub(crate) fn begin_pass(&mut self) {
        self.room = self.spec.outbox.room();
        self.walk_cut = false;
    }

    pub(crate) fn charge(&mut self, size: u64) {
        self.room.0 = self.room.0.saturating_sub(1);
        self.room.1 = self.room.1.saturating_sub(size);
        self.staged_bytes += size;
        let size = u32::try_from(size).unwrap_or(UNLIMITED);
        if self.credit_messages != UNLIMITED {
            self.credit_messages = self.credit_messages.saturating_sub(1);
        }
        if self.credit_bytes != UNLIMITED {
            self.credit_bytes = self.credit_bytes.saturating_sub(size);
        }
        // Charging the pair above keeps it equal to what the window has left.
        if self.window_mode {
            self.flow.consume(size);
        }
    }

    /// Credit mode: the balance grows (see [`add_capped`]). Window mode: the window grows
    /// (see `flow`).
    pub(crate) fn add_credit(&mut self, messages: u32, bytes: u32) {
        if self.window_mode {
            self.flow.grant(messages, bytes);
            self.sync_window();
        } else {
            self.credit_messages = add_capped(self.credit_messages, messages);
            self.credit_bytes = add_capped(self.credit_bytes, bytes);
        }
    }

    /// message.stop: no more credit. In window mode the transfers still outstanding keep
    /// their place in the window.
    pub(crate) fn stop(&mut self) {
        if self.window_mode {
            self.flow.clear_grant();
        }
        self.credit_messages = 0;
        self.credit_bytes = 0;
    }

    /// The client completed transfers delivered in window mode: the window moves on (only
    /// while the consumer is in window mode, as qpidd's `Credit::moveWindow`).
    pub(crate) fn window_completed(&mut self, messages: u32, bytes: u32) {
        if self.window_mode {
            self.flow.moved(messages, bytes);
            self.sync_window();
        }
    }

    /// 0-10 message.set-flow-mode. The spec lets a client switch only with no credit left;
    /// credit mode starts from none, window mode from the window as it was.
    pub(crate) fn set_window_mode(&mut self, window: bool) {
        if window == self.window_mode {
            return;
        }
        self.window_mode = window;
        if window {
            self.sync_window();
        } else {
            self.credit_messages = 0;
            self.credit_bytes = 0;
        }
    }

    fn sync_window(&mut self) {
        (self.credit_messages, self.credit_bytes) = self.flow.remaining();
    }

    /// Hands the pass's deliveries to the outbox. A consumer that still has credit but ran
    /// out of outbox room, or whose walk was cut short, asks to be dispatched again once the
    /// writer has taken them.
    pub(crate) fn flush_staged(&mut self, queue: &Arc<Queue>) {
        let out_of_room = (self.room.0 == 0 || self.room.1 == 0) && self.credit_messages > 0;
        let again = if std::mem::take(&mut self.walk_cut) {
            Some((queue, Again::Walk))
        } else {
            out_of_room.then_some((queue, Again::Room))
        };
        let bytes = std::mem::take(&mut self.staged_bytes);
        self.spec.outbox.push_batch(&mut self.staged, bytes, again);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer() -> Consumer {
        Consumer::new(ConsumerSpec {
            id: 1,
            outbox: Outbox::new(),
            owner: 1,
            connection: 0,
            tag: Bytes::new(),
            acquire: true,
            exclusive: false,
            window: None,
            filter: None,
            ack_timeout: None,
        })
    }

    #[test]
    fn byte_credit_limits_and_is_charged() {
        let mut c = consumer();
        assert!(!c.has_credit_for(0));
        c.add_credit(2, 100);
        assert!(c.has_credit_for(100));
        assert!(!c.has_credit_for(101));
        c.charge(60);
        assert_eq!((c.credit_messages, c.credit_bytes), (1, 40));
        assert!(!c.has_credit_for(41));
    }

    #[test]
    fn finite_credit_adds_up_to_one_short_of_unlimited() {
        let mut c = consumer();
        c.add_credit(UNLIMITED - 1, 10);
        c.add_credit(1, UNLIMITED - 10);
        assert_eq!(
            (c.credit_messages, c.credit_bytes),
            (UNLIMITED - 1, UNLIMITED - 1)
        );
        c.add_credit(u32::MAX / 2 + 1, 1);
        assert_eq!(c.credit_messages, UNLIMITED - 1, "still finite");
        c.charge(1);
        assert_eq!(
            (c.credit_messages, c.credit_bytes),
            (UNLIMITED - 2, UNLIMITED - 2)
        );
        // Only a grant of 0xFFFFFFFF itself is unlimited.
        c.add_credit(UNLIMITED, 0);
        assert_eq!(c.credit_messages, UNLIMITED);
    }

    #[test]
    fn unlimited_credit_is_never_charged_and_adding_saturates() {
        let mut c = consumer();
        c.add_credit(UNLIMITED, 10);
        c.add_credit(5, UNLIMITED);
        c.charge(1 << 40);
        assert_eq!((c.credit_messages, c.credit_bytes), (UNLIMITED, UNLIMITED));
        c.stop();
        assert!(!c.has_credit_for(0));
    }
}
