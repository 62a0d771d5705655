use crate::MessageParts;
use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::limits::QueueLimits;
use crate::queue::QueueOptions;
use crate::value::{HeaderValue as V, Headers};

fn queue(name: &str) -> Arc<Queue> {
    Queue::new(
        name.to_owned(),
        &QueueOptions::default(),
        None,
        QueueLimits::default(),
    )
}

fn exchange(kind: ExchangeKind) -> Arc<Exchange> {
    Exchange::new("x".into(), kind, &ExchangeOptions::default(), None, false)
}

fn msg(key: &str) -> Message {
    Message::new("x", key.to_owned(), Bytes::new())
}

fn routed(ex: &Exchange, m: &Message) -> Vec<String> {
    let mut out = Vec::new();
    ex.route(m, &mut out);
    let mut names: Vec<String> = out.iter().map(|q| q.name().to_owned()).collect();
    names.sort();
    names
}

fn no_args() -> Arguments {
    Arguments::new()
}

#[test]
fn direct_routes_exact_key_only() {
    let ex = exchange(ExchangeKind::Direct);
    let (a, b, c) = (queue("a"), queue("b"), queue("c"));
    ex.bind(&a, "k", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&b, "k", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&c, "other", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &msg("k")), ["a", "b"]);
    assert_eq!(routed(&ex, &msg("K")), Vec::<String>::new());
    assert!(ex.unbind(a.id(), "k", None).is_some());
    assert!(ex.unbind(a.id(), "k", None).is_none());
    assert_eq!(routed(&ex, &msg("k")), ["b"]);
}

#[test]
fn rebinding_is_idempotent() {
    let ex = exchange(ExchangeKind::Direct);
    let a = queue("a");
    assert_eq!(
        ex.bind(&a, "k", &no_args(), None, BindingIdentity::Key)
            .unwrap(),
        Bound::NewKey
    );
    assert_eq!(
        ex.bind(&a, "k", &no_args(), None, BindingIdentity::Key)
            .unwrap(),
        Bound::Replaced
    );
    assert_eq!(ex.binding_count(), 1);
    assert_eq!(routed(&ex, &msg("k")), ["a"]);
}

#[test]
fn fanout_delivers_once_per_queue_even_with_several_keys() {
    let ex = exchange(ExchangeKind::Fanout);
    let (a, b) = (queue("a"), queue("b"));
    ex.bind(&a, "one", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&a, "two", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&b, "", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &msg("anything")), ["a", "b"]);
    assert_eq!(ex.unbind(a.id(), "one", None), Some(true));
    assert_eq!(routed(&ex, &msg("")), ["a", "b"]);
    assert_eq!(ex.unbind(a.id(), "two", None), Some(true));
    assert_eq!(routed(&ex, &msg("")), ["b"]);
}

fn topic_matches(pattern: &str, key: &str) -> bool {
    let ex = exchange(ExchangeKind::Topic);
    let q = queue("q");
    ex.bind(&q, pattern, &no_args(), None, BindingIdentity::Key)
        .unwrap();
    !routed(&ex, &msg(key)).is_empty()
}

#[test]
fn topic_wildcard_edge_cases() {
    let cases: &[(&str, &str, bool)] = &[
        ("#", "", true),
        ("#", "a", true),
        ("#", "a.b.c", true),
        ("*", "", false),
        ("*", "a", true),
        ("*", "a.b", false),
        ("*.*", "a.b", true),
        ("*.*", "a", false),
        ("*.*", "a.b.c", false),
        ("a.#.b", "a.b", true),
        ("a.#.b", "a.x.b", true),
        ("a.#.b", "a.x.y.b", true),
        ("a.#.b", "a.x.y", false),
        ("a.#.b", "b.a.b", false),
        ("#.#", "", true),
        ("#.#", "a.b", true),
        ("a.#", "a", true),
        ("a.#", "ab", false),
        ("#.a", "x.y.a", true),
        ("#.a", "x.y.ab", false),
        ("#.*", "", false),
        ("#.*", "a", true),
        ("*.#.*", "a", false),
        ("*.#.*", "a.b", true),
        ("a..b", "a..b", true),
        ("a.*.b", "a..b", true),
        ("a.*", "a.", true),
        ("a", "a.", false),
        ("", "", true),
        ("", "a", false),
        ("a.b", "a.b", true),
        ("a.b", "a.c", false),
    ];
    for (pattern, key, want) in cases {
        assert_eq!(
            topic_matches(pattern, key),
            *want,
            "pattern {pattern:?} key {key:?}"
        );
    }
}

