use super::*;

fn parts_010(header: &Bytes, body: Bytes) -> MessageParts {
    // A header segment naming exchange "ex" at 4 and routing key "key" at 8, as a 0-10
    // delivery-properties struct does; the parts are slices of it, as the protocol layer
    // cuts them.
    MessageParts {
        exchange: header.slice(4..6),
        routing_key: header.slice(8..11),
        header: ProtocolHeader::Amqp010(header.clone()),
        body,
        ..MessageParts::default()
    }
}

fn header_010() -> Bytes {
    Bytes::from_static(b"\x00\x00\x00\x0cex\x00\x00key\x00\x01\x02\x03\x04\x05")
}

#[test]
fn a_message_is_one_pointer() {
    assert_eq!(std::mem::size_of::<Message>(), 8);
    assert_eq!(std::mem::size_of::<Option<Message>>(), 8);
}

#[test]
fn parts_read_back_as_built() {
    let header = header_010();
    let mut parts = parts_010(&header, Bytes::from_static(b"hello"));
    parts.priority = 7;
    parts.persistent = true;
    parts.body_segment = true;
    parts.expires_at = Some(123);
    parts.publisher = 42;
    let m = parts.build();
    assert_eq!(m.exchange(), b"ex");
    assert_eq!(m.routing_key(), b"key");
    assert_eq!(m.header(), Header::Amqp010(&header[..]));
    assert_eq!(m.body(), b"hello");
    assert_eq!(m.size(), (header.len() + 5) as u64);
    assert_eq!(
        (
            m.priority(),
            m.persistent(),
            m.body_segment(),
            m.expires_at()
        ),
        (7, true, true, Some(123))
    );
    assert_eq!(m.publisher(), 42);
    assert!(m.headers().is_none() && m.deaths().is_none() && m.sequence().is_none());
    // Persistent: room for a store id, unset until a journal records it.
    assert_eq!(m.store_id(), None);
    assert!(m.set_store_id(9));
    assert_eq!(m.store_id(), Some(9));
}

#[test]
fn a_borrowed_header_is_copied_in_and_holds_its_keys_once() {
    let header = header_010();
    let rewritten = header.to_vec();
    let mut parts = parts_010(&header, Bytes::from_static(b"hello"));
    parts.priority = 3;
    parts.persistent = true;
    parts.publisher = 5;
    let m = parts.build_with_header(&rewritten, &rewritten[8..11], &rewritten[4..6]);
    drop(rewritten);
    assert_eq!(m.exchange(), b"ex");
    assert_eq!(m.routing_key(), b"key");
    assert_eq!(m.header(), Header::Amqp010(&header[..]));
    assert_eq!(
        (m.body(), m.size()),
        (&b"hello"[..], (header.len() + 5) as u64)
    );
    assert_eq!((m.priority(), m.persistent(), m.publisher()), (3, true, 5));
    // The keys are read from the header: the allocation is the one `build` makes.
    let mut same = parts_010(&header, Bytes::from_static(b"hello"));
    same.persistent = true;
    assert_eq!(m.compact_bytes(), same.build().compact_bytes());
    // Keys that are not slices of the header are copied in beside it.
    let (ex, rk) = (b"ex".to_vec(), b"key".to_vec());
    let apart =
        parts_010(&header, Bytes::from_static(b"hello")).build_with_header(&header, &rk, &ex);
    assert_eq!(
        (apart.exchange(), apart.routing_key()),
        (&b"ex"[..], &b"key"[..])
    );
    let built = parts_010(&header, Bytes::from_static(b"hello")).build();
    assert_eq!(apart.compact_bytes(), built.compact_bytes().map(|n| n + 5));
}

