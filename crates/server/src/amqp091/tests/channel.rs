//! The exchange and queue classes: declare (passive, server-named, exclusive, arguments),
//! bind and unbind (queues and exchanges), purge, delete, and their errors, each closing
//! only its own channel.

use ferry_amqp091::{
    reply, BasicGet, BasicProperties, ExchangeBind, ExchangeDeclare, ExchangeDelete,
    ExchangeUnbind, FieldValue, Method, QueueBind, QueueDelete, QueuePurge, QueueUnbind,
};

use super::*;

fn exchange(name: &'static str, kind: &'static str) -> ExchangeDeclare {
    ExchangeDeclare {
        exchange: short(name),
        kind: short(kind),
        ..Default::default()
    }
}

fn bind(queue: &'static str, exchange: &'static str, key: &'static str) -> QueueBind {
    QueueBind {
        queue: short(queue),
        exchange: short(exchange),
        routing_key: short(key),
        ..Default::default()
    }
}

fn purge(queue: &'static str) -> QueuePurge {
    QueuePurge {
        queue: short(queue),
        ..Default::default()
    }
}

fn delete(queue: &'static str) -> QueueDelete {
    QueueDelete {
        queue: short(queue),
        ..Default::default()
    }
}

fn passive(name: &'static str) -> QueueDeclare {
    QueueDeclare {
        passive: true,
        ..queue(name)
    }
}

/// Sends `m` on a fresh channel `id` and asserts the reply is exactly `ok` on it.
#[track_caller]
fn ok_on(c: &mut Client, id: u16, m: impl Into<Method>, ok: fn(&Method) -> bool) {
    let out = c.call(id, m);
    assert!(
        matches!(&out[..], [(ch, m)] if *ch == id && ok(m)),
        "{out:?}"
    );
}

/// Sends `m` on channel `id`, expects it closed with `code` for method `ids`, and completes
/// the close.
#[track_caller]
fn refused_on(c: &mut Client, id: u16, m: impl Into<Method>, code: u16, ids: (u16, u16)) {
    let out = c.call(id, m);
    assert_channel_closed(&out, id, code, ids);
    assert!(c.call(id, ChannelCloseOk {}).is_empty());
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

/// A mandatory publish: whether it came back unroutable.
fn returned(c: &mut Client, exchange: &'static str, key: &'static str) -> bool {
    c.publish_with(
        1,
        BasicPublish {
            mandatory: true,
            ..to(exchange, key)
        },
        BasicProperties::default(),
        b"probe",
    );
    let got = c.take();
    match &got[..] {
        [] => false,
        [i] if matches!(i.method, Method::BasicReturn(_)) => true,
        other => panic!("{other:?}"),
    }
}

fn depth(c: &Client, name: &str) -> u64 {
    c.conn
        .broker()
        .queue(name)
        .expect("queue")
        .info()
        .message_count
}

#[tokio::test]
async fn passive_declare_of_a_missing_queue_is_404_and_only_that_channel_closes() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    c.declare_queue(1, "here");
    refused_on(&mut c, 2, passive("missing"), reply::NOT_FOUND, (50, 10));
    // Channel 1 goes on, and channel 2 can be opened again.
    let ok = c.declare(1, passive("here"));
    assert_eq!(ok.queue.as_bytes(), b"here");
    open_channel(&mut c, 2);
    c.declare(2, passive("here"));
}

#[tokio::test]
async fn declare_ok_reports_the_messages_and_consumers() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let ok = c.declare_queue(1, "q");
    assert_eq!((ok.message_count, ok.consumer_count), (0, 0));
    c.publish(1, "", "q", b"1");
    c.publish(1, "", "q", b"2");
    let ok = c.declare(1, passive("q"));
    assert_eq!((ok.message_count, ok.consumer_count), (2, 0));
    c.consume(1, consumer("q", "c"));
    // Both are out with the consumer now; redeclaring (not passive) reports the same way.
    let ok = c.declare_queue(1, "q");
    assert_eq!((ok.message_count, ok.consumer_count), (0, 1));
}