#[test]
fn topic_reaches_a_queue_once_when_several_patterns_match() {
    let ex = exchange(ExchangeKind::Topic);
    let (a, b) = (queue("a"), queue("b"));
    ex.bind(&a, "#", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&a, "x.*", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&a, "#.#", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&b, "x.y", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    let mut out = Vec::new();
    ex.route(&msg("x.y"), &mut out);
    assert_eq!(out.len(), 2);
    // "#" and "#.#" normalise alike; removing one must leave the other working.
    assert_eq!(ex.unbind(a.id(), "#", None), Some(true));
    assert_eq!(ex.unbind(a.id(), "x.*", None), Some(true));
    assert_eq!(routed(&ex, &msg("z")), ["a"]);
    assert_eq!(ex.unbind(a.id(), "#.#", None), Some(true));
    assert_eq!(ex.unbind(b.id(), "x.y", None), Some(true));
    assert!(ex.topic_index_is_empty(), "trie nodes pruned");
}

/// Reference matcher: direct recursion over words, no normalisation.
fn naive(pattern: &[&str], key: &[&str]) -> bool {
    match pattern.split_first() {
        None => key.is_empty(),
        Some((&"#", rest)) => (0..=key.len()).any(|i| naive(rest, &key[i..])),
        Some((&"*", rest)) => !key.is_empty() && naive(rest, &key[1..]),
        Some((w, rest)) => key.first() == Some(w) && naive(rest, &key[1..]),
    }
}

fn words(s: &str) -> Vec<&str> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split('.').collect()
    }
}

#[test]
fn topic_with_ten_thousand_bindings_agrees_with_reference() {
    // Deterministic pseudo-random patterns over a small vocabulary so many overlap.
    let mut seed: u64 = 0x1234_5678;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let vocab = ["a", "b", "c", "d", "*", "#"];
    let ex = exchange(ExchangeKind::Topic);
    let mut patterns = Vec::new();
    let queues: Vec<Arc<Queue>> = (0..10_000).map(|i| queue(&format!("q{i}"))).collect();
    for q in &queues {
        let len = next(5) + 1;
        let p: Vec<&str> = (0..len).map(|_| vocab[next(6) as usize]).collect();
        let p = p.join(".");
        ex.bind(q, &p, &no_args(), None, BindingIdentity::Key)
            .unwrap();
        patterns.push(p);
    }
    for _ in 0..300 {
        let len = next(6);
        let k: Vec<&str> = (0..len).map(|_| vocab[next(4) as usize]).collect();
        let key = k.join(".");
        let mut want: Vec<String> = patterns
            .iter()
            .zip(&queues)
            .filter(|(p, _)| naive(&words(p), &words(&key)))
            .map(|(_, q)| q.name().to_owned())
            .collect();
        want.sort();
        assert_eq!(routed(&ex, &msg(&key)), want, "key {key:?}");
    }
}

fn headers(entries: &[(&str, V)]) -> Headers {
    entries.iter().map(|(k, v)| (*k, v.clone())).collect()
}

fn hmsg(entries: &[(&str, V)]) -> Message {
    let mut m = MessageParts::new("x", "", Bytes::new());
    m.headers = Some(Arc::new(headers(entries)));
    m.build()
}

#[test]
fn headers_all_and_any() {
    let ex = exchange(ExchangeKind::Headers);
    assert!(ex.needs_headers());
    let (all, any) = (queue("all"), queue("any"));
    let crit = [("a", V::Int(1)), ("b", V::Str("x".into()))];
    let mut all_args = headers(&crit);
    all_args.push("x-match", V::Str("all".into()));
    let mut any_args = headers(&crit);
    any_args.push("x-match", V::Str("any".into()));
    ex.bind(&all, "k1", &all_args, None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&any, "k2", &any_args, None, BindingIdentity::Key)
        .unwrap();

    let both = hmsg(&[("b", V::Str("x".into())), ("a", V::UInt(1)), ("c", V::Void)]);
    assert_eq!(routed(&ex, &both), ["all", "any"]);
    let one = hmsg(&[("a", V::Int(1))]);
    assert_eq!(routed(&ex, &one), ["any"]);
    let wrong = hmsg(&[("a", V::Int(2)), ("b", V::Str("y".into()))]);
    assert!(routed(&ex, &wrong).is_empty());
    assert!(routed(&ex, &msg("no headers")).is_empty());
}

