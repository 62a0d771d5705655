//! What management (the HTTP API, metrics, QMF, the console) reads: snapshots of the
//! broker's objects and their counters, assembled from what each keeps cheaply (see
//! `crate::stats`). Nothing here is on the message path; a snapshot takes the registry's read
//! lock, then each queue's lock in turn, briefly.

use std::collections::HashMap;

use crate::broker::Broker;
use crate::exchange::{BindingStatus, ExchangeInfo};
use crate::journal::JournalStats;
use crate::limits::QueueLimits;
use crate::queue::{ConsumerStatus, QueueDepth};
use crate::stats::{ExchangeTotals, QueueCounters};
use crate::value::Arguments;
use crate::{ConnectionId, OwnerId};

/// A queue as management sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStatus {
    pub name: String,
    pub durable: bool,
    pub auto_delete: bool,
    /// The session (0-10) or connection (0-9-1) it is exclusive to.
    pub owner: Option<OwnerId>,
    pub alternate_exchange: Option<String>,
    pub arguments: Arguments,
    pub limits: QueueLimits,
    pub depth: QueueDepth,
    pub consumers: Vec<ConsumerStatus>,
}

/// An exchange as management sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeStatus {
    pub info: ExchangeInfo,
    /// Built in (the default exchange and `amq.*`).
    pub builtin: bool,
    pub bindings: usize,
    pub totals: ExchangeTotals,
}

/// A consumer with its queue and, when known, its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerEntry {
    pub queue: String,
    pub consumer: ConsumerStatus,
    pub connection: Option<ConnectionId>,
}

fn entries(
    queue: &str,
    consumers: &[ConsumerStatus],
    owners: &HashMap<OwnerId, ConnectionId>,
) -> Vec<ConsumerEntry> {
    consumers
        .iter()
        .map(|consumer| ConsumerEntry {
            queue: queue.to_owned(),
            consumer: consumer.clone(),
            connection: owners.get(&consumer.owner).copied(),
        })
        .collect()
}

/// The whole broker at a glance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overview {
    pub queues: usize,
    pub exchanges: usize,
    pub connections: usize,
    pub consumers: usize,
    pub messages_ready: u64,
    pub messages_unacked: u64,
    pub bytes_ready: u64,
    pub bytes_unacked: u64,
    /// Bytes queues hold in memory (what the memory alarm watches).
    pub memory_used: u64,
    /// Counters summed over the queues that exist now.
    pub queue_totals: QueueCounters,
    /// Summed over the exchanges that exist now.
    pub exchange_totals: ExchangeTotals,
    /// Resource alarms raised now ("memory", "disk").
    pub alarms: Vec<&'static str>,
    pub store: Option<JournalStats>,
}

impl Broker {
    /// Every queue but the broker's own ([`crate::QueueOptions::system`]), by name.
    pub fn queue_statuses(&self) -> Vec<QueueStatus> {
        let mut queues = self.queues();
        queues.retain(|q| !q.is_system());
        queues.sort_by(|a, b| a.name().cmp(b.name()));
        queues
            .iter()
            .map(|q| QueueStatus {
                name: q.name().to_owned(),
                durable: q.is_durable(),
                auto_delete: q.is_auto_delete(),
                owner: q.owner(),
                alternate_exchange: q.alternate_exchange_name().map(str::to_owned),
                arguments: q.arguments().clone(),
                limits: q.limits(),
                depth: q.depth(),
                consumers: q.consumers(),
            })
            .collect()
    }

    pub fn queue_status(&self, name: &str) -> Option<QueueStatus> {
        let q = self.queue(name).filter(|q| !q.is_system())?;
        Some(QueueStatus {
            name: q.name().to_owned(),
            durable: q.is_durable(),
            auto_delete: q.is_auto_delete(),
            owner: q.owner(),
            alternate_exchange: q.alternate_exchange_name().map(str::to_owned),
            arguments: q.arguments().clone(),
            limits: q.limits(),
            depth: q.depth(),
            consumers: q.consumers(),
        })
    }

