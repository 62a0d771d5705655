//! JMS 2 shared subscriptions (source capability `shared`), named as Qpid JMS names their
//! links: several links consume one subscription's queue.

use ferry_amqp1::{TerminusDurability, TerminusExpiryPolicy, Value};

use super::subscriptions::{detach, durable, publish};
use super::*;

fn capabilities(names: &[&str]) -> Vec<Symbol> {
    names.iter().map(|n| Symbol::from(*n)).collect()
}

fn shared(durable_source: bool, global: bool) -> Source {
    let mut caps = vec!["topic", "shared"];
    if global {
        caps.push("global");
    }
    let base = if durable_source {
        durable("amq.topic/news")
    } else {
        Source {
            address: Some("amq.topic/news".into()),
            expiry_policy: TerminusExpiryPolicy::LinkDetach,
            ..Source::default()
        }
    };
    Source {
        capabilities: capabilities(&caps),
        ..base
    }
}

/// Attaches receiving link `name` on `handle` (session 0).
fn attach_named(c: &mut Client, handle: u32, name: &str, source: Option<Source>) -> Vec<Item> {
    c.perform(
        0,
        Attach {
            name: name.into(),
            handle,
            role: Role::Receiver,
            source,
            target: Some(LinkTarget::Target(Target::default())),
            ..Attach::default()
        },
    )
}

fn accept_all(c: &mut Client, first: u32, last: u32) {
    c.settle(
        0,
        first,
        Some(last),
        DeliveryState::Accepted(ferry_amqp1::Accepted {}),
    );
}

#[tokio::test]
async fn shared_durable_links_split_one_subscription_that_outlives_them() {
    let mut c = open().await;
    c.begin(0);
    assert_eq!(
        error_of(&attach_named(&mut c, 1, "sub", Some(shared(true, false)))),
        None
    );
    assert_eq!(
        error_of(&attach_named(&mut c, 2, "sub|2", Some(shared(true, false)))),
        None
    );
    let q = c
        .broker()
        .queue("test-client_sub")
        .expect("one queue for both links");
    assert!(q.is_durable());
    assert_eq!(q.consumer_count(), 2);
    c.credit(0, 1, 0, 10);
    c.credit(0, 2, 0, 10);
    let mut got = Vec::new();
    for body in [&b"1"[..], b"2", b"3", b"4"] {
        publish(&c, "news", body);
        got.extend(transfers(&decode(c.take_output())));
    }
    let handles: Vec<u32> = got.iter().map(|(t, _)| t.handle).collect();
    assert_eq!(got.len(), 4, "each message once");
    assert!(handles.contains(&1) && handles.contains(&2), "{handles:?}");
    accept_all(&mut c, 0, 3);
    // A closing detach while another link consumes leaves the subscription.
    detach(&mut c, 2, true);
    assert!(c.broker().queue("test-client_sub").is_some());
    // The last link goes without closing: the subscription stays, collecting.
    detach(&mut c, 1, false);
    publish(&c, "news", b"5");
    assert_eq!(q.message_count(), 1);
    // Qpid JMS's unsubscribe: the first link's name with no source, then closed.
    let got = attach_named(&mut c, 3, "sub", None);
    assert_eq!(error_of(&got), None);
    detach(&mut c, 3, true);
    assert!(c.broker().queue("test-client_sub").is_none());
}

#[tokio::test]
async fn unsubscribing_a_shared_subscription_in_use_is_refused() {
    let mut c = open().await;
    c.begin(0);
    attach_named(&mut c, 1, "sub", Some(shared(true, false)));
    let got = attach_named(&mut c, 2, "sub", None);
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-locked"));
    // An unshared subscriber of the same name is refused too (JMS: one or the other).
    let got = attach_named(&mut c, 3, "sub", Some(durable("amq.topic/news")));
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-locked"));
    assert_eq!(
        c.broker()
            .queue("test-client_sub")
            .unwrap()
            .consumer_count(),
        1
    );
}

#[tokio::test]
async fn a_shared_volatile_subscription_goes_with_its_last_link() {
    let mut c = open().await;
    c.begin(0);
    attach_named(&mut c, 1, "v|volatile1", Some(shared(false, false)));
    attach_named(&mut c, 2, "v|volatile2", Some(shared(false, false)));
    let name = "test-client_v|volatile";
    let q = c.broker().queue(name).expect("one queue for both links");
    assert!(!q.is_durable());
    assert_eq!(q.consumer_count(), 2);
    publish(&c, "news", b"1");
    assert_eq!(q.message_count(), 1, "kept for its links");
    detach(&mut c, 1, true);
    assert!(c.broker().queue(name).is_some(), "another link consumes it");
    detach(&mut c, 2, true);
    assert!(c.broker().queue(name).is_none());
}

#[tokio::test]
async fn a_global_shared_subscription_is_named_without_the_container() {
    let mut c = open().await;
    c.begin(0);
    attach_named(&mut c, 1, "g|global", Some(shared(true, true)));
    attach_named(&mut c, 2, "g|global2", Some(shared(true, true)));
    let q = c
        .broker()
        .queue("g|global")
        .expect("no container id in its name");
    assert_eq!(q.consumer_count(), 2);
    attach_named(&mut c, 3, "g|global-volatile1", Some(shared(false, true)));
    assert!(c.broker().queue("g|global-volatile").is_some());
    detach(&mut c, 1, false);
    detach(&mut c, 2, false);
    // Unsubscribe: the link names the global subscription through its capabilities.
    let got = c.perform(
        0,
        Attach {
            name: "g|global".into(),
            handle: 4,
            role: Role::Receiver,
            target: Some(LinkTarget::Target(Target::default())),
            desired_capabilities: capabilities(&["shared", "global"]),
            ..Attach::default()
        },
    );
    assert_eq!(error_of(&got), None);
    detach(&mut c, 4, true);
    assert!(c.broker().queue("g|global").is_none());
}

