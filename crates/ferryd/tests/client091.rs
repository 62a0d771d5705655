//! ferry-client091, the harnesses' AMQP 0-9-1 client, against a real ferryd: confirms,
//! prefetch, acknowledgements, persistence, transactions and the errors it must report.

mod common;

use std::time::Duration;

use common::Ferryd;
use ferry_client091::{
    BasicProperties, ClientError, ConnectOptions, Connection, ConsumeOptions, Publication,
    QueueOptions,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn connect(broker: &Ferryd) -> Connection {
    Connection::connect(broker.addr, &ConnectOptions::default())
        .await
        .expect("connect over 0-9-1")
}

/// A connection that agreed 1 s heartbeats with the broker.
async fn connect_with_heartbeats(broker: &Ferryd) -> Connection {
    let beating = ConnectOptions {
        heartbeat: 1,
        ..Default::default()
    };
    Connection::connect(broker.addr, &beating)
        .await
        .expect("connect with heartbeats")
}

const STEP: Duration = Duration::from_secs(20);

#[test]
fn confirmed_publishes_arrive_in_order_under_prefetch_and_multiple_acks() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut conn = connect(&broker).await;
        let ch = conn.open_channel().await.unwrap();
        conn.queue_declare(ch, "c091-q", QueueOptions::default(), Default::default())
            .await
            .unwrap();
        conn.confirm_select(ch, 50).await.unwrap();
        let p = Publication::new(ch, "", "c091-q", BasicProperties::default(), 8).unwrap();
        for i in 0..2_000u64 {
            let seq = conn.publish(&p, &i.to_le_bytes()).await.unwrap();
            assert_eq!(seq, Some(i + 1));
            // The window holds: never more than 50 unconfirmed after a publish returns.
            assert!(conn.unconfirmed(ch) <= 50);
        }
        conn.wait_confirms(ch).await.unwrap();
        assert_eq!(conn.unconfirmed(ch), 0);

        let sub = conn.open_channel().await.unwrap();
        conn.qos(sub, 100, false).await.unwrap();
        conn.consume(sub, "c091-q", "c1", ConsumeOptions::default())
            .await
            .unwrap();
        for i in 0..2_000u64 {
            let d = tokio::time::timeout(STEP, conn.next_delivery(sub, "c1"))
                .await
                .expect("delivery in time")
                .unwrap();
            assert_eq!(&d.body[..], &i.to_le_bytes());
            assert!(!d.redelivered);
            if (i + 1) % 50 == 0 {
                conn.ack(sub, d.delivery_tag, true);
                conn.flush().await.unwrap();
            }
        }
        // Everything acknowledged: the queue is empty.
        let ok = conn
            .queue_declare(
                ch,
                "c091-q",
                QueueOptions {
                    passive: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap();
        assert_eq!(ok.message_count, 0);
        conn.close().await.unwrap();
    });
}

#[test]
fn prefetch_bounds_unacknowledged_deliveries() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut conn = connect(&broker).await;
        let ch = conn.open_channel().await.unwrap();
        conn.queue_declare(ch, "c091-pf", QueueOptions::default(), Default::default())
            .await
            .unwrap();
        let p = Publication::new(ch, "", "c091-pf", BasicProperties::default(), 1).unwrap();
        for _ in 0..20 {
            conn.publish(&p, b"x").await.unwrap();
        }
        conn.sync(ch).await.unwrap();
        conn.qos(ch, 5, false).await.unwrap();
        conn.consume(ch, "c091-pf", "pf", ConsumeOptions::default())
            .await
            .unwrap();
        let mut tags = Vec::new();
        for _ in 0..5 {
            tags.push(conn.next_delivery(ch, "pf").await.unwrap().delivery_tag);
        }
        // A sixth does not come until something is acknowledged.
        let sixth = tokio::time::timeout(Duration::from_millis(300), conn.next_delivery(ch, "pf"));
        assert!(sixth.await.is_err(), "more than the prefetch was delivered");
        conn.ack(ch, tags[4], true);
        let d = tokio::time::timeout(STEP, conn.next_delivery(ch, "pf"))
            .await
            .expect("delivery after the ack")
            .unwrap();
        assert_eq!(d.delivery_tag, 6);
    });
}

#[test]
fn a_consumer_waiting_through_heartbeat_intervals_stays_connected_and_gets_its_message() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut waiter = connect_with_heartbeats(&broker).await;
        let ch = waiter.open_channel().await.unwrap();
        waiter
            .queue_declare(ch, "c091-hb", QueueOptions::default(), Default::default())
            .await
            .unwrap();
        waiter
            .consume(ch, "c091-hb", "hb", ConsumeOptions::default())
            .await
            .unwrap();
        let mut sender = connect(&broker).await;
        let sch = sender.open_channel().await.unwrap();
        let p = Publication::new(sch, "", "c091-hb", BasicProperties::default(), 5).unwrap();
        // The wait spans several of the client's half-interval read time-outs (each one
        // abandons a read in progress) and the broker's two-interval limit for silence, so
        // the client's heartbeats are what keep the connection.
        let publish_later = async {
            tokio::time::sleep(Duration::from_millis(3_500)).await;
            sender.publish(&p, b"late").await.unwrap();
            sender.sync(sch).await.unwrap();
        };
        let (delivery, ()) = tokio::join!(
            tokio::time::timeout(STEP, waiter.next_delivery(ch, "hb")),
            publish_later
        );
        let d = delivery.expect("delivery in time").unwrap();
        assert_eq!(&d.body[..], b"late");
        waiter.close().await.unwrap();
    });
}

