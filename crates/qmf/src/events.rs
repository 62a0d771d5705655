//! QMF events: the core's [`BrokerEvent`]s, queued by an [`Observer`] under the broker's
//! lock and published by the agent's task to `qmf.default.topic` as qpidd's
//! `ManagementAgent::raiseEvent` publishes them (v2): routing key
//! `agent.ind.event.org_apache_qpid_broker.<event>.<severity>.<vendor>.<product>.<instance>`,
//! an `amqp/list` holding one map (`_schema_id`, `_values`, `_timestamp`, `_severity`),
//! headers `method` "indication", `qmf.opcode` "_data_indication", `qmf.content` "_event".
//!
//! Events reported: queueDeclare, queueDelete, exchangeDeclare, exchangeDelete, bind,
//! unbind, and a queue's threshold crossings (queueThresholdCrossedUpward, with
//! queueThresholdExceeded too for a queue without downward thresholds, at severity "warn";
//! queueThresholdCrossedDownward). `rhost` and `user` are those of the declaring or deleting session's connection
//! when the core knows the session (queue declares and explicit queue deletes) and that
//! connection is still open; empty otherwise. subscribe/unsubscribe are not reported (the
//! core does not see subscriptions at the broker level).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ferry_amqp010::{List, Map, Value};
use ferry_core::{Broker, BrokerEvent, Observer, OwnerId, Threshold};
use tokio::sync::Notify;

use crate::schema::{hash_of, PACKAGE};
use crate::value::{from_arguments, header_text, text};
use crate::wire::{Content, Reply, ReplyAddress};
use crate::Identity;

/// Events waiting for the agent's task; beyond this they are dropped (and counted), so a
/// stalled agent cannot make the broker hold unbounded memory.
const MAX_PENDING: usize = 10_000;

/// qpidd's severities, and how routing keys write them: "inform" for most events, "warning"
/// for a queue filling past its threshold.
const INFO: (u8, &str) = (6, "info");
const WARNING: (u8, &str) = (4, "warn");

/// The observer the broker calls: a bounded queue and a wake-up for the agent's task.
#[derive(Default)]
pub struct EventQueue {
    pending: Mutex<VecDeque<BrokerEvent>>,
    pub(crate) notify: Notify,
    dropped: AtomicU64,
}

impl Observer for EventQueue {
    fn event(&self, event: BrokerEvent) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.len() >= MAX_PENDING {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        pending.push_back(event);
        drop(pending);
        self.notify.notify_one();
    }
}

impl EventQueue {
    /// Everything queued so far, and how many were dropped since the last call.
    pub(crate) fn take(&self) -> (Vec<BrokerEvent>, u64) {
        let events = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        (events, self.dropped.swap(0, Ordering::Relaxed))
    }
}

/// The peer address and user of the connection `owner` belongs to, if it is still open.
fn who(broker: &Broker, owner: Option<OwnerId>) -> (String, String) {
    owner
        .and_then(|o| broker.connections().owner_connection(o))
        .and_then(|id| broker.connections().get(id))
        .map(|c| (crate::objects::connection_address(&c), c.meta.user))
        .unwrap_or_default()
}

