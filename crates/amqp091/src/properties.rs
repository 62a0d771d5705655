//! Content header frames: class, body size and the basic class's properties
//! with their property-flags encoding.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Field, FieldKind, Reader, Writer};
use crate::method::FieldInfo;
use crate::strings::ShortStr;
use crate::table::{skip_table, FieldTable};

/// The only 0-9-1 class whose methods carry content.
pub const BASIC_CLASS: u16 = 60;

/// Flag-word bit that says another flag word follows.
const CONTINUATION: u16 = 1;

macro_rules! properties {
    ($($field:ident : $ty:ty as $kind:ident),* $(,)?) => {
        /// The basic class's message properties; `None` is "flag clear".
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct BasicProperties {
            $(pub $field: Option<$ty>,)*
        }

        /// The properties in flag order (bit 15 downwards), for the spec
        /// cross-check.
        pub static PROPERTIES: &[FieldInfo] = &[
            $(FieldInfo { name: stringify!($field), kind: FieldKind::$kind },)*
        ];

        impl BasicProperties {
            fn read(flags: u16, r: &mut Reader) -> Result<Self, DecodeError> {
                let mut bit = 16u32;
                Ok(BasicProperties {
                    $($field: {
                        bit -= 1;
                        if flags & (1 << bit) != 0 {
                            Some(<$ty as Field>::read(r)?)
                        } else {
                            None
                        }
                    },)*
                })
            }

            fn flags(&self) -> u16 {
                let mut flags = 0u16;
                let mut bit = 16u32;
                $(
                    bit -= 1;
                    if self.$field.is_some() {
                        flags |= 1 << bit;
                    }
                )*
                flags
            }

            fn write(&self, w: &mut Writer<'_>) {
                $(
                    if let Some(v) = &self.$field {
                        Field::write(v, w);
                    }
                )*
            }

            #[cfg(test)]
            pub(crate) fn sample(g: &mut crate::testutil::Gen) -> Self {
                BasicProperties {
                    $($field: crate::testutil::Sample::sample(g),)*
                }
            }
        }
    };
}

properties! {
    content_type: ShortStr as ShortStr,
    content_encoding: ShortStr as ShortStr,
    headers: FieldTable as Table,
    delivery_mode: u8 as Octet,
    priority: u8 as Octet,
    correlation_id: ShortStr as ShortStr,
    reply_to: ShortStr as ShortStr,
    expiration: ShortStr as ShortStr,
    message_id: ShortStr as ShortStr,
    // Seconds since the epoch; the same octets as a longlong.
    timestamp: u64 as Timestamp,
    kind: ShortStr as ShortStr,
    user_id: ShortStr as ShortStr,
    app_id: ShortStr as ShortStr,
    cluster_id: ShortStr as ShortStr,
}

/// Flag bits that name a basic property (bits 15..2).
const KNOWN_FLAGS: u16 = !0u16 << (16 - 14);

/// The payload of a content header frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContentHeader {
    pub class_id: u16,
    pub body_size: u64,
    pub properties: BasicProperties,
}

impl ContentHeader {
    /// A basic-class header, the only kind 0-9-1 has.
    pub fn basic(body_size: u64, properties: BasicProperties) -> Self {
        ContentHeader {
            class_id: BASIC_CLASS,
            body_size,
            properties,
        }
    }

    pub fn decode(payload: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let (class_id, body_size) = read_prefix(&mut r)?;
        let flags = read_flags(&mut r)?;
        let properties = BasicProperties::read(flags, &mut r)?;
        match r.remaining() {
            0 => Ok(ContentHeader {
                class_id,
                body_size,
                properties,
            }),
            extra => Err(DecodeError::TrailingBytes {
                class_id,
                method_id: 0,
                extra,
            }),
        }
    }

    /// Appends the header frame payload. The basic class's fourteen flags fit
    /// one flag word, so the continuation bit is never set.
    pub fn encode(&self, out: &mut BytesMut) {
        encode_header_parts(out, self.class_id, self.body_size, &self.properties);
    }
}

/// Octets before the property flags in a content-header payload: class, weight, body size.
pub const PROPERTIES_OFFSET: usize = 12;

// Positions in `PROPERTIES` of the properties a broker acts on (checked by a test).
const HEADERS: usize = 2;
const DELIVERY_MODE: usize = 3;
const PRIORITY: usize = 4;
const EXPIRATION: usize = 7;

/// A content header as a broker keeps it: the properties stay encoded, exactly as
/// received (flags word onwards), so passing a message on costs no decoding or encoding;
/// the few properties a broker acts on are read out while the whole is validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawContentHeader {
    pub body_size: u64,
    pub properties: RawProperties,
}

