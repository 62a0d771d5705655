//! The ACL and quotas as a 0-9-1 client meets them: a denied request is a 403 on its own
//! channel (530 for the connection itself), and the per-user queue quota refuses a queue
//! until one is deleted.

use ferry_amqp091::{
    reply, BasicGet, ConnectionOpen, ExchangeBind, ExchangeDeclare, ExchangeDelete, ExchangeUnbind,
    Method, QueueBind, QueueDelete, QueuePurge, QueueUnbind,
};

use super::*;

fn exchange(name: &'static str, kind: &'static str) -> ExchangeDeclare {
    ExchangeDeclare {
        exchange: short(name),
        kind: short(kind),
        ..Default::default()
    }
}

#[tokio::test]
async fn each_request_the_acl_denies_is_403_on_its_channel_only() {
    let services = services_with_acl(
        "acl deny guest create queue name=secret*\n\
         acl deny guest create queue name=amq.gen-*\n\
         acl deny guest access queue name=hidden\n\
         acl deny guest purge queue name=kept\n\
         acl deny guest delete queue name=kept\n\
         acl deny guest consume queue name=kept\n\
         acl deny guest create exchange name=secret*\n\
         acl deny guest access exchange name=hidden-x\n\
         acl deny guest delete exchange name=kept-x\n\
         acl deny guest delete exchange name=ghost-x\n\
         acl deny guest delete queue name=ghost\n\
         acl deny guest bind exchange name=amq.fanout\n\
         acl deny guest unbind exchange name=amq.direct\n\
         acl deny guest publish exchange name=amq.topic routingkey=private.#\n\
         acl allow all all\n",
        ServerConfig::default(),
    );
    let mut c = open_on(&services, &[]).await;
    open_channel(&mut c, 1);
    // Set up what the denied requests are about (creating is allowed).
    c.declare_queue(1, "kept");
    c.declare_queue(1, "hidden");
    c.call(1, exchange("kept-x", "topic"));
    c.call(1, exchange("hidden-x", "topic"));
    c.call(
        1,
        QueueBind {
            queue: short("kept"),
            exchange: short("amq.direct"),
            routing_key: short("k"),
            ..Default::default()
        },
    );
    let denied: Vec<(Method, (u16, u16))> = vec![
        (queue("secret-1").into(), (50, 10)),
        (queue("").into(), (50, 10)),
        (
            QueueDeclare {
                passive: true,
                ..queue("hidden")
            }
            .into(),
            (50, 10),
        ),
        // Redeclaring an existing queue is an access.
        (queue("hidden").into(), (50, 10)),
        (
            QueuePurge {
                queue: short("kept"),
                ..Default::default()
            }
            .into(),
            (50, 30),
        ),
        (
            QueueDelete {
                queue: short("kept"),
                ..Default::default()
            }
            .into(),
            (50, 40),
        ),
        (consumer("kept", "c").into(), (60, 20)),
        (
            BasicGet {
                queue: short("kept"),
                ..Default::default()
            }
            .into(),
            (60, 70),
        ),
        (exchange("secret-x", "direct").into(), (40, 10)),
        (
            ExchangeDeclare {
                passive: true,
                ..exchange("hidden-x", "")
            }
            .into(),
            (40, 10),
        ),
        (
            ExchangeDelete {
                exchange: short("kept-x"),
                ..Default::default()
            }
            .into(),
            (40, 20),
        ),
        // Deleting what does not exist is checked by its name.
        (
            QueueDelete {
                queue: short("ghost"),
                ..Default::default()
            }
            .into(),
            (50, 40),
        ),
        (
            ExchangeDelete {
                exchange: short("ghost-x"),
                ..Default::default()
            }
            .into(),
            (40, 20),
        ),
        (
            QueueBind {
                queue: short("kept"),
                exchange: short("amq.fanout"),
                ..Default::default()
            }
            .into(),
            (50, 20),
        ),
        (
            QueueUnbind {
                queue: short("kept"),
                exchange: short("amq.direct"),
                routing_key: short("k"),
                ..Default::default()
            }
            .into(),
            (50, 50),
        ),
        // An exchange-to-exchange binding is a binding of its source.
        (
            ExchangeBind {
                destination: short("kept-x"),
                source: short("amq.fanout"),
                ..Default::default()
            }
            .into(),
            (40, 30),
        ),
        (
            ExchangeUnbind {
                destination: short("kept-x"),
                source: short("amq.direct"),
                ..Default::default()
            }
            .into(),
            (40, 40),
        ),
    ];
    for (i, (m, ids)) in denied.into_iter().enumerate() {
        let id = 2 + i as u16;
        open_channel(&mut c, id);
        let name = m.name();
        let out = c.call(id, m);
        assert_channel_closed(&out, id, reply::ACCESS_REFUSED, ids);
        let Some((_, Method::ChannelClose(cl))) = out.first() else {
            unreachable!()
        };
        assert!(
            cl.reply_text
                .as_bytes()
                .starts_with(b"ACCESS_REFUSED - ACL denied"),
            "{name}: {cl:?}"
        );
        c.call(id, ChannelCloseOk {});
    }
    // Publishing is checked per message, by exchange and routing key.
    c.publish(1, "amq.topic", "public.news", b"ok");
    assert!(c.take_output().is_empty());
    c.publish(1, "amq.topic", "private.diary", b"no");
    let out = methods(c.take_output());
    assert_channel_closed(&out, 1, reply::ACCESS_REFUSED, (60, 40));
    // Nothing that was denied happened.
    let broker = c.conn.broker();
    assert!(broker.queue("secret-1").is_none());
    assert!(broker.queue("kept").is_some());
    assert!(broker.exchange("kept-x").is_some());
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn a_connection_the_acl_denies_is_530_at_connection_open() {
    let services = services_with_acl(
        "acl deny guest create connection\nacl allow all all\n",
        ServerConfig::default(),
    );
    let mut c = Wire::new(|now| connection(services, peer(), now));
    c.take_output();
    c.send(&encode(
        0,
        start_ok("PLAIN", b"\0guest\0guest".to_vec(), &[]),
    ));
    c.finish_auth().await;
    c.take_output();
    c.send(&encode(0, tune_ok(65535, 0)));
    let out = c.call(0, ConnectionOpen::default());
    assert_connection_closed(&c, &out, reply::NOT_ALLOWED);
    let Some((_, Method::ConnectionClose(cl))) = out.last() else {
        unreachable!()
    };
    assert_eq!((cl.class_id, cl.method_id), (10, 40));
}

#[tokio::test]
async fn the_per_user_queue_quota_refuses_a_queue_until_one_is_deleted() {
    let config = ServerConfig {
        max_queues_per_user: 2,
        ..ServerConfig::default()
    };
    let services = services(config);
    let mut c = open_on(&services, &[]).await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q1");
    c.declare(1, queue(""));
    // Redeclaring what exists takes no slot.
    c.declare_queue(1, "q1");
    open_channel(&mut c, 2);
    let out = c.call(2, queue("q3"));
    assert_channel_closed(&out, 2, reply::PRECONDITION_FAILED, (50, 10));
    c.call(2, ChannelCloseOk {});
    let deleted = c.call(
        1,
        QueueDelete {
            queue: short("q1"),
            ..Default::default()
        },
    );
    assert!(matches!(&deleted[..], [(1, Method::QueueDeleteOk(_))]));
    c.declare_queue(1, "q3");
}