/// The event names, their severity and their `_values`, qpidd's argument lists
/// (management-schema.xml): one event, or two for an upward threshold crossing that qpidd
/// also reports the old way; none for the agent's own queue.
fn describe(
    broker: &Broker,
    event: &BrokerEvent,
    hidden_queue: &str,
) -> Vec<(&'static str, (u8, &'static str), Map)> {
    let mut v = Map::new();
    let who_values = |owner: Option<OwnerId>, v: &mut Map| {
        let (rhost, user) = who(broker, owner);
        v.insert("rhost", text(&rhost));
        v.insert("user", text(&user));
    };
    let name = match event {
        BrokerEvent::QueueDeclared {
            name,
            durable,
            exclusive,
            auto_delete,
            alternate_exchange,
            arguments,
            created,
            requester,
        } => {
            if name == hidden_queue {
                return Vec::new();
            }
            who_values(Some(*requester), &mut v);
            v.insert("qName", text(name));
            v.insert("durable", Value::Bool(*durable));
            v.insert("excl", Value::Bool(*exclusive));
            v.insert("autoDel", Value::Bool(*auto_delete));
            v.insert("altEx", text(alternate_exchange.as_deref().unwrap_or("")));
            v.insert("args", from_arguments(arguments));
            v.insert("disp", text(if *created { "created" } else { "existing" }));
            "queueDeclare"
        }
        BrokerEvent::QueueDeleted { name, requester } => {
            if name == hidden_queue {
                return Vec::new();
            }
            who_values(*requester, &mut v);
            v.insert("qName", text(name));
            "queueDelete"
        }
        BrokerEvent::ExchangeDeclared {
            name,
            kind,
            durable,
            auto_delete,
            alternate_exchange,
            arguments,
            created,
        } => {
            who_values(None, &mut v);
            v.insert("exName", text(name));
            v.insert("exType", text(kind.name()));
            v.insert("altEx", text(alternate_exchange.as_deref().unwrap_or("")));
            v.insert("durable", Value::Bool(*durable));
            v.insert("autoDel", Value::Bool(*auto_delete));
            v.insert("args", from_arguments(arguments));
            v.insert("disp", text(if *created { "created" } else { "existing" }));
            "exchangeDeclare"
        }
        BrokerEvent::ExchangeDeleted { name } => {
            who_values(None, &mut v);
            v.insert("exName", text(name));
            "exchangeDelete"
        }
        BrokerEvent::Bound {
            exchange,
            queue,
            key,
            arguments,
        } => {
            if queue == hidden_queue {
                return Vec::new();
            }
            who_values(None, &mut v);
            v.insert("exName", text(exchange));
            v.insert("qName", text(queue));
            v.insert("key", text(key));
            v.insert("args", from_arguments(arguments));
            "bind"
        }
        BrokerEvent::Unbound {
            exchange,
            queue,
            key,
        } => {
            if queue == hidden_queue {
                return Vec::new();
            }
            who_values(None, &mut v);
            v.insert("exName", text(exchange));
            v.insert("qName", text(queue));
            v.insert("key", text(key));
            "unbind"
        }
        BrokerEvent::QueueThreshold {
            queue,
            crossed,
            messages,
            bytes,
            legacy,
        } => {
            v.insert("qName", text(queue));
            v.insert("msgDepth", Value::Uint64(*messages));
            v.insert("byteDepth", Value::Uint64(*bytes));
            return match crossed {
                Threshold::Upward if *legacy => vec![
                    ("queueThresholdCrossedUpward", WARNING, v.clone()),
                    ("queueThresholdExceeded", WARNING, v),
                ],
                Threshold::Upward => vec![("queueThresholdCrossedUpward", WARNING, v)],
                Threshold::Downward => vec![("queueThresholdCrossedDownward", INFO, v)],
            };
        }
    };
    vec![(name, INFO, v)]
}

/// A name as qpidd puts it in a routing key: dots become underscores.
fn keyify(name: &str) -> String {
    name.replace('.', "_")
}

