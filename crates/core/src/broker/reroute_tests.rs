//! Management's purge of a count, reroute and move: from the front, in order, counted, and
//! journaled as a dequeue from the source and a new enqueue where they land.

use crate::MessageParts;

use bytes::Bytes;

use super::*;
use crate::error::BrokerError;
use crate::journal::testing::{Call, MemoryJournal};
use crate::message::Message;
use crate::queue::QueueOptions;
use crate::value::Arguments;

fn fill(b: &Broker, queue: &str, n: usize) {
    let ex = b.default_exchange().clone();
    for i in 0..n {
        let m = Message::new("", queue.to_owned(), Bytes::from(i.to_string()));
        b.publish(&ex, m).unwrap();
    }
}

fn bodies(b: &Broker, queue: &str) -> Vec<String> {
    b.queue(queue)
        .unwrap()
        .queued_bodies()
        .iter()
        .map(|body| String::from_utf8_lossy(body).into_owned())
        .collect()
}

fn declare(b: &Broker, name: &str) {
    b.declare_queue(name, QueueOptions::default(), false, 1)
        .unwrap();
}

#[test]
fn a_purge_of_a_count_drops_from_the_front() {
    let b = Broker::new(BrokerConfig::default());
    declare(&b, "q");
    fill(&b, "q", 5);
    let q = b.queue("q").unwrap();
    assert_eq!(q.purge_front(2, None), 2);
    assert_eq!(bodies(&b, "q"), ["2", "3", "4"]);
    assert_eq!(q.purge_front(10, None), 3);
    let c = q.depth().counters;
    assert_eq!((c.purged, c.dequeued()), (5, 5));
}

#[test]
fn reroute_sends_the_front_through_an_exchange_with_its_key() {
    let b = Broker::new(BrokerConfig::default());
    declare(&b, "q");
    declare(&b, "dest");
    b.declare_exchange("x", ExchangeKind::Direct, ExchangeOptions::default(), false)
        .unwrap();
    b.bind("dest", "x", "q", &Arguments::new()).unwrap();
    fill(&b, "q", 4);
    assert_eq!(b.reroute("q", Some(3), Some("x"), None).unwrap(), 3);
    assert_eq!(bodies(&b, "dest"), ["0", "1", "2"]);
    assert_eq!(bodies(&b, "q"), ["3"]);
    let c = b.queue("q").unwrap().depth().counters;
    assert_eq!((c.rerouted, c.dequeued()), (3, 3));
    assert!(matches!(
        b.reroute("q", None, Some("nowhere"), None),
        Err(BrokerError::NotFound(_))
    ));
    assert!(
        matches!(
            b.reroute("q", None, None, None),
            Err(BrokerError::NotFound(_))
        ),
        "no alternate exchange"
    );
    assert_eq!(bodies(&b, "q"), ["3"], "nothing taken on failure");
    let alt = QueueOptions {
        alternate_exchange: Some("x".into()),
        ..QueueOptions::default()
    };
    b.declare_queue("with-alt", alt, false, 1).unwrap();
    b.bind("dest", "x", "with-alt", &Arguments::new()).unwrap();
    fill(&b, "with-alt", 2);
    assert_eq!(b.reroute("with-alt", None, None, None).unwrap(), 2);
    assert_eq!(bodies(&b, "dest"), ["0", "1", "2", "0", "1"]);
}

#[test]
fn move_keeps_order_and_checks_both_queues_first() {
    let b = Broker::new(BrokerConfig::default());
    declare(&b, "src");
    declare(&b, "dst");
    fill(&b, "src", 5);
    assert_eq!(b.move_messages("src", "dst", Some(2), None).unwrap(), 2);
    assert_eq!(b.move_messages("src", "dst", None, None).unwrap(), 3);
    assert_eq!(bodies(&b, "dst"), ["0", "1", "2", "3", "4"]);
    assert!(b.move_messages("dst", "nowhere", None, None).is_err());
    assert!(b.move_messages("nowhere", "dst", None, None).is_err());
    assert_eq!(bodies(&b, "dst").len(), 5);
    assert_eq!(b.move_messages("src", "dst", None, None).unwrap(), 0);
}

#[test]
fn moved_persistent_messages_are_dequeued_and_journaled_again() {
    let j = MemoryJournal::new();
    let b = Broker::with_journal(BrokerConfig::default(), j.clone());
    let durable = QueueOptions {
        durable: true,
        ..QueueOptions::default()
    };
    let src = b.declare_queue("src", durable.clone(), false, 1).unwrap().0;
    let dst = b.declare_queue("dst", durable, false, 1).unwrap().0;
    let mut m = MessageParts::new("", "src", Bytes::from_static(b"p"));
    m.persistent = true;
    b.publish(b.default_exchange(), Message::from(m)).unwrap();
    let calls = j.take();
    let [.., Call::Enqueue(old, _)] = &calls[..] else {
        panic!("{calls:?}")
    };
    b.move_messages("src", "dst", None, None).unwrap();
    let calls = j.take();
    let (src_id, dst_id) = (src.store_id().unwrap(), dst.store_id().unwrap());
    assert_eq!(calls[0], Call::Dequeue(src_id, vec![*old]));
    assert!(
        matches!(&calls[1], Call::Enqueue(new, queues) if new != old && queues == &[dst_id]),
        "{calls:?}"
    );
}
