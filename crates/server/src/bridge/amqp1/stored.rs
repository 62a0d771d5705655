//! How a message published over AMQP 1.0 is kept in the core, and sent on again.
//!
//! The core message's body is the application payload when the 1.0 body is one data
//! section, or an amqp-value holding a string or binary (a zero-copy slice of the read
//! buffer), so 0-10 and 0-9-1 consumers get plain octets; any other body (several data
//! sections, amqp-sequence, other amqp-values, none) is kept as its encoded sections.
//! `ProtocolHeader::Amqp1` holds the rest, copied out of the read buffer (typically a few
//! dozen octets):
//!
//! ```text
//! kind (u8)  prefix length (u16, big-endian)  prefix  sections
//! ```
//!
//! `kind` says what the body is ([`BodyKind`]); `prefix` is the body section's octets before
//! the payload (its descriptor and constructor, exactly as received), so the body section is
//! rebuilt byte for byte as `prefix ++ body`; `sections` are the header, message-annotations,
//! properties, application-properties and footer sections as received (delivery annotations
//! are addressed to us and not kept). A 1.0 consumer gets a new header section and then every
//! other octet as the publisher sent it: the bare message is never re-encoded.

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp1::{DecodeError, Header, RawBody, RawMessage};

/// What the core message's body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// The content of the one data section.
    Data = 0,
    /// The UTF-8 text of an amqp-value string.
    String = 1,
    /// The octets of an amqp-value binary.
    Binary = 2,
    /// Every body section, encoded (possibly none).
    Verbatim = 3,
}

impl BodyKind {
    fn from_wire(b: u8) -> Option<BodyKind> {
        Some(match b {
            0 => BodyKind::Data,
            1 => BodyKind::String,
            2 => BodyKind::Binary,
            3 => BodyKind::Verbatim,
            _ => return None,
        })
    }
}

/// A received message split for the core: the stored header and the body.
#[derive(Debug)]
pub struct Split {
    pub stored: Bytes,
    pub body: Bytes,
}

/// The payload of `body_sections` when it ends with `content` (a slice of the same buffer):
/// the prefix before it.
fn prefix_of<'a>(body_sections: &'a Bytes, content: &Bytes) -> Option<&'a [u8]> {
    let end = body_sections.as_ptr() as usize + body_sections.len();
    let content_end = content.as_ptr() as usize + content.len();
    (end == content_end && content.len() <= body_sections.len())
        .then(|| &body_sections[..body_sections.len() - content.len()])
}

/// The content of an encoded string or binary value, and whether it is a string.
fn text_or_binary(value: &Bytes) -> Option<(Bytes, BodyKind)> {
    let (&code, rest) = value.split_first()?;
    let (kind, len_bytes) = match code {
        0xa1 => (BodyKind::String, 1),
        0xb1 => (BodyKind::String, 4),
        0xa0 => (BodyKind::Binary, 1),
        0xb0 => (BodyKind::Binary, 4),
        _ => return None,
    };
    let len = match len_bytes {
        1 => usize::from(*rest.first()?),
        _ => u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize,
    };
    let start = 1 + len_bytes;
    (value.len() == start + len).then(|| (value.slice(start..), kind))
}

/// Splits a parsed message into what the core keeps.
pub fn split(raw: &RawMessage) -> Split {
    let sections = raw.raw_body();
    let (kind, body) = match raw.body() {
        RawBody::Data(parts) => match parts.first().filter(|_| parts.len() == 1) {
            Some(content) => (BodyKind::Data, content),
            None => (BodyKind::Verbatim, sections.clone()),
        },
        RawBody::Value(v) => match text_or_binary(v) {
            Some((content, kind)) => (kind, content),
            None => (BodyKind::Verbatim, sections.clone()),
        },
        _ => (BodyKind::Verbatim, sections.clone()),
    };
    let (kind, body, prefix) = match kind {
        BodyKind::Verbatim => (kind, body, &[][..]),
        _ => match prefix_of(sections, &body) {
            Some(prefix) => (kind, body, prefix),
            None => (BodyKind::Verbatim, sections.clone(), &[][..]),
        },
    };
    let parts = [
        raw.raw_header(),
        raw.raw_message_annotations(),
        raw.raw_properties(),
        raw.raw_application_properties(),
        raw.raw_footer(),
    ];
    let len = 3 + prefix.len() + parts.iter().flatten().map(|p| p.len()).sum::<usize>();
    let mut stored = BytesMut::with_capacity(len);
    stored.put_u8(kind as u8);
    // A prefix is a section descriptor and a constructor: at most a few hundred octets.
    stored.put_u16(u16::try_from(prefix.len()).unwrap_or(u16::MAX));
    stored.extend_from_slice(prefix);
    for part in parts.into_iter().flatten() {
        stored.extend_from_slice(part);
    }
    Split {
        stored: stored.freeze(),
        body,
    }
}

/// A stored header read back: the body's kind and prefix, and the other sections.
#[derive(Debug)]
pub struct Stored {
    pub kind: BodyKind,
    pub prefix: Bytes,
    /// Header, message annotations, properties, application properties and footer (no body).
    pub sections: RawMessage,
}

