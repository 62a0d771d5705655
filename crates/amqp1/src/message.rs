//! Messages: the octets of a delivery, a sequence of sections.
//!
//! ```text
//! header? delivery-annotations? message-annotations?     (annotations, per hop)
//! properties? application-properties? body               (the bare message)
//! footer?
//! ```
//!
//! The bare message is immutable: the spec forbids intermediaries to change
//! it, since senders may sign it. A broker therefore reads a message with
//! [`RawMessage::parse`], which finds the sections and keeps them as slices
//! of the payload without decoding them; decodes the header, properties or
//! application properties only when routing needs them; and forwards with
//! [`RawMessage::encode_with`], which writes a new header and message
//! annotations in front of the bare message's original octets.
//!
//! [`Message`] is the fully decoded form, for clients and tests.

use bytes::{Bytes, BytesMut};

use crate::decode::{unexpected, Decoder};
use crate::encode;
use crate::error::DecodeError;
use crate::field::{Composite, Field};
use crate::format as f;
use crate::messaging::{Annotations, ApplicationProperties, Header, Properties};
use crate::value::Value;

/// Numeric descriptors of the sections.
pub mod section {
    pub const HEADER: u64 = 0x70;
    pub const DELIVERY_ANNOTATIONS: u64 = 0x71;
    pub const MESSAGE_ANNOTATIONS: u64 = 0x72;
    pub const PROPERTIES: u64 = 0x73;
    pub const APPLICATION_PROPERTIES: u64 = 0x74;
    pub const DATA: u64 = 0x75;
    pub const AMQP_SEQUENCE: u64 = 0x76;
    pub const AMQP_VALUE: u64 = 0x77;
    pub const FOOTER: u64 = 0x78;
}

/// Symbolic names of the sections that are not composites (header and
/// properties are in [`crate::messaging`]'s table).
pub(crate) const DESCRIPTORS: &[(u64, &str)] = &[
    (
        section::DELIVERY_ANNOTATIONS,
        "amqp:delivery-annotations:map",
    ),
    (section::MESSAGE_ANNOTATIONS, "amqp:message-annotations:map"),
    (
        section::APPLICATION_PROPERTIES,
        "amqp:application-properties:map",
    ),
    (section::DATA, "amqp:data:binary"),
    (section::AMQP_SEQUENCE, "amqp:amqp-sequence:list"),
    (section::AMQP_VALUE, "amqp:amqp-value:*"),
    (section::FOOTER, "amqp:footer:map"),
];

fn section_name(code: u64) -> &'static str {
    match code {
        section::HEADER => "header",
        section::DELIVERY_ANNOTATIONS => "delivery-annotations",
        section::MESSAGE_ANNOTATIONS => "message-annotations",
        section::PROPERTIES => "properties",
        section::APPLICATION_PROPERTIES => "application-properties",
        section::DATA => "data",
        section::AMQP_SEQUENCE => "amqp-sequence",
        section::AMQP_VALUE => "amqp-value",
        _ => "footer",
    }
}

/// The body of a [`RawMessage`], as slices of the payload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RawBody {
    /// No body section (the spec requires one; peers that omit it are
    /// tolerated).
    #[default]
    Empty,
    /// The data sections: [`Parts::iter`] gives each one's contents.
    Data(Parts),
    /// The amqp-sequence sections: [`Parts::iter`] gives each one's encoded
    /// list (decode with [`Value::decode_exact`]).
    Sequence(Parts),
    /// The encoded value of the amqp-value section.
    Value(Bytes),
}

/// A body's data or amqp-sequence sections, as received. A section's value
/// is found again each time it is asked for rather than kept as a `Bytes` of
/// its own: a 5-octet empty data section would otherwise cost a 32-octet
/// handle while the message is parsed, and a message of many tiny sections
/// several times its size.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parts {
    /// The sections, descriptors included, as received (checked by
    /// [`RawMessage::parse`]).
    sections: Bytes,
    count: usize,
    data: bool,
    /// The first section's value, kept: most bodies are one data section, and the broker
    /// looks at it for every message it stores.
    first: Bytes,
}

impl Parts {
    /// How many sections.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Each section's value, in order: a data section's contents or an
    /// amqp-sequence section's encoded list, as slices of the payload.
    pub fn iter(&self) -> PartsIter {
        PartsIter {
            d: Decoder::new(self.sections.clone()),
            data: self.data,
        }
    }