#[tokio::test]
async fn a_shared_subscriber_with_another_selector_is_refused_while_one_consumes() {
    let mut c = open().await;
    c.begin(0);
    let with_selector = |selector: &str| {
        let mut filter = ferry_amqp1::FilterSet::new();
        filter.push(
            Symbol::from("jms-selector"),
            Value::described(0x0000_468C_0000_0004u64, Value::from(selector)),
        );
        Source {
            filter: Some(filter),
            durable: TerminusDurability::UnsettledState,
            ..shared(true, false)
        }
    };
    attach_named(&mut c, 1, "sel", Some(with_selector("colour = 'red'")));
    let got = attach_named(&mut c, 2, "sel|2", Some(with_selector("colour = 'blue'")));
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-locked"));
    assert!(error_of(&attach_named(
        &mut c,
        3,
        "sel|3",
        Some(with_selector("colour = 'red'"))
    ))
    .is_none());
}

#[tokio::test]
async fn a_subscription_whose_first_link_may_not_consume_is_not_left_behind() {
    let services = services_with_acl(
        "acl deny anonymous consume queue name=test-client_v*\nacl allow all all\n",
        ServerConfig::default(),
    );
    let mut c = open_on(services, None).await;
    c.begin(0);
    let got = attach_named(&mut c, 1, "v|volatile1", Some(shared(false, false)));
    assert!(error_of(&got).is_some(), "consume denied");
    assert!(c.broker().queue("test-client_v|volatile").is_none());
    // Nor a durable one, shared or not, which would collect messages nobody may read.
    let got = attach_named(&mut c, 2, "v", Some(shared(true, false)));
    assert!(error_of(&got).is_some(), "consume denied");
    let got = attach_named(&mut c, 3, "v", Some(durable("amq.topic/news")));
    assert!(error_of(&got).is_some(), "consume denied");
    assert!(c.broker().queue("test-client_v").is_none());
}

#[tokio::test]
async fn an_unsubscribe_the_acl_refuses_fails_on_the_detach_and_keeps_the_subscription() {
    let services = services_with_acl(
        "acl deny anonymous delete queue name=test-client_kept*\nacl allow all all\n",
        ServerConfig::default(),
    );
    let mut c = open_on(services, None).await;
    c.begin(0);
    for (handle, name, source) in [
        (1, "kept", durable("amq.topic/news")),
        (2, "kept-shared", shared(true, false)),
    ] {
        attach_named(&mut c, handle, name, Some(source));
        detach(&mut c, handle, false);
        let got = attach_named(&mut c, handle + 10, name, None);
        assert_eq!(error_of(&got), None, "{name}: found");
        let got = detach(&mut c, handle + 10, true);
        assert_eq!(
            error_of(&got).as_deref(),
            Some("amqp:unauthorized-access"),
            "{name}"
        );
        let queue = format!("test-client_{name}");
        assert!(c.broker().queue(&queue).is_some(), "{name} kept");
    }
    // A shared subscription another link still consumes stays without an error, even
    // where the ACL would refuse to delete it: nothing is deleted.
    for (handle, name) in [(20, "open"), (30, "kept-in-use")] {
        attach_named(&mut c, handle, name, Some(shared(true, false)));
        attach_named(&mut c, handle + 1, name, Some(shared(true, false)));
        assert_eq!(error_of(&detach(&mut c, handle + 1, true)), None, "{name}");
        let queue = format!("test-client_{name}");
        assert!(c.broker().queue(&queue).is_some(), "{name}");
    }
}

#[tokio::test]
async fn a_subscription_is_taken_up_only_as_the_kind_it_was_made() {
    let mut c = open().await;
    c.begin(0);
    // Unshared, then asked for shared while no link consumes it: refused, and kept.
    attach_named(&mut c, 1, "solo", Some(durable("amq.topic/news")));
    detach(&mut c, 1, false);
    publish(&c, "news", b"kept");
    let got = attach_named(&mut c, 2, "solo", Some(shared(true, false)));
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-locked"));
    let q = c.broker().queue("test-client_solo").expect("kept");
    assert_eq!(q.message_count(), 1);
    // Shared, then asked for unshared while no link consumes it: refused too.
    attach_named(&mut c, 3, "group", Some(shared(true, false)));
    detach(&mut c, 3, false);
    let got = attach_named(&mut c, 4, "group", Some(durable("amq.topic/news")));
    assert_eq!(error_of(&got).as_deref(), Some("amqp:resource-locked"));
    // Each kind takes up its own again.
    let got = attach_named(&mut c, 5, "solo", Some(durable("amq.topic/news")));
    assert_eq!(error_of(&got), None);
    let got = attach_named(&mut c, 6, "group", Some(shared(true, false)));
    assert_eq!(error_of(&got), None);
}
