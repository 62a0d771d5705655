//! Hostile and broken input: every case is a typed error, promptly, with no
//! panic and no allocation out of proportion to the input.

use bytes::{Bytes, BytesMut};
use ferry_amqp1::*;

fn value(wire: &[u8]) -> Result<Value, DecodeError> {
    Value::decode_exact(Bytes::copy_from_slice(wire))
}

fn performative(wire: &[u8]) -> Result<Performative, DecodeError> {
    Performative::decode(&mut Bytes::copy_from_slice(wire))
}

#[test]
fn unknown_format_codes() {
    for code in [
        0x01, 0x3f, 0x46, 0x57, 0x62, 0x75, 0x99, 0xa2, 0xc2, 0xe1, 0xff,
    ] {
        assert_eq!(value(&[code]), Err(DecodeError::InvalidFormatCode(code)));
    }
    assert_eq!(value(&[]), Err(DecodeError::Truncated));
}

#[test]
fn truncated_scalars_and_sizes() {
    for wire in [
        &[0x50][..],
        &[0x60, 1],
        &[0x70, 1, 2, 3],
        &[0x80, 0, 0, 0, 0, 0, 0, 0],
        &[0x98, 1, 2],
        &[0xa1],
        &[0xa1, 2, b'a'],
        &[0xb0, 0, 0, 1],
        // A 4 GiB binary announced in five octets: refused, not allocated.
        &[0xb0, 0xff, 0xff, 0xff, 0xff],
        &[0xc0],
        &[0xc0, 5, 1, 0x41],
        &[0xd0, 0, 0, 0, 9, 0, 0, 0, 1],
        &[0xe0, 3, 1],
        &[0x00],
        &[0x00, 0x53],
        &[0x00, 0x53, 0x10],
    ] {
        assert_eq!(value(wire), Err(DecodeError::Truncated), "{wire:02x?}");
    }
}

#[test]
fn counts_larger_than_the_buffer() {
    // list8: 200 elements in 2 octets.
    assert_eq!(
        value(&[0xc0, 3, 200, 0x40, 0x40]),
        Err(DecodeError::CountExceedsSize {
            count: 200,
            size: 2
        })
    );
    // list32: 4 billion elements in none.
    assert_eq!(
        value(&[0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]),
        Err(DecodeError::CountExceedsSize {
            count: u32::MAX as u64,
            size: 0
        })
    );
    // map32 likewise.
    assert!(matches!(
        value(&[0xd1, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]),
        Err(DecodeError::CountExceedsSize { .. })
    ));
    // array32 of 4 billion ulongs in 0 octets of data.
    assert_eq!(
        value(&[0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x80]),
        Err(DecodeError::CountExceedsSize {
            count: u32::MAX as u64,
            size: 0
        })
    );
    // array32 of 4 billion nulls: no octets at all per element, so the
    // input's length bounds them instead.
    assert_eq!(
        value(&[0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40]),
        Err(DecodeError::TooManyElements)
    );
    // An array of arrays of nulls, each inner array 3 octets claiming 255:
    // the budget is shared, so nesting does not multiply it.
    let mut wire = vec![0xf0, 0, 0, 0, 0, 0, 0, 0, 100, 0xe0];
    for _ in 0..100 {
        wire.extend_from_slice(&[2, 255, 0x40]);
    }
    let size = (wire.len() - 5) as u32;
    wire[1..5].copy_from_slice(&size.to_be_bytes());
    assert_eq!(value(&wire), Err(DecodeError::TooManyElements));
    // A few zero-width elements are fine.
    let Ok(Value::Array(nulls)) = value(&[0xe0, 2, 100, 0x40]) else {
        panic!("array of nulls refused");
    };
    assert_eq!(nulls.len(), 100);
}

