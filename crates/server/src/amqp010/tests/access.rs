//! The ACL and quotas as a 0-10 client meets them: a denied command is an
//! execution.exception unauthorized-access (403) followed by session.detach, on its own
//! session; quotas refuse with resource-limit-exceeded (queues) or connection-forced
//! (connections).

use ferry_amqp010::{
    ExchangeBind, ExchangeBound, ExchangeDeclare, ExchangeDelete, ExchangeQuery, ExchangeUnbind,
    QueueDelete, QueuePurge, QueueQuery,
};

use super::*;

fn exchange(name: &str, kind: &str) -> ExchangeDeclare {
    ExchangeDeclare {
        exchange: Some(Str::from(name)),
        r#type: (!kind.is_empty()).then(|| Str::from(kind)),
        ..Default::default()
    }
}

fn s(text: &str) -> Option<Str> {
    Some(Str::from(text))
}

#[tokio::test]
async fn each_command_the_acl_denies_is_403_and_detaches_only_its_session() {
    let services = services_with_acl(
        "acl deny guest create queue name=secret*\n\
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
         acl allow all all\n",
        ServerConfig::default(),
    );
    let mut c = open_on(services, 0).await;
    c.attach(1, "setup");
    for cmd in [declare("kept"), declare("hidden")] {
        assert_eq!(exception(&c.call(1, cmd)), None);
    }
    for x in ["kept-x", "hidden-x"] {
        assert_eq!(exception(&c.call(1, exchange(x, "topic"))), None);
    }
    let bind = ExchangeBind {
        queue: s("kept"),
        exchange: s("amq.direct"),
        binding_key: s("k"),
        arguments: None,
    };
    assert_eq!(exception(&c.call(1, bind)), None);
    let denied: Vec<(Command, (u8, u8))> = vec![
        (declare("secret-1").into(), (8, 1)),
        (
            QueueDeclare {
                passive: true,
                ..declare("hidden")
            }
            .into(),
            (8, 1),
        ),
        // Redeclaring an existing queue is an access.
        (declare("hidden").into(), (8, 1)),
        (QueueQuery { queue: s("hidden") }.into(), (8, 4)),
        (QueuePurge { queue: s("kept") }.into(), (8, 3)),
        (
            QueueDelete {
                queue: s("kept"),
                ..Default::default()
            }
            .into(),
            (8, 2),
        ),
        (subscribe_to("kept", "c").into(), (4, 7)),
        (exchange("secret-x", "direct").into(), (7, 1)),
        (
            ExchangeDeclare {
                passive: true,
                ..exchange("hidden-x", "")
            }
            .into(),
            (7, 1),
        ),
        (
            ExchangeQuery {
                name: s("hidden-x"),
            }
            .into(),
            (7, 3),
        ),
        (
            ExchangeBound {
                exchange: s("hidden-x"),
                ..Default::default()
            }
            .into(),
            (7, 6),
        ),
        (
            ExchangeDelete {
                exchange: s("kept-x"),
                if_unused: false,
            }
            .into(),
            (7, 2),
        ),
        // Deleting what does not exist is checked by its name.
        (
            ExchangeDelete {
                exchange: s("ghost-x"),
                if_unused: false,
            }
            .into(),
            (7, 2),
        ),
        (
            QueueDelete {
                queue: s("ghost"),
                ..Default::default()
            }
            .into(),
            (8, 2),
        ),
        (
            ExchangeBind {
                queue: s("kept"),
                exchange: s("amq.fanout"),
                binding_key: s(""),
                arguments: None,
            }
            .into(),
            (7, 4),
        ),
        (
            ExchangeUnbind {
                queue: s("kept"),
                exchange: s("amq.direct"),
                binding_key: s("k"),
            }
            .into(),
            (7, 5),
        ),
    ];
    for (i, (cmd, codes)) in denied.into_iter().enumerate() {
        let channel = 2 + i as u16;
        let name: &'static str = Box::leak(format!("denied-{channel}").into_boxed_str());
        c.attach(channel, name);
        let what = cmd.name();
        let out = c.call(channel, cmd);
        let found = exceptions(&out);
        let [(ch, e)] = &found[..] else {
            panic!("{what}: {out:?}");
        };
        assert_eq!(*ch, channel);
        assert_eq!(
            (e.error_code, e.command_id, e.class_code, e.command_code),
            (
                Some(ErrorCode::UnauthorizedAccess),
                Some(0),
                Some(codes.0),
                Some(codes.1)
            ),
            "{what}"
        );
        let text = e.description.as_ref().unwrap().to_str_lossy().into_owned();
        assert!(
            text.starts_with("ACL denied") && text.contains("from guest"),
            "{what}: {text}"
        );
        assert!(
            matches!(out.last(), Some(Item::Control(ch, Control::SessionDetach(_))) if *ch == channel),
            "{what}: {out:?}"
        );
    }
    // Nothing that was denied happened; the setup session carries on.
    let broker = c.conn.broker().clone();
    assert!(broker.queue("secret-1").is_none());
    assert!(broker.queue("kept").is_some() && broker.exchange("kept-x").is_some());
    assert!(broker.exchange("secret-x").is_none());
    assert_eq!(exception(&c.call(1, ExecutionSync {})), None);
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn publishing_is_checked_per_message_by_exchange_and_routing_key() {
    let services = services_with_acl(
        "acl deny guest publish exchange name=amq.topic routingkey=private.#\n\
         acl deny guest publish exchange name=amq.default routingkey=locked\n\
         acl allow all all\n",
        ServerConfig::default(),
    );
    let mut c = open_on(services, 0).await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    c.call(1, declare("news"));
    c.call(1, declare("locked"));
    let bind = ExchangeBind {
        queue: s("news"),
        exchange: s("amq.topic"),
        binding_key: s("#"),
        arguments: None,
    };
    c.call(1, bind);
    assert_eq!(
        exception(&c.publish(1, "amq.topic", &keyed("public.news"), b"ok")),
        None
    );
    assert_eq!(
        exception(&c.publish(1, "", &keyed("news"), b"ok too")),
        None
    );
    let out = c.publish(1, "amq.topic", &keyed("private.diary"), b"no");
    let (code, id, text) = failure(&out);
    assert_eq!((code, id), (ErrorCode::UnauthorizedAccess, 5));
    assert!(text.starts_with("ACL denied publish"), "{text}");
    // The default exchange is named amq.default in rules.
    let out = c.publish(2, "", &keyed("locked"), b"no");
    assert_eq!(failure(&out).0, ErrorCode::UnauthorizedAccess);
    let broker = c.conn.broker().clone();
    assert_eq!(broker.queue("news").unwrap().message_count(), 2);
    assert_eq!(broker.queue("locked").unwrap().message_count(), 0);
}

#[tokio::test]
async fn an_internal_exchange_refuses_transfers_and_routes_what_is_bound_through_it() {
    let mut c = open_on(services(ServerConfig::default()), 0).await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    c.call(1, declare("q"));
    let broker = c.conn.broker().clone();
    let internal = ferry_core::ExchangeOptions {
        internal: true,
        ..Default::default()
    };
    broker
        .declare_exchange("inner", ferry_core::ExchangeKind::Fanout, internal, false)
        .unwrap();
    let none = ferry_core::Arguments::new();
    broker.bind("q", "inner", "", &none).unwrap();
    broker
        .bind_exchange("inner", "amq.fanout", "", &none)
        .unwrap();
    let out = c.publish(1, "inner", &keyed(""), b"no");
    let (code, _, text) = failure(&out);
    assert_eq!(code, ErrorCode::UnauthorizedAccess);
    assert!(text.contains("internal exchange inner"), "{text}");
    assert_eq!(
        exception(&c.publish(2, "amq.fanout", &keyed(""), b"yes")),
        None
    );
    assert_eq!(broker.queue("q").unwrap().message_count(), 1);
}

#[tokio::test]
async fn the_queue_quota_refuses_a_new_queue_until_one_is_deleted() {
    let config = ServerConfig {
        max_queues_per_user: 2,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    c.attach(1, "s1");
    c.call(1, declare("q1"));
    c.call(1, declare("q2"));
    // Redeclaring what exists takes no slot.
    assert_eq!(exception(&c.call(1, declare("q1"))), None);
    c.attach(2, "s2");
    let out = c.call(2, declare("q3"));
    let (code, _, text) = failure(&out);
    assert_eq!(
        (code, text.as_str()),
        (
            ErrorCode::ResourceLimitExceeded,
            "resource limit exceeded: user guest may have at most 2 queues"
        )
    );
    let delete = QueueDelete {
        queue: s("q1"),
        ..Default::default()
    };
    assert_eq!(exception(&c.call(1, delete)), None);
    assert_eq!(exception(&c.call(1, declare("q3"))), None);
}

#[tokio::test]
async fn an_acl_quota_overrides_the_configured_ones() {
    let services = services_with_acl(
        "quota queues 1 guest\nquota connections 1 guest\nacl allow all all\n",
        ServerConfig {
            max_queues_per_user: 10,
            ..ServerConfig::default()
        },
    );
    let mut c = open_on(services.clone(), 0).await;
    c.attach(1, "s1");
    assert_eq!(exception(&c.call(1, declare("only"))), None);
    let out = c.call(1, declare("second"));
    assert_eq!(failure(&out).0, ErrorCode::ResourceLimitExceeded);
    // A second connection for the same user is refused at connection.open.
    let mut second = Wire::new(|now| connection(services.clone(), peer(), now));
    second.take_output();
    let start_ok = ConnectionStartOk {
        client_properties: None,
        mechanism: Some(Str::from("PLAIN")),
        response: Some(Bytes::from_static(b"\0guest\0guest")),
        locale: None,
    };
    second.send(&control(0, start_ok));
    second.finish_auth().await;
    second.take_output();
    let tune_ok = ConnectionTuneOk {
        channel_max: None,
        max_frame_size: None,
        heartbeat: None,
    };
    second.send(&control(0, tune_ok));
    let out = second.exchange(control(0, ConnectionOpen::default()));
    assert!(
        matches!(&out[..], [Item::Control(0, Control::ConnectionClose(cl))]
            if cl.reply_code == Some(CloseCode::ConnectionForced)),
        "{out:?}"
    );
}