    /// The first section's value.
    pub fn first(&self) -> Option<Bytes> {
        (self.count > 0).then(|| self.first.clone())
    }

    pub fn to_vec(&self) -> Vec<Bytes> {
        self.iter().collect()
    }
}

/// The values of [`Parts`], in order.
#[derive(Debug)]
pub struct PartsIter {
    d: Decoder,
    data: bool,
}

impl Iterator for PartsIter {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.d.is_empty() {
            return None;
        }
        // Checked when parsed, so this does not fail; if it did, the parts end there.
        match section_value(&mut self.d, self.data) {
            Ok(v) => Some(v),
            Err(_) => {
                self.d = Decoder::new(Bytes::new());
                None
            }
        }
    }
}

/// Reads one body section from `d`: a data section's contents (`data`), or
/// the encoded value of any other.
fn section_value(d: &mut Decoder, data: bool) -> Result<Bytes, DecodeError> {
    let code = d.u8()?;
    if code != f::DESCRIBED {
        return Err(unexpected("message section", code));
    }
    d.descriptor()?;
    let value = d.raw_value()?;
    if !data {
        return Ok(value);
    }
    let mut v = Decoder::new(value);
    let code = v.u8()?;
    v.binary(code)
}

/// One section as received: all of it, and its value after the descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawSection {
    section: Bytes,
    value: Bytes,
}

/// A message split into its sections without decoding them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawMessage {
    header: Option<RawSection>,
    delivery_annotations: Option<RawSection>,
    message_annotations: Option<RawSection>,
    properties: Option<RawSection>,
    application_properties: Option<RawSection>,
    body: RawBody,
    footer: Option<RawSection>,
    bare: Bytes,
    /// Every body section, constructors included, as received.
    body_sections: Bytes,
}

impl RawMessage {
    /// Splits a delivery's payload (the transfers' octets, joined) into
    /// sections. Checks the section order and that each section's value has
    /// the right type and fits; does not look inside lists and maps.
    pub fn parse(payload: Bytes) -> Result<RawMessage, DecodeError> {
        let mut d = Decoder::new(payload.clone());
        let mut msg = RawMessage::default();
        // Position in the section order of the last section seen, and its name.
        let mut last: Option<(u8, u64)> = None;
        let mut bare: Option<(usize, usize)> = None;
        let mut body: Option<(usize, usize)> = None;
        // Data or amqp-sequence sections seen; their values are not kept (see Parts).
        let mut parts = 0;
        let mut first_part = Bytes::new();
        while !d.is_empty() {
            let start = payload.len() - d.remaining();
            let code = d.u8()?;
            if code != f::DESCRIBED {
                return Err(unexpected("message section", code));
            }
            let descriptor = d.descriptor()?;
            let Some(kind @ section::HEADER..=section::FOOTER) = descriptor.code() else {
                return Err(DecodeError::UnexpectedDescriptor {
                    expected: "message section",
                    found: descriptor,
                });
            };
            let value = d.raw_value()?;
            let end = payload.len() - d.remaining();
            let raw = RawSection {
                section: payload.slice(start..end),
                value: value.clone(),
            };

            let rank = match kind {
                section::DATA | section::AMQP_SEQUENCE | section::AMQP_VALUE => 5,
                section::FOOTER => 6,
                other => (other - section::HEADER) as u8,
            };
            if let Some((last_rank, last_kind)) = last {
                // Sections come in order, once each; only data and
                // amqp-sequence sections repeat, and not mixed.
                let repeatable = matches!(kind, section::DATA | section::AMQP_SEQUENCE);
                if rank < last_rank || (rank == last_rank && !(repeatable && kind == last_kind)) {
                    return Err(DecodeError::SectionOrder {
                        found: section_name(kind),
                        after: section_name(last_kind),
                    });
                }
            }
            last = Some((rank, kind));
            if (3..=5).contains(&rank) {
                bare = Some((bare.map_or(start, |(s, _)| s), end));
            }
            if rank == 5 {
                body = Some((body.map_or(start, |(s, _)| s), end));
            }

            let first = value.first().copied().unwrap_or(f::NULL);
            let expect = |ok: bool, what| {
                if ok {
                    Ok(())
                } else {
                    Err(unexpected(what, first))
                }
            };
            let is_list = matches!(first, f::LIST0 | f::LIST8 | f::LIST32);
            let is_map = matches!(first, f::MAP8 | f::MAP32);
            match kind {
                section::HEADER => {
                    expect(is_list, "list")?;
                    msg.header = Some(raw);
                }
                section::DELIVERY_ANNOTATIONS => {
                    expect(is_map, "map")?;
                    msg.delivery_annotations = Some(raw);
                }
                section::MESSAGE_ANNOTATIONS => {
                    expect(is_map, "map")?;
                    msg.message_annotations = Some(raw);
                }
                section::PROPERTIES => {
                    expect(is_list, "list")?;
                    msg.properties = Some(raw);
                }
                section::APPLICATION_PROPERTIES => {
                    expect(is_map, "map")?;
                    msg.application_properties = Some(raw);
                }
                section::DATA => {
                    let mut v = Decoder::new(value);
                    let code = v.u8()?;
                    let contents = v.binary(code)?;
                    if parts == 0 {
                        first_part = contents;
                    }
                    parts += 1;
                    msg.body = RawBody::Data(Parts::default());
                }
                section::AMQP_SEQUENCE => {
                    expect(is_list, "list")?;
                    if parts == 0 {
                        first_part = value;
                    }
                    parts += 1;
                    msg.body = RawBody::Sequence(Parts::default());
                }
                section::AMQP_VALUE => msg.body = RawBody::Value(value),
                _ => {
                    expect(is_map, "map")?;
                    msg.footer = Some(raw);
                }
            }
        }
        if let Some((start, end)) = bare {
            msg.bare = payload.slice(start..end);
        }
        if let Some((start, end)) = body {
            msg.body_sections = payload.slice(start..end);
        }
        let found = |data| Parts {
            sections: msg.body_sections.clone(),
            count: parts,
            data,
            first: first_part,
        };
        msg.body = match msg.body {
            RawBody::Data(_) => RawBody::Data(found(true)),
            RawBody::Sequence(_) => RawBody::Sequence(found(false)),
            other => other,
        };
        Ok(msg)
    }

