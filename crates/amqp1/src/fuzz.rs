//! Entry point for a fuzz target: arbitrary octets through every decoder.

use bytes::{Bytes, BytesMut};

use crate::error::DecodeError;
use crate::frame::{decode_frame, FrameBody};
use crate::message::{Message, RawMessage};
use crate::performative::Performative;
use crate::sasl::SaslFrame;
use crate::value::Value;

/// Large enough for interesting frames, small enough to keep runs fast.
const FUZZ_MAX_FRAME: u32 = 1 << 16;

/// Runs `data` as a frame stream and, so the fuzzer need not discover
/// framing first, as a bare value, performative, SASL body and message. Must
/// never panic on any input; it panics only if re-encoding something it
/// decoded is not stable, which is a codec bug.
pub fn fuzz_decode(data: &[u8]) {
    let raw = Bytes::copy_from_slice(data);
    check_value(raw.clone());
    check_performative(raw.clone());
    check_sasl(raw.clone());
    check_message(raw);

    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decode_frame(&mut buf, FUZZ_MAX_FRAME) {
        if let Ok(FrameBody::Amqp { payload, .. }) = frame.decode_body() {
            check_message(payload);
        }
        check_performative(frame.body.clone());
        check_sasl(frame.body);
    }
}

/// Encodes what `decode` produced, decodes and encodes that again, and
/// checks the two encodings are the same: the first pass may normalise (a
/// uint 0x70 0 becomes 0x43), after that the bytes must be fixed.
fn stable<T>(
    value: &T,
    encode: impl Fn(&T, &mut BytesMut),
    decode: impl Fn(Bytes) -> Result<T, DecodeError>,
    what: &str,
) {
    let mut first = BytesMut::new();
    encode(value, &mut first);
    match decode(first.clone().freeze()) {
        Ok(again) => {
            let mut second = BytesMut::new();
            encode(&again, &mut second);
            assert_eq!(first, second, "{what} re-encoding is not stable");
        }
        // Arrays of zero-width elements are bounded by the input's length
        // (see `decode`); shorter encodings elsewhere in the value can bring
        // a re-encoding under that bound.
        Err(DecodeError::TooManyElements) => {}
        Err(e) => panic!("{what} re-encoding does not decode: {e}"),
    }
}

fn check_value(mut raw: Bytes) {
    if let Ok(v) = Value::decode(&mut raw) {
        stable(&v, |v, o| v.encode(o), Value::decode_exact, "value");
    }
}

fn check_performative(mut raw: Bytes) {
    if let Ok(p) = Performative::decode(&mut raw) {
        stable(
            &p,
            |p, o| p.encode(o),
            |b| {
                let mut b = b;
                Performative::decode(&mut b)
            },
            "performative",
        );
    }
}

fn check_sasl(mut raw: Bytes) {
    if let Ok(s) = SaslFrame::decode(&mut raw) {
        stable(
            &s,
            |s, o| s.encode(o),
            |b| {
                let mut b = b;
                SaslFrame::decode(&mut b)
            },
            "SASL frame",
        );
    }
}

fn check_message(raw: Bytes) {
    let Ok(parsed) = RawMessage::parse(raw) else {
        return;
    };
    // Forwarding keeps the bare message's octets whatever the header says.
    let header = parsed.header().ok().flatten();
    let mut forwarded = BytesMut::new();
    parsed.encode_with(&mut forwarded, header.as_ref(), None);
    let again = RawMessage::parse(forwarded.freeze()).expect("forwarded message does not parse");
    assert_eq!(again.bare(), parsed.bare(), "bare message changed");

    if let Ok(m) = parsed.decode() {
        stable(&m, |m, o| m.encode(o), Message::decode, "message");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{write_frame, write_sasl_frame, write_transfer};
    use crate::performative::Transfer;
    use crate::testutil::{Gen, Sample};

    fn stream() -> Bytes {
        let mut g = Gen::new(0x1234);
        let mut out = BytesMut::new();
        for p in Performative::samples(&mut g) {
            write_frame(&mut out, 1, &p, &[]);
        }
        for s in SaslFrame::samples(&mut g) {
            write_sasl_frame(&mut out, &s);
        }
        let mut payload = BytesMut::new();
        Message::sample(&mut Gen::new(9)).encode(&mut payload);
        let transfer = Transfer {
            delivery_id: Some(1),
            ..Transfer::default()
        };
        write_transfer(&mut out, 1, &transfer, &payload, 4096).unwrap();
        out.freeze()
    }

    #[test]
    fn survives_every_prefix_and_bit_flip_of_a_real_stream() {
        let stream = stream();
        for cut in (0..stream.len()).step_by(5) {
            fuzz_decode(&stream[..cut]);
        }
        let mut flipped = stream.to_vec();
        for i in 0..flipped.len() {
            for mask in [0x01, 0x80, 0x5a] {
                flipped[i] ^= mask;
                fuzz_decode(&flipped[i.saturating_sub(48)..]);
                flipped[i] ^= mask;
            }
        }
    }

    #[test]
    fn survives_pseudo_random_input() {
        let mut x: u64 = 0x243f_6a88_85a3_08d3;
        for len in 0..3000 {
            let data: Vec<u8> = (0..len % 300)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Bias towards format codes and small sizes.
                    match x % 4 {
                        0 => {
                            [0x00, 0x40, 0x45, 0x53, 0xa1, 0xc0, 0xd0, 0xe0][(x >> 8) as usize % 8]
                        }
                        1 => (x >> 16) as u8 & 0x0f,
                        _ => (x >> 24) as u8,
                    }
                })
                .collect();
            fuzz_decode(&data);
        }
    }
}
