//! Every key qpid-config and qpid-stat read is present, with qpidd's type.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use ferry_amqp010::value::code;
use ferry_amqp010::{Map, Value};
use ferry_core::{
    Arguments, Broker, BrokerConfig, ConnectionMeta, ConsumerFilter, ConsumerSpec, ExchangeKind,
    ExchangeOptions, HeaderValue, Message, MessageFilter, Outbox, QueueOptions, SessionStatus,
};

use super::*;
use crate::schema::BROKER_KEY;
use crate::value::read_text;
use crate::{AgentConfig, Identity};

const U64: u8 = code::UINT64;
const U32: u8 = code::UINT32;
const U16: u8 = code::UINT16;
const BOOL: u8 = code::BOOLEAN;
const TEXT: u8 = code::VBIN16;
const MAP: u8 = code::MAP;
const FIVE_SECONDS: u64 = 5_000_000_000;

fn identity() -> Identity {
    Identity::new(AgentConfig {
        port: 5672,
        worker_threads: 2,
        max_connections: 500,
        listen_backlog: 1024,
        data_dir: None,
        version: "0.1.0".into(),
        log_level: "info".into(),
    })
}

fn view<'a>(broker: &'a Broker, id: &'a Identity) -> View<'a> {
    View {
        broker,
        identity: id,
        hidden_queue: &id.queue,
        now_ns: id.started_ns + FIVE_SECONDS,
    }
}

fn check(values: &Map, expected: &[(&str, u8)]) {
    for (key, code) in expected {
        match values.get(key) {
            Some(v) => assert_eq!(v.type_code(), *code, "{key} has type {:#x}", v.type_code()),
            None => panic!("no {key} in {values:?}"),
        }
    }
}

fn text_of<'a>(values: &'a Map, key: &str) -> &'a str {
    values.get(key).and_then(read_text).unwrap_or("<none>")
}

fn reference<'a>(values: &'a Map, key: &str) -> &'a str {
    match values.get(key) {
        Some(Value::Map(m)) => m.get("_object_name").and_then(read_text).unwrap_or(""),
        other => panic!("{key} is not a reference: {other:?}"),
    }
}

fn publish(b: &Broker, exchange: &str, key: &str, body: &'static [u8]) {
    let ex = b.exchange(exchange).unwrap();
    let m = Message::new(
        exchange.to_owned(),
        key.to_owned(),
        Bytes::from_static(body),
    );
    b.publish(&ex, m).unwrap();
}