#[test]
fn a_size_one_over_header_and_body_needs_no_ext() {
    let header = header_010();
    let counted = (header.len() + 5) as u64;
    let mut parts = parts_010(&header, Bytes::from_static(b"hello"));
    parts.size = Some(counted + 1);
    let m = parts.build();
    assert_eq!(m.size(), counted + 1);
    let plain = parts_010(&header, Bytes::from_static(b"hello")).build();
    assert_eq!(m.compact_bytes(), plain.compact_bytes(), "no Ext for it");
    // Kept through a derived copy; any other size still takes the Ext.
    let copy = m.derive(|p| p.priority = 9);
    assert_eq!((copy.size(), copy.priority()), (counted + 1, 9));
    let mut parts = parts_010(&header, Bytes::from_static(b"hello"));
    parts.size = Some(counted + 2);
    let m = parts.build();
    assert_eq!((m.size(), m.compact_bytes()), (counted + 2, None));
}

#[test]
fn keys_outside_the_header_are_copied_in() {
    // 0-9-1: exchange and routing key come in the method frame, not the properties.
    let m = MessageParts {
        exchange: Bytes::from_static(b"amq.direct"),
        routing_key: Bytes::from_static(b"rk"),
        header: ProtocolHeader::Amqp091(Bytes::from_static(&[0x10, 0, 2])),
        body: Bytes::from_static(b"b"),
        ..MessageParts::default()
    }
    .build();
    assert_eq!(m.exchange(), b"amq.direct");
    assert_eq!(m.routing_key(), b"rk");
    assert_eq!(m.header(), Header::Amqp091(&[0x10, 0, 2]));
    assert_eq!(m.body(), b"b");
    assert_eq!(m.size(), 4);
    // Transient: no store slot.
    assert!(!m.has_store_slot() && !m.set_store_id(3));
}

#[test]
fn long_names_and_large_bodies_go_to_the_ext() {
    let long_key = Bytes::from(vec![b'k'; 70_000]);
    let long_exchange = Bytes::from(vec![b'e'; 300]);
    let body = Bytes::from(vec![5u8; INLINE_BODY_MAX]);
    let m = MessageParts {
        exchange: long_exchange.clone(),
        routing_key: long_key.clone(),
        header: ProtocolHeader::Amqp1(Bytes::from_static(b"sections")),
        body: body.clone(),
        publisher: u64::from(u32::MAX) + 5,
        size: Some(1),
        ..MessageParts::default()
    }
    .build();
    assert_eq!(m.routing_key(), &long_key[..]);
    assert_eq!(m.exchange(), &long_exchange[..]);
    assert_eq!(m.header(), Header::Amqp1(b"sections"));
    assert_eq!(m.publisher(), u64::from(u32::MAX) + 5);
    assert_eq!(m.size(), 1);
    // The large body is the very same memory, not a copy.
    assert_eq!(m.body().as_ptr(), body.as_ptr());
    assert_eq!(m.body_bytes().as_ptr(), body.as_ptr());
    let just_below = MessageParts {
        body: Bytes::from(vec![5u8; INLINE_BODY_MAX - 1]),
        ..MessageParts::default()
    }
    .build();
    assert_eq!(just_below.body().len(), INLINE_BODY_MAX - 1);
}

#[test]
fn small_content_lets_go_of_the_buffer_it_came_in() {
    let buffer = Bytes::from(vec![1u8; 1000]);
    let m = MessageParts {
        routing_key: buffer.slice(0..3),
        body: buffer.slice(10..266),
        header: ProtocolHeader::Amqp010(buffer.slice(3..10)),
        ..MessageParts::default()
    }
    .build();
    assert!(buffer.is_unique(), "nothing of the read buffer is kept");
    assert_eq!(m.body(), &buffer[10..266]);
    assert_eq!(m.routing_key(), &buffer[0..3]);
}

#[test]
fn body_and_header_bytes_outlive_the_handle() {
    let header = header_010();
    let m = parts_010(&header, Bytes::from_static(b"payload")).build();
    let (body, head) = (m.body_bytes(), m.header_bytes());
    drop(m);
    assert_eq!(&body[..], b"payload");
    assert_eq!(head, header);
    assert!(Message::default().body_bytes().is_empty());
}