#[tokio::test]
async fn a_server_named_queue_is_amq_gen_and_the_default_for_the_channels_next_methods() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let ok = c.declare(1, queue(""));
    let name = ok.queue.as_bytes().to_vec();
    assert!(name.starts_with(b"amq.gen-"), "{ok:?}");
    // queue.bind with an empty queue name and key: that queue, under its own name.
    ok_on(&mut c, 1, bind("", "amq.direct", ""), |m| {
        matches!(m, Method::QueueBindOk(_))
    });
    let key = String::from_utf8(name.clone()).unwrap();
    c.publish_with(
        1,
        BasicPublish {
            exchange: short("amq.direct"),
            routing_key: ShortStr::new(key.clone()).unwrap(),
            ..Default::default()
        },
        BasicProperties::default(),
        b"via amq.direct",
    );
    assert_eq!(depth(&c, &key), 1);
    // basic.get, purge and consume with an empty name mean it too.
    let got = c.request(
        1,
        BasicGet {
            no_ack: true,
            ..Default::default()
        },
    );
    assert_eq!(got[0].body(), b"via amq.direct");
    c.publish(1, "amq.direct", "", b"x");
    ok_on(&mut c, 1, purge(""), |m| {
        matches!(m, Method::QueuePurgeOk(_))
    });
    let out = c.request(1, consumer("", "c"));
    assert!(matches!(out[0].method, Method::BasicConsumeOk(_)));
    // Two server-named queues never share a name.
    let other = c.declare(1, queue(""));
    assert_ne!(other.queue.as_bytes(), &name[..]);
}

#[tokio::test]
async fn an_empty_queue_name_with_no_queue_declared_on_the_channel_is_404() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    // Declared on channel 1: channel 2 has no "last queue".
    c.declare_queue(1, "q");
    refused_on(&mut c, 2, purge(""), reply::NOT_FOUND, (50, 30));
    open_channel(&mut c, 2);
    refused_on(&mut c, 2, consumer("", "c"), reply::NOT_FOUND, (60, 20));
    open_channel(&mut c, 2);
    refused_on(&mut c, 2, delete(""), reply::NOT_FOUND, (50, 40));
}

#[tokio::test]
async fn names_starting_with_amq_are_reserved_403() {
    let mut c = open().await;
    for id in 1..=3 {
        open_channel(&mut c, id);
    }
    refused_on(
        &mut c,
        1,
        queue("amq.mine"),
        reply::ACCESS_REFUSED,
        (50, 10),
    );
    refused_on(
        &mut c,
        2,
        exchange("amq.mine", "direct"),
        reply::ACCESS_REFUSED,
        (40, 10),
    );
    // The default exchange and the built-in ones cannot be deleted.
    open_channel(&mut c, 1);
    let builtin = ExchangeDelete {
        exchange: short("amq.direct"),
        ..Default::default()
    };
    refused_on(&mut c, 1, builtin, reply::ACCESS_REFUSED, (40, 20));
    assert!(c.conn.broker().exchange("amq.direct").is_some());
    // The default exchange cannot be declared, passively or not.
    let default = exchange("", "direct");
    for declare in [
        default.clone(),
        ExchangeDeclare {
            durable: true,
            ..default.clone()
        },
        ExchangeDeclare {
            passive: true,
            ..default
        },
    ] {
        open_channel(&mut c, 1);
        refused_on(&mut c, 1, declare, reply::ACCESS_REFUSED, (40, 10));
    }
    // The built-in ones may be declared as they are, passively or not.
    let builtin = ExchangeDeclare {
        durable: true,
        ..exchange("amq.direct", "direct")
    };
    ok_on(&mut c, 3, builtin, |m| {
        matches!(m, Method::ExchangeDeclareOk(_))
    });
    let declared = ExchangeDeclare {
        passive: true,
        ..exchange("amq.topic", "")
    };
    ok_on(&mut c, 3, declared, |m| {
        matches!(m, Method::ExchangeDeclareOk(_))
    });
}

