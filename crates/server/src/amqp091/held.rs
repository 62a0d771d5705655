//! Replies that report a change to durable state (declare-ok, bind-ok, delete-ok, purge-ok,
//! tx.commit-ok for durable objects) go out only once the journal has that change on stable
//! storage, as 0-10 completes such commands. Replies made while one is held queue behind it,
//! so the client sees them in order; publisher confirms wait behind them too, and so do the
//! deliveries of a consumer whose consume-ok is held (it gets no credit until then).

use std::collections::VecDeque;

use ferry_amqp091::Method;
use ferry_core::{ConsumerId, Message, SyncPoint};

/// One held reply.
#[derive(Debug)]
pub struct Reply {
    pub method: Method,
    /// The content of a get-ok.
    pub content: Option<Message>,
    /// Times the get-ok's message came back to its queue (its `x-delivery-count`).
    pub returns: u16,
    /// The consume-ok of this consumer: once it is sent, the consumer may get deliveries.
    pub announces: Option<ConsumerId>,
}

impl From<Method> for Reply {
    fn from(method: Method) -> Reply {
        Reply {
            method,
            content: None,
            returns: 0,
            announces: None,
        }
    }
}

#[derive(Debug, Default)]
pub struct HeldReplies {
    /// Ascending points; a reply queued only for order carries the point before it.
    held: VecDeque<(SyncPoint, Reply)>,
}

impl HeldReplies {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The point the last held reply waits for.
    pub fn last_point(&self) -> Option<SyncPoint> {
        self.held.back().map(|(p, _)| *p)
    }

    /// Holds `method` until the journal is durable up to `point` and every reply held
    /// before it has gone.
    pub fn hold(&mut self, point: SyncPoint, reply: Reply) {
        let point = self.last_point().map_or(point, |last| last.max(point));
        self.held.push_back((point, reply));
    }

    /// The replies the journal, durable up to `durable`, lets go, in order.
    pub fn release(&mut self, durable: SyncPoint) -> Vec<Reply> {
        let n = self.held.partition_point(|(p, _)| *p <= durable);
        self.held.drain(..n).map(|(_, m)| m).collect()
    }

    /// The channel ends (or the store failed): what is held will never be sent.
    pub fn clear(&mut self) {
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp091::{QueueBindOk, QueueDeclareOk, TxCommitOk};

    #[test]
    fn replies_go_in_order_once_durable() {
        let mut h = HeldReplies::default();
        h.hold(SyncPoint(5), Method::from(QueueBindOk {}).into());
        // Ready at once, but queued behind the first for order.
        h.hold(SyncPoint(0), Method::from(QueueDeclareOk::default()).into());
        h.hold(SyncPoint(9), Method::from(TxCommitOk {}).into());
        assert_eq!(h.last_point(), Some(SyncPoint(9)));
        assert!(h.release(SyncPoint(4)).is_empty());
        let out = h.release(SyncPoint(8));
        assert_eq!(out.len(), 2);
        assert!(matches!(out[0].method, Method::QueueBindOk(_)));
        assert!(matches!(out[1].method, Method::QueueDeclareOk(_)));
        assert!(!h.is_empty());
        assert_eq!(h.release(SyncPoint(9)).len(), 1);
        assert!(h.is_empty());
    }
}
