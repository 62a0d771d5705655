//! Durable subscriptions: a durable source on an exchange, resumed by link name, ended by a
//! closing detach or by Qpid JMS's unsubscribe (a link with no source, then closed).

use ferry_amqp1::{Close, Detach, TerminusDurability, TerminusExpiryPolicy};

use super::*;

/// The queue of subscription "receiver-1" (links in these tests are named after their
/// handle) of the test client's container.
const QUEUE: &str = "test-client_receiver-1";

pub(super) fn durable(address: &str) -> Source {
    Source {
        address: Some(address.into()),
        durable: TerminusDurability::UnsettledState,
        expiry_policy: TerminusExpiryPolicy::Never,
        // What Qpid JMS asks for on a durable subscriber.
        distribution_mode: Some(ferry_amqp1::messaging::distribution_mode::COPY),
        ..Source::default()
    }
}

pub(super) fn publish(c: &Client, key: &str, body: &'static [u8]) {
    let b = c.broker();
    let topic = b.exchange("amq.topic").expect("amq.topic");
    b.publish(
        &topic,
        ferry_core::Message::new("amq.topic", key.to_owned(), Bytes::from_static(body)),
    )
    .expect("publish");
}

fn depth(c: &Client) -> Option<u64> {
    c.broker().queue(QUEUE).map(|q| q.message_count())
}

pub(super) fn detach(c: &mut Client, handle: u32, closed: bool) -> Vec<Item> {
    c.perform(
        0,
        Detach {
            handle,
            closed,
            error: None,
        },
    )
}

fn bodies(items: &[Item]) -> Vec<Bytes> {
    transfers(items).iter().map(|(_, p)| body_of(p)).collect()
}

#[tokio::test]
async fn a_durable_subscription_outlives_its_link_and_connection_until_closed() {
    let services = services(ServerConfig::default());
    let mut c = open_on(services.clone(), None).await;
    c.begin(0);
    assert_eq!(
        error_of(&c.attach_receiver_from(0, 1, durable("amq.topic/news"), false)),
        None
    );
    let q = c.broker().queue(QUEUE).expect("the subscription's queue");
    assert!(q.is_durable() && !q.is_auto_delete());
    publish(&c, "news", b"1");
    publish(&c, "sport", b"not for us");
    assert_eq!(bodies(&c.credit(0, 1, 0, 10)), [Bytes::from_static(b"1")]);
    c.settle(
        0,
        0,
        None,
        DeliveryState::Accepted(ferry_amqp1::Accepted {}),
    );
    // Away: the link detached without closing, then the connection ended.
    detach(&mut c, 1, false);
    publish(&c, "news", b"2");
    c.perform(0, Close { error: None });
    publish(&c, "news", b"3");
    assert_eq!(depth(&c), Some(2));
    // Back, from the same container, under the same link name.
    let mut c = open_on(services.clone(), None).await;
    c.begin(0);
    let got = c.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    assert_eq!(error_of(&got), None);
    let source = got.iter().find_map(|i| match i {
        Item::Frame(_, Performative::Attach(a), _) => a.source.clone(),
        _ => None,
    });
    assert_eq!(
        source.and_then(|s| s.distribution_mode),
        None,
        "the subscription's queue is consumed, not browsed"
    );
    let got = bodies(&c.credit(0, 1, 0, 10));
    assert_eq!(got, [Bytes::from_static(b"2"), Bytes::from_static(b"3")]);
    // One consumer at a time: a second link of the same name is refused.
    let mut other = open_on(services.clone(), None).await;
    other.begin(0);
    let refused = other.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    assert_eq!(error_of(&refused).as_deref(), Some("amqp:resource-locked"));
    // A detach that closes the link ends the subscription.
    detach(&mut c, 1, true);
    assert_eq!(depth(&c), None);
}

#[tokio::test]
async fn a_subscription_to_another_topic_replaces_the_old_one() {
    let services = services(ServerConfig::default());
    let mut c = open_on(services.clone(), None).await;
    c.begin(0);
    c.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    detach(&mut c, 1, false);
    publish(&c, "news", b"old");
    assert_eq!(depth(&c), Some(1));
    // Not while a link consumes it.
    let mut other = open_on(services, None).await;
    other.begin(0);
    other.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    let refused = c.attach_receiver_from(0, 1, durable("amq.topic/sport"), false);
    assert_eq!(error_of(&refused).as_deref(), Some("amqp:resource-locked"));
    detach(&mut other, 1, false);
    // The client's half of the refused link's detach.
    detach(&mut c, 1, true);
    c.attach_receiver_from(0, 1, durable("amq.topic/sport"), false);
    assert_eq!(
        depth(&c),
        Some(0),
        "the old subscription went, with its messages"
    );
    publish(&c, "news", b"no longer");
    publish(&c, "sport", b"now");
    assert_eq!(bodies(&c.credit(0, 1, 0, 10)), [Bytes::from_static(b"now")]);
}