#[tokio::test]
async fn redeclaring_a_queue_with_other_properties_or_arguments_is_406() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let original = QueueDeclare {
        durable: false,
        arguments: table(&[("x-max-length", FieldValue::I32(10))]),
        ..queue("q")
    };
    c.declare(1, original.clone());
    // The same in another integer width is the same.
    c.declare(
        1,
        QueueDeclare {
            arguments: table(&[("x-max-length", FieldValue::I64(10))]),
            ..original.clone()
        },
    );
    let variants = [
        QueueDeclare {
            durable: true,
            ..original.clone()
        },
        QueueDeclare {
            auto_delete: true,
            ..original.clone()
        },
        QueueDeclare {
            arguments: table(&[("x-max-length", FieldValue::I32(11))]),
            ..original.clone()
        },
        QueueDeclare {
            arguments: FieldTable::new(),
            ..original.clone()
        },
    ];
    for (i, variant) in variants.into_iter().enumerate() {
        let id = 2 + i as u16;
        open_channel(&mut c, id);
        refused_on(&mut c, id, variant, reply::PRECONDITION_FAILED, (50, 10));
    }
    // A passive declare ignores all of that.
    c.declare(
        1,
        QueueDeclare {
            durable: true,
            ..passive("q")
        },
    );
}

#[tokio::test]
async fn bad_queue_arguments_are_406() {
    let mut c = open().await;
    let bad = [
        ("x-max-length", FieldValue::I32(-1)),
        ("x-max-length", FieldValue::I32(0)),
        ("x-message-ttl", long("soon")),
        ("x-overflow", long("explode")),
        ("x-dead-letter-exchange", FieldValue::I32(1)),
        ("x-single-active-consumer", long("yes")),
    ];
    for (i, arg) in bad.into_iter().enumerate() {
        let id = 1 + i as u16;
        open_channel(&mut c, id);
        let m = QueueDeclare {
            arguments: table(std::slice::from_ref(&arg)),
            ..queue("q")
        };
        refused_on(&mut c, id, m, reply::PRECONDITION_FAILED, (50, 10));
    }
    assert!(c.conn.broker().queue("q").is_none());
}

#[tokio::test]
async fn nowait_declares_and_binds_send_nothing_back() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    let quiet = [
        Method::from(QueueDeclare {
            nowait: true,
            ..queue("q")
        }),
        ExchangeDeclare {
            nowait: true,
            ..exchange("x", "topic")
        }
        .into(),
        QueueBind {
            nowait: true,
            ..bind("q", "x", "a.#")
        }
        .into(),
        QueuePurge {
            nowait: true,
            ..purge("q")
        }
        .into(),
    ];
    for m in quiet {
        assert!(c.call(1, m).is_empty());
    }
    assert!(!returned(&mut c, "x", "a.b.c"));
    assert_eq!(depth(&c, "q"), 1);
    let quiet = [
        Method::from(ExchangeDelete {
            exchange: short("x"),
            nowait: true,
            ..Default::default()
        }),
        QueueDelete {
            nowait: true,
            ..delete("q")
        }
        .into(),
    ];
    for m in quiet {
        assert!(c.call(1, m).is_empty());
    }
    assert!(c.conn.broker().queue("q").is_none());
}

#[tokio::test]
async fn queue_purge_counts_the_ready_messages_and_leaves_unacknowledged_ones() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    open_channel(&mut c, 2);
    c.declare_queue(1, "q");
    for body in [b"1", b"2", b"3", b"4"] {
        c.publish(1, "", "q", body);
    }
    let got = c.request(
        2,
        BasicGet {
            queue: short("q"),
            ..Default::default()
        },
    );
    assert!(matches!(got[0].method, Method::BasicGetOk(_)));
    let out = c.call(1, purge("q"));
    assert!(
        matches!(&out[..], [(1, Method::QueuePurgeOk(p))] if p.message_count == 3),
        "{out:?}"
    );
    let out = c.call(1, purge("q"));
    assert!(matches!(&out[..], [(1, Method::QueuePurgeOk(p))] if p.message_count == 0));
    // The one fetched comes back when its channel closes.
    c.call(2, ChannelClose::default());
    assert_eq!(depth(&c, "q"), 1);
    refused_on(&mut c, 1, purge("missing"), reply::NOT_FOUND, (50, 30));
}