    /// Every exchange, by name (the default exchange first: its name is empty).
    pub fn exchange_statuses(&self) -> Vec<ExchangeStatus> {
        let mut exchanges = self.exchanges();
        exchanges.sort_by(|a, b| a.name().cmp(b.name()));
        exchanges
            .iter()
            .map(|e| ExchangeStatus {
                info: e.info(),
                builtin: e.is_builtin(),
                bindings: e.binding_count(),
                totals: e.counters().totals(),
            })
            .collect()
    }

    /// Every binding, the default exchange's (each queue under its own name) included, as
    /// RabbitMQ lists them.
    pub fn bindings(&self) -> Vec<BindingStatus> {
        let mut exchanges = self.exchanges();
        exchanges.sort_by(|a, b| a.name().cmp(b.name()));
        exchanges.iter().flat_map(|e| e.bindings()).collect()
    }

    /// Every consumer of every queue.
    pub fn consumer_entries(&self) -> Vec<ConsumerEntry> {
        // One map of owners for all consumers: a scan of every connection per consumer is
        // quadratic (10,000 connections with a consumer each: 10^8 session locks).
        let owners = self.connections().owners();
        self.queue_statuses()
            .into_iter()
            .flat_map(|q| entries(&q.name, &q.consumers, &owners))
            .collect()
    }

    /// The consumers of the queue `status` describes, with their connections.
    pub fn consumer_entries_of(&self, status: &QueueStatus) -> Vec<ConsumerEntry> {
        if status.consumers.is_empty() {
            return Vec::new();
        }
        entries(
            &status.name,
            &status.consumers,
            &self.connections().owners(),
        )
    }

    pub fn overview(&self) -> Overview {
        let queues = self.queue_statuses();
        let exchanges = self.exchange_statuses();
        let mut o = Overview {
            queues: queues.len(),
            exchanges: exchanges.len(),
            connections: self.connections().len(),
            memory_used: self.memory_used(),
            alarms: self.alarms().raised(),
            store: self.journal().map(|j| j.stats()),
            ..Overview::default()
        };
        for q in &queues {
            let d = &q.depth;
            o.consumers += q.consumers.len();
            o.messages_ready += d.ready;
            o.messages_unacked += d.unacked;
            o.bytes_ready += d.ready_bytes;
            o.bytes_unacked += d.unacked_bytes;
            o.queue_totals.add(&d.counters);
        }
        o.queue_totals.add(&self.retired_counters());
        for e in &exchanges {
            o.exchange_totals.add(&e.totals);
        }
        o
    }
}

#[cfg(test)]
mod tests {

    use bytes::Bytes;

    use super::*;
    use crate::broker::BrokerConfig;
    use crate::connections::ConnectionMeta;
    use crate::message::Message;
    use crate::queue::{ConsumerSpec, Outbox, OutboxItem, QueueOptions};

    fn publish(b: &Broker, exchange: &str, key: &str, body: &'static str) {
        let ex = b.exchange(exchange).unwrap();
        let m = Message::new(
            exchange.to_owned(),
            key.to_owned(),
            Bytes::from_static(body.as_bytes()),
        );
        b.publish(&ex, m).unwrap();
    }

