//! The agent end to end inside one process: a console's requests published through the
//! core, the replies read from a queue bound to `qmf.default.topic`.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_amqp010::codec::Reader;
use ferry_amqp010::{
    DeliveryProperties, List, Map, MessageHeader, MessageProperties, ReplyTo, Str, Value,
};
use ferry_core::{
    Arguments, Broker, BrokerConfig, ConsumerSpec, MessageParts, Outbox, OutboxItem,
    ProtocolHeader, QueueOptions,
};

use super::*;
use crate::value::{read_text, text};

struct Console {
    broker: Arc<Broker>,
    outbox: Arc<Outbox>,
    /// Taken from the outbox, not yet received.
    pending: std::sync::Mutex<std::collections::VecDeque<OutboxItem>>,
    correlation: u32,
    _agent: AgentHandle,
}

/// A reply as a console sees it.
struct Received {
    headers: Map,
    correlation_id: Option<Bytes>,
    content_type: String,
    body: Bytes,
}

impl Received {
    fn opcode(&self) -> &str {
        self.headers
            .get("qmf.opcode")
            .and_then(read_text)
            .unwrap_or("")
    }

    fn list(&self) -> Vec<Value> {
        assert_eq!(self.content_type, "amqp/list");
        List::decode(&mut Reader::new(self.body.clone())).unwrap().0
    }

    fn map(&self) -> Map {
        assert_eq!(self.content_type, "amqp/map");
        Map::decode(&mut Reader::new(self.body.clone())).unwrap()
    }
}

impl Console {
    fn start() -> Console {
        let broker = Broker::new(BrokerConfig::default());
        let agent = start(broker.clone(), AgentConfig::default()).unwrap();
        broker
            .declare_queue("replies", QueueOptions::default(), false, 1)
            .unwrap();
        broker
            .bind(
                "replies",
                TOPIC_EXCHANGE,
                "direct.console",
                &Arguments::new(),
            )
            .unwrap();
        let outbox = Outbox::new();
        let q = broker.queue("replies").unwrap();
        let id = broker.next_consumer_id();
        q.subscribe(ConsumerSpec {
            id,
            outbox: outbox.clone(),
            owner: 1,
            connection: 0,
            tag: Bytes::from_static(b"r"),
            acquire: true,
            exclusive: false,
            window: None,
            filter: None,
            ack_timeout: None,
        })
        .unwrap();
        q.add_credit(id, u32::MAX, u32::MAX).unwrap();
        Console {
            broker,
            outbox,
            pending: Default::default(),
            correlation: 0,
            _agent: agent,
        }
    }

    /// Sends a request as BrokerAgent does; returns its correlation id.
    fn send(&mut self, opcode: &str, body: &Map, reply: bool) -> Bytes {
        self.correlation += 1;
        let correlation = Bytes::from(self.correlation.to_string());
        let mut headers = Map::new();
        headers.insert("method", text("request"));
        headers.insert("qmf.opcode", text(opcode));
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("broker")),
                ..Default::default()
            }),
            properties: Some(MessageProperties {
                correlation_id: Some(correlation.clone()),
                reply_to: reply.then(|| ReplyTo {
                    exchange: Some(Str::from(TOPIC_EXCHANGE)),
                    routing_key: Some(Str::from("direct.console")),
                }),
                content_type: Some(Str::from("amqp/map")),
                app_id: Some(Bytes::from_static(b"qmf2")),
                application_headers: Some(headers),
                ..Default::default()
            }),
            other: Vec::new(),
        };
        let mut segment = BytesMut::new();
        header.encode(&mut segment).unwrap();
        let mut content = BytesMut::new();
        body.encode(&mut content).unwrap();
        let mut m = MessageParts::new(DIRECT_EXCHANGE, "broker", content.freeze());
        m.header = ProtocolHeader::Amqp010(segment.freeze());
        let ex = self.broker.exchange(DIRECT_EXCHANGE).unwrap();
        assert_eq!(self.broker.publish(&ex, m.build()).unwrap().queues, 1);
        correlation
    }

    async fn receive(&self) -> Received {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut items = Vec::new();
            self.outbox.take(&mut items);
            let next = {
                let mut pending = self.pending.lock().unwrap();
                pending.extend(items);
                pending.pop_front()
            };
            if let Some(OutboxItem::Deliver(d)) = next {
                d.queue.accept(d.position);
                let ferry_core::Header::Amqp010(segment) = d.message.header() else {
                    panic!("a reply has a 0-10 header")
                };
                let p = MessageHeader::decode(Bytes::copy_from_slice(segment))
                    .unwrap()
                    .properties
                    .unwrap();
                assert_eq!(p.app_id.as_deref(), Some(b"qmf2".as_slice()));
                return Received {
                    headers: p.application_headers.unwrap_or_default(),
                    correlation_id: p.correlation_id,
                    content_type: p.content_type.unwrap().to_str_lossy().into_owned(),
                    body: d.message.body_bytes(),
                };
            }
            tokio::time::timeout_at(deadline, self.outbox.notified())
                .await
                .expect("a reply within 5 s");
        }
    }

    async fn nothing_more(&self) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(self.outbox.is_empty(), "no further reply");
        assert!(self.pending.lock().unwrap().is_empty(), "no further reply");
    }
}