    /// The bare message's octets (properties through body), exactly as
    /// received.
    pub fn bare(&self) -> &Bytes {
        &self.bare
    }

    pub fn body(&self) -> &RawBody {
        &self.body
    }

    pub fn has_header(&self) -> bool {
        self.header.is_some()
    }

    pub fn header(&self) -> Result<Option<Header>, DecodeError> {
        decode_section(&self.header, Header::read_list)
    }

    pub fn delivery_annotations(&self) -> Result<Option<Annotations>, DecodeError> {
        decode_section(&self.delivery_annotations, Field::read)
    }

    pub fn message_annotations(&self) -> Result<Option<Annotations>, DecodeError> {
        decode_section(&self.message_annotations, Field::read)
    }

    pub fn properties(&self) -> Result<Option<Properties>, DecodeError> {
        decode_section(&self.properties, Properties::read_list)
    }

    pub fn application_properties(&self) -> Result<Option<ApplicationProperties>, DecodeError> {
        decode_section(&self.application_properties, Field::read)
    }

    pub fn footer(&self) -> Result<Option<Annotations>, DecodeError> {
        decode_section(&self.footer, Field::read)
    }

    /// The footer section's octets as received.
    pub fn raw_footer(&self) -> Option<&Bytes> {
        self.footer.as_ref().map(|s| &s.section)
    }

    /// The message annotations section's octets as received.
    pub fn raw_message_annotations(&self) -> Option<&Bytes> {
        self.message_annotations.as_ref().map(|s| &s.section)
    }

    /// The header section's octets as received.
    pub fn raw_header(&self) -> Option<&Bytes> {
        self.header.as_ref().map(|s| &s.section)
    }

    /// The properties section's octets as received.
    pub fn raw_properties(&self) -> Option<&Bytes> {
        self.properties.as_ref().map(|s| &s.section)
    }

    /// The application properties section's octets as received.
    pub fn raw_application_properties(&self) -> Option<&Bytes> {
        self.application_properties.as_ref().map(|s| &s.section)
    }

    /// The body sections' octets as received, constructors included (empty without a
    /// body). A broker keeping the body apart from the rest of a message can rebuild the
    /// bare message byte for byte from these.
    pub fn raw_body(&self) -> &Bytes {
        &self.body_sections
    }