/// Encoded basic properties, flags word onwards: valid by construction.
#[derive(Debug, Clone, PartialEq)]
pub struct RawProperties {
    raw: Bytes,
    summary: PropertySummary,
}

/// The properties a broker routes and keeps messages by.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PropertySummary {
    pub delivery_mode: Option<u8>,
    pub priority: Option<u8>,
    pub expiration: Option<ShortStr>,
    /// The headers table still encoded (length prefix included): decoded only by whoever
    /// needs its entries (a headers exchange).
    pub headers: Option<Bytes>,
}

impl Default for RawProperties {
    fn default() -> Self {
        RawProperties {
            raw: Bytes::from_static(&[0, 0]),
            summary: PropertySummary::default(),
        }
    }
}

impl RawContentHeader {
    pub fn decode(payload: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let (class_id, body_size) = read_prefix(&mut r)?;
        let properties = RawProperties::parse(r.into_rest()).map_err(|e| match e {
            DecodeError::TrailingBytes { extra, .. } => DecodeError::TrailingBytes {
                class_id,
                method_id: 0,
                extra,
            },
            other => other,
        })?;
        Ok(RawContentHeader {
            body_size,
            properties,
        })
    }
}

impl RawProperties {
    /// Validates encoded properties (flags word onwards) and reads the summary; the
    /// headers table is checked but not built.
    pub fn parse(raw: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(raw.clone());
        let flags = read_flags(&mut r)?;
        let mut summary = PropertySummary::default();
        // Only the present properties' bits, highest (first) first: a message carries a few
        // of the fourteen, and this runs for every message published.
        let mut present = flags & KNOWN_FLAGS;
        while present != 0 {
            let index = present.leading_zeros() as usize;
            present &= !(0x8000 >> index);
            let Some(info) = PROPERTIES.get(index) else {
                return Err(DecodeError::UnknownProperties(flags));
            };
            match (index, info.kind) {
                (HEADERS, _) => {
                    let start = raw.len() - r.remaining();
                    skip_table(&mut r, 0)?;
                    let end = raw.len() - r.remaining();
                    summary.headers = Some(raw.slice(start..end));
                }
                (DELIVERY_MODE, _) => summary.delivery_mode = Some(r.u8()?),
                (PRIORITY, _) => summary.priority = Some(r.u8()?),
                (EXPIRATION, _) => summary.expiration = Some(r.short_str()?),
                (_, FieldKind::ShortStr) => drop(r.short_str()?),
                (_, FieldKind::Timestamp) => drop(r.u64()?),
                (_, FieldKind::Octet) => drop(r.u8()?),
                // Every basic property is of a kind above; a table change that adds
                // another must teach this walk to skip it.
                _ => return Err(DecodeError::UnknownProperties(flags)),
            }
        }
        match r.remaining() {
            0 => Ok(RawProperties { raw, summary }),
            extra => Err(DecodeError::TrailingBytes {
                class_id: BASIC_CLASS,
                method_id: 0,
                extra,
            }),
        }
    }

    /// Encodes decoded properties.
    pub fn encode(properties: &BasicProperties) -> Self {
        let mut out = BytesMut::new();
        let mut w = Writer::new(&mut out);
        w.u16(properties.flags());
        properties.write(&mut w);
        let summary = PropertySummary {
            delivery_mode: properties.delivery_mode,
            priority: properties.priority,
            expiration: properties.expiration.clone(),
            headers: properties.headers.as_ref().map(|h| {
                let mut t = BytesMut::new();
                h.encode(&mut t);
                t.freeze()
            }),
        };
        RawProperties {
            raw: out.freeze(),
            summary,
        }
    }

    /// The octets, flags word onwards, as received.
    pub fn as_bytes(&self) -> &Bytes {
        &self.raw
    }

    /// The octets, flags word onwards, as received.
    #[inline]
    pub fn into_bytes(self) -> Bytes {
        self.raw
    }

    pub fn summary(&self) -> &PropertySummary {
        &self.summary
    }

    /// Everything, decoded.
    pub fn decode(&self) -> BasicProperties {
        let mut r = Reader::new(self.raw.clone());
        // Validated when parsed: decoding again cannot fail.
        read_flags(&mut r)
            .and_then(|flags| BasicProperties::read(flags, &mut r))
            .unwrap_or_default()
    }

    /// The headers table, decoded, if there is one.
    pub fn headers(&self) -> Option<FieldTable> {
        let mut raw = self.summary.headers.clone()?;
        FieldTable::decode(&mut raw).ok()
    }
}

/// Class, weight and body size: what precedes the properties.
fn read_prefix(r: &mut Reader) -> Result<(u16, u64), DecodeError> {
    let class_id = r.u16()?;
    if class_id != BASIC_CLASS {
        return Err(DecodeError::NoContentClass(class_id));
    }
    let weight = r.u16()?;
    if weight != 0 {
        return Err(DecodeError::NonZeroWeight(weight));
    }
    Ok((class_id, r.u64()?))
}

