//! Methods as BrokerAgent (qpid-tools) calls them, and the answers qpidd gives.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use ferry_amqp010::{Map, Value};
use ferry_core::{Broker, BrokerConfig, ConnectionMeta, Message, Outbox, OutboxItem};

use super::*;
use crate::value::{read_text, text};
use crate::wire::Content;
use crate::{AgentConfig, Identity};

struct Fixture {
    broker: Arc<Broker>,
    id: Identity,
    caller: Caller,
}

impl Fixture {
    fn new() -> Fixture {
        let broker = Broker::new(BrokerConfig::default());
        let id = Identity::new(AgentConfig {
            log_level: "info".into(),
            ..AgentConfig::default()
        });
        broker
            .declare_queue(&id.queue, QueueOptions::default(), false, 1)
            .unwrap();
        Fixture {
            caller: Caller {
                owner: broker.next_owner_id() + 100,
            },
            broker,
            id,
        }
    }

    /// Calls `method` on `object` with `args`: Ok(output arguments) or Err((code, text)).
    fn call(&self, object: &str, method: &str, args: Map) -> Result<Map, (u32, String)> {
        let mut request = Map::new();
        let mut oid = Map::new();
        oid.insert("_object_name", text(object));
        request.insert("_object_id", Value::Map(oid));
        request.insert("_method_name", text(method));
        request.insert("_arguments", Value::Map(args));
        self.raw(&request)
    }

    fn raw(&self, request: &Map) -> Result<Map, (u32, String)> {
        let view = View {
            broker: &self.broker,
            identity: &self.id,
            hidden_queue: &self.id.queue,
            now_ns: 1,
        };
        let reply = call(&view, &self.caller, request);
        let Content::Map(body) = reply.content else {
            panic!("a method reply is a map")
        };
        match reply.opcode {
            "_method_response" => match body.get("_arguments") {
                Some(Value::Map(m)) => Ok(m.clone()),
                other => panic!("no _arguments: {other:?}"),
            },
            "_exception" => {
                assert_eq!(reply.method, "indication");
                let Some(Value::Map(values)) = body.get("_values") else {
                    panic!("no _values")
                };
                let code = match values.get("error_code") {
                    Some(Value::Uint32(c)) => *c,
                    other => panic!("error_code {other:?}"),
                };
                let text = values.get("error_text").and_then(read_text).unwrap();
                Err((code, text.to_owned()))
            }
            other => panic!("unexpected opcode {other}"),
        }
    }

    fn broker_call(&self, method: &str, args: Map) -> Result<Map, (u32, String)> {
        self.call("org.apache.qpid.broker:broker:amqp-broker", method, args)
    }
}