#[test]
fn derive_keeps_the_content_and_changes_what_it_is_told() {
    let header = header_010();
    let mut parts = parts_010(&header, Bytes::from_static(b"body"));
    parts.persistent = true;
    parts.publisher = 3;
    let m = parts.build();
    assert!(m.set_store_id(11));
    let ttl = m.derive(|p| {
        p.expires_at = Some(5);
        p.store_id = m.store_id();
    });
    assert!(!Message::ptr_eq(&m, &ttl));
    assert_eq!(
        (ttl.expires_at(), ttl.store_id(), ttl.publisher()),
        (Some(5), Some(11), 3)
    );
    assert_eq!(
        (ttl.routing_key(), ttl.exchange()),
        (&b"key"[..], &b"ex"[..])
    );
    assert_eq!(ttl.header(), m.header());
    assert_eq!(ttl.body(), b"body");
    // A copy is a new message for the store unless told otherwise.
    let dead = m.derive(|p| {
        p.exchange = Some(Bytes::from_static(b"dlx"));
        p.routing_key = Some(Bytes::from_static(b"retry"));
        p.deaths = Some(Arc::new(DeathHistory::default()));
        p.expires_at = None;
    });
    assert_eq!(dead.store_id(), None);
    assert!(
        dead.has_store_slot(),
        "persistent, so it may be journaled afresh"
    );
    assert_eq!(
        (dead.exchange(), dead.routing_key()),
        (&b"dlx"[..], &b"retry"[..])
    );
    assert!(dead.deaths().is_some() && dead.expires_at().is_none());
    assert_eq!(dead.body(), b"body");
    // A large body is shared by the derived message.
    let big = Message::new("", "k", Bytes::from(vec![1u8; 10_000]));
    let numbered = big.derive(|p| {
        p.sequence = Some(Arc::new(Sequenced {
            key: "n".into(),
            number: 1,
        }))
    });
    assert_eq!(numbered.body().as_ptr(), big.body().as_ptr());
    assert_eq!(numbered.sequence().map(|s| s.number), Some(1));
    // Room for a store id on request, for queues that journal transient messages.
    let slot = Message::new("", "k", Bytes::new()).derive(|p| p.store_slot = true);
    assert!(slot.set_store_id(4) && slot.store_id() == Some(4));
}

#[test]
fn a_stub_keeps_what_a_queue_needs_and_no_content() {
    let mut parts = parts_010(&header_010(), Bytes::from_static(b"content"));
    parts.persistent = true;
    parts.priority = 2;
    parts.expires_at = Some(99);
    let m = parts.build();
    assert!(m.set_store_id(8));
    let stub = m.stub();
    assert!(stub.body().is_empty() && stub.routing_key().is_empty());
    assert_eq!(
        (
            stub.size(),
            stub.store_id(),
            stub.priority(),
            stub.expires_at()
        ),
        (m.size(), Some(8), 2, Some(99))
    );
}

#[test]
fn to_parts_rebuilds_an_equal_message() {
    let header = header_010();
    let mut parts = parts_010(&header, Bytes::from_static(b"x"));
    parts.headers = Some(Arc::new(Headers::default()));
    parts.expires_at = Some(1);
    let m = parts.build();
    let again = m.to_parts().build();
    assert_eq!(format!("{m:?}"), format!("{again:?}"));
}

#[test]
fn expiry_is_inclusive_of_the_deadline() {
    let m = Message::new("", "k", Bytes::from_static(b"abc"));
    assert_eq!(m.size(), 3);
    assert!(!m.is_expired_at(u64::MAX));
    let m = m.derive(|p| p.expires_at = Some(100));
    assert!(!m.is_expired_at(99));
    assert!(m.is_expired_at(100));
}

#[test]
fn now_is_after_2020() {
    assert!(now_ms() > 1_577_836_800_000);
}