#[test]
fn headers_defaults_void_presence_and_x_keys() {
    let ex = exchange(ExchangeKind::Headers);
    let q = queue("q");
    // No x-match: all. Void: presence only. x- keys are not criteria.
    ex.bind(
        &q,
        "",
        &headers(&[("p", V::Void), ("x-other", V::Int(9))]),
        None,
        BindingIdentity::Key,
    )
    .unwrap();
    assert_eq!(routed(&ex, &hmsg(&[("p", V::Bool(false))])), ["q"]);
    assert!(routed(&ex, &hmsg(&[("x-other", V::Int(9))])).is_empty());
}

#[test]
fn headers_rebind_replaces_criteria_and_bad_x_match_is_rejected() {
    let ex = exchange(ExchangeKind::Headers);
    let q = queue("q");
    ex.bind(
        &q,
        "k",
        &headers(&[("a", V::Int(1))]),
        None,
        BindingIdentity::Key,
    )
    .unwrap();
    ex.bind(
        &q,
        "k",
        &headers(&[("a", V::Int(2))]),
        None,
        BindingIdentity::Key,
    )
    .unwrap();
    assert!(routed(&ex, &hmsg(&[("a", V::Int(1))])).is_empty());
    assert_eq!(routed(&ex, &hmsg(&[("a", V::Int(2))])), ["q"]);
    let err = ex.bind(
        &q,
        "j",
        &headers(&[("x-match", V::Str("some".into()))]),
        None,
        BindingIdentity::Key,
    );
    assert!(matches!(err, Err(BrokerError::InvalidArgument(_))));
    assert_eq!(ex.binding_count(), 1);
}

/// RabbitMQ's identity: one queue bound twice under one key with other criteria gets what
/// either matches, once; an unbind names the one it removes; a 0-10 bind or unbind of the
/// key replaces or removes them all.
#[test]
fn bindings_told_apart_by_their_arguments_route_what_either_matches() {
    let ex = exchange(ExchangeKind::Headers);
    let q = queue("q");
    let pdf = headers(&[("format", V::Str("pdf".into()))]);
    let report = headers(&[("type", V::Str("report".into()))]);
    let by_args = BindingIdentity::KeyAndArguments;
    assert_eq!(ex.bind(&q, "", &pdf, None, by_args).unwrap(), Bound::NewKey);
    assert_eq!(
        ex.bind(&q, "", &report, None, by_args).unwrap(),
        Bound::NewVariant
    );
    assert_eq!(ex.binding_count(), 2);
    let both = hmsg(&[
        ("format", V::Str("pdf".into())),
        ("type", V::Str("report".into())),
    ]);
    let only_report = hmsg(&[("type", V::Str("report".into()))]);
    let only_pdf = hmsg(&[("format", V::Str("pdf".into()))]);
    assert_eq!(routed(&ex, &both), ["q"]);
    assert_eq!(routed(&ex, &only_report), ["q"]);
    assert_eq!(routed(&ex, &only_pdf), ["q"]);
    // The same entries in another order are the same binding.
    let reordered = headers(&[
        ("x-match", V::Str("all".into())),
        ("type", V::Str("report".into())),
    ]);
    let with_match = headers(&[
        ("type", V::Str("report".into())),
        ("x-match", V::Str("all".into())),
    ]);
    assert_eq!(
        ex.bind(&q, "", &with_match, None, by_args).unwrap(),
        Bound::NewVariant
    );
    assert_eq!(
        ex.bind(&q, "", &reordered, None, by_args).unwrap(),
        Bound::Unchanged
    );
    assert_eq!(ex.unbind(q.id(), "", Some(&reordered)), Some(false));
    // Removing one leaves the other; removing one that is not there removes nothing.
    assert_eq!(ex.unbind(q.id(), "", Some(&report)), Some(false));
    assert!(routed(&ex, &only_report).is_empty());
    assert_eq!(routed(&ex, &only_pdf), ["q"]);
    assert_eq!(ex.unbind(q.id(), "", Some(&report)), None);
    assert_eq!(ex.binding_count(), 1);
    // Under the key alone (0-10): a bind replaces every binding under it, an unbind removes
    // every one.
    ex.bind(&q, "", &report, None, by_args).unwrap();
    assert_eq!(
        ex.bind(&q, "", &report, None, BindingIdentity::Key)
            .unwrap(),
        Bound::Replaced
    );
    assert_eq!(ex.binding_count(), 1);
    assert!(routed(&ex, &only_pdf).is_empty());
    ex.bind(&q, "", &pdf, None, by_args).unwrap();
    assert_eq!(ex.unbind(q.id(), "", None), Some(true));
    assert_eq!(ex.binding_count(), 0);
    assert!(routed(&ex, &both).is_empty());
    assert!(ex.bindings().is_empty());
}

