//! Arbitrary bytes through everything that reads peer input: frames, assembly, controls,
//! commands, header segments and values. Anything decoded must re-encode, and encoding
//! must be stable (decode . encode is the identity on encoded bytes).

#![no_main]

use bytes::{Bytes, BytesMut};
use ferry_amqp010::codec::Reader;
use ferry_amqp010::{
    decode_frame, is_redelivered, with_redelivered, with_timestamp, write_with_exchange, Assembler,
    Command, CommandHeader, Control, ExchangeWritten, Incoming, MessageHeader, Str, Value,
};
use libfuzzer_sys::fuzz_target;

fn control_round_trip(c: &Control) {
    let mut once = BytesMut::new();
    c.encode(&mut once).expect("decoded control re-encodes");
    let again = Control::decode(once.clone().freeze()).expect("encoded control decodes");
    let mut twice = BytesMut::new();
    again.encode(&mut twice).expect("re-encodes twice");
    assert_eq!(once, twice);
}

fn command_round_trip(h: CommandHeader, c: &Command) {
    let mut once = BytesMut::new();
    c.encode(h.clone(), &mut once)
        .expect("decoded command re-encodes");
    let (h2, again) = Command::decode(once.clone().freeze()).expect("encoded command decodes");
    assert_eq!(h, h2);
    let mut twice = BytesMut::new();
    again.encode(h2, &mut twice).expect("re-encodes twice");
    assert_eq!(once, twice);
}

fn header_checks(segment: &Bytes) {
    let decoded = MessageHeader::decode(segment.clone());
    let flag = is_redelivered(segment);
    if let Ok(h) = &decoded {
        let expected = h.delivery.as_ref().is_some_and(|d| d.redelivered);
        assert_eq!(
            flag.ok(),
            Some(expected),
            "is_redelivered agrees with decode"
        );
        let mut once = BytesMut::new();
        h.encode(&mut once).expect("decoded header re-encodes");
        let again = MessageHeader::decode(once.clone().freeze()).expect("encoded header decodes");
        let mut twice = BytesMut::new();
        again.encode(&mut twice).expect("re-encodes twice");
        assert_eq!(once, twice);
    }
    if let (Ok(_), Ok(patched)) = (&decoded, with_redelivered(segment)) {
        let p = MessageHeader::decode(patched).expect("patched header decodes");
        assert!(p.delivery.is_some_and(|d| d.redelivered));
    }
    // The exchange a broker sets on receipt: on a header that decodes, the rewrite decodes
    // to the same header naming the exchange (malformed ones may be refused, not panic).
    // The receive timestamp likewise.
    let stamped = with_timestamp(segment, 0x0102_0304_0506_0708);
    if let Ok(h) = &decoded {
        let got = MessageHeader::decode(stamped.expect("a header that decodes takes a timestamp"))
            .expect("stamped header decodes");
        let mut h = h.clone();
        h.delivery.get_or_insert_with(Default::default).timestamp = Some(0x0102_0304_0506_0708);
        assert_eq!(got, h);
    }
    let mut out = Vec::new();
    let named = write_with_exchange(segment, b"amq.direct", false, &mut out);
    if let Ok(mut h) = decoded {
        let named = named.expect("a header that decodes takes an exchange");
        let got = match named {
            ExchangeWritten::Written(_) => {
                MessageHeader::decode(Bytes::from(out)).expect("rewritten header decodes")
            }
            ExchangeWritten::AsIs => h.clone(),
            ExchangeWritten::LeftOut => panic!("only the default exchange is left out"),
        };
        h.delivery.get_or_insert_with(Default::default).exchange = Some(Str::from("amq.direct"));
        assert_eq!(got, h);
    }
}

fn value_round_trip(data: &Bytes) {
    if let Ok(v) = Value::decode(&mut Reader::new(data.clone())) {
        let mut once = BytesMut::new();
        v.encode(&mut once).expect("decoded value re-encodes");
        let again = Value::decode(&mut Reader::new(once.clone().freeze())).expect("decodes");
        let mut twice = BytesMut::new();
        again.encode(&mut twice).expect("re-encodes twice");
        assert_eq!(once, twice);
    }
}

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);

    // The raw input as each kind of segment payload.
    if let Ok(c) = Control::decode(bytes.clone()) {
        control_round_trip(&c);
    }
    if let Ok((h, c)) = Command::decode(bytes.clone()) {
        command_round_trip(h, &c);
    }
    header_checks(&bytes);
    value_round_trip(&bytes);

    // The raw input as a stream of frames on any channels.
    let mut buf = BytesMut::from(data);
    let mut assemblers: Vec<(u16, Assembler)> = Vec::new();
    loop {
        let frame = match decode_frame(&mut buf, 65535) {
            Ok(Some(f)) => f,
            Ok(None) | Err(_) => break,
        };
        let channel = frame.header.channel;
        let index = match assemblers.iter().position(|(c, _)| *c == channel) {
            Some(i) => i,
            None => {
                assemblers.push((
                    channel,
                    Assembler::new(1 << 16).with_max_command_size(1 << 14),
                ));
                assemblers.len() - 1
            }
        };
        match assemblers[index].1.push(frame) {
            Ok(Some(Incoming::Control(c))) => control_round_trip(&c),
            Ok(Some(Incoming::Command {
                header,
                command,
                message_header,
                ..
            })) => {
                command_round_trip(header, &command);
                if let Some(m) = message_header {
                    header_checks(&m);
                }
            }
            Ok(None) | Err(ferry_amqp010::AssemblyError::Command(_)) => {}
            Err(_) => break,
        }
    }
});