#[tokio::test]
async fn queue_delete_reports_the_messages_and_honours_if_unused_and_if_empty() {
    let mut c = open().await;
    for id in 1..=4 {
        open_channel(&mut c, id);
    }
    c.declare_queue(1, "q");
    c.publish(1, "", "q", b"1");
    c.publish(1, "", "q", b"2");
    refused_on(
        &mut c,
        2,
        QueueDelete {
            if_empty: true,
            ..delete("q")
        },
        reply::PRECONDITION_FAILED,
        (50, 40),
    );
    c.declare_queue(1, "busy");
    c.consume(1, consumer("busy", "c"));
    refused_on(
        &mut c,
        3,
        QueueDelete {
            if_unused: true,
            ..delete("busy")
        },
        reply::PRECONDITION_FAILED,
        (50, 40),
    );
    // An unused queue with messages may go with if-unused; the count comes back.
    let out = c.call(
        4,
        QueueDelete {
            if_unused: true,
            ..delete("q")
        },
    );
    assert!(
        matches!(&out[..], [(4, Method::QueueDeleteOk(d))] if d.message_count == 2),
        "{out:?}"
    );
    assert!(c.conn.broker().queue("q").is_none());
    // Deleting what is not there succeeds with 0, as in RabbitMQ.
    let out = c.call(4, delete("q"));
    assert!(matches!(&out[..], [(4, Method::QueueDeleteOk(d))] if d.message_count == 0));
    // An empty queue may go with if-empty even with consumers; they are cancelled.
    let out = c.call(
        4,
        QueueDelete {
            if_empty: true,
            ..delete("busy")
        },
    );
    assert!(
        matches!(&out[..], [(4, Method::QueueDeleteOk(_))]),
        "{out:?}"
    );
}

#[tokio::test]
async fn queues_bind_and_unbind_on_direct_topic_fanout_and_headers_exchanges() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    for (x, kind) in [
        ("d", "direct"),
        ("t", "topic"),
        ("f", "fanout"),
        ("h", "headers"),
    ] {
        ok_on(&mut c, 1, exchange(x, kind), |m| {
            matches!(m, Method::ExchangeDeclareOk(_))
        });
    }
    let binds = [
        bind("q", "d", "key"),
        bind("q", "t", "a.*.c"),
        bind("q", "f", "ignored"),
        QueueBind {
            arguments: table(&[("x-match", long("all")), ("kind", long("x"))]),
            ..bind("q", "h", "")
        },
    ];
    for b in binds {
        ok_on(&mut c, 1, b, |m| matches!(m, Method::QueueBindOk(_)));
    }
    assert!(!returned(&mut c, "d", "key"));
    assert!(returned(&mut c, "d", "other"));
    assert!(!returned(&mut c, "t", "a.b.c"));
    assert!(returned(&mut c, "t", "a.b"));
    assert!(!returned(&mut c, "f", "anything"));
    // Headers routing reads the message's headers.
    let matching = BasicProperties {
        headers: Some(table(&[("kind", long("x"))])),
        ..Default::default()
    };
    for (props, routed) in [(matching, true), (BasicProperties::default(), false)] {
        c.publish_with(
            1,
            BasicPublish {
                mandatory: true,
                ..to("h", "")
            },
            props,
            b"h",
        );
        assert_eq!(c.take().is_empty(), routed);
    }
    assert_eq!(depth(&c, "q"), 4);
    // Unbinding stops the routing; unbinding what is not bound succeeds.
    for _ in 0..2 {
        let unbind = QueueUnbind {
            queue: short("q"),
            exchange: short("d"),
            routing_key: short("key"),
            ..Default::default()
        };
        ok_on(&mut c, 1, unbind, |m| matches!(m, Method::QueueUnbindOk(_)));
    }
    assert!(returned(&mut c, "d", "key"));
}

#[tokio::test]
async fn binding_errors_close_the_channel() {
    let mut c = open().await;
    for id in 1..=5 {
        open_channel(&mut c, id);
    }
    c.declare_queue(1, "q");
    refused_on(
        &mut c,
        1,
        bind("q", "missing", "k"),
        reply::NOT_FOUND,
        (50, 20),
    );
    refused_on(
        &mut c,
        2,
        bind("missing", "amq.direct", "k"),
        reply::NOT_FOUND,
        (50, 20),
    );
    refused_on(
        &mut c,
        3,
        bind("q", "", "k"),
        reply::ACCESS_REFUSED,
        (50, 20),
    );
    let unbind_default = QueueUnbind {
        queue: short("q"),
        routing_key: short("q"),
        ..Default::default()
    };
    refused_on(&mut c, 4, unbind_default, reply::ACCESS_REFUSED, (50, 50));
    // Unbinding from a queue or an exchange that is not there succeeds, as in RabbitMQ
    // (checked against 3.10): clients tear down bindings of auto-deleted queues.
    for (queue, exchange) in [
        ("missing", "amq.direct"),
        ("q", "missing"),
        ("gone", "gone"),
    ] {
        let unbind = QueueUnbind {
            queue: ShortStr::new(bytes::Bytes::from(queue)).unwrap(),
            exchange: ShortStr::new(bytes::Bytes::from(exchange)).unwrap(),
            ..Default::default()
        };
        ok_on(&mut c, 5, unbind, |m| matches!(m, Method::QueueUnbindOk(_)));
    }
}

