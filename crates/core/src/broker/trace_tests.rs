//! qpidd's message tracing through the broker: tracing queues add their id to
//! `x-qpid.trace`, excluding ones refuse what names an excluded id, and a management
//! reroute clears the list.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::message::{Message, MessageParts, TRACE_HEADER};
use crate::queue::QueueOptions;
use crate::value::{Arguments, HeaderValue, Headers};

fn declare(b: &Broker, name: &str, args: &[(&str, &str)], alternate: Option<&str>) {
    let arguments: Arguments = args
        .iter()
        .map(|(k, v)| (k.to_string(), HeaderValue::Str(v.to_string())))
        .collect();
    let options = QueueOptions {
        arguments,
        alternate_exchange: alternate.map(str::to_owned),
        ..QueueOptions::default()
    };
    b.declare_queue(name, options, false, 1).unwrap();
}

/// Publishes to queue `queue` through the default exchange, with the trace `trace` (none:
/// without the header), its headers decoded as a publisher decodes them for tracing queues.
fn publish(b: &Broker, queue: &str, trace: Option<&str>) {
    assert!(b.default_exchange().needs_headers());
    let mut headers = Headers::new();
    if let Some(t) = trace {
        headers.push(TRACE_HEADER, HeaderValue::Str(t.to_owned()));
    }
    let m = MessageParts {
        routing_key: Bytes::copy_from_slice(queue.as_bytes()),
        body: Bytes::from_static(b"m"),
        headers: Some(Arc::new(headers)),
        ..MessageParts::default()
    }
    .build();
    b.publish(b.default_exchange(), m).unwrap();
}

/// The trace a consumer of `queue` would see on the next message, and that message.
fn next_trace(b: &Broker, queue: &str) -> (Option<String>, Message) {
    let got = b.queue(queue).unwrap().get().expect("a message");
    let m = got.message;
    let published = m
        .headers()
        .and_then(|h| h.get(TRACE_HEADER))
        .and_then(HeaderValue::as_str)
        .map(str::to_owned);
    let now = match m.trace() {
        Some(edit) => edit.apply(published.as_deref()).or(published),
        None => published,
    };
    (now, m)
}

#[test]
fn a_tracing_queue_adds_its_id_once() {
    let b = Broker::new(BrokerConfig::default());
    declare(&b, "t", &[("qpid.trace.id", "q1")], None);
    publish(&b, "t", None);
    publish(&b, "t", Some("A,B"));
    publish(&b, "t", Some("A, q1"));
    assert_eq!(next_trace(&b, "t").0.as_deref(), Some("q1"));
    assert_eq!(next_trace(&b, "t").0.as_deref(), Some("A,B,q1"));
    let (trace, m) = next_trace(&b, "t");
    assert_eq!(trace.as_deref(), Some("A, q1"));
    assert!(
        m.trace().is_none(),
        "named already: the message as published"
    );
}

#[test]
fn an_excluding_queue_refuses_what_names_an_excluded_id() {
    let b = Broker::new(BrokerConfig::default());
    declare(&b, "x", &[("qpid.trace.exclude", "B, C")], None);
    publish(&b, "x", Some("A,B"));
    publish(&b, "x", Some("C"));
    publish(&b, "x", Some("A,BB"));
    publish(&b, "x", None);
    let q = b.queue("x").unwrap();
    assert_eq!(q.message_count(), 2, "whole ids: BB is not B");
    assert_eq!(next_trace(&b, "x").0.as_deref(), Some("A,BB"));
}

#[test]
fn a_link_queue_traces_and_excludes_its_own_id() {
    // qpidd's federation: a bridge queue adds its broker's id and refuses messages that
    // carry it already, so a message does not go round a loop of brokers twice.
    let b = Broker::new(BrokerConfig::default());
    let both = [("qpid.trace.id", "me"), ("qpid.trace.exclude", "me")];
    declare(&b, "link", &both, None);
    publish(&b, "link", Some("other"));
    publish(&b, "link", Some("other,me"));
    assert_eq!(b.queue("link").unwrap().message_count(), 1);
    let (trace, m) = next_trace(&b, "link");
    assert_eq!(trace.as_deref(), Some("other,me"));
    // Back at the same queue, the message is refused.
    b.publish(b.default_exchange(), m).unwrap();
    assert_eq!(b.queue("link").unwrap().message_count(), 0);
}

#[test]
fn reroute_clears_the_trace_and_later_queues_trace_afresh() {
    let b = Broker::new(BrokerConfig::default());
    b.declare_exchange(
        "alt",
        ExchangeKind::Fanout,
        ExchangeOptions::default(),
        false,
    )
    .unwrap();
    declare(&b, "plain", &[], None);
    declare(&b, "traced", &[("qpid.trace.id", "T")], None);
    b.bind("plain", "alt", "", &Arguments::new()).unwrap();
    b.bind("traced", "alt", "", &Arguments::new()).unwrap();
    declare(&b, "src", &[], Some("alt"));
    publish(&b, "src", Some("A,B,C"));
    publish(&b, "src", None);
    assert_eq!(b.reroute("src", None, None, None).unwrap(), 2);
    assert_eq!(next_trace(&b, "plain").0.as_deref(), Some(""));
    assert_eq!(next_trace(&b, "plain").0, None, "untraced: still no header");
    assert_eq!(next_trace(&b, "traced").0.as_deref(), Some("T"));
    assert_eq!(next_trace(&b, "traced").0.as_deref(), Some("T"));
}