fn class_query(class: &str) -> Map {
    let mut schema = Map::new();
    schema.insert("_class_name", text(class));
    let mut q = Map::new();
    q.insert("_what", text("OBJECT"));
    q.insert("_schema_id", Value::Map(schema));
    q
}

fn object_name(object: &Value) -> String {
    let Value::Map(m) = object else {
        panic!("an object is a map")
    };
    let Some(Value::Map(oid)) = m.get("_object_id") else {
        panic!("no _object_id")
    };
    oid.get("_object_name")
        .and_then(read_text)
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_class_query_comes_back_in_partial_batches() {
    let mut c = Console::start();
    for i in 0..150 {
        c.broker
            .declare_queue(&format!("q{i:03}"), QueueOptions::default(), false, 1)
            .unwrap();
    }
    let cid = c.send("_query_request", &class_query("queue"), true);
    let first = c.receive().await;
    assert_eq!(first.opcode(), "_query_response");
    assert_eq!(first.correlation_id, Some(cid.clone()));
    assert!(first.headers.get("partial").is_some());
    let second = c.receive().await;
    assert!(second.headers.get("partial").is_none());
    assert_eq!(second.correlation_id, Some(cid));
    let mut names: Vec<String> = first.list().iter().map(object_name).collect();
    names.extend(second.list().iter().map(object_name));
    assert_eq!(first.list().len(), 100);
    // 150 queues and the console's reply queue; the agent's own is not listed.
    assert_eq!(names.len(), 151);
    assert!(names.contains(&"org.apache.qpid.broker:queue:q149".to_owned()));
    assert!(!names.iter().any(|n| n.contains("qmf.agent.")));
    c.nothing_more().await;
}

#[tokio::test]
async fn a_query_by_object_id_finds_one_object_or_none() {
    let mut c = Console::start();
    let by_id = |name: &str| {
        let mut oid = Map::new();
        oid.insert("_object_name", text(name));
        let mut q = Map::new();
        q.insert("_what", text("OBJECT"));
        q.insert("_object_id", Value::Map(oid));
        q
    };
    c.send(
        "_query_request",
        &by_id("org.apache.qpid.broker:exchange:amq.topic"),
        true,
    );
    let found = c.receive().await.list();
    assert_eq!(found.len(), 1);
    assert_eq!(
        object_name(&found[0]),
        "org.apache.qpid.broker:exchange:amq.topic"
    );
    c.send(
        "_query_request",
        &by_id("org.apache.qpid.broker:queue:nope"),
        true,
    );
    let none = c.receive().await;
    assert_eq!(none.opcode(), "_query_response");
    assert!(none.list().is_empty());
}

#[tokio::test]
async fn a_method_creates_and_a_bad_query_is_an_exception() {
    let mut c = Console::start();
    let mut oid = Map::new();
    oid.insert(
        "_object_name",
        text("org.apache.qpid.broker:broker:amqp-broker"),
    );
    let mut args = Map::new();
    args.insert("type", text("queue"));
    args.insert("name", text("made"));
    let mut request = Map::new();
    request.insert("_object_id", Value::Map(oid));
    request.insert("_method_name", text("create"));
    request.insert("_arguments", Value::Map(args));
    c.send("_method_request", &request, true);
    let reply = c.receive().await;
    assert_eq!(reply.opcode(), "_method_response");
    assert!(matches!(reply.map().get("_arguments"), Some(Value::Map(_))));
    assert!(c.broker.queue("made").is_some());

    let mut q = Map::new();
    q.insert("_what", text("SCHEMA_ID"));
    c.send("_query_request", &q, true);
    let e = c.receive().await;
    assert_eq!(e.opcode(), "_exception");
    let Some(Value::Map(values)) = e.map().get("_values").cloned() else {
        panic!("no _values")
    };
    assert_eq!(
        values.get("error_text").and_then(read_text),
        Some("Query for _what => 'SCHEMA_ID' not supported")
    );
}

#[tokio::test]
async fn garbage_is_ignored_or_answered_and_the_agent_carries_on() {
    let mut c = Console::start();
    // No reply-to: ignored (qpidd's rule).
    c.send("_query_request", &class_query("broker"), false);
    // An opcode the agent does not handle: ignored.
    c.send("_subscribe_request", &Map::new(), true);
    c.nothing_more().await;
    // A body that is not a map: an exception.
    let ex = c.broker.exchange(DIRECT_EXCHANGE).unwrap();
    let mut headers = Map::new();
    headers.insert("qmf.opcode", text("_query_request"));
    let header = MessageHeader {
        delivery: None,
        properties: Some(MessageProperties {
            reply_to: Some(ReplyTo {
                exchange: Some(Str::from(TOPIC_EXCHANGE)),
                routing_key: Some(Str::from("direct.console")),
            }),
            app_id: Some(Bytes::from_static(b"qmf2")),
            application_headers: Some(headers),
            ..Default::default()
        }),
        other: Vec::new(),
    };
    let mut segment = BytesMut::new();
    header.encode(&mut segment).unwrap();
    let mut m = MessageParts::new(DIRECT_EXCHANGE, "broker", Bytes::from_static(b"\xff\xff"));
    m.header = ProtocolHeader::Amqp010(segment.freeze());
    c.broker.publish(&ex, m.build()).unwrap();
    assert_eq!(c.receive().await.opcode(), "_exception");
    // Still answering.
    c.send("_query_request", &class_query("broker"), true);
    assert_eq!(c.receive().await.list().len(), 1);
}

#[tokio::test]
async fn agents_are_located() {
    let mut c = Console::start();
    c.send("_agent_locate_request", &Map::new(), true);
    let r = c.receive().await;
    assert_eq!(r.opcode(), "_agent_locate_response");
    let Some(Value::Map(values)) = r.map().get("_values").cloned() else {
        panic!("no _values")
    };
    let name = values.get("_name").and_then(read_text).unwrap().to_owned();
    assert!(name.starts_with("apache.org:qpidd:"), "{name}");
    assert_eq!(
        r.headers.get("qmf.agent").and_then(read_text),
        Some(name.as_str())
    );
}

#[tokio::test]
async fn the_agent_sets_itself_up_again_when_its_queue_is_deleted() {
    let mut c = Console::start();
    let own = c._agent.identity().queue.clone();
    // As an operator's tool could, through the core, as the queue's owner.
    let owner = c.broker.queue(&own).unwrap().owner().unwrap();
    c.broker.delete_queue(&own, false, false, owner).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while c.broker.queue(&own).is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "queue not redeclared"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.send("_query_request", &class_query("broker"), true);
    assert_eq!(c.receive().await.list().len(), 1);
}

#[tokio::test]
async fn declares_and_deletes_are_published_as_events() {
    let c = Console::start();
    c.broker
        .bind(
            "replies",
            TOPIC_EXCHANGE,
            "agent.ind.event.org_apache_qpid_broker.*.*.#",
            &Arguments::new(),
        )
        .unwrap();
    c.broker
        .declare_queue("evq", QueueOptions::default(), false, 9)
        .unwrap();
    c.broker.delete_queue("evq", false, false, 9).unwrap();
    // Events about the console's own queue may come first; those about evq follow in order.
    let mut names = Vec::new();
    while names.last().map(String::as_str) != Some("queueDelete") {
        let r = c.receive().await;
        assert_eq!(r.opcode(), "_data_indication");
        assert_eq!(
            r.headers.get("qmf.content").and_then(read_text),
            Some("_event")
        );
        let Value::Map(event) = &r.list()[0] else {
            panic!("an event is a map")
        };
        let Some(Value::Map(schema)) = event.get("_schema_id") else {
            panic!("no _schema_id")
        };
        let Some(Value::Map(values)) = event.get("_values") else {
            panic!("no _values")
        };
        if values.get("qName").and_then(read_text) == Some("evq") {
            names.push(
                schema
                    .get("_class_name")
                    .and_then(read_text)
                    .unwrap()
                    .to_owned(),
            );
        }
    }
    assert_eq!(names, ["queueDeclare", "queueDelete"]);
}
