//! The observer is told of declares, deletes and bindings, automatic deletions included.

use std::sync::{Arc, Mutex};

use super::*;
use crate::events::{BrokerEvent, Observer};
use crate::queue::QueueOptions;
use crate::value::Arguments;

#[derive(Default)]
struct Recorder(Mutex<Vec<BrokerEvent>>);

impl Observer for Recorder {
    fn event(&self, event: BrokerEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    fn take(&self) -> Vec<BrokerEvent> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn observed() -> (Arc<Broker>, Arc<Recorder>) {
    let b = Broker::new(BrokerConfig::default());
    let r = Arc::new(Recorder::default());
    assert!(b.set_observer(r.clone()));
    assert!(!b.set_observer(Arc::new(Recorder::default())), "set once");
    (b, r)
}

#[test]
fn declares_report_created_or_existing_and_passive_ones_nothing() {
    let (b, r) = observed();
    let opts = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    b.declare_queue("q", opts.clone(), false, 7).unwrap();
    b.declare_queue("q", opts, false, 8).unwrap();
    b.declare_queue("q", QueueOptions::default(), true, 8)
        .unwrap();
    let events = r.take();
    assert_eq!(events.len(), 2);
    assert!(matches!(
        &events[0],
        BrokerEvent::QueueDeclared { name, durable: true, created: true, requester: 7, .. } if name == "q"
    ));
    assert!(matches!(
        &events[1],
        BrokerEvent::QueueDeclared {
            created: false,
            requester: 8,
            ..
        }
    ));
    b.declare_exchange("x", ExchangeKind::Topic, ExchangeOptions::default(), false)
        .unwrap();
    b.declare_exchange("x", ExchangeKind::Topic, ExchangeOptions::default(), false)
        .unwrap();
    b.declare_exchange("x", ExchangeKind::Topic, ExchangeOptions::default(), true)
        .unwrap();
    let events = r.take();
    assert_eq!(events.len(), 2);
    assert!(matches!(
        &events[0],
        BrokerEvent::ExchangeDeclared {
            kind: ExchangeKind::Topic,
            created: true,
            ..
        }
    ));
    assert!(matches!(
        &events[1],
        BrokerEvent::ExchangeDeclared { created: false, .. }
    ));
}

#[test]
fn bindings_are_reported_when_they_change() {
    let (b, r) = observed();
    b.declare_queue("q", QueueOptions::default(), false, 1)
        .unwrap();
    r.take();
    let none = Arguments::new();
    b.bind("q", "amq.topic", "a.#", &none).unwrap();
    b.bind("q", "amq.topic", "a.#", &none).unwrap();
    b.unbind("q", "amq.topic", "a.#").unwrap();
    b.unbind("q", "amq.topic", "a.#").unwrap();
    let events = r.take();
    assert_eq!(
        events,
        [
            BrokerEvent::Bound {
                exchange: "amq.topic".into(),
                queue: "q".into(),
                key: "a.#".into(),
                arguments: none,
            },
            BrokerEvent::Unbound {
                exchange: "amq.topic".into(),
                queue: "q".into(),
                key: "a.#".into(),
            }
        ]
    );
}

#[test]
fn deletions_are_reported_explicit_or_automatic() {
    let (b, r) = observed();
    b.declare_queue("q", QueueOptions::default(), false, 1)
        .unwrap();
    b.delete_queue("q", false, false, 3).unwrap();
    let exclusive = QueueOptions {
        exclusive_owner: Some(5),
        auto_delete: true,
        ..QueueOptions::default()
    };
    b.declare_queue("mine", exclusive, false, 5).unwrap();
    r.take();
    b.release_owner(5);
    b.declare_exchange("x", ExchangeKind::Direct, ExchangeOptions::default(), false)
        .unwrap();
    b.delete_exchange("x", false).unwrap();
    let events = r.take();
    assert_eq!(
        events[0],
        BrokerEvent::QueueDeleted {
            name: "mine".into(),
            requester: None
        }
    );
    assert!(matches!(&events[2], BrokerEvent::ExchangeDeleted { name } if name == "x"));
    b.declare_queue("q", QueueOptions::default(), false, 1)
        .unwrap();
    r.take();
    b.delete_queue("q", false, false, 3).unwrap();
    assert_eq!(
        r.take(),
        [BrokerEvent::QueueDeleted {
            name: "q".into(),
            requester: Some(3)
        }]
    );
}

#[test]
fn a_queue_tells_when_its_depth_crosses_its_thresholds() {
    use crate::events::Threshold;
    use crate::message::Message;
    use crate::value::HeaderValue;
    let (b, r) = observed();
    let opts = QueueOptions {
        arguments: [
            ("qpid.alert_count", HeaderValue::UInt(2)),
            ("qpid.alert_count_down", HeaderValue::UInt(1)),
        ]
        .into_iter()
        .collect(),
        ..QueueOptions::default()
    };
    let (q, _) = b.declare_queue("t", opts, false, 7).unwrap();
    r.take();
    let ex = b.exchange("").unwrap();
    for _ in 0..3 {
        b.publish(
            &ex,
            Message::new("", "t", bytes::Bytes::from_static(b"abc")),
        )
        .unwrap();
    }
    let crossed = |events: Vec<BrokerEvent>| -> Vec<(Threshold, u64, u64)> {
        events
            .into_iter()
            .filter_map(|e| match e {
                BrokerEvent::QueueThreshold {
                    queue,
                    crossed,
                    messages,
                    bytes,
                    legacy: false,
                } if queue == "t" => Some((crossed, messages, bytes)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(crossed(r.take()), [(Threshold::Upward, 2, 6)]);
    // Messages count until they are settled: taking them is not enough.
    let got: Vec<_> = (0..2).map(|_| q.get().unwrap()).collect();
    assert!(crossed(r.take()).is_empty());
    assert!(q.accept(got[0].position));
    assert!(crossed(r.take()).is_empty());
    assert!(q.accept(got[1].position));
    assert_eq!(crossed(r.take()), [(Threshold::Downward, 1, 3)]);
    // Purging counts as leaving too.
    b.publish(
        &ex,
        Message::new("", "t", bytes::Bytes::from_static(b"abc")),
    )
    .unwrap();
    assert_eq!(crossed(r.take()), [(Threshold::Upward, 2, 6)]);
    q.purge();
    assert_eq!(crossed(r.take()), [(Threshold::Downward, 0, 0)]);
}
