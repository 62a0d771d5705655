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
