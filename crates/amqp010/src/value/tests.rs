use super::*;
use crate::generated::{ExchangeQueryResult, QueueQueryResult, SPEC_TYPES};

fn round_trip(v: &Value) -> Value {
    let mut out = BytesMut::new();
    v.encode(&mut out).unwrap();
    let mut r = Reader::new(out.freeze());
    let back = Value::decode(&mut r).unwrap();
    assert!(r.is_empty(), "{v:?} left bytes");
    back
}

fn every_kind() -> Vec<Value> {
    let mut inner = Map::new();
    inner.insert("k", Value::Uint8(1));
    vec![
        Value::Void,
        Value::Bool(true),
        Value::Bool(false),
        Value::Int8(-3),
        Value::Uint8(250),
        Value::Char(b'x'),
        Value::Int16(-300),
        Value::Uint16(65000),
        Value::Int32(-70000),
        Value::Uint32(4_000_000_000),
        Value::Float(1.5),
        Value::Int64(-1 << 40),
        Value::Uint64(u64::MAX),
        Value::Double(-2.25),
        Value::Datetime(1_700_000_000),
        Value::Uuid([9; 16]),
        Value::Str8(Str::from("short")),
        Value::Str16(Str::from("longer string")),
        Value::Vbin8(Bytes::from_static(b"\x00\x01")),
        Value::Vbin16(Bytes::from_static(b"bin16")),
        Value::Vbin32(Bytes::from_static(b"bin32")),
        Value::Map(inner.clone()),
        Value::List(List(vec![Value::Int32(1), Value::from("two"), Value::Void])),
        Value::Array(Array::of_str16(["a", "b"])),
        Value::Struct32(Struct32 {
            class_code: 8,
            struct_code: 1,
            body: Bytes::from_static(&[0, 0]),
        }),
        Value::Raw {
            code: 0x00,
            bytes: Bytes::from_static(&[1]),
        },
        Value::Raw {
            code: 0x27,
            bytes: Bytes::from_static(&[0, 0, 0, 65]),
        },
        Value::Raw {
            code: 0x84,
            bytes: Bytes::from_static(b"latin"),
        },
        Value::Raw {
            code: 0x96,
            bytes: Bytes::from_static(b"\x00a"),
        },
        Value::Raw {
            code: 0xc8,
            bytes: Bytes::from_static(&[2, 0, 0, 0, 5]),
        },
        Value::Raw {
            code: 0xd8,
            bytes: Bytes::from_static(&[1; 9]),
        },
        Value::Raw {
            code: 0x70,
            bytes: Bytes::from(vec![3u8; 128]),
        },
        Value::Raw {
            code: 0xf1,
            bytes: Bytes::new(),
        },
    ]
}

#[test]
fn every_kind_round_trips_with_its_type_code() {
    for v in every_kind() {
        let back = round_trip(&v);
        assert_eq!(back, v);
        assert_eq!(back.type_code(), v.type_code());
    }
}

#[test]
fn widths_by_code_agree_with_the_spec() {
    for t in SPEC_TYPES {
        if let Some(code) = t.code {
            assert_eq!(type_width(code), Some(t.width), "{}", t.name);
        }
    }
    assert_eq!(type_width(0xb0), None);
    assert_eq!(type_width(0xe5), None);
}

#[test]
fn map_known_encoding() {
    // {"a": str16 "hi", "n": int32 -2}: size, count, then key/type/value entries.
    let wire: &[u8] = &[
        0, 0, 0, 18, 0, 0, 0, 2, 1, b'a', 0x95, 0, 2, b'h', b'i', 1, b'n', 0x21, 0xff, 0xff, 0xff,
        0xfe,
    ];
    let m = Map::decode(&mut Reader::new(Bytes::from_static(wire))).unwrap();
    assert_eq!(m.get("a"), Some(&Value::Str16(Str::from("hi"))));
    assert_eq!(m.get("n").and_then(Value::as_i64), Some(-2));
    assert_eq!(m.get("z"), None);
    let mut out = BytesMut::new();
    m.encode(&mut out).unwrap();
    assert_eq!(&out[..], wire);
}