#[test]
fn sizes_and_counts_that_disagree() {
    // Size says 3 octets, the one element takes 1: 1 left over.
    assert_eq!(
        value(&[0xc0, 3, 1, 0x41, 0x41]),
        Err(DecodeError::SizeMismatch(1))
    );
    // A size smaller than the count field.
    assert_eq!(value(&[0xc0, 0]), Err(DecodeError::InvalidSize(0)));
    assert_eq!(
        value(&[0xd0, 0, 0, 0, 3, 0, 0]),
        Err(DecodeError::InvalidSize(3))
    );
    assert_eq!(value(&[0xe0, 0]), Err(DecodeError::InvalidSize(0)));
    // An odd map.
    assert_eq!(value(&[0xc1, 2, 1, 0x40]), Err(DecodeError::OddMapCount(1)));
    // An element that runs past its compound's size.
    assert_eq!(
        value(&[0xc0, 3, 1, 0xa1, 5, b'a', b'b']),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn nesting_bombs() {
    // Lists nested `depth` deep, innermost holding a null.
    let nested_lists = |depth: usize| {
        let mut wire = vec![0x40];
        for _ in 0..depth {
            let mut outer = vec![0xc0, wire.len() as u8 + 1, 1];
            outer.extend_from_slice(&wire);
            wire = outer;
        }
        value(&wire)
    };
    assert_eq!(
        nested_lists(80),
        Err(DecodeError::NestingTooDeep(MAX_NESTING))
    );
    assert!(nested_lists(MAX_NESTING).is_ok());
    assert!(nested_lists(MAX_NESTING + 1).is_err());
    // 10,000 nested described values.
    let mut wire = [0x00, 0x53, 0x01].repeat(10_000);
    wire.push(0x40);
    assert_eq!(value(&wire), Err(DecodeError::NestingTooDeep(MAX_NESTING)));
    // Deeply nested maps inside a performative's properties.
    let nested_maps = |depth| {
        let mut inner = vec![0x40];
        for _ in 0..depth {
            // map32: size, count 2, key "k", the map inside as the value.
            let mut m = vec![0xd1];
            m.extend_from_slice(&((4 + 3 + inner.len()) as u32).to_be_bytes());
            m.extend_from_slice(&2u32.to_be_bytes());
            m.extend_from_slice(&[0xa3, 1, b'k']);
            m.extend_from_slice(&inner);
            inner = m;
        }
        // open("c", 8 nulls, properties = the maps).
        let mut open = vec![0x00, 0x53, 0x10, 0xd0];
        open.extend_from_slice(&((4 + 3 + 8 + inner.len()) as u32).to_be_bytes());
        open.extend_from_slice(&10u32.to_be_bytes());
        open.extend_from_slice(&[0xa1, 1, b'c']);
        open.extend_from_slice(&[0x40; 8]);
        open.extend_from_slice(&inner);
        performative(&open)
    };
    assert_eq!(
        nested_maps(200),
        Err(DecodeError::NestingTooDeep(MAX_NESTING))
    );
    assert!(nested_maps(20).is_ok());
}

#[test]
fn invalid_text() {
    assert_eq!(value(&[0xa1, 2, 0xc3, 0x28]), Err(DecodeError::InvalidUtf8));
    assert_eq!(value(&[0xa3, 1, 0xff]), Err(DecodeError::InvalidUtf8));
    // Overlong encoding of '/'.
    assert_eq!(value(&[0xa1, 2, 0xc0, 0xaf]), Err(DecodeError::InvalidUtf8));
    // A surrogate is not a char.
    assert_eq!(
        value(&[0x73, 0, 0, 0xd8, 0]),
        Err(DecodeError::InvalidChar(0xd800))
    );
    assert_eq!(
        value(&[0x73, 0, 0x11, 0, 0]),
        Err(DecodeError::InvalidChar(0x11_0000))
    );
    // A container-id with invalid UTF-8.
    assert_eq!(
        performative(&[0x00, 0x53, 0x10, 0xc0, 4, 1, 0xa1, 1, 0xff]),
        Err(DecodeError::InvalidUtf8)
    );
    // Booleans are 0 or 1.
    assert_eq!(
        value(&[0x56, 2]),
        Err(DecodeError::InvalidValue {
            what: "boolean",
            value: 2
        })
    );
}

#[test]
fn wrong_descriptors() {
    // An unknown performative.
    assert!(matches!(
        performative(&[0x00, 0x53, 0x19, 0x45]),
        Err(DecodeError::UnexpectedDescriptor { .. })
    ));
    // A descriptor that is neither ulong nor symbol.
    assert_eq!(
        performative(&[0x00, 0xa1, 1, b'x', 0x45]),
        Err(DecodeError::InvalidDescriptor(0xa1))
    );
    assert_eq!(
        value(&[0x00, 0x40, 0x40]),
        Err(DecodeError::InvalidDescriptor(0x40))
    );
    // The right descriptor around something other than a list.
    assert_eq!(
        performative(&[0x00, 0x53, 0x10, 0xc1, 1, 0]),
        Err(DecodeError::UnexpectedType {
            expected: "list",
            found: 0xc1
        })
    );
    // A SASL body in an AMQP frame and the other way round.
    assert!(performative(&[0x00, 0x53, 0x41, 0x45]).is_err());
    assert!(SaslFrame::decode(&mut Bytes::from_static(&[0x00, 0x53, 0x10, 0x45])).is_err());
    // An error whose condition is a string.
    assert_eq!(
        performative(&[0x00, 0x53, 0x18, 0xc0, 9, 1, 0x00, 0x53, 0x1d, 0xc0, 3, 1, 0xa1, 0]),
        Err(DecodeError::UnexpectedType {
            expected: "symbol",
            found: 0xa1
        })
    );
    // A transfer whose state is a described type of another kind is kept
    // as an unknown state (extensions may define states)...
    #[rustfmt::skip]
    let transfer: &[u8] = &[
        0x00, 0x53, 0x14, 0xc0, 12, 8,
        0x43, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
        0x00, 0x53, 0x77, 0x40,
    ];
    let Ok(Performative::Transfer(t)) = performative(transfer) else {
        panic!("transfer refused");
    };
    assert!(matches!(t.state, Some(DeliveryState::Other(_))));
    // ...but one that is not described at all is an error.
    assert!(performative(&[
        0x00, 0x53, 0x14, 0xc0, 9, 8, 0x43, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x45
    ])
    .is_err());
}

#[test]
fn frames() {
    let decode = |b: &[u8], max| decode_frame(&mut BytesMut::from(b), max);
    for size in 0..8u32 {
        let mut b = size.to_be_bytes().to_vec();
        b.extend_from_slice(&[2, 0, 0, 0]);
        assert_eq!(decode(&b, 512), Err(FrameError::TooSmall(size)));
    }
    for doff in [0, 1] {
        assert_eq!(
            decode(&[0, 0, 0, 8, doff, 0, 0, 0], 512),
            Err(FrameError::BadDataOffset { doff, size: 8 })
        );
    }
    assert_eq!(
        decode(&[0, 0, 0, 16, 5, 0, 0, 0], 512),
        Err(FrameError::BadDataOffset { doff: 5, size: 16 })
    );
    assert_eq!(
        decode(&[0, 0, 0, 8, 2, 2, 0, 0], 512),
        Err(FrameError::UnknownType(2))
    );
    assert_eq!(
        decode(&[0, 0, 0x10, 0, 2, 0, 0, 0], 4095),
        Err(FrameError::TooLarge {
            size: 4096,
            max: 4095
        })
    );
    // A frame whose body is garbage is a framing success and a decode error.
    let mut b = BytesMut::from(&[0, 0, 0, 10, 2, 0, 0, 0, 0xff, 0xff][..]);
    let f = decode_frame(&mut b, 512).unwrap().unwrap();
    assert_eq!(
        f.decode_body(),
        Err(DecodeError::UnexpectedType {
            expected: "performative",
            found: 0xff
        })
    );
    assert_eq!(
        DecodeError::InvalidFormatCode(0xff).condition(),
        condition::DECODE_ERROR
    );
    assert_eq!(
        DecodeError::NestingTooDeep(MAX_NESTING).condition(),
        condition::RESOURCE_LIMIT_EXCEEDED
    );
}

#[test]
fn every_prefix_of_real_traffic_is_refused_or_waits() {
    // Proton's own frames, cut anywhere: decode_frame waits for the rest,
    // and the body decoders given a cut body return errors.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/proton_frames.txt"
    ))
    .unwrap();
    for line in text.lines() {
        let hex = line.split_once(' ').unwrap().1;
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let mut start = 0;
        while start < bytes.len() {
            if bytes[start..].starts_with(b"AMQP") {
                start += 8;
                continue;
            }
            let size = u32::from_be_bytes(bytes[start..start + 4].try_into().unwrap()) as usize;
            let frame = &bytes[start..start + size];
            for cut in 0..size {
                assert_eq!(
                    decode_frame(&mut BytesMut::from(&frame[..cut]), 4096),
                    Ok(None)
                );
            }
            let body = Bytes::copy_from_slice(&frame[8..]);
            for cut in 0..body.len() {
                let mut b = body.slice(..cut);
                let p = Performative::decode(&mut b);
                let s = SaslFrame::decode(&mut body.slice(..cut));
                // A transfer cut inside its payload still decodes.
                assert!(p.is_err() || matches!(p, Ok(Performative::Transfer(_))));
                assert!(s.is_err());
            }
            start += size;
        }
    }
}

#[test]
fn fuzz_entry_survives_proton_traffic_with_bit_flips() {
    // What the cargo-fuzz target runs, over proton's frames and messages
    // with one octet changed at a time.
    for file in ["proton_frames.txt", "proton_messages.txt"] {
        let text = std::fs::read_to_string(format!(
            "{}/tests/vectors/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        for line in text.lines() {
            let hex = line.split_once(' ').unwrap().1;
            let mut bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            fuzz_decode(&bytes);
            for i in 0..bytes.len().min(600) {
                for mask in [0x01, 0x10, 0xff] {
                    bytes[i] ^= mask;
                    fuzz_decode(&bytes[i.saturating_sub(16)..]);
                    bytes[i] ^= mask;
                }
            }
        }
    }
}