#[tokio::test]
async fn exchange_to_exchange_bindings_route_through_and_unbinding_stops_them() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    ok_on(&mut c, 1, exchange("front", "topic"), |m| {
        matches!(m, Method::ExchangeDeclareOk(_))
    });
    ok_on(&mut c, 1, exchange("back", "direct"), |m| {
        matches!(m, Method::ExchangeDeclareOk(_))
    });
    ok_on(&mut c, 1, bind("q", "back", "orders.new"), |m| {
        matches!(m, Method::QueueBindOk(_))
    });
    let e2e = ExchangeBind {
        destination: short("back"),
        source: short("front"),
        routing_key: short("orders.*"),
        ..Default::default()
    };
    ok_on(&mut c, 1, e2e, |m| matches!(m, Method::ExchangeBindOk(_)));
    // front matches orders.*, then back routes by the message's own key.
    assert!(!returned(&mut c, "front", "orders.new"));
    assert!(returned(&mut c, "front", "orders.old"));
    assert!(returned(&mut c, "front", "invoices.new"));
    assert_eq!(depth(&c, "q"), 1);
    for _ in 0..2 {
        let unbind = ExchangeUnbind {
            destination: short("back"),
            source: short("front"),
            routing_key: short("orders.*"),
            ..Default::default()
        };
        ok_on(&mut c, 1, unbind, |m| {
            matches!(m, Method::ExchangeUnbindOk(_))
        });
    }
    assert!(returned(&mut c, "front", "orders.new"));
}

#[tokio::test]
async fn exchange_binding_errors_close_the_channel() {
    let mut c = open().await;
    for id in 1..=3 {
        open_channel(&mut c, id);
    }
    c.call(1, exchange("x", "fanout"));
    let missing_source = ExchangeBind {
        destination: short("x"),
        source: short("missing"),
        ..Default::default()
    };
    refused_on(&mut c, 1, missing_source, reply::NOT_FOUND, (40, 30));
    let missing_destination = ExchangeBind {
        destination: short("missing"),
        source: short("x"),
        ..Default::default()
    };
    refused_on(&mut c, 2, missing_destination, reply::NOT_FOUND, (40, 30));
    let default_exchange = ExchangeUnbind {
        destination: short("x"),
        source: short(""),
        ..Default::default()
    };
    refused_on(&mut c, 3, default_exchange, reply::ACCESS_REFUSED, (40, 40));
}

#[tokio::test]
async fn exchange_declare_and_delete_errors() {
    let mut c = open().await;
    for id in 1..=5 {
        open_channel(&mut c, id);
    }
    let passive_missing = ExchangeDeclare {
        passive: true,
        ..exchange("missing", "")
    };
    refused_on(&mut c, 1, passive_missing, reply::NOT_FOUND, (40, 10));
    let default = ExchangeDelete {
        exchange: short(""),
        ..Default::default()
    };
    refused_on(&mut c, 2, default, reply::ACCESS_REFUSED, (40, 20));
    // A used exchange with if-unused stays.
    c.declare_queue(3, "q");
    c.call(3, exchange("used", "direct"));
    c.call(3, bind("q", "used", "k"));
    let if_unused = ExchangeDelete {
        exchange: short("used"),
        if_unused: true,
        ..Default::default()
    };
    refused_on(&mut c, 3, if_unused, reply::PRECONDITION_FAILED, (40, 20));
    assert!(c.conn.broker().exchange("used").is_some());
    // Deleting it, and deleting what is not there, succeed.
    for _ in 0..2 {
        let delete = ExchangeDelete {
            exchange: short("used"),
            ..Default::default()
        };
        ok_on(&mut c, 4, delete, |m| {
            matches!(m, Method::ExchangeDeleteOk(_))
        });
    }
    assert!(c.conn.broker().exchange("used").is_none());
    // Publishing to it now is a 404 even though the channel had it cached.
    c.publish(4, "used", "k", b"x");
    let out = methods(c.take_output());
    assert_channel_closed(&out, 4, reply::NOT_FOUND, (60, 40));
    // An unknown type is a connection error.
    let out = c.call(5, exchange("odd", "x-unknown-type"));
    assert_connection_closed(&c, &out, reply::COMMAND_INVALID);
}