fn map(entries: &[(&'static str, Value)]) -> Map {
    entries.iter().cloned().collect()
}

/// `BrokerAgent.create`/`addQueue`/`addExchange`/`bind`'s arguments.
fn create(kind: &str, name: &str, properties: Map) -> Map {
    map(&[
        ("type", text(kind)),
        ("name", text(name)),
        ("properties", Value::Map(properties)),
        ("strict", Value::Bool(true)),
    ])
}

fn delete(kind: &str, name: &str, options: Map) -> Map {
    map(&[
        ("type", text(kind)),
        ("name", text(name)),
        ("options", Value::Map(options)),
    ])
}

#[test]
fn qpid_config_add_queue_declares_it_with_its_arguments() {
    let f = Fixture::new();
    let props = map(&[
        ("durable", Value::Int64(1)),
        ("qpid.max_count", Value::Int64(10)),
        ("qpid.policy_type", text("ring")),
        ("alternate-exchange", text("amq.fanout")),
    ]);
    assert_eq!(
        f.broker_call("create", create("queue", "q1", props)),
        Ok(Map::new())
    );
    let q = f.broker.queue_status("q1").unwrap();
    assert!(q.durable && !q.auto_delete);
    assert_eq!(q.alternate_exchange.as_deref(), Some("amq.fanout"));
    assert_eq!(q.limits.max_count, Some(10));
    assert_eq!(q.limits.policy, ferry_core::LimitPolicy::Ring);
    assert!(q.arguments.get("durable").is_none());
    assert!(q.arguments.get("qpid.max_count").is_some());
    assert_eq!(
        f.broker_call("create", create("queue", "q1", Map::new())),
        Err((7, "object already exists: q1".into()))
    );
}

#[test]
fn bad_queue_arguments_are_exceptions() {
    let f = Fixture::new();
    let props = map(&[("qpid.max_count", text("many"))]);
    let (code, _) = f
        .broker_call("create", create("queue", "q", props))
        .unwrap_err();
    assert_eq!(code, 7);
    let props = map(&[("alternate-exchange", text("missing"))]);
    let (code, _) = f
        .broker_call("create", create("queue", "q", props))
        .unwrap_err();
    assert_eq!(code, 7);
    assert!(f.broker.queue("q").is_none());
}

#[test]
fn exchanges_are_created_with_their_type_and_deleted() {
    let f = Fixture::new();
    let props = map(&[
        ("exchange-type", text("headers")),
        ("durable", Value::Bool(true)),
    ]);
    assert!(f
        .broker_call("create", create("exchange", "h", props))
        .is_ok());
    let e = f.broker.exchange_info("h").unwrap();
    assert_eq!(e.kind, ExchangeKind::Headers);
    assert!(e.durable);
    // The type defaults to topic, as in qpidd.
    assert!(f
        .broker_call("create", create("exchange", "t", Map::new()))
        .is_ok());
    assert_eq!(
        f.broker.exchange_info("t").unwrap().kind,
        ExchangeKind::Topic
    );
    let bad = map(&[("exchange-type", text("xml"))]);
    assert_eq!(
        f.broker_call("create", create("exchange", "x", bad)),
        Err((7, "Invalid exchange type: xml".into()))
    );
    assert_eq!(
        f.broker_call("create", create("exchange", "t", Map::new())),
        Err((7, "object already exists: t".into()))
    );
    assert!(f
        .broker_call("delete", delete("exchange", "t", Map::new()))
        .is_ok());
    assert!(f.broker.exchange("t").is_none());
    let (code, _) = f
        .broker_call("delete", delete("exchange", "amq.direct", Map::new()))
        .unwrap_err();
    assert_eq!(code, 7);
}

#[test]
fn bindings_are_named_exchange_queue_key() {
    let f = Fixture::new();
    f.broker_call("create", create("queue", "q", Map::new()))
        .unwrap();
    let args = map(&[("x-match", text("all")), ("colour", text("red"))]);
    assert!(f
        .broker_call("create", create("binding", "amq.match/q/k", args))
        .is_ok());
    assert!(f
        .broker_call("create", create("binding", "amq.topic/q/a.#", Map::new()))
        .is_ok());
    assert!(f
        .broker_call("create", create("binding", "amq.direct/q", Map::new()))
        .is_ok());
    let bound: Vec<(String, String)> = f
        .broker
        .bindings()
        .into_iter()
        .filter(|b| b.destination == "q")
        .map(|b| (b.source, b.key))
        .collect();
    assert!(bound.contains(&("amq.match".into(), "k".into())));
    assert!(bound.contains(&("amq.topic".into(), "a.#".into())));
    assert!(bound.contains(&("amq.direct".into(), String::new())));
    assert!(f
        .broker_call("delete", delete("binding", "amq.topic/q/a.#", Map::new()))
        .is_ok());
    assert!(!f
        .broker
        .bindings()
        .iter()
        .any(|b| b.source == "amq.topic" && b.destination == "q"));
    assert_eq!(
        f.broker_call("create", create("binding", "a/b/c/d", Map::new())),
        Err((7, "invalid binding: a/b/c/d".into()))
    );
    let (code, _) = f
        .broker_call("create", create("binding", "nowhere/q/k", Map::new()))
        .unwrap_err();
    assert_eq!(code, 7);
}

#[test]
fn queues_are_deleted_with_qpidds_options() {
    let f = Fixture::new();
    f.broker_call("create", create("queue", "q", Map::new()))
        .unwrap();
    let ex = f.broker.default_exchange().clone();
    f.broker
        .publish(&ex, Message::new("", "q", Bytes::from_static(b"m")))
        .unwrap();
    let if_empty = map(&[
        ("if_empty", Value::Bool(true)),
        ("if_unused", Value::Bool(true)),
    ]);
    let (code, _) = f
        .broker_call("delete", delete("queue", "q", if_empty))
        .unwrap_err();
    assert_eq!(code, 7);
    assert!(f.broker.queue("q").is_some());
    assert!(f
        .broker_call("delete", delete("queue", "q", Map::new()))
        .is_ok());
    assert!(f.broker.queue("q").is_none());
    let (code, _) = f
        .broker_call("delete", delete("queue", "q", Map::new()))
        .unwrap_err();
    assert_eq!(code, 7);
}

#[test]
fn the_agents_own_queue_cannot_be_touched() {
    let f = Fixture::new();
    let q = f.id.queue.clone();
    assert!(f
        .broker_call("delete", delete("queue", &q, Map::new()))
        .is_err());
    assert!(f
        .broker_call("create", create("queue", &q, Map::new()))
        .is_err());
    assert!(f
        .broker_call(
            "create",
            create("binding", &format!("amq.fanout/{q}"), Map::new())
        )
        .is_err());
    assert!(f
        .call(
            &format!("org.apache.qpid.broker:queue:{q}"),
            "purge",
            Map::new()
        )
        .is_err());
    assert!(f.broker.queue(&q).is_some());
}

#[test]
fn malformed_requests_get_qpidds_status_codes() {
    let f = Fixture::new();
    assert_eq!(f.raw(&Map::new()), Err((4, "InvalidParameter".into())));
    let mut no_name = Map::new();
    no_name.insert("_object_id", Value::Map(Map::new()));
    no_name.insert("_method_name", text("echo"));
    assert_eq!(f.raw(&no_name).unwrap_err().0, 7);
    let mut not_a_map = Map::new();
    not_a_map.insert(
        "_object_id",
        text("org.apache.qpid.broker:broker:amqp-broker"),
    );
    not_a_map.insert("_method_name", text("echo"));
    assert_eq!(f.raw(&not_a_map).unwrap_err().0, 7);
    let mut bad_args = Map::new();
    let mut oid = Map::new();
    oid.insert(
        "_object_name",
        text("org.apache.qpid.broker:broker:amqp-broker"),
    );
    bad_args.insert("_object_id", Value::Map(oid));
    bad_args.insert("_method_name", Value::Int64(3));
    assert_eq!(f.raw(&bad_args).unwrap_err().0, 7);
    assert_eq!(
        f.call("org.apache.qpid.broker:queue:nope", "purge", Map::new()),
        Err((
            1,
            "No object found with ID=org.apache.qpid.broker:queue:nope".into()
        ))
    );
    assert_eq!(
        f.broker_call("frobnicate", Map::new()),
        Err((2, "UnknownMethod".into()))
    );
    assert_eq!(f.broker_call("shutdown", Map::new()).unwrap_err().0, 3);
    assert_eq!(
        f.broker_call("create", create("widget", "w", Map::new())),
        Err((7, "unknown object type: widget".into()))
    );
    let props_not_a_map = map(&[
        ("type", text("queue")),
        ("name", text("q")),
        ("properties", text("x")),
    ]);
    assert_eq!(f.broker_call("create", props_not_a_map).unwrap_err().0, 7);
}

#[test]
fn echo_and_the_getters_answer() {
    let f = Fixture::new();
    let args = map(&[("sequence", Value::Uint32(5)), ("body", text("hi"))]);
    assert_eq!(f.broker_call("echo", args.clone()), Ok(args));
    let level = f.broker_call("getLogLevel", Map::new()).unwrap();
    assert_eq!(level.get("level").and_then(read_text), Some("info"));
    let ts = f.broker_call("getTimestampConfig", Map::new()).unwrap();
    assert_eq!(ts.get("receive"), Some(&Value::Bool(false)));
}

#[test]
fn receive_timestamps_are_turned_on_and_off() {
    let f = Fixture::new();
    let receive = |f: &Fixture| {
        let ts = f.broker_call("getTimestampConfig", Map::new()).unwrap();
        ts.get("receive").cloned()
    };
    let on = map(&[("receive", Value::Bool(true))]);
    assert!(f.broker_call("setTimestampConfig", on).is_ok());
    assert!(f.broker.stamps_receipt());
    assert_eq!(receive(&f), Some(Value::Bool(true)));
    let off = map(&[("receive", Value::Uint8(0))]);
    assert!(f.broker_call("setTimestampConfig", off).is_ok());
    assert!(!f.broker.stamps_receipt());
    assert_eq!(receive(&f), Some(Value::Bool(false)));
    let bad = map(&[("receive", text("maybe"))]);
    assert_eq!(f.broker_call("setTimestampConfig", bad).unwrap_err().0, 7);
    assert!(!f.broker.stamps_receipt());
}

fn fill(f: &Fixture, queue: &str, n: usize) {
    let ex = f.broker.default_exchange().clone();
    for i in 0..n {
        let m = Message::new("", queue.to_owned(), Bytes::from(i.to_string()));
        f.broker.publish(&ex, m).unwrap();
    }
}

fn depth(f: &Fixture, queue: &str) -> u64 {
    f.broker.queue(queue).unwrap().message_count()
}

#[test]
fn purge_drops_a_count_or_everything() {
    let f = Fixture::new();
    f.broker_call("create", create("queue", "q", Map::new()))
        .unwrap();
    fill(&f, "q", 3);
    let some = map(&[("request", Value::Uint32(2))]);
    assert!(f
        .call("org.apache.qpid.broker:queue:q", "purge", some)
        .is_ok());
    assert_eq!(depth(&f, "q"), 1);
    let all = map(&[("request", Value::Uint32(0))]);
    assert!(f
        .call("org.apache.qpid.broker:queue:q", "purge", all)
        .is_ok());
    assert_eq!(depth(&f, "q"), 0);
    let filtered = map(&[
        ("request", Value::Uint32(0)),
        ("filter", Value::Map(map(&[("group", text("a"))]))),
    ]);
    assert_eq!(
        f.call("org.apache.qpid.broker:queue:q", "purge", filtered)
            .unwrap_err()
            .0,
        3
    );
}

#[test]
fn reroute_and_move_answer_as_qpidd_does() {
    let f = Fixture::new();
    f.broker_call("create", create("queue", "src", Map::new()))
        .unwrap();
    f.broker_call("create", create("queue", "dst", Map::new()))
        .unwrap();
    f.broker_call("create", create("binding", "amq.fanout/dst", Map::new()))
        .unwrap();
    fill(&f, "src", 5);
    let q = "org.apache.qpid.broker:queue:src";
    let to_fanout = |n: u32| {
        map(&[
            ("request", Value::Uint32(n)),
            ("useAltExchange", Value::Bool(false)),
            ("exchange", text("amq.fanout")),
        ])
    };
    assert!(f.call(q, "reroute", to_fanout(2)).is_ok());
    assert_eq!((depth(&f, "src"), depth(&f, "dst")), (3, 2));
    let nowhere = map(&[("exchange", text("amq.nosuchexchange"))]);
    assert_eq!(
        f.call(q, "reroute", nowhere),
        Err((4, "InvalidParameter".into()))
    );
    let alternate = map(&[("useAltExchange", Value::Bool(true))]);
    assert_eq!(
        f.call(q, "reroute", alternate).unwrap_err().0,
        4,
        "no alternate"
    );
    let moving = |src: &str, dst: &str, qty: u32| {
        map(&[
            ("srcQueue", text(src)),
            ("destQueue", text(dst)),
            ("qty", Value::Uint32(qty)),
            ("filter", Value::Map(Map::new())),
        ])
    };
    assert!(f
        .broker_call("queueMoveMessages", moving("src", "dst", 0))
        .is_ok());
    assert_eq!((depth(&f, "src"), depth(&f, "dst")), (0, 5));
    assert_eq!(
        f.broker_call("queueMoveMessages", moving("bad", "dst", 0)),
        Err((4, "InvalidParameter".into()))
    );
    assert_eq!(
        f.broker_call("queueMoveMessages", moving("dst", "bad", 0))
            .unwrap_err()
            .0,
        4
    );
    assert_eq!(depth(&f, "dst"), 5);
}

#[test]
fn a_connection_is_closed_by_its_address() {
    let f = Fixture::new();
    let outbox = Outbox::new();
    let meta = ConnectionMeta {
        peer: SocketAddr::from(([127, 0, 0, 1], 4321)),
        user: "u".into(),
        protocol: "AMQP 0-10",
        tls: false,
        client_properties: Vec::new(),
        connected_at: 0,
        heartbeat: 0,
        frame_max: 65535,
        channel_max: 256,
    };
    let _registered = f
        .broker
        .connections()
        .register(f.broker.next_connection_id(), meta, &outbox);
    assert!(f
        .call(
            "org.apache.qpid.broker:connection:127.0.0.1:4321",
            "close",
            Map::new()
        )
        .is_ok());
    let mut items = Vec::new();
    outbox.take(&mut items);
    assert!(matches!(&items[..], [OutboxItem::Close { .. }]));
    assert_eq!(
        f.call(
            "org.apache.qpid.broker:connection:127.0.0.1:1",
            "close",
            Map::new()
        )
        .unwrap_err()
        .0,
        1
    );
}

/// Publishes messages to `queue` whose header "G" names their group.
fn fill_grouped(f: &Fixture, queue: &str, groups: &[&str]) {
    let ex = f.broker.default_exchange().clone();
    for g in groups {
        let mut headers = ferry_core::Headers::new();
        headers.push("G", ferry_core::HeaderValue::Str((*g).into()));
        let m = ferry_core::MessageParts {
            headers: Some(Arc::new(headers)),
            ..ferry_core::MessageParts::new("", queue.to_owned(), Bytes::from(g.to_string()))
        }
        .build();
        f.broker.publish(&ex, m).unwrap();
    }
}

fn header_filter(value: &str) -> Value {
    Value::Map(map(&[
        ("filter_type", text("header_match_str")),
        (
            "filter_params",
            Value::Map(map(&[
                ("header_key", text("G")),
                ("header_value", text(value)),
            ])),
        ),
    ]))
}

#[test]
fn message_groups_are_queried_and_filtered_by_group() {
    let f = Fixture::new();
    let grouped = map(&[
        ("qpid.group_header_key", text("G")),
        ("qpid.shared_msg_group", Value::Uint8(1)),
    ]);
    f.broker_call("create", create("queue", "g", grouped))
        .unwrap();
    f.broker_call("create", create("queue", "dst", Map::new()))
        .unwrap();
    fill_grouped(&f, "g", &["A", "B", "A", "C", "B", "A"]);
    // broker.query: the groups and their counts, none held.
    let query = map(&[("type", text("queue")), ("name", text("g"))]);
    let out = f.broker_call("query", query.clone()).unwrap();
    let Some(Value::Map(results)) = out.get("results") else {
        panic!("{out:?}")
    };
    let Some(Value::Map(info)) = results.get("qpid.message_group_queue") else {
        panic!("{results:?}")
    };
    assert_eq!(info.get("group_header_key").and_then(read_text), Some("G"));
    let Some(Value::List(state)) = info.get("group_state") else {
        panic!("{info:?}")
    };
    let mut counts: Vec<(String, u32, String)> = state
        .0
        .iter()
        .map(|g| {
            let Value::Map(g) = g else { panic!("{g:?}") };
            let count = match g.get("msg_count") {
                Some(Value::Uint32(n)) => *n,
                other => panic!("{other:?}"),
            };
            let id = g.get("group_id").and_then(read_text).unwrap().to_owned();
            let consumer = g.get("consumer").and_then(read_text).unwrap().to_owned();
            (id, count, consumer)
        })
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        [
            ("A".into(), 3, String::new()),
            ("B".into(), 2, String::new()),
            ("C".into(), 1, String::new())
        ]
    );
    // A plain queue has no special state to report; a missing one is an invalid parameter.
    let plain = map(&[("type", text("queue")), ("name", text("dst"))]);
    let out = f.broker_call("query", plain).unwrap();
    assert_eq!(out.get("results"), Some(&Value::Map(Map::new())));
    let missing = map(&[("type", text("queue")), ("name", text("nowhere"))]);
    assert_eq!(f.broker_call("query", missing).unwrap_err().0, 4);
    // Purge one group, move another; the third stays.
    let purge_a = map(&[
        ("request", Value::Uint32(0)),
        ("filter", header_filter("A")),
    ]);
    assert!(f
        .call("org.apache.qpid.broker:queue:g", "purge", purge_a)
        .is_ok());
    let move_b = map(&[
        ("srcQueue", text("g")),
        ("destQueue", text("dst")),
        ("qty", Value::Uint32(0)),
        ("filter", header_filter("B")),
    ]);
    assert!(f.broker_call("queueMoveMessages", move_b).is_ok());
    let bodies = |q: &str| f.broker.queue(q).unwrap().queued_bodies();
    assert_eq!(bodies("g"), [Bytes::from_static(b"C")]);
    assert_eq!(
        bodies("dst"),
        [Bytes::from_static(b"B"), Bytes::from_static(b"B")]
    );
    // A queue that does not read headers cannot be filtered.
    let purge_plain = map(&[
        ("request", Value::Uint32(0)),
        ("filter", header_filter("B")),
    ]);
    assert_eq!(
        f.call("org.apache.qpid.broker:queue:dst", "purge", purge_plain)
            .unwrap_err()
            .0,
        3
    );
    assert_eq!(depth(&f, "dst"), 2);
}
