//! Entry point for a fuzz target: arbitrary octets through every decoder.

use bytes::{Bytes, BytesMut};

use crate::assembler::{Assembled, AssemblyError, AssemblyProgress, Content, ContentAssembler};
use crate::frame::{decode_frame, FrameType};
use crate::method::Method;
use crate::properties::{BasicProperties, ContentHeader, RawContentHeader};
use crate::table::FieldTable;

/// Large enough for interesting frames, small enough to keep runs fast.
const FUZZ_FRAME_MAX: usize = 1 << 16;
const FUZZ_MAX_BODY: u64 = 1 << 20;

/// Runs `data` as a frame stream (methods, headers, assembly) and, so the
/// fuzzer need not discover framing first, as a bare method payload, header
/// payload and field table. Must never panic on any input; it panics only if
/// re-encoding something it decoded is not stable, or if a broker's in-place takes from the
/// assembler disagree with `push`: codec bugs.
pub fn fuzz_decode(data: &[u8]) {
    let raw = Bytes::copy_from_slice(data);
    check_method(raw.clone());
    check_header(raw.clone());
    check_table(raw);

    let mut buf = BytesMut::from(data);
    let mut assembler = ContentAssembler::new(FUZZ_MAX_BODY);
    // A broker's assembler beside it, fed the same frames and taken from in place. The
    // first octet's bits say which completed pieces it leaves untaken (the next frame drops
    // them), so that path is explored too.
    let mut broker = ContentAssembler::new(FUZZ_MAX_BODY);
    let leave_untaken = data.first().copied().unwrap_or(0);
    let mut frames = 0u32;
    while let Ok(Some(frame)) = decode_frame(&mut buf, FUZZ_FRAME_MAX) {
        match frame.frame_type {
            FrameType::Method => check_method(frame.payload.clone()),
            FrameType::Header => check_header(frame.payload.clone()),
            FrameType::Body | FrameType::Heartbeat => {}
        }
        let pushed = assembler.push(frame.clone());
        let fed = broker.feed(frame);
        let take = (leave_untaken >> (frames % 8)) & 1 == 0;
        frames += 1;
        check_taken_in_place(pushed, fed, &mut broker, take);
    }
}