    #[test]
    fn counters_follow_messages_through_a_queue() {
        let b = Broker::new(BrokerConfig::default());
        let (q, _) = b
            .declare_queue("q", QueueOptions::default(), false, 1)
            .unwrap();
        b.bind("q", "amq.direct", "k", &Arguments::default())
            .unwrap();
        for body in ["a", "b", "c", "d", "e"] {
            publish(&b, "amq.direct", "k", body);
        }
        publish(&b, "amq.direct", "nowhere", "lost");
        let outbox = Outbox::new();
        let consumer = b.next_consumer_id();
        q.subscribe(ConsumerSpec {
            id: consumer,
            outbox: outbox.clone(),
            owner: 9,
            connection: 0,
            tag: Bytes::from_static(b"ctag"),
            acquire: true,
            exclusive: false,
            window: None,
            filter: None,
            ack_timeout: None,
        })
        .unwrap();
        q.add_credit(consumer, 3, u32::MAX).unwrap();
        let mut items = Vec::new();
        outbox.take(&mut items);
        let delivered: Vec<_> = items
            .into_iter()
            .filter_map(|i| match i {
                OutboxItem::Deliver(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(delivered.len(), 3);
        q.accept(delivered[0].position);
        q.reject(delivered[1].position, delivered[1].message.clone());
        q.release(
            [(delivered[2].position, delivered[2].message.clone())],
            true,
        );
        b.purge_queue("q").unwrap();

        let s = b.queue_status("q").unwrap();
        let c = s.depth.counters;
        assert_eq!((c.enqueued, c.delivered, c.acked, c.rejected), (5, 3, 1, 1));
        assert_eq!((c.released, c.purged, c.dequeued()), (1, 3, 5));
        assert_eq!(s.depth.ready, 0);
        assert_eq!(s.consumers.len(), 1);
        assert_eq!(s.consumers[0].tag, "ctag");

        let direct = b
            .exchange_statuses()
            .into_iter()
            .find(|e| e.info.name == "amq.direct")
            .unwrap();
        assert_eq!(direct.totals.messages_in, 6);
        assert_eq!(direct.totals.unroutable, 1);
        assert_eq!(direct.bindings, 1);
        let bindings: Vec<_> = b
            .bindings()
            .into_iter()
            .map(|b| (b.source, b.destination, b.key))
            .collect();
        let owned = |s: &str| s.to_owned();
        assert_eq!(
            bindings,
            [
                (owned(""), owned("q"), owned("q")),
                (owned("amq.direct"), owned("q"), owned("k"))
            ]
        );

        let o = b.overview();
        assert_eq!((o.queues, o.consumers, o.connections), (1, 1, 0));
        assert_eq!(o.queue_totals.enqueued, 5);
        assert_eq!(o.exchange_totals.messages_in, 6);
        assert!(o.alarms.is_empty());
    }

    #[test]
    fn consumers_are_matched_to_their_connections() {
        let b = Broker::new(BrokerConfig::default());
        let (q, _) = b
            .declare_queue("q", QueueOptions::default(), false, 1)
            .unwrap();
        let outbox = Outbox::new();
        let meta = ConnectionMeta {
            peer: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
            user: "u".into(),
            protocol: "AMQP 0-10",
            tls: false,
            client_properties: Vec::new(),
            connected_at: 0,
            heartbeat: 0,
            frame_max: 65535,
            channel_max: 256,
        };
        let conn = b
            .connections()
            .register(b.next_connection_id(), meta, &outbox);
        conn.set_sessions(vec![crate::connections::SessionStatus {
            channel: 1,
            owner: 42,
            ..Default::default()
        }]);
        q.subscribe(ConsumerSpec {
            id: b.next_consumer_id(),
            outbox,
            owner: 42,
            connection: 0,
            tag: Bytes::from_static(b"d"),
            acquire: false,
            exclusive: false,
            window: None,
            filter: None,
            ack_timeout: None,
        })
        .unwrap();
        let consumers = b.consumer_entries();
        assert_eq!(consumers.len(), 1);
        assert_eq!(consumers[0].connection, Some(conn.id()));
        assert!(!consumers[0].consumer.acquire);

        // One queue's consumers, and only theirs.
        let (other, _) = b
            .declare_queue("other", QueueOptions::default(), false, 1)
            .unwrap();
        let outbox = Outbox::new();
        other
            .subscribe(ConsumerSpec {
                id: b.next_consumer_id(),
                outbox,
                owner: 43,
                connection: 0,
                tag: Bytes::from_static(b"e"),
                acquire: true,
                exclusive: false,
                window: None,
                filter: None,
                ack_timeout: None,
            })
            .unwrap();
        let of_q = b.consumer_entries_of(&b.queue_status("q").unwrap());
        assert_eq!(of_q, consumers);
        let of_other = b.consumer_entries_of(&b.queue_status("other").unwrap());
        assert_eq!(of_other.len(), 1);
        assert_eq!(of_other[0].queue, "other");
        assert_eq!(of_other[0].connection, None, "owner 43 has no connection");
        assert_eq!(b.consumer_entries().len(), 2);
    }
}