    /// Writes the message as it goes out of a node: `header` and
    /// `message_annotations` (typically the received ones, updated: a
    /// delivery count raised, an annotation added) in front of the bare
    /// message's original octets, then the footer as received. Delivery
    /// annotations are not forwarded: they are addressed to the node that
    /// received them.
    pub fn encode_with(
        &self,
        out: &mut BytesMut,
        header: Option<&Header>,
        message_annotations: Option<&Annotations>,
    ) {
        write_message(
            out,
            header,
            None,
            message_annotations,
            &self.bare,
            self.raw_footer().map(|b| &b[..]),
        );
    }

    /// Decodes every section.
    pub fn decode(&self) -> Result<Message, DecodeError> {
        Ok(Message {
            header: self.header()?,
            delivery_annotations: self.delivery_annotations()?,
            message_annotations: self.message_annotations()?,
            properties: self.properties()?,
            application_properties: self.application_properties()?,
            body: match &self.body {
                RawBody::Empty => Body::Empty,
                RawBody::Data(parts) => Body::Data(parts.to_vec()),
                RawBody::Sequence(parts) => Body::Sequence(
                    parts
                        .iter()
                        .map(|p| decode_exact(&p, |code, d| d.list(code)))
                        .collect::<Result<_, _>>()?,
                ),
                RawBody::Value(v) => Body::Value(Value::decode_exact(v.clone())?),
            },
            footer: self.footer()?,
        })
    }
}

fn decode_exact<T>(
    raw: &Bytes,
    read: impl FnOnce(u8, &mut Decoder) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut d = Decoder::new(raw.clone());
    let code = d.u8()?;
    let value = read(code, &mut d)?;
    d.finish()?;
    Ok(value)
}

fn decode_section<T>(
    raw: &Option<RawSection>,
    read: impl FnOnce(u8, &mut Decoder) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    raw.as_ref()
        .map(|s| decode_exact(&s.value, read))
        .transpose()
}

/// Writes a message from its annotations and the octets of a bare message
/// (and footer) kept from elsewhere.
pub fn write_message(
    out: &mut BytesMut,
    header: Option<&Header>,
    delivery_annotations: Option<&Annotations>,
    message_annotations: Option<&Annotations>,
    bare: &[u8],
    footer: Option<&[u8]>,
) {
    if let Some(h) = header {
        h.encode(out);
    }
    write_map_section(out, section::DELIVERY_ANNOTATIONS, delivery_annotations);
    write_map_section(out, section::MESSAGE_ANNOTATIONS, message_annotations);
    out.extend_from_slice(bare);
    if let Some(footer) = footer {
        out.extend_from_slice(footer);
    }
}

fn write_map_section<M: Field>(out: &mut BytesMut, code: u64, map: Option<&M>) {
    if let Some(map) = map {
        encode::described_code(out, code);
        map.write(out);
    }
}

/// A message body, decoded.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Body {
    #[default]
    Empty,
    /// One or more data sections (opaque octets; most messages).
    Data(Vec<Bytes>),
    /// One or more amqp-sequence sections.
    Sequence(Vec<Vec<Value>>),
    /// One amqp-value section.
    Value(Value),
}

/// A message with every section decoded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    pub header: Option<Header>,
    pub delivery_annotations: Option<Annotations>,
    pub message_annotations: Option<Annotations>,
    pub properties: Option<Properties>,
    pub application_properties: Option<ApplicationProperties>,
    pub body: Body,
    pub footer: Option<Annotations>,
}

impl Message {
    /// A message with one data section.
    pub fn data(body: impl Into<Bytes>) -> Message {
        Message {
            body: Body::Data(vec![body.into()]),
            ..Message::default()
        }
    }

    pub fn decode(payload: Bytes) -> Result<Message, DecodeError> {
        RawMessage::parse(payload)?.decode()
    }

    pub fn encode(&self, out: &mut BytesMut) {
        if let Some(h) = &self.header {
            h.encode(out);
        }
        write_map_section(
            out,
            section::DELIVERY_ANNOTATIONS,
            self.delivery_annotations.as_ref(),
        );
        write_map_section(
            out,
            section::MESSAGE_ANNOTATIONS,
            self.message_annotations.as_ref(),
        );
        if let Some(p) = &self.properties {
            p.encode(out);
        }
        write_map_section(
            out,
            section::APPLICATION_PROPERTIES,
            self.application_properties.as_ref(),
        );
        match &self.body {
            Body::Empty => {}
            Body::Data(parts) => {
                for part in parts {
                    encode::described_code(out, section::DATA);
                    encode::binary(out, part);
                }
            }
            Body::Sequence(parts) => {
                for part in parts {
                    encode::described_code(out, section::AMQP_SEQUENCE);
                    encode::value(out, &Value::List(part.clone()));
                }
            }
            Body::Value(v) => {
                encode::described_code(out, section::AMQP_VALUE);
                encode::value(out, v);
            }
        }
        write_map_section(out, section::FOOTER, self.footer.as_ref());
    }
}