/// What a broker takes in place is what `push` hands back, and nothing is there to take
/// before a piece is complete.
fn check_taken_in_place(
    pushed: Result<Option<Assembled>, AssemblyError>,
    fed: Result<AssemblyProgress, AssemblyError>,
    broker: &mut ContentAssembler,
    take: bool,
) {
    match (pushed, fed) {
        (Ok(None), Ok(AssemblyProgress::Incomplete)) => {
            assert!(
                broker.take_content().is_none(),
                "content before it is complete"
            );
            assert!(broker.take_method().is_none(), "a method mid-message");
            assert!(
                broker.take_message().is_none(),
                "a message before it is complete"
            );
        }
        (Ok(Some(Assembled::Method(_))), Ok(AssemblyProgress::MethodReady)) if !take => {}
        (Ok(Some(Assembled::Method(m))), Ok(AssemblyProgress::MethodReady)) => {
            let taken = broker.take_method().expect("a method to take");
            assert_eq!(method_octets(&m), method_octets(&taken));
        }
        (Ok(Some(Assembled::Message(_))), Ok(AssemblyProgress::MessageReady)) if !take => {}
        (Ok(Some(Assembled::Message(m))), Ok(AssemblyProgress::MessageReady)) => {
            match (m.method, broker.take_content()) {
                (Method::BasicPublish(method), Some(Content::Publish(p))) => {
                    assert_eq!(method, p.method);
                    assert_eq!(m.header.properties.as_bytes(), p.properties.as_bytes());
                    assert_eq!(m.body, p.body);
                }
                (other, Some(Content::Other(taken))) => {
                    assert_eq!(method_octets(&other), method_octets(&taken));
                }
                (method, taken) => panic!("push gave {method:?}, take_content {taken:?}"),
            }
            assert!(broker.take_content().is_none(), "taken twice");
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        (pushed, fed) => panic!("push gave {pushed:?}, feed {fed:?}"),
    }
}

fn method_octets(m: &Method) -> BytesMut {
    let mut out = BytesMut::new();
    m.encode(&mut out);
    out
}

// Decoded values are re-encoded twice: bit octets' unused bits and non-0/1
// booleans normalise on the first pass, after which the bytes must be fixed.
fn check_method(payload: Bytes) {
    let Ok(method) = Method::decode(payload) else {
        return;
    };
    let mut first = BytesMut::new();
    method.encode(&mut first);
    let mut second = BytesMut::new();
    if let Ok(again) = Method::decode(first.clone().freeze()) {
        again.encode(&mut second);
    }
    assert_eq!(first, second, "method re-encoding is not stable");
}

fn check_header(payload: Bytes) {
    // The broker's raw reading must accept exactly what the full decoder does, and agree
    // with it on every value.
    let raw = RawContentHeader::decode(payload.clone());
    let Ok(header) = ContentHeader::decode(payload) else {
        assert!(raw.is_err(), "raw header accepted what the decoder refuses");
        return;
    };
    let raw = raw.expect("raw header refused what the decoder accepts");
    // Compared as encoded octets, not with `==`: a header value may be a NaN double, which
    // is never equal to itself though both readings hold the same bits.
    assert_eq!(
        properties_octets(&raw.properties.decode()),
        properties_octets(&header.properties)
    );
    assert_eq!(
        table_octets(raw.properties.headers().as_ref()),
        table_octets(header.properties.headers.as_ref())
    );
    let mut first = BytesMut::new();
    header.encode(&mut first);
    let mut second = BytesMut::new();
    if let Ok(again) = ContentHeader::decode(first.clone().freeze()) {
        again.encode(&mut second);
    }
    assert_eq!(first, second, "content header re-encoding is not stable");
}

fn properties_octets(properties: &BasicProperties) -> BytesMut {
    let mut out = BytesMut::new();
    ContentHeader::basic(0, properties.clone()).encode(&mut out);
    out
}

fn table_octets(table: Option<&FieldTable>) -> Option<BytesMut> {
    table.map(|t| {
        let mut out = BytesMut::new();
        t.encode(&mut out);
        out
    })
}

fn check_table(mut raw: Bytes) {
    let Ok(table) = FieldTable::decode(&mut raw) else {
        return;
    };
    let mut first = BytesMut::new();
    table.encode(&mut first);
    let mut second = BytesMut::new();
    let mut again = first.clone().freeze();
    if let Ok(again) = FieldTable::decode(&mut again) {
        again.encode(&mut second);
    }
    assert_eq!(first, second, "field table re-encoding is not stable");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::write_content;
    use crate::table::FieldValue;
    use crate::testutil::Gen;
    use crate::ShortStr;

    #[test]
    fn a_nan_header_value_reads_the_same_both_ways() {
        // Found by the fuzzer: NaN != NaN made the raw and full readings look different.
        let headers: FieldTable = [(ShortStr::from_static("x"), FieldValue::F64(f64::NAN))]
            .into_iter()
            .collect();
        let props = BasicProperties {
            headers: Some(headers),
            ..BasicProperties::default()
        };
        let m = Method::samples(&mut Gen::new(1))
            .into_iter()
            .find(|m| m.has_content())
            .expect("a content method");
        let mut stream = BytesMut::new();
        write_content(&mut stream, 1, &m, &props, b"body", 4096);
        fuzz_decode(&stream);
    }

    #[test]
    fn survives_every_prefix_and_bit_flip_of_a_real_stream() {
        let mut stream = BytesMut::new();
        for m in Method::samples(&mut Gen::new(0x1234)) {
            if m.has_content() {
                let props = BasicProperties::sample(&mut Gen::new(7));
                write_content(&mut stream, 1, &m, &props, b"body", 4096);
            } else {
                crate::frame::write_method(&mut stream, 0, &m);
            }
        }
        let stream = stream.freeze();
        for cut in (0..stream.len()).step_by(7) {
            fuzz_decode(&stream[..cut]);
        }
        let mut flipped = stream.to_vec();
        for i in 0..flipped.len() {
            flipped[i] ^= 0x5a;
            fuzz_decode(&flipped[i.saturating_sub(64)..]);
            flipped[i] ^= 0x5a;
        }
    }

    #[test]
    fn survives_pseudo_random_input() {
        let mut x: u64 = 0x243f_6a88_85a3_08d3;
        for len in 0..2000 {
            let data: Vec<u8> = (0..len % 300)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            fuzz_decode(&data);
        }
    }
}
