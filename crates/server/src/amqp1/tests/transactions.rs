//! The transaction coordinator: declare, transactional transfers and settlements,
//! discharge.

use ferry_amqp1::transaction::capability;
use ferry_amqp1::{Accepted, Coordinator, Declare, Discharge, Outcome, TransactionalState, Value};

use super::*;

fn data(body: &'static [u8]) -> Message {
    Message::data(Bytes::from_static(body))
}

fn control(body: Value) -> Message {
    Message {
        body: Body::Value(body),
        ..Message::default()
    }
}

fn declare_value() -> Value {
    let mut out = BytesMut::new();
    ferry_amqp1::Composite::encode(&Declare::default(), &mut out);
    Value::decode_exact(out.freeze()).unwrap()
}

fn discharge_value(txn_id: &Bytes, fail: bool) -> Value {
    let mut out = BytesMut::new();
    let d = Discharge {
        txn_id: txn_id.clone(),
        fail: Some(fail),
    };
    ferry_amqp1::Composite::encode(&d, &mut out);
    Value::decode_exact(out.freeze()).unwrap()
}

/// Attaches a coordinator on handle 9 and declares a transaction as delivery `next_id`.
fn begin_txn(c: &mut Client, next_id: u32) -> Bytes {
    {
        let attach = Attach {
            name: "txn".into(),
            handle: 9,
            role: Role::Sender,
            source: Some(Source::default()),
            target: Some(LinkTarget::Coordinator(Coordinator {
                capabilities: vec![capability::LOCAL_TRANSACTIONS],
            })),
            ..Attach::default()
        };
        let got = c.perform(0, attach);
        assert!(error_of(&got).is_none(), "{got:?}");
    }
    let got = c.transfer(0, 9, next_id, false, &control(declare_value()));
    let d = dispositions(&got);
    let Some(DeliveryState::Declared(declared)) = &d[0].state else {
        panic!("{got:?}");
    };
    declared.txn_id.clone()
}

fn in_txn(c: &mut Client, handle: u32, id: u32, txn_id: &Bytes, m: &Message) -> Vec<Item> {
    let mut payload = BytesMut::new();
    m.encode(&mut payload);
    let t = Transfer {
        handle,
        delivery_id: Some(id),
        delivery_tag: Some(Bytes::copy_from_slice(&id.to_be_bytes())),
        state: Some(DeliveryState::Transactional(TransactionalState {
            txn_id: txn_id.clone(),
            outcome: None,
        })),
        ..Transfer::default()
    };
    let mut out = BytesMut::new();
    write_frame(&mut out, 0, &t.into(), &payload);
    c.exchange(out)
}

#[tokio::test]
async fn transactional_publishes_appear_at_commit() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    let txn = begin_txn(&mut c, 0);
    c.attach_sender(0, 0, Some("q"));
    let got = in_txn(&mut c, 0, 1, &txn, &data(b"m"));
    let d = dispositions(&got);
    assert_eq!(
        d[0].state,
        Some(DeliveryState::Transactional(TransactionalState {
            txn_id: txn.clone(),
            outcome: Some(Outcome::Accepted(Accepted {})),
        }))
    );
    assert_eq!(c.broker().queue("q").unwrap().message_count(), 0);
    let got = c.transfer(0, 9, 2, false, &control(discharge_value(&txn, false)));
    assert_eq!(
        dispositions(&got)[0].state,
        Some(DeliveryState::Accepted(Accepted {}))
    );
    assert_eq!(c.broker().queue("q").unwrap().message_count(), 1);
}

#[tokio::test]
async fn a_rollback_discards_publishes_and_redelivers_settled_messages() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"kept"));
    let txn = begin_txn(&mut c, 1);
    in_txn(&mut c, 0, 2, &txn, &data(b"dropped"));
    c.attach_receiver(0, 1, "q");
    let t = transfers(&c.credit(0, 1, 0, 1));
    assert_eq!(t.len(), 1);
    let ack = Disposition {
        role: Role::Receiver,
        first: t[0].0.delivery_id.unwrap(),
        last: None,
        settled: true,
        state: Some(DeliveryState::Transactional(TransactionalState {
            txn_id: txn.clone(),
            outcome: Some(Outcome::Accepted(Accepted {})),
        })),
        batchable: false,
    };
    c.perform(0, ack);
    let q = c.broker().queue("q").unwrap();
    assert_eq!(q.unsettled_count(), 1, "held until the discharge");
    let got = c.transfer(0, 9, 3, false, &control(discharge_value(&txn, true)));
    assert_eq!(
        dispositions(&got)[0].state,
        Some(DeliveryState::Accepted(Accepted {}))
    );
    assert_eq!((q.message_count(), q.unsettled_count()), (1, 0));
    let body = q.queued_bodies();
    assert_eq!(&body[0][..], b"kept");
}

#[tokio::test]
async fn a_commit_applies_settlements() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    c.transfer(0, 0, 0, true, &data(b"m"));
    let txn = begin_txn(&mut c, 1);
    c.attach_receiver(0, 1, "q");
    let t = transfers(&c.credit(0, 1, 0, 1));
    let ack = Disposition {
        role: Role::Receiver,
        first: t[0].0.delivery_id.unwrap(),
        last: None,
        settled: true,
        state: Some(DeliveryState::Transactional(TransactionalState {
            txn_id: txn.clone(),
            outcome: Some(Outcome::Accepted(Accepted {})),
        })),
        batchable: false,
    };
    c.perform(0, ack);
    c.transfer(0, 9, 2, false, &control(discharge_value(&txn, false)));
    let q = c.broker().queue("q").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 0));
}

