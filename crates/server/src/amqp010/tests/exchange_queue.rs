//! The exchange and queue classes: declare, delete, bind, unbind, purge, and the queries
//! (exchange.query, exchange.bound, queue.query) with the results and error codes a qpid
//! client relies on.

use ferry_amqp010::{
    ExchangeBind, ExchangeBound, ExchangeBoundResult, ExchangeDeclare, ExchangeDelete,
    ExchangeQuery, ExchangeQueryResult, ExchangeUnbind, Map, QueueDelete, QueuePurge, QueueQuery,
    QueueQueryResult, Value,
};

use super::*;

fn exchange(name: &str, kind: &str) -> ExchangeDeclare {
    ExchangeDeclare {
        exchange: Some(Str::from(name)),
        r#type: (!kind.is_empty()).then(|| Str::from(kind)),
        ..Default::default()
    }
}

fn unbind(queue: &str, exchange: &str, key: &str) -> ExchangeUnbind {
    ExchangeUnbind {
        queue: Some(Str::from(queue)),
        exchange: Some(Str::from(exchange)),
        binding_key: Some(Str::from(key)),
    }
}

fn query_exchange(c: &mut Client, channel: u16, name: &str) -> ExchangeQueryResult {
    let q = ExchangeQuery {
        name: Some(Str::from(name)),
    };
    result(&c.call(channel, q)).1
}

fn query_queue(c: &mut Client, channel: u16, name: &str) -> QueueQueryResult {
    let q = QueueQuery {
        queue: Some(Str::from(name)),
    };
    result(&c.call(channel, q)).1
}

fn bound(c: &mut Client, channel: u16, b: ExchangeBound) -> ExchangeBoundResult {
    result(&c.call(channel, b)).1
}

fn bound_query(exchange: &str, queue: Option<&str>, key: Option<&str>) -> ExchangeBound {
    ExchangeBound {
        exchange: Some(Str::from(exchange)),
        queue: queue.map(Str::from),
        binding_key: key.map(Str::from),
        arguments: None,
    }
}

/// (exchange-not-found, queue-not-found, queue-not-matched, key-not-matched,
/// args-not-matched)
fn flags(r: ExchangeBoundResult) -> (bool, bool, bool, bool, bool) {
    (
        r.exchange_not_found,
        r.queue_not_found,
        r.queue_not_matched,
        r.key_not_matched,
        r.args_not_matched,
    )
}

fn map(entries: &[(&str, Value)]) -> Map {
    let mut m = Map::new();
    for (k, v) in entries {
        m.insert(*k, v.clone());
    }
    m
}

/// `cmd` on a session of its own: the exception's code and text, if it failed.
fn refused(c: &mut Client, channel: u16, cmd: impl Into<Command>) -> Option<(ErrorCode, String)> {
    let name: &'static str = Box::leak(format!("refused-{channel}").into_boxed_str());
    c.attach(channel, name);
    let out = c.call(channel, cmd);
    exception(&out)?;
    let (code, _, text) = failure(&out);
    Some((code, text))
}