#[test]
fn list_and_array_known_encodings() {
    // The size covers the count and items but not itself; octets left over after the
    // counted items are an error.
    let list: &[u8] = &[0, 0, 0, 8, 0, 0, 0, 2, 0x08, 1, 0xf0, 0];
    let l = List::decode(&mut Reader::new(Bytes::from_static(list))).unwrap_err();
    assert!(matches!(l, DecodeError::InvalidSize { .. }), "{l:?}");
    let list: &[u8] = &[0, 0, 0, 7, 0, 0, 0, 2, 0x08, 1, 0xf0];
    let l = List::decode(&mut Reader::new(Bytes::from_static(list))).unwrap();
    assert_eq!(l.0, vec![Value::Bool(true), Value::Void]);

    let array: &[u8] = &[0, 0, 0, 12, 0x95, 0, 0, 0, 2, 0, 1, b'x', 0, 2, b'y', b'z'];
    let a = Array::decode(&mut Reader::new(Bytes::from_static(array))).unwrap();
    assert_eq!(a, Array::of_str16(["x", "yz"]));
    let mut out = BytesMut::new();
    a.encode(&mut out).unwrap();
    assert_eq!(&out[..], array);
}

#[test]
fn empty_collections_without_count_are_empty() {
    let zero = Bytes::from_static(&[0, 0, 0, 0]);
    assert!(Map::decode(&mut Reader::new(zero.clone()))
        .unwrap()
        .is_empty());
    assert!(List::decode(&mut Reader::new(zero.clone()))
        .unwrap()
        .0
        .is_empty());
    assert!(Array::decode(&mut Reader::new(zero))
        .unwrap()
        .items
        .is_empty());
}

#[test]
fn map_insert_replaces_in_place() {
    let mut m: Map = [("a", Value::Int8(1)), ("b", Value::Int8(2))]
        .into_iter()
        .collect();
    assert_eq!(m.insert("a", Value::Int8(3)), Some(Value::Int8(1)));
    let keys: Vec<String> = m.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(m.remove("a"), Some(Value::Int8(3)));
    assert_eq!(m.len(), 1);
}

#[test]
fn collecting_a_map_keeps_what_repeated_inserts_keep() {
    // Keys repeat before and after the collection switches to its hash index, and the
    // first repeat of each comes after the switch for some keys.
    let entries: Vec<(String, Value)> = (0..200u32)
        .map(|i| (format!("k{}", i % 37), Value::Uint32(i)))
        .collect();
    let mut by_insert = Map::new();
    for (k, v) in entries.clone() {
        by_insert.insert(k, v);
    }
    let collected: Map = entries.into_iter().collect();
    assert_eq!(collected, by_insert);
    assert_eq!(collected.len(), 37);
    assert_eq!(collected.get("k0"), Some(&Value::Uint32(185)));
    assert_eq!(collected.entries()[36].0.to_string(), "k36");
}

#[test]
fn collecting_first_values_keeps_each_keys_first_value_in_first_place() {
    // As above, with repeats on both sides of the switch to the hash index.
    let entries: Vec<(String, Value)> = (0..200u32)
        .map(|i| (format!("k{}", i % 37), Value::Uint32(i)))
        .collect();
    let m = Map::from_first_values(entries);
    assert_eq!(m.len(), 37);
    assert!(m
        .entries()
        .iter()
        .enumerate()
        .all(|(i, (k, v))| k.to_string() == format!("k{i}") && *v == Value::Uint32(i as u32)));
}

#[test]
fn collecting_a_large_map_keeps_every_distinct_key_in_order() {
    let m: Map = (0..100_000u32)
        .map(|i| (format!("key-{i}"), Value::Uint32(i)))
        .collect();
    assert_eq!(m.len(), 100_000);
    assert!(m
        .entries()
        .iter()
        .enumerate()
        .all(|(i, (k, v))| k.to_string() == format!("key-{i}") && *v == Value::Uint32(i as u32)));
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let mut m = Map::new();
    for (i, v) in every_kind().into_iter().enumerate() {
        m.insert(format!("k{i}"), v);
    }
    let mut out = BytesMut::new();
    Value::Map(m).encode(&mut out).unwrap();
    let full = out.freeze();
    for n in 0..full.len() {
        let r = Value::decode(&mut Reader::new(full.slice(..n)));
        assert!(
            r.is_err(),
            "decoded a value from {n} of {} octets",
            full.len()
        );
    }
}