/// Other exchange types keep one route per (queue, key) whatever its bindings under it: the
/// queue stays routed until the key's last binding goes.
#[test]
fn a_key_bound_with_several_arguments_routes_until_its_last_binding_goes() {
    for kind in [
        ExchangeKind::Direct,
        ExchangeKind::Topic,
        ExchangeKind::Fanout,
    ] {
        let ex = exchange(kind);
        let q = queue("q");
        let (one, two) = (headers(&[("n", V::Int(1))]), headers(&[("n", V::Int(2))]));
        let by_args = BindingIdentity::KeyAndArguments;
        ex.bind(&q, "k", &one, None, by_args).unwrap();
        ex.bind(&q, "k", &two, None, by_args).unwrap();
        assert_eq!(routed(&ex, &msg("k")), ["q"], "{kind:?}");
        let shown: Vec<Arguments> = ex.bindings().into_iter().map(|b| b.arguments).collect();
        assert_eq!(shown, [one.clone(), two.clone()], "{kind:?}");
        assert_eq!(ex.unbind(q.id(), "k", Some(&one)), Some(false));
        assert_eq!(routed(&ex, &msg("k")), ["q"], "{kind:?}");
        assert_eq!(ex.unbind(q.id(), "k", Some(&two)), Some(true));
        assert!(routed(&ex, &msg("k")).is_empty(), "{kind:?}");
    }
}

#[test]
fn has_binding_checks_each_criterion() {
    let ex = exchange(ExchangeKind::Headers);
    let (a, b) = (queue("a"), queue("b"));
    let args = headers(&[("h", V::Int(1))]);
    ex.bind(&a, "k", &args, None, BindingIdentity::Key).unwrap();
    assert!(ex.has_binding(Some(&a), Some("k"), Some(&args)));
    assert!(ex.has_binding(None, Some("k"), None));
    assert!(!ex.has_binding(Some(&b), None, None));
    assert!(!ex.has_binding(Some(&a), Some("j"), None));
    assert!(!ex.has_binding(None, None, Some(&headers(&[("h", V::Int(2))]))));
}