#[cfg(test)]
mod samples {
    use super::*;
    use crate::testutil::{Gen, Sample};

    impl Sample for Body {
        fn sample(g: &mut Gen) -> Self {
            match g.below(4) {
                0 => Body::Empty,
                1 => Body::Data((0..1 + g.below(3)).map(|_| Sample::sample(g)).collect()),
                2 => Body::Sequence(
                    (0..1 + g.below(2))
                        .map(|_| (0..g.below(4)).map(|_| Sample::sample(g)).collect())
                        .collect(),
                ),
                _ => Body::Value(Sample::sample(g)),
            }
        }
    }

    impl Sample for Message {
        fn sample(g: &mut Gen) -> Self {
            Message {
                header: Sample::sample(g),
                delivery_annotations: Sample::sample(g),
                message_annotations: Sample::sample(g),
                properties: Sample::sample(g),
                application_properties: Sample::sample(g),
                body: Sample::sample(g),
                footer: Sample::sample(g),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messaging::AnnotationKey;
    use crate::primitive::{Str, Symbol};
    use crate::testutil::{Gen, Sample};

    fn encode(m: &Message) -> Bytes {
        let mut out = BytesMut::new();
        m.encode(&mut out);
        out.freeze()
    }

    #[test]
    fn messages_round_trip() {
        for seed in 0..200 {
            let m = Message::sample(&mut Gen::new(seed));
            let bytes = encode(&m);
            assert_eq!(Message::decode(bytes.clone()), Ok(m.clone()), "seed {seed}");
            let raw = RawMessage::parse(bytes).unwrap();
            // Re-emitting with the same annotations reproduces the message,
            // less its delivery annotations.
            let mut again = BytesMut::new();
            raw.encode_with(
                &mut again,
                m.header.as_ref(),
                m.message_annotations.as_ref(),
            );
            let expected = Message {
                delivery_annotations: None,
                ..m
            };
            assert_eq!(&again[..], &encode(&expected)[..], "seed {seed}");
        }
    }

    #[test]
    fn a_data_message_by_hand() {
        let m = Message {
            header: Some(Header {
                durable: true,
                ..Header::default()
            }),
            properties: Some(Properties {
                to: Some(Str::from("q")),
                ..Properties::default()
            }),
            ..Message::data(&b"hi"[..])
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x53, 0x70, 0xc0, 2, 1, 0x41,
            0x00, 0x53, 0x73, 0xc0, 6, 3, 0x40, 0x40, 0xa1, 1, b'q',
            0x00, 0x53, 0x75, 0xa0, 2, b'h', b'i',
        ];
        let bytes = encode(&m);
        assert_eq!(&bytes[..], expected);
        let raw = RawMessage::parse(bytes.clone()).unwrap();
        assert_eq!(&raw.bare()[..], &expected[7..]);
        let RawBody::Data(parts) = raw.body() else {
            panic!("{:?}", raw.body())
        };
        assert_eq!(parts.to_vec(), [Bytes::from_static(b"hi")]);
        // The body is a slice of the payload, not a copy.
        assert_eq!(parts.first().unwrap().as_ptr(), bytes[23..].as_ptr());
        // Each section's octets, as received.
        assert_eq!(&raw.raw_header().unwrap()[..], &expected[..7]);
        assert_eq!(&raw.raw_properties().unwrap()[..], &expected[7..18]);
        assert_eq!(raw.raw_application_properties(), None);
        assert_eq!(&raw.raw_body()[..], &expected[18..]);
    }

    #[test]
    fn bare_message_passes_through_byte_for_byte() {
        // Properties written with non-shortest encodings (uint 0x70 for a
        // group-sequence of 1, str32 for a subject), which a re-encoding
        // would change.
        #[rustfmt::skip]
        let bare: &[u8] = &[
            0x00, 0x53, 0x73, 0xd0, 0, 0, 0, 25, 0, 0, 0, 12,
            0x40, 0x40, 0x40,
            0xb1, 0, 0, 0, 1, b's',
            0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
            0x70, 0, 0, 0, 1,
            0x00, 0x53, 0x77, 0x41,
        ];
        let raw = RawMessage::parse(Bytes::from_static(bare)).unwrap();
        let props = raw.properties().unwrap().unwrap();
        assert_eq!(props.subject.as_ref().map(|s| s.as_str()), Some("s"));
        assert_eq!(props.group_sequence, Some(1));
        let header = Header {
            delivery_count: 1,
            ..Header::default()
        };
        let mut annotations = Annotations::new();
        annotations.insert(
            AnnotationKey::from("x-opt-ferry"),
            Value::Symbol(Symbol::from("q1")),
        );
        let mut out = BytesMut::new();
        raw.encode_with(&mut out, Some(&header), Some(&annotations));
        assert!(out.ends_with(bare));
        let again = RawMessage::parse(out.freeze()).unwrap();
        assert_eq!(again.header(), Ok(Some(header)));
        assert_eq!(again.message_annotations(), Ok(Some(annotations)));
        assert_eq!(again.bare(), raw.bare());
    }

    #[test]
    fn section_order_is_enforced() {
        let header = [0x00, 0x53, 0x70, 0x45];
        let props = [0x00, 0x53, 0x73, 0x45];
        let data = [0x00, 0x53, 0x75, 0xa0, 0];
        let value = [0x00, 0x53, 0x77, 0x40];
        let seq = [0x00, 0x53, 0x76, 0x45];
        let cat = |parts: &[&[u8]]| Bytes::from(parts.concat());
        assert_eq!(
            RawMessage::parse(cat(&[&props, &header])),
            Err(DecodeError::SectionOrder {
                found: "header",
                after: "properties"
            })
        );
        assert!(RawMessage::parse(cat(&[&header, &header])).is_err());
        assert!(RawMessage::parse(cat(&[&data, &seq])).is_err());
        assert!(RawMessage::parse(cat(&[&value, &value])).is_err());
        assert!(RawMessage::parse(cat(&[&data, &props])).is_err());
        let raw = RawMessage::parse(cat(&[&header, &props, &data, &data])).unwrap();
        assert!(
            matches!(raw.body(), RawBody::Data(p) if p.to_vec() == [Bytes::new(), Bytes::new()])
        );
        let raw = RawMessage::parse(cat(&[&seq, &seq])).unwrap();
        assert!(matches!(raw.body(), RawBody::Sequence(p) if p.len() == 2));
    }

    #[test]
    fn malformed_sections() {
        // Not described.
        assert!(RawMessage::parse(Bytes::from_static(&[0xa0, 0])).is_err());
        // A performative's descriptor.
        assert!(matches!(
            RawMessage::parse(Bytes::from_static(&[0x00, 0x53, 0x10, 0x45])),
            Err(DecodeError::UnexpectedDescriptor { .. })
        ));
        // A data section holding a string.
        assert_eq!(
            RawMessage::parse(Bytes::from_static(&[0x00, 0x53, 0x75, 0xa1, 0])),
            Err(DecodeError::UnexpectedType {
                expected: "binary",
                found: 0xa1
            })
        );
        // Header as a map.
        assert!(RawMessage::parse(Bytes::from_static(&[0x00, 0x53, 0x70, 0xc1, 1, 0])).is_err());
        // A body section cut short.
        assert_eq!(
            RawMessage::parse(Bytes::from_static(&[0x00, 0x53, 0x75, 0xa0, 5, 1])),
            Err(DecodeError::Truncated)
        );
        // Invalid UTF-8 inside properties shows when they are decoded.
        let raw = RawMessage::parse(Bytes::from_static(&[
            0x00, 0x53, 0x73, 0xc0, 6, 3, 0x40, 0x40, 0xa1, 1, 0xff,
        ]))
        .unwrap();
        assert_eq!(raw.properties(), Err(DecodeError::InvalidUtf8));
    }

    #[test]
    fn symbolic_section_descriptors() {
        let mut wire = vec![0x00, 0xa3, 16];
        wire.extend_from_slice(b"amqp:data:binary");
        wire.extend_from_slice(&[0xa0, 1, b'x']);
        let m = Message::decode(Bytes::from(wire)).unwrap();
        assert_eq!(m.body, Body::Data(vec![Bytes::from_static(b"x")]));
    }
}