#[tokio::test]
async fn unknown_transactions_are_rejected() {
    let mut c = open().await;
    c.begin(0);
    begin_txn(&mut c, 0);
    let got = c.transfer(
        0,
        9,
        1,
        false,
        &control(discharge_value(&Bytes::from_static(b"nope"), false)),
    );
    let Some(DeliveryState::Rejected(r)) = &dispositions(&got)[0].state else {
        panic!("{got:?}");
    };
    assert_eq!(
        r.error
            .as_ref()
            .map(|e| e.condition.as_str().to_owned())
            .as_deref(),
        Some("amqp:transaction:unknown-id")
    );
    let got = c.transfer(0, 9, 2, false, &data(b"not a control"));
    assert!(matches!(
        &dispositions(&got)[0].state,
        Some(DeliveryState::Rejected(_))
    ));
}

/// Deliveries a transaction settles stay acquired until the discharge: they count against
/// --session-max-unacked until then, so a transaction never discharged cannot take a
/// whole queue.
#[tokio::test]
async fn transactional_settlements_count_against_the_unsettled_cap_until_the_discharge() {
    let config = ServerConfig {
        session_max_unacked: 5,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, None).await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..50 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    let txn = begin_txn(&mut c, 50);
    c.attach_receiver(0, 1, "q");
    let t = transfers(&c.credit(0, 1, 0, 100));
    assert_eq!(t.len(), 5, "the cap");
    let ack = |first: u32| Disposition {
        role: Role::Receiver,
        first,
        last: Some(first + 4),
        settled: true,
        state: Some(DeliveryState::Transactional(TransactionalState {
            txn_id: txn.clone(),
            outcome: Some(Outcome::Accepted(Accepted {})),
        })),
        batchable: false,
    };
    let first = t[0].0.delivery_id.unwrap();
    let got = c.perform(0, ack(first));
    assert!(transfers(&got).is_empty(), "still held: {got:?}");
    assert!(transfers(&decode(c.take_output())).is_empty());
    let q = c.broker().queue("q").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (45, 5));
    let got = c.transfer(0, 9, 51, false, &control(discharge_value(&txn, false)));
    let t = transfers(&got);
    assert_eq!(t.len(), 5, "the commit frees the cap: {got:?}");
    assert_eq!((q.message_count(), q.unsettled_count()), (40, 5));
}

/// A rollback frees the cap as a commit does (the deliveries go back to the queue).
#[tokio::test]
async fn a_rollback_frees_the_unsettled_cap_too() {
    let config = ServerConfig {
        session_max_unacked: 2,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, None).await;
    declare(&c, "q");
    c.begin(0);
    c.attach_sender(0, 0, Some("q"));
    for id in 0..4 {
        c.transfer(0, 0, id, true, &data(b"m"));
    }
    let txn = begin_txn(&mut c, 4);
    c.attach_receiver(0, 1, "q");
    let t = transfers(&c.credit(0, 1, 0, 100));
    assert_eq!(t.len(), 2);
    let ack = Disposition {
        role: Role::Receiver,
        first: t[0].0.delivery_id.unwrap(),
        last: t[1].0.delivery_id,
        settled: true,
        state: Some(DeliveryState::Transactional(TransactionalState {
            txn_id: txn.clone(),
            outcome: Some(Outcome::Accepted(Accepted {})),
        })),
        batchable: false,
    };
    assert!(transfers(&c.perform(0, ack)).is_empty());
    let got = c.transfer(0, 9, 5, false, &control(discharge_value(&txn, true)));
    assert_eq!(transfers(&got).len(), 2, "{got:?}");
}

/// Each open transaction holds what it stages until its discharge: a session has at most
/// `MAX_OPEN`, and a declare beyond them is rejected with resource-limit-exceeded.
#[tokio::test]
async fn declares_beyond_the_open_transaction_limit_are_rejected() {
    let mut c = open().await;
    c.begin(0);
    let first = begin_txn(&mut c, 0);
    let max = crate::amqp1::txn::MAX_OPEN as u32;
    for id in 1..max {
        let got = c.transfer(0, 9, id, false, &control(declare_value()));
        assert!(matches!(
            &dispositions(&got)[0].state,
            Some(DeliveryState::Declared(_))
        ));
    }
    let got = c.transfer(0, 9, max, false, &control(declare_value()));
    let Some(DeliveryState::Rejected(r)) = &dispositions(&got)[0].state else {
        panic!("{got:?}");
    };
    assert_eq!(
        r.error.as_ref().map(|e| e.condition.as_str()),
        Some("amqp:resource-limit-exceeded")
    );
    // Discharging one makes room for another.
    c.transfer(
        0,
        9,
        max + 1,
        false,
        &control(discharge_value(&first, true)),
    );
    let got = c.transfer(0, 9, max + 2, false, &control(declare_value()));
    assert!(matches!(
        &dispositions(&got)[0].state,
        Some(DeliveryState::Declared(_))
    ));
}
