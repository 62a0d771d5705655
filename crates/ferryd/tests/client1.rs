//! ferry-client1 against a real ferryd: the cases the harnesses do not reach (refusals,
//! outcomes other than accepted, multi-frame deliveries both ways, at-most-once links).

mod common;

use common::Ferryd;
use ferry_client1::{
    ClientError, ConnectOptions, Connection, DeliveryState, Mechanism, Publication, ReceiveOptions,
    SendMode,
};

fn declare(broker: &Ferryd, queue: &str, args: &[(&str, i64)], overflow: Option<&str>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = ferry_client091::Connection::connect(
            broker.addr,
            &ferry_client091::ConnectOptions::default(),
        )
        .await
        .unwrap();
        let ch = conn.open_channel().await.unwrap();
        let mut table = ferry_client091::FieldTable::new();
        for (k, v) in args {
            table.insert(
                ferry_client091::ShortStr::try_from(*k).unwrap(),
                ferry_client091::FieldValue::I64(*v),
            );
        }
        if let Some(o) = overflow {
            table.insert(
                ferry_client091::ShortStr::try_from("x-overflow").unwrap(),
                ferry_client091::FieldValue::string(o).unwrap(),
            );
        }
        conn.queue_declare(ch, queue, Default::default(), table)
            .await
            .unwrap();
        conn.close().await.unwrap();
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn anonymous() -> ConnectOptions {
    ConnectOptions {
        mechanism: Mechanism::Anonymous,
        ..ConnectOptions::default()
    }
}

#[test]
fn large_messages_both_ways_and_at_most_once_links() {
    let broker = Ferryd::start();
    declare(&broker, "big", &[], None);
    runtime().block_on(async {
        let mut conn = Connection::connect(broker.addr, &anonymous())
            .await
            .unwrap();
        let tx = conn
            .attach_sender("tx", "big", SendMode::Unsettled { window: 3 })
            .await
            .unwrap();
        // Four frames' worth each, and the frame size ferryd allows.
        let body: Vec<u8> = (0..250_000u32).map(|i| (i % 251) as u8).collect();
        let p = Publication::simple(true, None, body.len());
        for _ in 0..5 {
            conn.send(tx, &p, &body).await.unwrap();
        }
        conn.wait_settled(tx).await.unwrap();
        let rx = conn
            .attach_receiver(
                "rx",
                "big",
                ReceiveOptions {
                    settled: true,
                    credit_window: 2,
                },
            )
            .await
            .unwrap();
        for _ in 0..5 {
            let d = conn.next_delivery(rx).await.unwrap();
            assert!(d.settled);
            assert_eq!(&d.body().unwrap()[..], &body[..]);
            assert!(d.message().unwrap().header.unwrap().durable);
        }
        conn.close().await.unwrap();
    });
}

#[test]
fn refusals_and_outcomes_come_back_as_errors() {
    let broker = Ferryd::start();
    // A queue that refuses what goes beyond 2 messages.
    declare(
        &broker,
        "small",
        &[("x-max-length", 2)],
        Some("reject-publish"),
    );
    runtime().block_on(async {
        let mut conn = Connection::connect(broker.addr, &anonymous()).await.unwrap();
        let err = conn
            .attach_sender("nowhere", "no-such-queue", SendMode::Settled)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ClientError::LinkDetached { condition, .. } if condition == "amqp:not-found"),
            "{err}"
        );
        // The session carries on.
        let tx = conn
            .attach_sender("tx", "small", SendMode::Unsettled { window: 0 })
            .await
            .unwrap();
        let p = Publication::simple(false, None, 3);
        for _ in 0..2 {
            conn.send(tx, &p, b"abc").await.unwrap();
        }
        conn.wait_settled(tx).await.unwrap();
        // A third is refused by the full queue: rejected, and the link says so.
        conn.send(tx, &p, b"abc").await.unwrap();
        let err = conn.wait_settled(tx).await.unwrap_err();
        assert!(
            matches!(err, ClientError::NotAccepted { count: 1, outcome: "rejected", .. }),
            "{err}"
        );
        // Receive one, release it, take it again and accept it.
        let rx = conn
            .attach_receiver("rx", "small", ReceiveOptions::default())
            .await
            .unwrap();
        let d = conn.next_delivery(rx).await.unwrap();
        conn.settle(d.delivery_id, DeliveryState::Released(Default::default()));
        let again = conn.next_delivery(rx).await.unwrap();
        assert_eq!(&again.body().unwrap()[..], b"abc");
        conn.accept(again.delivery_id);
        conn.flush().await.unwrap();
        conn.close().await.unwrap();
    });
}