#[tokio::test]
async fn each_exchange_type_is_declared_and_queried_as_declared() {
    let mut c = open().await;
    c.attach(1, "s1");
    for kind in ["direct", "fanout", "topic", "headers"] {
        let name = format!("x-{kind}");
        let declared = ExchangeDeclare {
            durable: kind == "topic",
            arguments: Some(map(&[("note", Value::Str16(Str::from(kind)))])),
            ..exchange(&name, kind)
        };
        let out = c.call(1, declared);
        assert_eq!(exception(&out), None, "{kind}: {out:?}");
        let r = query_exchange(&mut c, 1, &name);
        assert_eq!(r.r#type, Some(Str::from(kind)));
        assert_eq!((r.durable, r.not_found), (kind == "topic", false));
        assert_eq!(
            r.arguments.unwrap().get("note"),
            Some(&Value::Str16(Str::from(kind)))
        );
    }
    // Built-in exchanges are there; a missing one is not-found in the result, not an error.
    let r = query_exchange(&mut c, 1, "amq.topic");
    assert_eq!((r.r#type, r.not_found), (Some(Str::from("topic")), false));
    let r = query_exchange(&mut c, 1, "amq.match");
    assert_eq!(r.r#type, Some(Str::from("headers")));
    let r = query_exchange(&mut c, 1, "nowhere");
    assert_eq!(
        (r.r#type, r.durable, r.not_found, r.arguments),
        (None, false, true, None)
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn an_exchange_alternate_must_exist_and_match_on_redeclaration() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, exchange("ae", "fanout"));
    c.call(1, exchange("other-ae", "fanout"));
    let with_alt = |alt: &str, passive: bool| ExchangeDeclare {
        alternate_exchange: Some(Str::from(alt)),
        passive,
        ..exchange("x", "direct")
    };
    assert_eq!(
        refused(&mut c, 2, with_alt("missing", false)).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(refused(&mut c, 3, with_alt("ae", false)), None);
    assert_eq!(
        c.conn
            .broker()
            .exchange_info("x")
            .unwrap()
            .alternate_exchange
            .as_deref(),
        Some("ae")
    );
    // The same alternate, or none named: fine. Another: not-allowed.
    assert_eq!(refused(&mut c, 4, with_alt("ae", false)), None);
    assert_eq!(refused(&mut c, 5, exchange("x", "direct")), None);
    assert_eq!(
        refused(&mut c, 6, with_alt("other-ae", false)).map(|r| r.0),
        Some(ErrorCode::NotAllowed)
    );
    // An alternate in use cannot be deleted.
    let delete = ExchangeDelete {
        exchange: Some(Str::from("ae")),
        if_unused: false,
    };
    assert_eq!(
        refused(&mut c, 7, delete.clone()).map(|r| r.0),
        Some(ErrorCode::NotAllowed)
    );
    let delete_x = ExchangeDelete {
        exchange: Some(Str::from("x")),
        if_unused: false,
    };
    assert_eq!(refused(&mut c, 8, delete_x), None);
    assert_eq!(refused(&mut c, 9, delete), None);
}

#[tokio::test]
async fn a_passive_exchange_declare_checks_type_and_alternate_as_qpidd_does() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, exchange("ae", "fanout"));
    let x = ExchangeDeclare {
        alternate_exchange: Some(Str::from("ae")),
        ..exchange("x", "topic")
    };
    c.call(1, x);
    let passive = |kind: &str, alt: Option<&str>| ExchangeDeclare {
        passive: true,
        alternate_exchange: alt.map(Str::from),
        ..exchange("x", kind)
    };
    assert_eq!(refused(&mut c, 2, passive("", None)), None);
    assert_eq!(refused(&mut c, 3, passive("topic", Some("ae"))), None);
    assert_eq!(
        refused(&mut c, 4, passive("direct", None)),
        Some((
            ErrorCode::NotAllowed,
            "Exchange declared to be of type topic, requested direct".into()
        ))
    );
    c.call(1, exchange("other", "fanout"));
    assert_eq!(
        refused(&mut c, 5, passive("", Some("other"))),
        Some((
            ErrorCode::NotAllowed,
            "Exchange declared with alternate-exchange ae, requested other".into()
        ))
    );
    assert_eq!(
        refused(&mut c, 6, passive("", Some("missing"))).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    // An exchange without an alternate asked for one.
    assert_eq!(
        refused(
            &mut c,
            7,
            ExchangeDeclare {
                passive: true,
                alternate_exchange: Some(Str::from("ae")),
                ..exchange("other", "")
            }
        ),
        Some((
            ErrorCode::NotAllowed,
            "Exchange declared with alternate-exchange <none>, requested ae".into()
        ))
    );
}

#[tokio::test]
async fn exchange_delete_of_a_missing_or_bound_exchange() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    c.call(1, exchange("x", "direct"));
    c.call(1, bind("q", "x", "k"));
    let delete = |name: &str, if_unused: bool| ExchangeDelete {
        exchange: Some(Str::from(name)),
        if_unused,
    };
    assert_eq!(
        refused(&mut c, 2, delete("missing", false)).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    // Built-in exchanges stay.
    assert_eq!(
        refused(&mut c, 3, delete("amq.direct", false)).map(|r| r.0),
        Some(ErrorCode::NotAllowed)
    );
    // The spec's if-unused (qpidd ignores it): precondition-failed while bound.
    assert_eq!(
        refused(&mut c, 4, delete("x", true)).map(|r| r.0),
        Some(ErrorCode::PreconditionFailed)
    );
    assert_eq!(refused(&mut c, 5, delete("x", false)), None);
    assert!(c.conn.broker().exchange("x").is_none());
    // Its bindings went with it.
    let r = bound(&mut c, 1, bound_query("x", Some("q"), Some("k")));
    assert!(r.exchange_not_found);
}

#[tokio::test]
async fn bind_and_unbind_route_and_stop_routing() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    for (exchange, key, routed) in [
        ("amq.direct", "k", "k"),
        ("amq.topic", "a.*", "a.b"),
        ("amq.fanout", "", "anything"),
    ] {
        let out = c.call(1, bind("q", exchange, key));
        assert_eq!(exception(&out), None, "{out:?}");
        c.publish(1, exchange, &keyed(routed), exchange.as_bytes());
    }
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.message_count(), 3);
    // Binding twice is harmless.
    assert_eq!(exception(&c.call(1, bind("q", "amq.direct", "k"))), None);
    for (exchange, key, routed) in [
        ("amq.direct", "k", "k"),
        ("amq.topic", "a.*", "a.b"),
        ("amq.fanout", "", "anything"),
    ] {
        let out = c.call(1, unbind("q", exchange, key));
        assert_eq!(exception(&out), None, "{out:?}");
        c.publish(1, exchange, &keyed(routed), b"dropped");
    }
    assert_eq!(q.message_count(), 3);
    // Unbinding what is not bound is harmless too.
    assert_eq!(exception(&c.call(1, unbind("q", "amq.direct", "k"))), None);
}

#[tokio::test]
async fn bind_and_unbind_name_what_is_missing() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    assert_eq!(
        refused(&mut c, 2, bind("missing", "amq.direct", "k")).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        refused(&mut c, 3, bind("q", "missing", "k")).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        refused(&mut c, 4, unbind("missing", "amq.direct", "k")).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        refused(&mut c, 5, unbind("q", "missing", "k")).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    // The queue field is required.
    let no_queue = ExchangeBind {
        queue: None,
        ..bind("q", "amq.direct", "k")
    };
    let (code, text) = refused(&mut c, 6, no_queue).unwrap();
    assert_eq!(
        (code, text.as_str()),
        (
            ErrorCode::InvalidArgument,
            "required field queue is missing"
        )
    );
}

#[tokio::test]
async fn exchange_bound_reports_what_does_not_match_as_qpidd_does() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    c.call(1, declare("unbound"));
    c.call(1, bind("q", "amq.direct", "k"));
    let all_good = (false, false, false, false, false);
    for (query, expected) in [
        (bound_query("amq.direct", Some("q"), Some("k")), all_good),
        (bound_query("amq.direct", Some("q"), None), all_good),
        (bound_query("amq.direct", None, Some("k")), all_good),
        (bound_query("amq.direct", None, None), all_good),
        (
            bound_query("missing", Some("q"), Some("k")),
            (true, false, false, false, false),
        ),
        (
            bound_query("missing", Some("ghost"), None),
            (true, true, false, false, false),
        ),
        (
            bound_query("amq.direct", Some("ghost"), Some("k")),
            (false, true, false, false, false),
        ),
        (
            bound_query("amq.direct", Some("unbound"), Some("k")),
            (false, false, true, false, false),
        ),
        (
            bound_query("amq.direct", Some("q"), Some("other")),
            (false, false, false, true, false),
        ),
        (
            bound_query("amq.direct", Some("unbound"), Some("other")),
            (false, false, true, true, false),
        ),
        (
            bound_query("amq.fanout", None, None),
            (false, false, false, false, false),
        ),
    ] {
        let asked = format!("{query:?}");
        assert_eq!(flags(bound(&mut c, 1, query)), expected, "{asked}");
    }
}

#[tokio::test]
async fn exchange_bound_takes_an_empty_queue_or_key_as_not_given() {
    // qpidd: `!queueName.empty()`, `key.empty() ? 0 : &key`. Clients that fill every field
    // (the Java client) send "" for what they do not ask about.
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    c.call(1, bind("q", "amq.direct", "k"));
    let none = (false, false, false, false, false);
    assert_eq!(
        flags(bound(
            &mut c,
            1,
            bound_query("amq.direct", Some("q"), Some(""))
        )),
        none
    );
    assert_eq!(
        flags(bound(
            &mut c,
            1,
            bound_query("amq.direct", Some(""), Some("k"))
        )),
        none
    );
    assert_eq!(
        flags(bound(
            &mut c,
            1,
            bound_query("amq.direct", Some(""), Some(""))
        )),
        none
    );
}

#[tokio::test]
async fn exchange_bound_matches_headers_binding_arguments() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    let args = map(&[
        ("x-match", Value::Str16(Str::from("all"))),
        ("colour", Value::Str16(Str::from("red"))),
    ]);
    let b = ExchangeBind {
        arguments: Some(args.clone()),
        ..bind("q", "amq.match", "k")
    };
    assert_eq!(exception(&c.call(1, b)), None);
    let with_args = |a: Map| ExchangeBound {
        arguments: Some(a),
        ..bound_query("amq.match", Some("q"), None)
    };
    assert_eq!(
        flags(bound(&mut c, 1, with_args(args))),
        (false, false, false, false, false)
    );
    let other = map(&[
        ("x-match", Value::Str16(Str::from("all"))),
        ("colour", Value::Str16(Str::from("blue"))),
    ]);
    assert_eq!(
        flags(bound(&mut c, 1, with_args(other))),
        (false, false, false, false, true)
    );
    // Messages are routed by the headers.
    let mut red = keyed("");
    red.properties = Some(ferry_amqp010::MessageProperties {
        application_headers: Some(map(&[("colour", Value::Str16(Str::from("red")))])),
        ..Default::default()
    });
    c.publish(1, "amq.match", &red, b"red");
    let mut blue = red.clone();
    blue.properties = Some(ferry_amqp010::MessageProperties {
        application_headers: Some(map(&[("colour", Value::Str16(Str::from("blue")))])),
        ..Default::default()
    });
    c.publish(1, "amq.match", &blue, b"blue");
    assert_eq!(
        c.conn.broker().queue("q").unwrap().queued_bodies(),
        [Bytes::from_static(b"red")]
    );
}

#[tokio::test]
async fn queue_query_reports_the_queue_as_declared_and_its_counts() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, exchange("ae", "fanout"));
    let declared = QueueDeclare {
        alternate_exchange: Some(Str::from("ae")),
        durable: false,
        exclusive: true,
        auto_delete: true,
        arguments: Some(map(&[("qpid.max_count", Value::Uint32(10))])),
        ..declare("q")
    };
    assert_eq!(exception(&c.call(1, declared)), None);
    for body in ["a", "b"] {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    let r = query_queue(&mut c, 1, "q");
    assert_eq!(r.queue, Some(Str::from("q")));
    assert_eq!(r.alternate_exchange, Some(Str::from("ae")));
    assert_eq!((r.durable, r.exclusive, r.auto_delete), (false, true, true));
    assert_eq!((r.message_count, r.subscriber_count), (Some(2), Some(1)));
    let args = r.arguments.unwrap();
    assert!(args.get("qpid.max_count").is_some(), "{args:?}");
    // A missing queue is an empty result, not an error (qpid.messaging relies on it).
    let r = query_queue(&mut c, 1, "missing");
    assert_eq!(
        (r.queue, r.message_count, r.subscriber_count),
        (None, None, None)
    );
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn queue_query_returns_thousands_of_arguments_whole() {
    // The map sent back is built in time linear in its entries (a peer's table of tens of
    // thousands of entries made it quadratic).
    let mut c = open().await;
    c.attach(1, "s1");
    let entries: Vec<(String, Value)> = (0..20_000u32)
        .map(|i| (format!("x-arg-{i}"), Value::Uint64(u64::from(i))))
        .collect();
    let declared = QueueDeclare {
        arguments: Some(entries.iter().cloned().collect()),
        ..declare("q")
    };
    assert_eq!(exception(&c.call(1, declared)), None);
    let args = query_queue(&mut c, 1, "q").arguments.unwrap();
    assert_eq!(args.len(), entries.len());
    for ((k, v), (key, value)) in args.iter().zip(&entries) {
        assert_eq!((k.to_string(), v), (key.clone(), value));
    }
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn queries_whose_answers_fill_the_output_wait_for_the_peer_to_read() {
    // A twenty-octet query answers with the queue's arguments (here half a megabyte): a
    // read full of queries from a peer that does not read would otherwise be answered
    // whole, a thousand times what it sent.
    let mut c = open().await;
    c.attach(1, "s1");
    let big = Value::Vbin32(bytes::Bytes::from(vec![7u8; 512 * 1024]));
    let declared = QueueDeclare {
        arguments: Some(map(&[("x-big", big)])),
        ..declare("q")
    };
    assert_eq!(exception(&c.call(1, declared)), None);
    let mut queries = BytesMut::new();
    for _ in 0..100 {
        queries.extend_from_slice(&command(
            1,
            QueueQuery {
                queue: Some(Str::from("q")),
            },
            true,
        ));
    }
    c.send(&queries);
    let high_water = c.conn.shell.config.write_high_water;
    assert!(
        c.conn.shell.out.len() < high_water + 600 * 1024,
        "{} octets answered before the peer read any",
        c.conn.shell.out.len()
    );
    assert!(c.unprocessed() > 0, "the rest of the queries wait");
    // As the peer reads, the rest are answered, in order and all of them.
    let answered = decode(c.take_output())
        .iter()
        .filter(|i| matches!(i, Item::Command(1, Command::ExecutionResult(_), _)))
        .count();
    assert_eq!(answered, 100);
    assert_eq!(c.unprocessed(), 0);
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn queue_declare_errors_have_their_codes() {
    let mut c = open().await;
    let passive_missing = QueueDeclare {
        passive: true,
        ..declare("missing")
    };
    assert_eq!(
        refused(&mut c, 1, passive_missing).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    let no_name = QueueDeclare {
        queue: None,
        ..declare("")
    };
    assert_eq!(
        refused(&mut c, 2, no_name),
        Some((
            ErrorCode::InvalidArgument,
            "required field queue is missing".into()
        ))
    );
    let missing_alt = QueueDeclare {
        alternate_exchange: Some(Str::from("nowhere")),
        ..declare("q")
    };
    assert_eq!(
        refused(&mut c, 3, missing_alt).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    let bad_limit = QueueDeclare {
        arguments: Some(map(&[("qpid.max_count", Value::Str16(Str::from("lots")))])),
        ..declare("q")
    };
    assert_eq!(
        refused(&mut c, 4, bad_limit).map(|r| r.0),
        Some(ErrorCode::InvalidArgument)
    );
    let reserved = declare("amq.mine");
    assert_eq!(
        refused(&mut c, 5, reserved).map(|r| r.0),
        Some(ErrorCode::NotAllowed)
    );
    // Nothing was made.
    assert!(c.conn.broker().queue("q").is_none());
    // A redeclaration with other properties is the same queue (qpidd compares nothing).
    c.attach(6, "s6");
    c.call(6, declare("same"));
    let other = QueueDeclare {
        durable: true,
        auto_delete: true,
        arguments: Some(map(&[("x", Value::Bool(true))])),
        ..declare("same")
    };
    assert_eq!(exception(&c.call(6, other)), None);
    let r = query_queue(&mut c, 6, "same");
    assert_eq!((r.durable, r.auto_delete), (false, false));
}

#[tokio::test]
async fn queue_delete_with_its_preconditions_and_errors() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("full"));
    c.publish(1, "", &keyed("full"), b"m");
    c.call(1, declare("used"));
    c.subscribe(1, "used", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let delete = |name: &str, if_unused: bool, if_empty: bool| QueueDelete {
        queue: Some(Str::from(name)),
        if_unused,
        if_empty,
    };
    assert_eq!(
        refused(&mut c, 2, delete("full", false, true)).map(|r| r.0),
        Some(ErrorCode::PreconditionFailed)
    );
    assert_eq!(
        refused(&mut c, 3, delete("used", true, false)).map(|r| r.0),
        Some(ErrorCode::PreconditionFailed)
    );
    assert_eq!(
        refused(&mut c, 4, delete("missing", false, false)).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
    // Unconditional deletes work on both, and the subscription's session is told nothing
    // until it uses the subscription (it had no credit).
    assert_eq!(refused(&mut c, 5, delete("full", false, false)), None);
    assert_eq!(refused(&mut c, 6, delete("used", false, false)), None);
    let broker = c.conn.broker().clone();
    assert!(broker.queue("full").is_none() && broker.queue("used").is_none());
    assert!(c.take_output().is_empty());
}

#[tokio::test]
async fn queue_purge_empties_the_queue_but_not_what_is_acquired() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.call(1, declare("q"));
    for body in ["a", "b", "c"] {
        c.publish(1, "", &keyed("q"), body.as_bytes());
    }
    c.subscribe(1, "q", "d", AcceptMode::Explicit, AcquireMode::PreAcquired);
    assert_eq!(c.grant(1, "d", 1).len(), 1);
    let purge = QueuePurge {
        queue: Some(Str::from("q")),
    };
    assert_eq!(exception(&c.call(1, purge)), None);
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 1));
    let r = query_queue(&mut c, 1, "q");
    assert_eq!(r.message_count, Some(0));
    let missing = QueuePurge {
        queue: Some(Str::from("missing")),
    };
    assert_eq!(
        refused(&mut c, 2, missing).map(|r| r.0),
        Some(ErrorCode::NotFound)
    );
}

#[tokio::test]
async fn an_auto_delete_queue_goes_with_its_last_subscription() {
    let mut c = open().await;
    c.attach(1, "s1");
    let auto = QueueDeclare {
        auto_delete: true,
        ..declare("auto")
    };
    c.call(1, auto);
    // Never used: kept.
    c.call(1, ExecutionSync {});
    assert!(c.conn.broker().queue("auto").is_some());
    c.subscribe(1, "auto", "a", AcceptMode::None, AcquireMode::PreAcquired);
    c.subscribe(1, "auto", "b", AcceptMode::None, AcquireMode::PreAcquired);
    let cancel = |d: &str| ferry_amqp010::MessageCancel {
        destination: Some(Str::from(d)),
    };
    c.call(1, cancel("a"));
    assert!(c.conn.broker().queue("auto").is_some());
    c.call(1, cancel("b"));
    assert!(c.conn.broker().queue("auto").is_none());
}

#[tokio::test]
async fn a_queue_limit_refuses_transfers_with_resource_limit_exceeded() {
    let mut c = open().await;
    c.attach(1, "s1");
    let limited = QueueDeclare {
        arguments: Some(map(&[
            ("qpid.max_count", Value::Uint32(2)),
            ("qpid.policy_type", Value::Str16(Str::from("reject"))),
        ])),
        ..declare("small")
    };
    assert_eq!(exception(&c.call(1, limited)), None);
    assert_eq!(exception(&c.publish(1, "", &keyed("small"), b"1")), None);
    assert_eq!(exception(&c.publish(1, "", &keyed("small"), b"2")), None);
    let out = c.publish(1, "", &keyed("small"), b"3");
    let (code, id, _) = failure(&out);
    assert_eq!((code, id), (ErrorCode::ResourceLimitExceeded, 3));
    assert_eq!(c.conn.broker().queue("small").unwrap().message_count(), 2);
}

#[tokio::test]
async fn a_ring_queue_drops_from_the_head() {
    let mut c = open().await;
    c.attach(1, "s1");
    let ring = QueueDeclare {
        arguments: Some(map(&[
            ("qpid.max_count", Value::Uint32(2)),
            ("qpid.policy_type", Value::Str16(Str::from("ring"))),
        ])),
        ..declare("ring")
    };
    c.call(1, ring);
    for body in ["1", "2", "3"] {
        assert_eq!(
            exception(&c.publish(1, "", &keyed("ring"), body.as_bytes())),
            None
        );
    }
    assert_eq!(
        c.conn.broker().queue("ring").unwrap().queued_bodies(),
        [Bytes::from_static(b"2"), Bytes::from_static(b"3")]
    );
}

#[tokio::test]
async fn declared_arguments_come_back_from_queue_query_in_widened_types() {
    let mut c = open().await;
    c.attach(1, "s1");
    let args = map(&[
        ("void", Value::Void),
        ("bool", Value::Bool(true)),
        ("i8", Value::Int8(-8)),
        ("i16", Value::Int16(-16)),
        ("i32", Value::Int32(-32)),
        ("u8", Value::Uint8(8)),
        ("char", Value::Char(b'c')),
        ("u16", Value::Uint16(16)),
        ("u64", Value::Uint64(64)),
        ("time", Value::Datetime(1_700_000_000)),
        ("f32", Value::Float(1.5)),
        ("f64", Value::Double(2.5)),
        ("text", Value::Str8(Str::from("short"))),
        (
            "binary",
            Value::Str16(Str::from_bytes(Bytes::from_static(&[0xff]))),
        ),
        ("vbin", Value::Vbin8(Bytes::from_static(b"raw"))),
        (
            "list",
            Value::List(ferry_amqp010::List(vec![Value::Bool(true), Value::Int8(1)])),
        ),
        ("uuid", Value::Uuid([9; 16])),
    ]);
    let declared = QueueDeclare {
        arguments: Some(args),
        ..declare("typed")
    };
    assert_eq!(exception(&c.call(1, declared)), None);
    let got = query_queue(&mut c, 1, "typed").arguments.unwrap();
    let expected = [
        ("void", Value::Void),
        ("bool", Value::Bool(true)),
        ("i8", Value::Int64(-8)),
        ("i16", Value::Int64(-16)),
        ("i32", Value::Int64(-32)),
        ("u8", Value::Uint64(8)),
        ("char", Value::Uint64(u64::from(b'c'))),
        ("u16", Value::Uint64(16)),
        ("u64", Value::Uint64(64)),
        ("time", Value::Uint64(1_700_000_000)),
        ("f32", Value::Double(1.5)),
        ("f64", Value::Double(2.5)),
        ("text", Value::Str16(Str::from("short"))),
        ("binary", Value::Vbin32(Bytes::from_static(&[0xff]))),
        ("vbin", Value::Vbin32(Bytes::from_static(b"raw"))),
        (
            "list",
            Value::List(ferry_amqp010::List(vec![
                Value::Bool(true),
                Value::Int64(1),
            ])),
        ),
        // What the neutral form cannot hold comes back as void.
        ("uuid", Value::Void),
    ];
    for (k, v) in expected {
        assert_eq!(got.get(k), Some(&v), "{k}");
    }
}