/// The indications for `event` and where they go; none for events about the agent's own
/// plumbing.
pub(crate) fn indications(
    broker: &Broker,
    identity: &Identity,
    event: &BrokerEvent,
    now_ns: u64,
) -> Vec<(Reply, ReplyAddress)> {
    describe(broker, event, &identity.queue)
        .into_iter()
        .map(|(name, (severity, severity_name), values)| {
            let mut schema = Map::new();
            schema.insert("_package_name", text(PACKAGE));
            schema.insert("_class_name", text(name));
            schema.insert("_type", text("_event"));
            schema.insert("_hash", Value::Uuid(hash_of(name)));
            let mut map = Map::new();
            map.insert("_schema_id", Value::Map(schema));
            map.insert("_values", Value::Map(values));
            map.insert("_timestamp", Value::Uint64(now_ns));
            map.insert("_severity", Value::Uint8(severity));
            let reply = Reply {
                method: "indication",
                opcode: "_data_indication",
                content: Content::List(List(vec![Value::Map(map)])),
                headers: vec![("qmf.content", header_text("_event"))],
            };
            let to = ReplyAddress {
                exchange: crate::TOPIC_EXCHANGE.to_owned(),
                routing_key: format!(
                    "agent.ind.event.{}.{name}.{severity_name}.{}.{}.{}",
                    keyify(PACKAGE),
                    keyify(crate::VENDOR),
                    keyify(crate::PRODUCT),
                    keyify(&identity.instance)
                ),
                correlation_id: None,
            };
            (reply, to)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use ferry_core::{Arguments, BrokerConfig, ConnectionMeta, Outbox, SessionStatus};

    use super::*;
    use crate::value::read_text;
    use crate::AgentConfig;

    fn values(reply: &Reply) -> Map {
        let Content::List(list) = &reply.content else {
            panic!("an event is a list")
        };
        let [Value::Map(event)] = &list.0[..] else {
            panic!("one event: {list:?}")
        };
        // "inform", but "warning" for a queue filling past its threshold.
        let warns = matches!(event.get("_schema_id"), Some(Value::Map(id))
        if id.get("_class_name").and_then(read_text).is_some_and(|n| {
            n == "queueThresholdCrossedUpward" || n == "queueThresholdExceeded"
        }));
        let severity = if warns { 4 } else { 6 };
        assert_eq!(event.get("_severity"), Some(&Value::Uint8(severity)));
        match event.get("_values") {
            Some(Value::Map(v)) => v.clone(),
            other => panic!("no _values: {other:?}"),
        }
    }

    #[test]
    fn a_queue_declare_names_its_connection_and_routes_as_qpidds() {
        let broker = Broker::new(BrokerConfig::default());
        let id = Identity::new(AgentConfig::default());
        let outbox = Outbox::new();
        let meta = ConnectionMeta {
            peer: SocketAddr::from(([127, 0, 0, 1], 999)),
            user: "bob".into(),
            protocol: "AMQP 0-10",
            tls: false,
            client_properties: Vec::new(),
            connected_at: 0,
            heartbeat: 0,
            frame_max: 65535,
            channel_max: 256,
        };
        let conn = broker
            .connections()
            .register(broker.next_connection_id(), meta, &outbox);
        conn.set_sessions(vec![SessionStatus {
            owner: 42,
            ..SessionStatus::default()
        }]);
        let event = BrokerEvent::QueueDeclared {
            name: "myq".into(),
            durable: false,
            exclusive: true,
            auto_delete: true,
            alternate_exchange: None,
            arguments: Arguments::new(),
            created: true,
            requester: 42,
        };
        let (reply, to) = indications(&broker, &id, &event, 7).remove(0);
        assert_eq!(to.exchange, "qmf.default.topic");
        assert_eq!(
            to.routing_key,
            format!(
                "agent.ind.event.org_apache_qpid_broker.queueDeclare.info.apache_org.qpidd.{}",
                id.instance
            )
        );
        assert_eq!(reply.opcode, "_data_indication");
        let v = values(&reply);
        assert_eq!(v.get("qName").and_then(read_text), Some("myq"));
        assert_eq!(v.get("rhost").and_then(read_text), Some("127.0.0.1:999"));
        assert_eq!(v.get("user").and_then(read_text), Some("bob"));
        assert_eq!(v.get("disp").and_then(read_text), Some("created"));
        assert_eq!(v.get("excl"), Some(&Value::Bool(true)));

        let gone = BrokerEvent::QueueDeleted {
            name: "myq".into(),
            requester: None,
        };
        let (reply, to) = indications(&broker, &id, &gone, 8).remove(0);
        assert!(to.routing_key.contains(".queueDelete.info."));
        assert_eq!(values(&reply).get("rhost").and_then(read_text), Some(""));

        let own = BrokerEvent::QueueDeleted {
            name: id.queue.clone(),
            requester: None,
        };
        assert!(indications(&broker, &id, &own, 9).is_empty());
    }

    #[test]
    fn every_event_carries_its_schemas_arguments() {
        use ferry_core::ExchangeKind;
        let broker = Broker::new(BrokerConfig::default());
        let id = Identity::new(AgentConfig::default());
        let none = Arguments::new;
        let events = [
            BrokerEvent::QueueDeclared {
                name: "q".into(),
                durable: true,
                exclusive: false,
                auto_delete: false,
                alternate_exchange: Some("x".into()),
                arguments: none(),
                created: false,
                requester: 1,
            },
            BrokerEvent::QueueDeleted {
                name: "q".into(),
                requester: Some(1),
            },
            BrokerEvent::ExchangeDeclared {
                name: "x".into(),
                kind: ExchangeKind::Fanout,
                durable: false,
                auto_delete: false,
                alternate_exchange: None,
                arguments: none(),
                created: true,
            },
            BrokerEvent::ExchangeDeleted { name: "x".into() },
            BrokerEvent::Bound {
                exchange: "x".into(),
                queue: "q".into(),
                key: "k".into(),
                arguments: none(),
            },
            BrokerEvent::Unbound {
                exchange: "x".into(),
                queue: "q".into(),
                key: "k".into(),
            },
            BrokerEvent::QueueThreshold {
                queue: "q".into(),
                crossed: Threshold::Upward,
                messages: 5,
                bytes: 170,
                legacy: true,
            },
            BrokerEvent::QueueThreshold {
                queue: "q".into(),
                crossed: Threshold::Downward,
                messages: 3,
                bytes: 102,
                legacy: true,
            },
        ];
        let mut names = Vec::new();
        for (reply, to) in events
            .iter()
            .flat_map(|event| indications(&broker, &id, event, 1))
        {
            let name = to.routing_key.split('.').nth(4).unwrap().to_owned();
            let (_, args) = crate::v1::schema::EVENTS
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("{name} has no schema"));
            names.push(name.clone());
            let v = values(&reply);
            let mut keys: Vec<String> = v.iter().map(|(k, _)| k.to_string()).collect();
            let mut expected: Vec<String> = args.iter().map(|a| a.name.to_owned()).collect();
            keys.sort();
            expected.sort();
            assert_eq!(keys, expected, "{name}");
        }
        assert_eq!(
            names[names.len() - 3..],
            [
                "queueThresholdCrossedUpward",
                "queueThresholdExceeded",
                "queueThresholdCrossedDownward"
            ]
        );
    }

    #[test]
    fn the_queue_is_bounded() {
        let q = EventQueue::default();
        for i in 0..MAX_PENDING + 5 {
            q.event(BrokerEvent::ExchangeDeleted {
                name: i.to_string(),
            });
        }
        let (events, dropped) = q.take();
        assert_eq!((events.len(), dropped), (MAX_PENDING, 5));
        assert_eq!(q.take(), (Vec::new(), 0));
    }
}