impl Stored {
    pub fn parse(stored: &Bytes) -> Result<Stored, DecodeError> {
        let (&kind, rest) = stored.split_first().ok_or(DecodeError::Truncated)?;
        let kind = BodyKind::from_wire(kind).ok_or(DecodeError::InvalidValue {
            what: "stored body kind",
            value: u64::from(kind),
        })?;
        let len = rest.get(..2).ok_or(DecodeError::Truncated)?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if stored.len() < 3 + len {
            return Err(DecodeError::Truncated);
        }
        Ok(Stored {
            kind,
            prefix: stored.slice(3..3 + len),
            sections: RawMessage::parse(stored.slice(3 + len..))?,
        })
    }

    /// Writes the message as a 1.0 consumer gets it: `header` (if any), then everything
    /// else exactly as received, with `body` put back into its section.
    pub fn write(&self, out: &mut BytesMut, header: Option<&Header>, body: &[u8]) {
        self.write_before_body(out, header);
        out.extend_from_slice(body);
        out.extend_from_slice(&self.after_body());
    }

    /// What [`Stored::write`] writes before the body.
    pub fn write_before_body(&self, out: &mut BytesMut, header: Option<&Header>) {
        let s = &self.sections;
        if let Some(h) = header {
            ferry_amqp1::Composite::encode(h, out);
        }
        for part in [
            s.raw_message_annotations(),
            s.raw_properties(),
            s.raw_application_properties(),
        ]
        .into_iter()
        .flatten()
        {
            out.extend_from_slice(part);
        }
        out.extend_from_slice(&self.prefix);
    }

    /// What [`Stored::write`] writes after the body: the footer, if any.
    pub fn after_body(&self) -> Bytes {
        self.sections.raw_footer().cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp1::{Body, Message, Properties, Str, Value};

    impl Split {
        fn kind(&self) -> BodyKind {
            Stored::parse(&self.stored).unwrap().kind
        }
    }

    fn round_trip(m: &Message) -> (Split, Bytes) {
        let mut wire = BytesMut::new();
        m.encode(&mut wire);
        let wire = wire.freeze();
        let raw = RawMessage::parse(wire.clone()).unwrap();
        let split = split(&raw);
        let stored = Stored::parse(&split.stored).unwrap();
        let mut out = BytesMut::new();
        let header = raw.header().unwrap();
        stored.write(&mut out, header.as_ref(), &split.body);
        assert_eq!(&out[..], &wire[..], "rebuilt byte for byte");
        (split, wire)
    }

    fn with_props(body: Body) -> Message {
        Message {
            header: Some(Header {
                durable: true,
                ..Header::default()
            }),
            properties: Some(Properties {
                subject: Some(Str::from("s")),
                ..Properties::default()
            }),
            body,
            ..Message::default()
        }
    }

    #[test]
    fn a_data_body_is_the_payload_and_shares_the_read_buffer() {
        let (split, wire) = round_trip(&with_props(Body::Data(vec![Bytes::from_static(b"hi")])));
        assert_eq!(split.kind(), BodyKind::Data);
        assert_eq!(&split.body[..], b"hi");
        assert_eq!(split.body.as_ptr(), wire[wire.len() - 2..].as_ptr());
        let big = vec![7u8; 70_000];
        let (split, _) = round_trip(&Message::data(big.clone()));
        assert_eq!(&split.body[..], &big[..]);
    }

    #[test]
    fn strings_and_binaries_in_amqp_values_are_payloads_too() {
        let (split, _) = round_trip(&with_props(Body::Value(Value::from("text"))));
        assert_eq!(
            (split.kind(), &split.body[..]),
            (BodyKind::String, &b"text"[..])
        );
        let long = "x".repeat(300);
        let (split, _) = round_trip(&Message {
            body: Body::Value(Value::String(Str::from(long.as_str()))),
            ..Message::default()
        });
        assert_eq!((split.kind(), split.body.len()), (BodyKind::String, 300));
        let (split, _) = round_trip(&Message {
            body: Body::Value(Value::Binary(Bytes::from_static(b"\x00\x01"))),
            ..Message::default()
        });
        assert_eq!(split.kind(), BodyKind::Binary);
    }

    #[test]
    fn other_bodies_are_kept_encoded() {
        for body in [
            Body::Empty,
            Body::Value(Value::Int(7)),
            Body::Data(vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]),
            // Empty data sections count as sections: the body is not one section's payload.
            Body::Data(vec![Bytes::new(), Bytes::from_static(b"abc")]),
            Body::Data(vec![Bytes::from_static(b"abc"), Bytes::new()]),
            Body::Data(vec![Bytes::new(); 1000]),
            Body::Sequence(vec![vec![Value::from("x")]]),
        ] {
            let (split, wire) = round_trip(&with_props(body));
            assert_eq!(split.kind(), BodyKind::Verbatim);
            assert!(wire.ends_with(&split.body));
        }
    }

    #[test]
    fn damaged_stored_headers_are_errors() {
        assert!(Stored::parse(&Bytes::new()).is_err());
        assert!(Stored::parse(&Bytes::from_static(&[9, 0, 0])).is_err());
        assert!(Stored::parse(&Bytes::from_static(&[0, 0, 5, 1])).is_err());
        assert!(Stored::parse(&Bytes::from_static(&[0, 0, 0, 0x45])).is_err());
    }
}
