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
