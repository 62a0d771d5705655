//! Link addresses, as qpidd reads them (and RabbitMQ's `/queue/…`, `/exchange/…` forms):
//!
//! - `q` names a queue, or else an exchange (the message's subject is the routing key);
//! - `ex/key` names exchange `ex` with routing (or binding) key `key`;
//! - `/q` is `q` (a leading slash is dropped);
//! - `/queue/q`, `/queue` (the subject names the queue), `/exchange/ex`, `/exchange/ex/key`,
//!   `/topic/key` (`amq.topic`) are RabbitMQ's spellings of the same;
//! - with the `topic` capability (Qpid JMS topics) a name that is neither becomes a key of
//!   `amq.topic`.
//!
//! Queues win over exchanges, as in qpidd. What does not resolve is `amqp:not-found`.

use std::sync::Arc;

use ferry_core::{Broker, Exchange, Queue};

/// What an address names.
#[derive(Debug, Clone)]
pub enum Node {
    Queue(Arc<Queue>),
    /// An exchange, with the routing key (targets) or binding key (sources) the address
    /// gives; `None`: the message's subject (targets), every message the kind allows
    /// (sources).
    Exchange {
        exchange: Arc<Exchange>,
        key: Option<String>,
    },
}

/// The default topic exchange, which JMS topics without an exchange of their own use.
pub const TOPIC_EXCHANGE: &str = "amq.topic";

/// Resolves `address`; `topic` says the peer asked for a topic (capability `topic`).
pub fn resolve(broker: &Broker, address: &str, topic: bool) -> Option<Node> {
    let exchange = |name: &str, key: Option<&str>| {
        broker.exchange(name).map(|exchange| Node::Exchange {
            exchange,
            key: key.map(str::to_owned),
        })
    };
    if let Some(rest) = address.strip_prefix("/queue/") {
        return broker.queue(rest).map(Node::Queue);
    }
    if address == "/queue" {
        return exchange("", None);
    }
    if let Some(rest) = address.strip_prefix("/exchange/") {
        return match rest.split_once('/') {
            Some((name, key)) => exchange(name, Some(key)),
            None => exchange(rest, None),
        };
    }
    if let Some(key) = address.strip_prefix("/topic/") {
        return exchange(TOPIC_EXCHANGE, Some(key));
    }
    let name = address.strip_prefix('/').unwrap_or(address);
    if name.is_empty() {
        return None;
    }
    if let Some(q) = broker.queue(name) {
        return Some(Node::Queue(q));
    }
    if let Some(node) = exchange(name, None) {
        return Some(node);
    }
    if let Some((ex, key)) = name.split_once('/') {
        if let Some(node) = exchange(ex, Some(key)) {
            return Some(node);
        }
    }
    if topic {
        return exchange(TOPIC_EXCHANGE, Some(name));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::{BrokerConfig, QueueOptions};

    fn broker() -> Arc<Broker> {
        let b = Broker::new(BrokerConfig::default());
        b.declare_queue("q", QueueOptions::default(), false, 1)
            .unwrap();
        b.declare_exchange(
            "x",
            ferry_core::ExchangeKind::Direct,
            Default::default(),
            false,
        )
        .unwrap();
        b.declare_queue("x/odd", QueueOptions::default(), false, 1)
            .unwrap();
        b
    }

    fn describe(n: Option<Node>) -> String {
        match n {
            None => "none".into(),
            Some(Node::Queue(q)) => format!("queue {}", q.name()),
            Some(Node::Exchange { exchange, key }) => {
                format!("exchange '{}' key {key:?}", exchange.name())
            }
        }
    }

    #[test]
    fn addresses_resolve_as_qpidd_and_rabbitmq_spell_them() {
        let b = broker();
        let r = |a: &str, topic| describe(resolve(&b, a, topic));
        assert_eq!(r("q", false), "queue q");
        assert_eq!(r("/q", false), "queue q");
        assert_eq!(r("/queue/q", false), "queue q");
        assert_eq!(r("/queue", false), "exchange '' key None");
        assert_eq!(r("amq.topic", false), "exchange 'amq.topic' key None");
        assert_eq!(
            r("amq.topic/a.b", false),
            "exchange 'amq.topic' key Some(\"a.b\")"
        );
        assert_eq!(
            r("/exchange/amq.fanout", false),
            "exchange 'amq.fanout' key None"
        );
        assert_eq!(
            r("/exchange/amq.direct/k/2", false),
            "exchange 'amq.direct' key Some(\"k/2\")"
        );
        assert_eq!(
            r("/topic/a.b", false),
            "exchange 'amq.topic' key Some(\"a.b\")"
        );
        // A queue whose name has a slash wins over the exchange/key reading.
        assert_eq!(r("x/odd", false), "queue x/odd");
        assert_eq!(r("x/even", false), "exchange 'x' key Some(\"even\")");
        assert_eq!(r("nothing", false), "none");
        assert_eq!(r("nothing/k", false), "none");
        assert_eq!(r("", false), "none");
        assert_eq!(r("/queue/nothing", false), "none");
        assert_eq!(r("news", true), "exchange 'amq.topic' key Some(\"news\")");
        assert_eq!(r("q", true), "queue q");
    }
}
