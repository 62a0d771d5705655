//! Links with a JMS selector: only matching messages, the selector echoed, bad ones refused.

use ferry_amqp1::{
    condition, ApplicationProperties, FilterSet, Str as Str1, TerminusDurability,
    TerminusExpiryPolicy, Value,
};

use super::*;

fn coloured(body: &'static [u8], colour: &str) -> Message {
    let mut app = ApplicationProperties::new();
    app.push(Str1::from("colour"), Value::from(colour));
    Message {
        application_properties: Some(app),
        ..Message::data(Bytes::from_static(body))
    }
}

fn selecting(address: &str, selector: &str) -> Source {
    let mut filter = FilterSet::new();
    filter.push(
        Symbol::from("jms-selector"),
        Value::described(0x0000_468C_0000_0004u64, Value::from(selector)),
    );
    Source {
        address: Some(address.into()),
        filter: Some(filter),
        ..Source::default()
    }
}

fn bodies(items: &[Item]) -> Vec<Bytes> {
    transfers(items).iter().map(|(_, p)| body_of(p)).collect()
}

#[tokio::test]
async fn a_queue_consumer_gets_only_what_its_selector_matches() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    let got = c.attach_receiver_from(0, 1, selecting("q", "colour = 'red'"), false);
    let echoed = got
        .iter()
        .find_map(|i| match i {
            Item::Frame(_, Performative::Attach(a), _) => a.source.clone(),
            _ => None,
        })
        .and_then(|s| s.filter)
        .expect("the selector is echoed: it is in force");
    assert!(echoed.get("jms-selector").is_some());
    c.credit(0, 1, 0, 10);
    c.attach_sender(0, 0, Some("q"));
    let mut got = Vec::new();
    for (id, (body, colour)) in [(&b"r1"[..], "red"), (b"b1", "blue"), (b"r2", "red")]
        .into_iter()
        .enumerate()
    {
        got.extend(c.transfer(0, 0, id as u32, true, &coloured(body, colour)));
    }
    assert_eq!(
        bodies(&got),
        [Bytes::from_static(b"r1"), Bytes::from_static(b"r2")]
    );
    assert_eq!(
        c.broker().queue("q").unwrap().message_count(),
        1,
        "blue stays"
    );
}

#[tokio::test]
async fn a_selector_that_does_not_parse_refuses_the_link() {
    let mut c = open().await;
    declare(&c, "q");
    c.begin(0);
    let got = c.attach_receiver_from(0, 1, selecting("q", "colour = 'red"), false);
    assert_eq!(
        error_of(&got).as_deref(),
        Some(condition::INVALID_FIELD.as_str())
    );
    assert_eq!(c.broker().queue("q").unwrap().consumer_count(), 0);
}

/// What the link's temporary subscription queue holds.
fn subscription_depth(c: &Client) -> u64 {
    c.broker()
        .queues()
        .iter()
        .filter(|q| q.name().starts_with("amq.1-"))
        .map(|q| q.message_count())
        .sum()
}

#[tokio::test]
async fn a_topic_subscriber_never_holds_what_its_selector_does_not_match() {
    let mut c = open().await;
    c.begin(0);
    c.attach_receiver_from(0, 1, selecting("amq.fanout", "colour = 'red'"), false);
    c.attach_sender(0, 0, Some("amq.fanout"));
    // No credit: the subscription's queue keeps the red message, not the blue ones.
    for (id, (body, colour)) in [(&b"b1"[..], "blue"), (b"r1", "red"), (b"b2", "blue")]
        .into_iter()
        .enumerate()
    {
        c.transfer(0, 0, id as u32, true, &coloured(body, colour));
    }
    let queued = subscription_depth(&c);
    assert_eq!(queued, 2, "b1 dropped as passed over; b2 waits behind r1");
    let got = c.credit(0, 1, 0, 10);
    assert_eq!(bodies(&got), [Bytes::from_static(b"r1")]);
    let queued = subscription_depth(&c);
    assert_eq!(queued, 0);
}

#[tokio::test]
async fn a_durable_subscription_keeps_only_what_its_selector_matches() {
    let mut c = open().await;
    c.begin(0);
    let source = Source {
        durable: TerminusDurability::UnsettledState,
        expiry_policy: TerminusExpiryPolicy::Never,
        // What Qpid JMS asks for on a durable subscriber.
        distribution_mode: Some(ferry_amqp1::messaging::distribution_mode::COPY),
        ..selecting("amq.fanout", "colour = 'red'")
    };
    assert_eq!(error_of(&c.attach_receiver_from(0, 1, source, false)), None);
    c.attach_sender(0, 0, Some("amq.fanout"));
    for (id, (body, colour)) in [(&b"b1"[..], "blue"), (b"r1", "red"), (b"b2", "blue")]
        .into_iter()
        .enumerate()
    {
        c.transfer(0, 0, id as u32, true, &coloured(body, colour));
    }
    let queue = c
        .broker()
        .queue("test-client_receiver-1")
        .expect("subscription");
    assert_eq!(queue.message_count(), 2, "b1 dropped; b2 waits behind r1");
    assert_eq!(bodies(&c.credit(0, 1, 0, 10)), [Bytes::from_static(b"r1")]);
    assert_eq!(queue.message_count(), 0);
}