#[test]
fn a_publisher_that_has_not_read_for_a_while_finds_the_servers_heartbeats_waiting() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut conn = connect_with_heartbeats(&broker).await;
        let ch = conn.open_channel().await.unwrap();
        conn.queue_declare(
            ch,
            "c091-quiet",
            QueueOptions::default(),
            Default::default(),
        )
        .await
        .unwrap();
        let p = Publication::new(ch, "", "c091-quiet", BasicProperties::default(), 1).unwrap();
        // Writing keeps the broker content; nothing is read for more than two intervals,
        // while the broker's heartbeats pile up in the socket.
        for _ in 0..15 {
            conn.publish(&p, b"x").await.unwrap();
            conn.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        conn.sync(ch)
            .await
            .expect("the server's heartbeats were there to read");
        conn.close().await.unwrap();
    });
}

#[test]
fn persistent_messages_keep_their_delivery_mode() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut conn = connect(&broker).await;
        let ch = conn.open_channel().await.unwrap();
        let durable = QueueOptions {
            durable: true,
            ..Default::default()
        };
        conn.queue_declare(ch, "c091-durable", durable, Default::default())
            .await
            .unwrap();
        let props = BasicProperties {
            delivery_mode: Some(2),
            ..Default::default()
        };
        let p = Publication::new(ch, "", "c091-durable", props, 3).unwrap();
        conn.publish(&p, b"abc").await.unwrap();
        // A body of another length still gets a correct header.
        conn.publish(&p, b"abcdef").await.unwrap();
        let no_ack = ConsumeOptions {
            no_ack: true,
            ..Default::default()
        };
        conn.consume(ch, "c091-durable", "d", no_ack).await.unwrap();
        for body in [&b"abc"[..], b"abcdef"] {
            let d = conn.next_delivery(ch, "d").await.unwrap();
            assert_eq!(d.properties.delivery_mode, Some(2));
            assert_eq!(&d.body[..], body);
        }
    });
}

#[test]
fn transactions_publish_and_acknowledge_on_commit_only() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut conn = connect(&broker).await;
        let ch = conn.open_channel().await.unwrap();
        conn.queue_declare(ch, "c091-tx", QueueOptions::default(), Default::default())
            .await
            .unwrap();
        conn.tx_select(ch).await.unwrap();
        let p = Publication::new(ch, "", "c091-tx", BasicProperties::default(), 1).unwrap();
        conn.publish(&p, b"r").await.unwrap();
        conn.tx_rollback(ch).await.unwrap();
        conn.publish(&p, b"c").await.unwrap();
        conn.tx_commit(ch).await.unwrap();

        let count = |ok: ferry_client091::QueueDeclareOk| ok.message_count;
        let passive = QueueOptions {
            passive: true,
            ..Default::default()
        };
        let other = conn.open_channel().await.unwrap();
        let n = conn
            .queue_declare(other, "c091-tx", passive, Default::default())
            .await
            .unwrap();
        assert_eq!(count(n), 1, "the rolled-back message must not be queued");

        conn.consume(ch, "c091-tx", "t", ConsumeOptions::default())
            .await
            .unwrap();
        let d = conn.next_delivery(ch, "t").await.unwrap();
        assert_eq!(&d.body[..], b"c");
        conn.ack(ch, d.delivery_tag, false);
        conn.tx_rollback(ch).await.unwrap();
        conn.ack(ch, d.delivery_tag, false);
        conn.tx_commit(ch).await.unwrap();
        conn.cancel(ch, "t").await.unwrap();
        let n = conn
            .queue_declare(other, "c091-tx", passive, Default::default())
            .await
            .unwrap();
        assert_eq!(count(n), 0, "the committed ack removes the message");
    });
}

#[test]
fn channel_errors_close_only_their_channel_and_cancels_are_reported() {
    let broker = Ferryd::start();
    runtime().block_on(async {
        let mut conn = connect(&broker).await;
        let ch = conn.open_channel().await.unwrap();
        let passive = QueueOptions {
            passive: true,
            ..Default::default()
        };
        let err = conn
            .queue_declare(ch, "c091-missing", passive, Default::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::ChannelClosed { code: 404, .. }),
            "{err:?}"
        );
        // The channel stays failed; the connection and other channels carry on.
        assert!(conn.sync(ch).await.is_err());
        let ch2 = conn.open_channel().await.unwrap();
        conn.queue_declare(
            ch2,
            "c091-gone",
            QueueOptions::default(),
            Default::default(),
        )
        .await
        .unwrap();
        conn.consume(ch2, "c091-gone", "g", ConsumeOptions::default())
            .await
            .unwrap();
        let ch3 = conn.open_channel().await.unwrap();
        conn.queue_delete(ch3, "c091-gone").await.unwrap();
        let err = tokio::time::timeout(STEP, conn.next_delivery(ch2, "g"))
            .await
            .expect("the cancel arrives")
            .unwrap_err();
        assert!(matches!(err, ClientError::ConsumerCancelled(_)), "{err:?}");
    });
}

#[test]
fn wrong_credentials_are_refused() {
    let broker = Ferryd::start_with(&["--auth", "yes"]);
    runtime().block_on(async {
        let options = ConnectOptions {
            username: Some("guest".into()),
            password: Some("wrong".into()),
            ..Default::default()
        };
        assert!(Connection::connect(broker.addr, &options).await.is_err());
        let ok = ConnectOptions {
            username: Some("guest".into()),
            password: Some("guest".into()),
            ..Default::default()
        };
        Connection::connect(broker.addr, &ok)
            .await
            .expect("guest/guest from loopback")
            .close()
            .await
            .unwrap();
    });
}