#[test]
fn clear_removes_everything() {
    let ex = exchange(ExchangeKind::Direct);
    let a = queue("a");
    ex.bind(&a, "k", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    let other = exchange(ExchangeKind::Fanout);
    ex.bind_exchange(&other, "k", &no_args()).unwrap();
    assert_eq!(ex.binding_count(), 2);
    let (queues, exchanges) = ex.clear();
    assert_eq!((queues.len(), exchanges.len()), (1, 1));
    assert_eq!(ex.binding_count(), 0);
    assert!(routed(&ex, &msg("k")).is_empty());
}

#[test]
fn kind_names_round_trip() {
    for k in [
        ExchangeKind::Direct,
        ExchangeKind::Fanout,
        ExchangeKind::Topic,
        ExchangeKind::Headers,
    ] {
        assert_eq!(ExchangeKind::from_name(k.name()), Some(k));
    }
    assert_eq!(ExchangeKind::from_name("x-custom"), None);
}

/// Admits messages whose body starts with its prefix.
#[derive(Debug)]
struct BodyPrefix(&'static str);

impl MessageFilter for BodyPrefix {
    fn matches(&self, message: &Message) -> bool {
        message.body().starts_with(self.0.as_bytes())
    }
}

fn with_body(key: &str, body: &'static str) -> Message {
    Message::new("x", key.to_owned(), Bytes::from_static(body.as_bytes()))
}

fn only(prefix: &'static str) -> Option<Arc<dyn MessageFilter>> {
    Some(Arc::new(BodyPrefix(prefix)))
}

#[test]
fn a_filtered_binding_routes_only_what_its_filter_admits() {
    let ex = exchange(ExchangeKind::Topic);
    let (sub, plain) = (queue("sub"), queue("plain"));
    ex.bind(
        &sub,
        "news.#",
        &no_args(),
        only("red"),
        BindingIdentity::Key,
    )
    .unwrap();
    ex.bind(&plain, "news.#", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &with_body("news.a", "red 1")), ["plain", "sub"]);
    assert_eq!(routed(&ex, &with_body("news.a", "blue 1")), ["plain"]);
    // Unbound, the queue is forgotten; bound again without a filter, it takes everything.
    assert!(ex.unbind(sub.id(), "news.#", None).is_some());
    ex.bind(&sub, "news.#", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    assert_eq!(
        routed(&ex, &with_body("news.a", "blue 2")),
        ["plain", "sub"]
    );
}

#[test]
fn an_unfiltered_binding_of_the_same_queue_admits_everything_it_routes() {
    let ex = exchange(ExchangeKind::Direct);
    let q = queue("q");
    ex.bind(&q, "plain", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&q, "red", &no_args(), only("red"), BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &with_body("red", "blue")), Vec::<String>::new());
    assert_eq!(routed(&ex, &with_body("red", "red")), ["q"]);
    // The queue is also bound without a filter: that binding's routing stands. Direct
    // exchanges know which binding routed, so the other key's filter plays no part.
    assert_eq!(routed(&ex, &with_body("plain", "blue")), ["q"]);
    assert!(ex.unbind(q.id(), "plain", None).is_some());
    assert!(
        routed(&ex, &with_body("plain", "blue")).is_empty(),
        "unbound"
    );
    assert!(ex.unbind(q.id(), "red", None).is_some());
    ex.bind(&q, "red", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &with_body("red", "blue")), ["q"], "filter gone");
}

/// Under one key, bindings told apart by their arguments (each with its own selector) admit
/// what any of them admits; unbinding one takes only its filter away.
#[test]
fn filtered_bindings_under_one_key_each_admit_their_own() {
    let ex = exchange(ExchangeKind::Direct);
    let q = queue("q");
    let by_args = BindingIdentity::KeyAndArguments;
    let (red, blue) = (
        headers(&[("selector", V::Str("red".into()))]),
        headers(&[("selector", V::Str("blue".into()))]),
    );
    ex.bind(&q, "k", &red, only("red"), by_args).unwrap();
    ex.bind(&q, "k", &blue, only("blue"), by_args).unwrap();
    assert_eq!(routed(&ex, &with_body("k", "red")), ["q"]);
    assert_eq!(routed(&ex, &with_body("k", "blue")), ["q"]);
    assert!(routed(&ex, &with_body("k", "green")).is_empty());
    assert_eq!(ex.unbind(q.id(), "k", Some(&red)), Some(false));
    assert!(routed(&ex, &with_body("k", "red")).is_empty());
    assert_eq!(routed(&ex, &with_body("k", "blue")), ["q"]);
}

#[test]
fn route_all_and_route_only_queues_apply_binding_filters_too() {
    let ex = exchange(ExchangeKind::Fanout);
    let q = queue("q");
    ex.bind(&q, "", &no_args(), only("red"), BindingIdentity::Key)
        .unwrap();
    let mut out = Vec::new();
    assert!(!ex.route_only_queues(&with_body("", "blue"), &mut out));
    assert!(ex.route_only_queues(&with_body("", "red"), &mut out));
    let (mut queues, mut exchanges) = (Vec::new(), Vec::new());
    assert!(!ex.route_all(&with_body("", "blue"), &mut queues, &mut exchanges));
    assert!(ex.route_all(&with_body("", "red"), &mut queues, &mut exchanges));
    assert_eq!(queues.len(), 1);
    // Deleting the exchange's bindings forgets the filters with them.
    ex.clear();
    ex.bind(&q, "", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &with_body("", "blue")), ["q"]);
}