#[test]
fn hostile_counts_and_codes() {
    // Count says 4 billion entries in 4 octets of body: must fail, not allocate.
    let huge: &[u8] = &[0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(
        Map::decode(&mut Reader::new(Bytes::from_static(huge))),
        Err(DecodeError::Truncated)
    );
    assert_eq!(
        List::decode(&mut Reader::new(Bytes::from_static(huge))),
        Err(DecodeError::Truncated)
    );
    let voids: &[u8] = &[0, 0, 0, 5, 0xf0, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        Array::decode(&mut Reader::new(Bytes::from_static(voids))),
        Err(DecodeError::InvalidSize { .. })
    ));
    let reserved: &[u8] = &[0xb3, 1, 2];
    assert_eq!(
        Value::decode(&mut Reader::new(Bytes::from_static(reserved))),
        Err(DecodeError::ReservedTypeCode(0xb3))
    );
    let bad_struct: &[u8] = &[0xab, 0, 0, 0, 1, 8];
    assert!(matches!(
        Value::decode(&mut Reader::new(Bytes::from_static(bad_struct))),
        Err(DecodeError::InvalidSize { .. })
    ));
}

#[test]
fn nesting_is_bounded_both_ways() {
    let mut v = Value::List(List::default());
    for _ in 0..MAX_DEPTH + 2 {
        v = Value::List(List(vec![v]));
    }
    let mut out = BytesMut::new();
    assert_eq!(v.encode(&mut out), Err(EncodeError::TooDeep(MAX_DEPTH)));

    // Hand-build a deeper nesting than the encoder allows.
    let depth = MAX_DEPTH + 5;
    let mut wire = Vec::new();
    for level in 0..depth {
        let inner = (depth - level - 1) * 9 + 4;
        wire.push(0xa9);
        wire.extend_from_slice(&((inner + 4) as u32).to_be_bytes());
        wire.extend_from_slice(&1u32.to_be_bytes());
    }
    wire.push(0xa9);
    wire.extend_from_slice(&4u32.to_be_bytes());
    wire.extend_from_slice(&0u32.to_be_bytes());
    let r = Value::decode(&mut Reader::new(Bytes::from(wire)));
    assert_eq!(r, Err(DecodeError::TooDeep(MAX_DEPTH)));
}

#[test]
fn encode_errors() {
    let mismatch = Array::new(code::STR16, vec![Value::Int8(1)]);
    assert!(matches!(
        mismatch.encode(&mut BytesMut::new()),
        Err(EncodeError::ArrayElementMismatch { .. })
    ));
    let bad_raw = Value::Raw {
        code: 0x20,
        bytes: Bytes::from_static(&[1]),
    };
    assert!(matches!(
        bad_raw.encode(&mut BytesMut::new()),
        Err(EncodeError::RawWidth { .. })
    ));
    let reserved = Value::Raw {
        code: 0xe0,
        bytes: Bytes::new(),
    };
    assert_eq!(
        reserved.encode(&mut BytesMut::new()),
        Err(EncodeError::ReservedTypeCode(0xe0))
    );
    let long_key = Map::from_iter([("k".repeat(300), Value::Void)]);
    assert!(matches!(
        long_key.encode(&mut BytesMut::new()),
        Err(EncodeError::TooLong { .. })
    ));
}

#[test]
fn struct32_typed_access() {
    let q = QueueQueryResult {
        queue: Some(Str::from("q")),
        durable: true,
        message_count: Some(3),
        subscriber_count: Some(0),
        ..Default::default()
    };
    let s = Struct32::from_struct(&q).unwrap();
    assert!(s.is::<QueueQueryResult>());
    assert!(!s.is::<ExchangeQueryResult>());
    assert_eq!((s.class_code, s.struct_code), (8, 1));
    assert_eq!(s.decode_as::<QueueQueryResult>().unwrap(), q);
    assert!(matches!(
        s.decode_as::<ExchangeQueryResult>(),
        Err(DecodeError::UnexpectedStruct {
            expected: 0x0701,
            found: 0x0801
        })
    ));
    assert!(matches!(
        s.clone().into_decoded::<ExchangeQueryResult>(),
        Err(DecodeError::UnexpectedStruct {
            expected: 0x0701,
            found: 0x0801
        })
    ));
    assert_eq!(s.into_decoded::<QueueQueryResult>().unwrap(), q);
}