/// A broker with a queue `q` (max count 10, alternate exchange `alt`), bound to `t` (topic)
/// under `a.#`, two messages on it, and the agent's own queue.
fn broker(id: &Identity) -> Arc<Broker> {
    let b = Broker::new(BrokerConfig::default());
    b.declare_exchange(
        "alt",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    b.declare_exchange("t", ExchangeKind::Topic, ExchangeOptions::default(), false)
        .unwrap();
    let args: Arguments = [("qpid.max_count", HeaderValue::Int(10))]
        .into_iter()
        .collect();
    let opts = QueueOptions {
        durable: true,
        alternate_exchange: Some("alt".into()),
        arguments: args,
        ..QueueOptions::default()
    };
    b.declare_queue("q", opts, false, 1).unwrap();
    b.bind("q", "t", "a.#", &Arguments::new()).unwrap();
    publish(&b, "t", "a.b", b"hello");
    publish(&b, "t", "a.c", b"world!");
    publish(&b, "t", "nowhere", b"lost");
    b.declare_queue(&id.queue, QueueOptions::default(), false, 2)
        .unwrap();
    b.bind(&id.queue, "t", "#", &Arguments::new()).unwrap();
    b
}

#[test]
fn queues_carry_what_qpid_config_and_qpid_stat_read() {
    let id = identity();
    let b = broker(&id);
    let queues = view(&b, &id).objects(Class::Queue);
    assert_eq!(queues.len(), 1, "the agent's queue is hidden");
    let q = &queues[0];
    assert_eq!(q.object_name(), "org.apache.qpid.broker:queue:q");
    let v = &q.values;
    check(
        v,
        &[
            ("name", TEXT),
            ("durable", BOOL),
            ("autoDelete", BOOL),
            ("exclusive", BOOL),
            ("arguments", MAP),
            ("altExchange", MAP),
            ("vhostRef", MAP),
            ("msgDepth", U64),
            ("byteDepth", U64),
            ("msgTotalEnqueues", U64),
            ("msgTotalDequeues", U64),
            ("byteTotalEnqueues", U64),
            ("byteTotalDequeues", U64),
            ("msgPersistEnqueues", U64),
            ("msgPersistDequeues", U64),
            ("bytePersistEnqueues", U64),
            ("bytePersistDequeues", U64),
            ("msgTxnEnqueues", U64),
            ("byteTxnDequeues", U64),
            ("msgFtdDepth", U64),
            ("byteFtdDepth", U64),
            ("msgFtdEnqueues", U64),
            ("byteFtdDequeues", U64),
            ("acquires", U64),
            ("releases", U64),
            ("discardsTtl", U64),
            ("discardsOverflow", U64),
            ("discardsRing", U64),
            ("discardsLvq", U64),
            ("discardsSubscriber", U64),
            ("discardsPurge", U64),
            ("reroutes", U64),
            ("consumerCount", U32),
            ("consumerCountHigh", U32),
            ("bindingCount", U32),
            ("unackedMessages", U32),
            ("flowStopped", BOOL),
            ("flowStoppedCount", U32),
        ],
    );
    assert_eq!(text_of(v, "name"), "q");
    assert_eq!(v.get("durable"), Some(&Value::Bool(true)));
    assert_eq!(v.get("msgDepth"), Some(&Value::Uint64(2)));
    assert_eq!(v.get("byteDepth"), Some(&Value::Uint64(11)));
    assert_eq!(v.get("msgTotalEnqueues"), Some(&Value::Uint64(2)));
    assert_eq!(
        v.get("bindingCount"),
        Some(&Value::Uint32(2)),
        "default + t"
    );
    assert_eq!(
        reference(v, "altExchange"),
        "org.apache.qpid.broker:exchange:alt"
    );
    let Some(Value::Map(args)) = v.get("arguments") else {
        panic!("no arguments")
    };
    assert_eq!(args.get("qpid.max_count"), Some(&Value::Int64(10)));
}

#[test]
fn exchanges_and_bindings_refer_to_each_other_by_name() {
    let id = identity();
    let b = broker(&id);
    let v = view(&b, &id);
    let exchanges = v.objects(Class::Exchange);
    let t = exchanges.iter().find(|e| e.key == "t").unwrap();
    check(
        &t.values,
        &[
            ("name", TEXT),
            ("type", TEXT),
            ("durable", BOOL),
            ("autoDelete", BOOL),
            ("arguments", MAP),
            ("bindingCount", U32),
            ("msgReceives", U64),
            ("msgRoutes", U64),
            ("msgDrops", U64),
            ("byteReceives", U64),
            ("byteRoutes", U64),
            ("byteDrops", U64),
            ("producerCount", U32),
        ],
    );
    assert_eq!(text_of(&t.values, "type"), "topic");
    assert_eq!(t.values.get("msgReceives"), Some(&Value::Uint64(3)));
    assert_eq!(t.values.get("msgDrops"), Some(&Value::Uint64(1)));
    assert_eq!(t.values.get("msgRoutes"), Some(&Value::Uint64(2)));
    assert_eq!(
        t.values.get("bindingCount"),
        Some(&Value::Uint32(1)),
        "the agent's binding is not counted"
    );
    assert!(!t.values.entries().iter().any(|(k, _)| k == "altExchange"));
    let default = exchanges.iter().find(|e| e.key.is_empty()).unwrap();
    assert_eq!(default.object_name(), "org.apache.qpid.broker:exchange:");
    assert_eq!(text_of(&default.values, "type"), "direct");

    let bindings = v.objects(Class::Binding);
    assert_eq!(bindings.len(), 2, "q on the default exchange and on t");
    for binding in &bindings {
        check(
            &binding.values,
            &[
                ("exchangeRef", MAP),
                ("queueRef", MAP),
                ("bindingKey", TEXT),
                ("arguments", MAP),
            ],
        );
    }
    let on_t = bindings
        .iter()
        .find(|o| reference(&o.values, "exchangeRef").ends_with(":t"))
        .unwrap();
    assert_eq!(
        on_t.object_name(),
        "org.apache.qpid.broker:binding:org.apache.qpid.broker:exchange:t,\
         org.apache.qpid.broker:queue:q,a.#"
    );
    assert_eq!(
        reference(&on_t.values, "queueRef"),
        "org.apache.qpid.broker:queue:q"
    );
    assert_eq!(text_of(&on_t.values, "bindingKey"), "a.#");
}

/// 0-9-1 may bind a queue under one key twice with other arguments, which qpidd cannot:
/// each binding is its own object, under a name of its own, also when another binding's
/// key makes qpidd's name for it the one the second would have had.
#[test]
fn bindings_under_one_key_have_names_of_their_own() {
    let id = identity();
    let b = broker(&id);
    let n = |v: i64| -> Arguments { [("n", HeaderValue::Int(v))].into_iter().collect() };
    for (key, v) in [("", 1), ("", 2), (",2", 3), ("", 4)] {
        b.bind_as(
            ferry_core::BindingIdentity::KeyAndArguments,
            "q",
            "amq.match",
            key,
            &n(v),
        )
        .unwrap();
    }
    let v = view(&b, &id);
    let mut names: Vec<(String, String)> = v
        .objects(Class::Binding)
        .iter()
        .filter(|o| reference(&o.values, "exchangeRef").ends_with(":amq.match"))
        .map(|o| {
            let n = match o.values.get("arguments") {
                Some(Value::Map(m)) => format!("{:?}", m.get("n")),
                other => format!("{other:?}"),
            };
            (o.object_name().to_owned(), n)
        })
        .collect();
    names.sort();
    let first = "org.apache.qpid.broker:binding:org.apache.qpid.broker:exchange:amq.match,\
                 org.apache.qpid.broker:queue:q,";
    let int = |v: i64| format!("{:?}", Some(Value::Int64(v)));
    assert_eq!(
        names,
        [
            (first.to_owned(), int(1)),
            (format!("{first},2"), int(3)),
            (format!("{first},3"), int(2)),
            (format!("{first},4"), int(4)),
        ]
    );
}

#[test]
fn the_broker_sums_the_queues_but_the_agents() {
    let id = identity();
    let b = broker(&id);
    publish(&b, "t", "x", b"for the agent only");
    let v = view(&b, &id);
    let broker = &v.objects(Class::Broker)[0];
    assert_eq!(
        broker.object_name(),
        "org.apache.qpid.broker:broker:amqp-broker"
    );
    let keys: Vec<(&str, u8)> = [
        "queueCount",
        "msgDepth",
        "byteDepth",
        "msgTotalEnqueues",
        "byteTotalEnqueues",
        "msgTotalDequeues",
        "byteTotalDequeues",
        "msgPersistEnqueues",
        "bytePersistEnqueues",
        "msgPersistDequeues",
        "bytePersistDequeues",
        "msgTxnEnqueues",
        "byteTxnEnqueues",
        "msgTxnDequeues",
        "byteTxnDequeues",
        "msgFtdDepth",
        "byteFtdDepth",
        "msgFtdEnqueues",
        "byteFtdEnqueues",
        "msgFtdDequeues",
        "byteFtdDequeues",
        "acquires",
        "releases",
        "discardsNoRoute",
        "discardsTtl",
        "discardsOverflow",
        "discardsRing",
        "discardsLvq",
        "discardsSubscriber",
        "discardsPurge",
        "reroutes",
        "abandoned",
        "abandonedViaAlt",
        "uptime",
    ]
    .into_iter()
    .map(|k| (k, U64))
    .chain([
        ("name", TEXT),
        ("systemRef", MAP),
        ("port", U16),
        ("workerThreads", U16),
        ("maxConns", U16),
        ("connBacklog", U16),
        ("stagingThreshold", U32),
        ("mgmtPublish", BOOL),
        ("mgmtPubInterval", U16),
        ("version", TEXT),
    ])
    .collect();
    check(&broker.values, &keys);
    let values = &broker.values;
    assert_eq!(values.get("queueCount"), Some(&Value::Uint64(1)));
    assert_eq!(values.get("msgDepth"), Some(&Value::Uint64(2)));
    assert_eq!(values.get("discardsNoRoute"), Some(&Value::Uint64(1)));
    assert_eq!(values.get("port"), Some(&Value::Uint16(5672)));
    assert_eq!(values.get("uptime"), Some(&Value::Uint64(FIVE_SECONDS)));
    assert_eq!(broker.create_ts, id.started_ns);
    assert_eq!(broker.update_ts, id.started_ns + FIVE_SECONDS);
    assert!(!values.entries().iter().any(|(k, _)| k == "dataDir"));

    let system = &v.objects(Class::System)[0];
    assert_eq!(
        reference(values, "systemRef"),
        system.object_name(),
        "the broker refers to the system object"
    );
    check(
        &system.values,
        &[("systemId", code::UUID), ("osName", TEXT)],
    );
    let vhost = &v.objects(Class::Vhost)[0];
    assert_eq!(
        vhost.object_name(),
        "org.apache.qpid.broker:vhost:org.apache.qpid.broker:broker:amqp-broker,/"
    );
    let memory = &v.objects(Class::Memory)[0];
    assert_eq!(text_of(&memory.values, "name"), BROKER_KEY);
}

/// A consumer filter with a text, as a JMS selector has.
#[derive(Debug)]
struct Selector;

impl MessageFilter for Selector {
    fn matches(&self, _: &Message) -> bool {
        true
    }

    fn text(&self) -> Option<&str> {
        Some("colour = 'red'")
    }
}

#[test]
fn clients_are_linked_connection_to_session_to_subscription() {
    let id = identity();
    let b = broker(&id);
    let outbox = Outbox::new();
    let meta = ConnectionMeta {
        peer: SocketAddr::from(([127, 0, 0, 1], 40000)),
        user: "alice".into(),
        protocol: "AMQP 0-10",
        tls: false,
        client_properties: vec![
            ("qpid.client_process".into(), "qpid-stat".into()),
            ("qpid.client_pid".into(), "1234".into()),
        ],
        connected_at: 1_000,
        heartbeat: 0,
        frame_max: 65535,
        channel_max: 256,
    };
    let conn = b
        .connections()
        .register(b.next_connection_id(), meta, &outbox);
    conn.set_sessions(vec![SessionStatus {
        channel: 1,
        name: "my-session".into(),
        owner: 77,
        unacked: 3,
        ..SessionStatus::default()
    }]);
    let q = b.queue("q").unwrap();
    q.subscribe(ConsumerSpec {
        id: b.next_consumer_id(),
        outbox: outbox.clone(),
        owner: 77,
        connection: 0,
        tag: Bytes::from_static(b"dest"),
        acquire: false,
        exclusive: false,
        window: None,
        filter: Some(ConsumerFilter {
            matches: Arc::new(Selector),
            drop_unmatched: false,
        }),
        ack_timeout: None,
    })
    .unwrap();
    let v = view(&b, &id);

    let connections = v.objects(Class::Connection);
    assert_eq!(connections.len(), 1);
    let c = &connections[0];
    assert_eq!(
        c.object_name(),
        "org.apache.qpid.broker:connection:127.0.0.1:40000"
    );
    check(
        &c.values,
        &[
            ("address", TEXT),
            ("authIdentity", TEXT),
            ("saslMechanism", TEXT),
            ("remoteProcessName", TEXT),
            ("remotePid", U32),
            ("msgsFromClient", U64),
            ("msgsToClient", U64),
            ("bytesFromClient", U64),
            ("framesFromClient", U64),
            ("incoming", BOOL),
            ("remoteProperties", MAP),
        ],
    );
    assert_eq!(c.values.get("remotePid"), Some(&Value::Uint32(1234)));
    assert_eq!(c.create_ts, 1_000_000_000);

    let sessions = v.objects(Class::Session);
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    check(
        &s.values,
        &[
            ("name", TEXT),
            ("connectionRef", MAP),
            ("channelId", U16),
            ("unackedMessages", U64),
            ("attached", BOOL),
        ],
    );
    assert_eq!(text_of(&s.values, "name"), "my-session");
    assert_eq!(reference(&s.values, "connectionRef"), c.object_name());

    let subs = v.objects(Class::Subscription);
    assert_eq!(subs.len(), 1);
    let sub = &subs[0];
    check(
        &sub.values,
        &[
            ("name", TEXT),
            ("sessionRef", MAP),
            ("queueRef", MAP),
            ("browsing", BOOL),
            ("acknowledged", BOOL),
            ("exclusive", BOOL),
            ("creditMode", TEXT),
            ("delivered", U64),
        ],
    );
    assert_eq!(reference(&sub.values, "sessionRef"), s.object_name());
    assert_eq!(sub.values.get("browsing"), Some(&Value::Bool(true)));
    let Some(Value::Map(arguments)) = sub.values.get("arguments") else {
        panic!("no arguments");
    };
    assert_eq!(
        text_of(arguments, "x-filter-jms-selector"),
        "colour = 'red'"
    );
    assert_eq!(
        sub.object_name(),
        "org.apache.qpid.broker:subscription:org.apache.qpid.broker:session:my-session,\
         org.apache.qpid.broker:queue:q,dest"
    );
    assert_eq!(v.find(&sub.object_name()).as_ref(), Some(sub));
}

#[test]
fn an_encoded_object_has_qmf_v2s_envelope() {
    let id = identity();
    let b = broker(&id);
    let o = &view(&b, &id).objects(Class::Queue)[0];
    let Value::Map(m) = o.encode() else {
        panic!("not a map")
    };
    let Some(Value::Map(oid)) = m.get("_object_id") else {
        panic!("no _object_id")
    };
    assert_eq!(
        text_of(oid, "_object_name"),
        "org.apache.qpid.broker:queue:q"
    );
    let Some(Value::Map(sid)) = m.get("_schema_id") else {
        panic!("no _schema_id")
    };
    assert_eq!(text_of(sid, "_package_name"), "org.apache.qpid.broker");
    assert_eq!(text_of(sid, "_class_name"), "queue");
    assert_eq!(text_of(sid, "_type"), "_data");
    assert_eq!(sid.get("_hash"), Some(&Value::Uuid(Class::Queue.hash())));
    check(
        &m,
        &[
            ("_values", MAP),
            ("_create_ts", U64),
            ("_update_ts", U64),
            ("_delete_ts", U64),
        ],
    );
}

/// The wire type a QMF type code is sent as.
fn wire_type(qmf_type: u8) -> u8 {
    use crate::v1::schema::ty;
    match qmf_type {
        ty::U16 => U16,
        ty::U32 => U32,
        ty::U64 | ty::ABSTIME | ty::DELTATIME => U64,
        ty::SSTR | ty::LSTR => TEXT,
        ty::REF | ty::MAP => MAP,
        ty::BOOL => BOOL,
        ty::UUID => code::UUID,
        other => panic!("type {other} is not used"),
    }
}

#[test]
fn every_object_matches_its_schema_both_ways() {
    let id = identity();
    let b = broker(&id);
    let outbox = Outbox::new();
    let meta = ConnectionMeta {
        peer: SocketAddr::from(([127, 0, 0, 1], 40001)),
        user: "u".into(),
        protocol: "AMQP 0-10",
        tls: false,
        client_properties: vec![("qpid.client_pid".into(), "1".into())],
        connected_at: 1,
        heartbeat: 0,
        frame_max: 65535,
        channel_max: 256,
    };
    let conn = b
        .connections()
        .register(b.next_connection_id(), meta, &outbox);
    conn.set_sessions(vec![SessionStatus {
        channel: 0,
        name: "s".into(),
        owner: 5,
        ..SessionStatus::default()
    }]);
    b.queue("q")
        .unwrap()
        .subscribe(ConsumerSpec {
            id: b.next_consumer_id(),
            outbox: outbox.clone(),
            owner: 5,
            connection: 0,
            tag: Bytes::from_static(b"d"),
            acquire: true,
            exclusive: true,
            window: None,
            filter: None,
            ack_timeout: None,
        })
        .unwrap();
    let v = view(&b, &id);
    for class in Class::ALL {
        let schema = crate::v1::schema::class_schema(class);
        let objects = v.objects(class);
        assert!(!objects.is_empty(), "no {class:?} to check");
        for o in objects {
            for (key, value) in o.values.iter() {
                let key = key.to_str_lossy();
                let declared = schema
                    .properties
                    .iter()
                    .map(|p| (p.name, p.ty))
                    .chain(schema.statistics.iter().map(|s| (s.name, s.ty)))
                    .find(|(name, _)| *name == key);
                let Some((_, ty)) = declared else {
                    panic!("{class:?}.{key} is not in the schema")
                };
                assert_eq!(value.type_code(), wire_type(ty), "{class:?}.{key}");
            }
            let required = schema
                .properties
                .iter()
                .filter(|p| !p.optional)
                .map(|p| p.name)
                .chain(schema.statistics.iter().map(|s| s.name));
            for name in required {
                assert!(o.values.get(name).is_some(), "{class:?}.{name} missing");
            }
        }
    }
}