#[tokio::test]
async fn exclusive_queues_belong_to_their_connection_and_die_with_it() {
    let services = services(ServerConfig::default());
    let mut owner = open_on(&services, &[]).await;
    let mut other = open_on(&services, &[]).await;
    open_channel(&mut owner, 1);
    owner.declare(
        1,
        QueueDeclare {
            exclusive: true,
            ..queue("mine")
        },
    );
    owner.publish(1, "", "mine", b"x");
    let attempts: [(Method, (u16, u16)); 7] = [
        (queue("mine").into(), (50, 10)),
        (passive("mine").into(), (50, 10)),
        (consumer("mine", "c").into(), (60, 20)),
        (
            BasicGet {
                queue: short("mine"),
                ..Default::default()
            }
            .into(),
            (60, 70),
        ),
        (bind("mine", "amq.direct", "k").into(), (50, 20)),
        (purge("mine").into(), (50, 30)),
        (delete("mine").into(), (50, 40)),
    ];
    for (i, (m, ids)) in attempts.into_iter().enumerate() {
        let id = 1 + i as u16;
        open_channel(&mut other, id);
        refused_on(&mut other, id, m, reply::RESOURCE_LOCKED, ids);
    }
    // The owner still has it, message and all.
    let ok = owner.declare(1, passive("mine"));
    assert_eq!(ok.message_count, 1);
    owner.call(0, ConnectionClose::default());
    assert!(services.broker.queue("mine").is_none());
    open_channel(&mut other, 1);
    refused_on(&mut other, 1, passive("mine"), reply::NOT_FOUND, (50, 10));
    // Now anyone may declare the name afresh.
    open_channel(&mut other, 1);
    other.declare_queue(1, "mine");
}

#[tokio::test]
async fn redeclaring_a_queue_with_another_exclusivity_is_405_as_in_rabbitmq() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "shared");
    c.declare(
        1,
        QueueDeclare {
            auto_delete: true,
            ..queue("temp")
        },
    );
    c.declare(
        1,
        QueueDeclare {
            exclusive: true,
            ..queue("mine")
        },
    );
    let mismatches = [
        QueueDeclare {
            exclusive: true,
            ..queue("shared")
        },
        // Same flags otherwise: still not a way to claim a shared queue.
        QueueDeclare {
            exclusive: true,
            auto_delete: true,
            ..queue("temp")
        },
        queue("mine"),
        QueueDeclare {
            auto_delete: true,
            ..queue("mine")
        },
    ];
    for (i, declare) in mismatches.into_iter().enumerate() {
        let id = 2 + i as u16;
        open_channel(&mut c, id);
        refused_on(&mut c, id, declare, reply::RESOURCE_LOCKED, (50, 10));
    }
    // The shared queues stayed shared: another connection may still use them.
    let services = Services {
        broker: c.conn.broker().clone(),
        ..services(ServerConfig::default())
    };
    let mut other = open_on(&services, &[]).await;
    open_channel(&mut other, 1);
    other.declare(1, passive("temp"));
    other.declare_queue(1, "shared");
    // The exclusive one, declared as it is, is fine for its owner.
    c.declare(
        1,
        QueueDeclare {
            exclusive: true,
            ..queue("mine")
        },
    );
}

#[tokio::test]
async fn auto_delete_queues_go_when_their_last_consumer_does() {
    let mut c = open().await;
    open_channel(&mut c, 1);
    c.declare(
        1,
        QueueDeclare {
            auto_delete: true,
            ..queue("temp")
        },
    );
    c.consume(1, consumer("temp", "a"));
    c.consume(1, consumer("temp", "b"));
    c.call(
        1,
        ferry_amqp091::BasicCancel {
            consumer_tag: short("a"),
            nowait: false,
        },
    );
    assert!(c.conn.broker().queue("temp").is_some());
    c.call(
        1,
        ferry_amqp091::BasicCancel {
            consumer_tag: short("b"),
            nowait: false,
        },
    );
    assert!(c.conn.broker().queue("temp").is_none());
}