#[test]
fn each_binding_of_a_queue_filters_only_what_it_routes() {
    // Topic: the unfiltered binding does not route b.*, so the filter of b.# decides there.
    let ex = exchange(ExchangeKind::Topic);
    let q = queue("q");
    ex.bind(&q, "a.#", &no_args(), None, BindingIdentity::Key)
        .unwrap();
    ex.bind(&q, "b.#", &no_args(), only("red"), BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &with_body("a.x", "blue")), ["q"]);
    assert!(routed(&ex, &with_body("b.x", "blue")).is_empty());
    assert_eq!(routed(&ex, &with_body("b.x", "red")), ["q"]);
    // Two filtered bindings: each admits only what it routes.
    ex.bind(&q, "a.#", &no_args(), only("green"), BindingIdentity::Key)
        .unwrap();
    assert!(routed(&ex, &with_body("a.x", "red")).is_empty());
    assert_eq!(routed(&ex, &with_body("a.x", "green")), ["q"]);
    assert!(routed(&ex, &with_body("b.x", "green")).is_empty());

    // Headers: the criteria say which binding routed.
    let ex = exchange(ExchangeKind::Headers);
    let hmsg_with = |n: i64, body: &'static str| {
        let mut m = MessageParts::new("x", "", Bytes::from_static(body.as_bytes()));
        m.headers = Some(Arc::new(headers(&[("n", V::Int(n))])));
        m.build()
    };
    ex.bind(
        &q,
        "one",
        &headers(&[("n", V::Int(1))]),
        None,
        BindingIdentity::Key,
    )
    .unwrap();
    ex.bind(
        &q,
        "two",
        &headers(&[("n", V::Int(2))]),
        only("red"),
        BindingIdentity::Key,
    )
    .unwrap();
    assert_eq!(routed(&ex, &hmsg_with(1, "blue")), ["q"]);
    assert!(routed(&ex, &hmsg_with(2, "blue")).is_empty());
    assert_eq!(routed(&ex, &hmsg_with(2, "red")), ["q"]);

    // Fanout: every binding routes everything, so any filter that matches admits.
    let ex = exchange(ExchangeKind::Fanout);
    ex.bind(&q, "one", &no_args(), only("red"), BindingIdentity::Key)
        .unwrap();
    ex.bind(&q, "two", &no_args(), only("blue"), BindingIdentity::Key)
        .unwrap();
    assert_eq!(routed(&ex, &with_body("", "blue")), ["q"]);
    assert!(routed(&ex, &with_body("", "green")).is_empty());
}

#[test]
fn rebinding_replaces_a_binding_s_filter() {
    let ex = exchange(ExchangeKind::Topic);
    let q = queue("q");
    assert_eq!(
        ex.bind(&q, "news.#", &no_args(), only("red"), BindingIdentity::Key)
            .unwrap(),
        Bound::NewKey
    );
    assert_eq!(
        ex.bind(&q, "news.#", &no_args(), only("blue"), BindingIdentity::Key)
            .unwrap(),
        Bound::Replaced
    );
    assert_eq!(routed(&ex, &with_body("news.a", "blue")), ["q"]);
    assert!(routed(&ex, &with_body("news.a", "red")).is_empty());
    assert_eq!(
        ex.bind(&q, "news.#", &no_args(), None, BindingIdentity::Key)
            .unwrap(),
        Bound::Replaced
    );
    assert_eq!(routed(&ex, &with_body("news.a", "red")), ["q"]);
    assert!(
        ex.table.read().selective.is_none(),
        "no filtered binding left"
    );
    // An unfiltered binding bound again with a filter gets it, and shows its arguments.
    let mut red = Arguments::new();
    red.push("selector", V::Str("red".into()));
    assert_eq!(
        ex.bind(&q, "news.#", &red, only("red"), BindingIdentity::Key)
            .unwrap(),
        Bound::Replaced
    );
    assert!(routed(&ex, &with_body("news.a", "blue")).is_empty());
    assert_eq!(ex.binding_count(), 1);
    assert_eq!(ex.bindings()[0].arguments, red, "the arguments in force");
}
