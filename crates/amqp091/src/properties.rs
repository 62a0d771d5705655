//! Content header frames: class, body size and the basic class's properties
//! with their property-flags encoding.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Field, FieldKind, Reader, Writer};
use crate::method::FieldInfo;
use crate::strings::ShortStr;
use crate::table::FieldTable;

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
        let class_id = r.u16()?;
        if class_id != BASIC_CLASS {
            return Err(DecodeError::NoContentClass(class_id));
        }
        let weight = r.u16()?;
        if weight != 0 {
            return Err(DecodeError::NonZeroWeight(weight));
        }
        let body_size = r.u64()?;
        let flags = r.u16()?;
        if flags & !KNOWN_FLAGS & !CONTINUATION != 0 {
            return Err(DecodeError::UnknownProperties(flags));
        }
        // Continuation words would flag properties past the fourteenth, which
        // basic does not have; all-zero ones are tolerated. Each costs two
        // octets of input, so the loop is bounded by the payload.
        let mut more = flags & CONTINUATION != 0;
        while more {
            let next = r.u16()?;
            if next & !CONTINUATION != 0 {
                return Err(DecodeError::UnknownProperties(next));
            }
            more = next & CONTINUATION != 0;
        }
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