/// Qpid JMS's unsubscribe: a link with the subscription's name and no source, which the
/// client closes if the reply names a source.
#[tokio::test]
async fn a_link_without_a_source_finds_the_subscription_to_close() {
    let mut c = open().await;
    c.begin(0);
    c.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    detach(&mut c, 1, false);
    let lookup = |handle| Attach {
        name: "receiver-1".into(),
        handle,
        role: Role::Receiver,
        target: Some(LinkTarget::Target(Target::default())),
        ..Attach::default()
    };
    let got = c.perform(0, lookup(2));
    assert_eq!(error_of(&got), None);
    assert!(got
        .iter()
        .any(|i| matches!(i, Item::Frame(_, Performative::Attach(a), _) if a.source.is_some())));
    detach(&mut c, 2, true);
    assert_eq!(depth(&c), None);
    // Gone: the same lookup is refused, with no source in the reply.
    let got = c.perform(0, lookup(3));
    assert_eq!(error_of(&got).as_deref(), Some("amqp:not-found"));
    assert!(got
        .iter()
        .any(|i| matches!(i, Item::Frame(_, Performative::Attach(a), _) if a.source.is_none())));
}

#[tokio::test]
async fn a_durable_queue_source_is_the_queue() {
    let mut c = open().await;
    c.begin(0);
    declare(&c, "q");
    let source = Source {
        address: Some("q".into()),
        durable: TerminusDurability::Configuration,
        ..Source::default()
    };
    assert!(error_of(&c.attach_receiver_from(0, 2, source, false)).is_none());
    assert!(c.broker().queue("test-client_receiver-2").is_none());
    // A queue that happens to have a subscription's name is not taken over.
    declare(&c, "test-client_receiver-3");
    c.broker()
        .publish(
            &c.broker().default_exchange().clone(),
            ferry_core::Message::new(
                "",
                "test-client_receiver-3".to_owned(),
                Bytes::from_static(b"x"),
            ),
        )
        .unwrap();
    let got = c.attach_receiver_from(0, 3, durable("amq.topic/news"), false);
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-locked"));
    // A link name that would make a queue name no other protocol can say is refused.
    let long = Attach {
        name: "n".repeat(300).into(),
        handle: 4,
        role: Role::Receiver,
        source: Some(durable("amq.topic/news")),
        target: Some(LinkTarget::Target(Target::default())),
        ..Attach::default()
    };
    let queues = c.broker().queue_names().len();
    assert_eq!(
        error_of(&c.perform(0, long)).as_deref(),
        Some("amqp:invalid-field")
    );
    assert_eq!(c.broker().queue_names().len(), queues, "no queue made");
    let q = c
        .broker()
        .queue("test-client_receiver-3")
        .expect("still there");
    assert_eq!(q.message_count(), 1);
}

/// Ending a subscription deletes a durable queue: the closing detach's reply waits until the
/// journal has that, as a 0-9-1 queue.delete-ok does, so a crash cannot bring back a
/// subscription the client was told is gone.
#[tokio::test]
async fn the_reply_to_a_closing_detach_waits_for_the_journal() {
    let disk = Arc::new(crate::shell::testing::Disk::default());
    let services = crate::shell::Services {
        broker: ferry_core::Broker::with_journal(ferry_core::BrokerConfig::default(), disk.clone()),
        ..services(ServerConfig::default())
    };
    let mut c = open_on(services, None).await;
    c.begin(0);
    c.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    disk.sync();
    // Detaching without closing changes nothing durable: answered at once.
    assert_eq!(detach(&mut c, 1, false).len(), 1);
    c.attach_receiver_from(0, 1, durable("amq.topic/news"), false);
    assert!(detach(&mut c, 1, true).is_empty(), "not before the sync");
    assert_eq!(depth(&c), None, "the queue is gone already");
    disk.sync();
    c.poll_flow();
    let got = decode(c.take_output());
    assert!(
        matches!(&got[..], [Item::Frame(0, Performative::Detach(d), _)] if d.handle == 1 && d.closed),
        "{got:?}"
    );
}