/// The property flags. Continuation words would flag properties past the fourteenth,
/// which basic does not have; all-zero ones are tolerated. Each costs two octets of
/// input, so the loop is bounded by the payload.
fn read_flags(r: &mut Reader) -> Result<u16, DecodeError> {
    let flags = r.u16()?;
    if flags & !KNOWN_FLAGS & !CONTINUATION != 0 {
        return Err(DecodeError::UnknownProperties(flags));
    }
    let mut more = flags & CONTINUATION != 0;
    while more {
        let next = r.u16()?;
        if next & !CONTINUATION != 0 {
            return Err(DecodeError::UnknownProperties(next));
        }
        more = next & CONTINUATION != 0;
    }
    Ok(flags)
}

/// Appends a content-header payload whose properties are already encoded.
pub(crate) fn encode_raw_header(out: &mut BytesMut, body_size: u64, properties: &[u8]) {
    let mut w = Writer::new(out);
    w.u16(BASIC_CLASS);
    w.u16(0);
    w.u64(body_size);
    w.bytes(properties);
}

/// `ContentHeader::encode` from borrowed parts, so a sender need not build
/// (and clone properties into) a `ContentHeader`.
pub(crate) fn encode_header_parts(
    out: &mut BytesMut,
    class_id: u16,
    body_size: u64,
    properties: &BasicProperties,
) {
    let mut w = Writer::new(out);
    w.u16(class_id);
    w.u16(0);
    w.u64(body_size);
    w.u16(properties.flags());
    properties.write(&mut w);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::FieldValue;
    use crate::testutil::Gen;

    #[test]
    fn the_summary_positions_name_the_right_properties() {
        assert_eq!(PROPERTIES[HEADERS].name, "headers");
        assert_eq!(PROPERTIES[DELIVERY_MODE].name, "delivery_mode");
        assert_eq!(PROPERTIES[PRIORITY].name, "priority");
        assert_eq!(PROPERTIES[EXPIRATION].name, "expiration");
    }

    #[test]
    fn raw_headers_keep_their_octets_and_agree_with_the_decoded_form() {
        let mut g = Gen::new(7);
        for _ in 0..500 {
            let h = ContentHeader::basic(g.below(1 << 20), BasicProperties::sample(&mut g));
            let payload = encode(&h).freeze();
            let raw = RawContentHeader::decode(payload.clone()).expect("valid header");
            assert_eq!(raw.body_size, h.body_size);
            assert_eq!(
                &raw.properties.as_bytes()[..],
                &payload[PROPERTIES_OFFSET..]
            );
            assert_eq!(raw.properties.decode(), h.properties);
            let p = &h.properties;
            let s = raw.properties.summary();
            assert_eq!(s.delivery_mode, p.delivery_mode);
            assert_eq!(s.priority, p.priority);
            assert_eq!(s.expiration, p.expiration);
            assert_eq!(raw.properties.headers(), p.headers);
            assert_eq!(RawProperties::encode(p), raw.properties);
            let mut out = BytesMut::new();
            encode_raw_header(&mut out, h.body_size, raw.properties.as_bytes());
            assert_eq!(out.freeze(), payload);
        }
    }

    #[test]
    fn raw_headers_refuse_what_the_decoder_refuses() {
        let mut g = Gen::new(11);
        for _ in 0..2000 {
            let h = ContentHeader::basic(1, BasicProperties::sample(&mut g));
            let mut payload = encode(&h);
            // Damage one octet past the prefix, or cut the payload short.
            if payload.len() > PROPERTIES_OFFSET + 2 {
                let at = PROPERTIES_OFFSET
                    + g.below((payload.len() - PROPERTIES_OFFSET) as u64) as usize;
                if g.below(2) == 0 {
                    payload[at] ^= 1 << g.below(8);
                } else {
                    payload.truncate(at);
                }
            }
            let payload = payload.freeze();
            assert_eq!(
                RawContentHeader::decode(payload.clone()).is_ok(),
                ContentHeader::decode(payload.clone()).is_ok(),
                "{payload:?}"
            );
        }
    }

    fn encode(h: &ContentHeader) -> BytesMut {
        let mut out = BytesMut::new();
        h.encode(&mut out);
        out
    }

    #[test]
    fn hand_encoded_header_with_headers_table() {
        let mut headers = FieldTable::new();
        headers.push(ShortStr::from_static("x"), FieldValue::I32(7));
        let h = ContentHeader::basic(
            5,
            BasicProperties {
                content_type: Some(ShortStr::from_static("text/plain")),
                headers: Some(headers),
                delivery_mode: Some(2),
                timestamp: Some(0x0102_0304),
                cluster_id: Some(ShortStr::from_static("c")),
                ..Default::default()
            },
        );
        let expected: &[u8] = &[
            0,
            60, // class
            0,
            0, // weight
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            5, // body size
            // flags: content-type(15) headers(13) delivery-mode(12)
            // timestamp(6) cluster-id(2)
            0b1011_0000,
            0b0100_0100,
            10,
            b't',
            b'e',
            b'x',
            b't',
            b'/',
            b'p',
            b'l',
            b'a',
            b'i',
            b'n',
            0,
            0,
            0,
            7,
            1,
            b'x',
            b'I',
            0,
            0,
            0,
            7, // headers
            2, // delivery mode
            0,
            0,
            0,
            0,
            1,
            2,
            3,
            4, // timestamp
            1,
            b'c',
        ];
        assert_eq!(&encode(&h)[..], expected);
        assert_eq!(ContentHeader::decode(Bytes::from_static(expected)), Ok(h));
    }

    #[test]
    fn hand_encoded_header_with_the_other_nine_properties() {
        let one = |c: &'static str| Some(ShortStr::from_static(c));
        let h = ContentHeader::basic(
            0x0100_0000_0000,
            BasicProperties {
                content_encoding: one("e"),
                priority: Some(9),
                correlation_id: one("c"),
                reply_to: one("r"),
                expiration: one("x"),
                message_id: one("m"),
                kind: one("t"),
                user_id: one("u"),
                app_id: one("a"),
                ..Default::default()
            },
        );
        let expected: &[u8] = &[
            0,
            60,
            0,
            0, //
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0, // body size
            // content-encoding(14) priority(11) correlation-id(10) reply-to(9)
            // expiration(8) message-id(7) type(5) user-id(4) app-id(3)
            0b0100_1111,
            0b1011_1000,
            1,
            b'e',
            9,
            1,
            b'c',
            1,
            b'r',
            1,
            b'x',
            1,
            b'm',
            1,
            b't',
            1,
            b'u',
            1,
            b'a',
        ];
        assert_eq!(&encode(&h)[..], expected);
        assert_eq!(ContentHeader::decode(Bytes::from_static(expected)), Ok(h));
    }

    #[test]
    fn all_fourteen_flags_and_no_others() {
        let all = BasicProperties::sample(&mut Gen::new(u64::MAX));
        assert_eq!(all.flags(), KNOWN_FLAGS);
        assert_eq!(KNOWN_FLAGS, 0xfffc);
        assert_eq!(BasicProperties::default().flags(), 0);
    }

    #[test]
    fn round_trips_and_truncation() {
        for seed in [0, 1, 0x5555, 0xaaaa, u64::MAX] {
            let h = ContentHeader::basic(seed, BasicProperties::sample(&mut Gen::new(seed)));
            let bytes = encode(&h).freeze();
            assert_eq!(ContentHeader::decode(bytes.clone()), Ok(h), "seed {seed}");
            for cut in 0..bytes.len() {
                assert!(ContentHeader::decode(bytes.slice(..cut)).is_err());
            }
        }
    }

    #[test]
    fn continuation_words_must_not_name_missing_properties() {
        let mut raw = vec![0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0, 0];
        raw.extend_from_slice(&[2, b'a', b'b']);
        let h = ContentHeader::decode(Bytes::from(raw.clone())).unwrap();
        assert_eq!(h.properties.content_type, Some(ShortStr::from_static("ab")));

        raw[15] = 0x80;
        assert_eq!(
            ContentHeader::decode(Bytes::from(raw)),
            Err(DecodeError::UnknownProperties(0x0080))
        );
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let ok = [0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(ContentHeader::decode(Bytes::copy_from_slice(&ok)).is_ok());
        let mut bad = ok;
        bad[1] = 50;
        assert_eq!(
            ContentHeader::decode(Bytes::copy_from_slice(&bad)),
            Err(DecodeError::NoContentClass(50))
        );
        let mut bad = ok;
        bad[3] = 1;
        assert_eq!(
            ContentHeader::decode(Bytes::copy_from_slice(&bad)),
            Err(DecodeError::NonZeroWeight(1))
        );
        let mut bad = ok;
        bad[13] = 0b10;
        assert_eq!(
            ContentHeader::decode(Bytes::copy_from_slice(&bad)),
            Err(DecodeError::UnknownProperties(0b10))
        );
        let mut extra = ok.to_vec();
        extra.push(0);
        assert!(matches!(
            ContentHeader::decode(Bytes::from(extra)),
            Err(DecodeError::TrailingBytes { extra: 1, .. })
        ));
    }
}
