//! Every 0-9-1 method, with RabbitMQ's extensions, as one struct per method
//! and the `Method` enum over them.
//!
//! The table below is written by hand from `amqp-0-9-1.stripped.xml`;
//! `tests/spec_xml.rs` compares it with that file field by field, so the two
//! cannot drift apart unnoticed. Field names are the spec's with `-` turned
//! into `_`, except `type`, which is `kind`. Reserved fields are kept so that
//! whatever a peer sent is re-encoded unchanged.

use bytes::{Bytes, BytesMut};

use crate::codec::{DecodeError, Field, FieldKind, Reader, Writer};
use crate::strings::{LongStr, ShortStr};
use crate::table::FieldTable;

/// Description of a method for tests and diagnostics.
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo {
    pub class_id: u16,
    pub method_id: u16,
    /// `class.method` with the names RabbitMQ and the published 0-9-1 spec use.
    pub name: &'static str,
    /// Does a content header and body follow the method frame?
    pub has_content: bool,
    pub fields: &'static [FieldInfo],
}

#[derive(Debug, Clone, Copy)]
pub struct FieldInfo {
    /// The Rust field name.
    pub name: &'static str,
    pub kind: FieldKind,
}

/// Class ids this codec knows, to tell an unknown class (not-implemented)
/// from an unknown method of a known class (command-invalid).
pub const CLASSES: &[(u16, &str)] = &[
    (10, "connection"),
    (20, "channel"),
    (40, "exchange"),
    (50, "queue"),
    (60, "basic"),
    (85, "confirm"),
    (90, "tx"),
];

macro_rules! methods {
    ($(
        $class:literal $method:literal $Name:ident $spec:literal $content:literal {
            $($field:ident : $ty:ty),* $(,)?
        }
    )*) => {
        $(
            #[doc = concat!("`", $spec, "` (", $class, ", ", $method, ")")]
            #[derive(Debug, Clone, Default, PartialEq)]
            pub struct $Name {
                $(pub $field: $ty,)*
            }

            impl $Name {
                /// (class id, method id).
                pub const IDS: (u16, u16) = ($class, $method);
            }

            impl From<$Name> for Method {
                fn from(m: $Name) -> Method {
                    Method::$Name(m)
                }
            }
        )*

        /// A decoded method frame payload.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Method {
            $($Name($Name),)*
        }

        impl Method {
            pub fn class_id(&self) -> u16 {
                match self {
                    $(Method::$Name(_) => $class,)*
                }
            }

            pub fn method_id(&self) -> u16 {
                match self {
                    $(Method::$Name(_) => $method,)*
                }
            }

            /// `class.method`, for logs and close reasons.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Method::$Name(_) => $spec,)*
                }
            }

            /// Does a content header and body follow this method?
            pub fn has_content(&self) -> bool {
                match self {
                    $(Method::$Name(_) => $content,)*
                }
            }

            fn read_fields(
                class_id: u16,
                method_id: u16,
                r: &mut Reader,
            ) -> Result<Method, DecodeError> {
                match (class_id, method_id) {
                    $(
                        // Struct-literal fields are evaluated in source order,
                        // which is wire order.
                        ($class, $method) => Ok(Method::$Name($Name {
                            $($field: <$ty as Field>::read(r)?,)*
                        })),
                    )*
                    _ if CLASSES.iter().any(|(id, _)| *id == class_id) => {
                        Err(DecodeError::UnknownMethod { class_id, method_id })
                    }
                    _ => Err(DecodeError::UnknownClass(class_id)),
                }
            }

            fn write_fields(&self, w: &mut Writer<'_>) {
                match self {
                    $(
                        #[allow(unused_variables)]
                        Method::$Name(m) => {
                            $(Field::write(&m.$field, w);)*
                        }
                    )*
                }
            }
        }

        /// One value of every method, fields filled from `g`, for tests.
        #[cfg(test)]
        impl Method {
            pub(crate) fn samples(g: &mut crate::testutil::Gen) -> Vec<Method> {
                vec![$(Method::$Name($Name {
                    $($field: crate::testutil::Sample::sample(g),)*
                }),)*]
            }
        }

        /// Every method this codec knows, in table order.
        pub static METHODS: &[MethodInfo] = &[
            $(MethodInfo {
                class_id: $class,
                method_id: $method,
                name: $spec,
                has_content: $content,
                fields: &[$(FieldInfo {
                    name: stringify!($field),
                    kind: <$ty as Field>::KIND,
                }),*],
            },)*
        ];
    };
}

methods! {
    10 10 ConnectionStart "connection.start" false {
        version_major: u8, version_minor: u8, server_properties: FieldTable,
        mechanisms: LongStr, locales: LongStr,
    }
    10 11 ConnectionStartOk "connection.start-ok" false {
        client_properties: FieldTable, mechanism: ShortStr, response: LongStr, locale: ShortStr,
    }
    10 20 ConnectionSecure "connection.secure" false { challenge: LongStr }
    10 21 ConnectionSecureOk "connection.secure-ok" false { response: LongStr }
    10 30 ConnectionTune "connection.tune" false {
        channel_max: u16, frame_max: u32, heartbeat: u16,
    }
    10 31 ConnectionTuneOk "connection.tune-ok" false {
        channel_max: u16, frame_max: u32, heartbeat: u16,
    }
    10 40 ConnectionOpen "connection.open" false {
        virtual_host: ShortStr, capabilities: ShortStr, insist: bool,
    }
    10 41 ConnectionOpenOk "connection.open-ok" false { known_hosts: ShortStr }
    10 50 ConnectionClose "connection.close" false {
        reply_code: u16, reply_text: ShortStr, class_id: u16, method_id: u16,
    }
    10 51 ConnectionCloseOk "connection.close-ok" false {}
    // RabbitMQ extensions: resource alarms and credential refresh.
    10 60 ConnectionBlocked "connection.blocked" false { reason: ShortStr }
    10 61 ConnectionUnblocked "connection.unblocked" false {}
    10 70 ConnectionUpdateSecret "connection.update-secret" false {
        new_secret: LongStr, reason: ShortStr,
    }
    10 71 ConnectionUpdateSecretOk "connection.update-secret-ok" false {}

    20 10 ChannelOpen "channel.open" false { out_of_band: ShortStr }
    20 11 ChannelOpenOk "channel.open-ok" false { channel_id: LongStr }
    20 20 ChannelFlow "channel.flow" false { active: bool }
    20 21 ChannelFlowOk "channel.flow-ok" false { active: bool }
    20 40 ChannelClose "channel.close" false {
        reply_code: u16, reply_text: ShortStr, class_id: u16, method_id: u16,
    }
    20 41 ChannelCloseOk "channel.close-ok" false {}

    40 10 ExchangeDeclare "exchange.declare" false {
        ticket: u16, exchange: ShortStr, kind: ShortStr, passive: bool, durable: bool,
        auto_delete: bool, internal: bool, nowait: bool, arguments: FieldTable,
    }
    40 11 ExchangeDeclareOk "exchange.declare-ok" false {}
    40 20 ExchangeDelete "exchange.delete" false {
        ticket: u16, exchange: ShortStr, if_unused: bool, nowait: bool,
    }
    40 21 ExchangeDeleteOk "exchange.delete-ok" false {}
    // Qpid's addition, sent by the Qpid JMS 0-x client to test a binding.
    40 22 ExchangeBound "exchange.bound" false {
        exchange: ShortStr, routing_key: ShortStr, queue: ShortStr,
    }
    40 23 ExchangeBoundOk "exchange.bound-ok" false { reply_code: u16, reply_text: ShortStr }
    // RabbitMQ extension: exchange-to-exchange bindings.
    40 30 ExchangeBind "exchange.bind" false {
        ticket: u16, destination: ShortStr, source: ShortStr, routing_key: ShortStr,
        nowait: bool, arguments: FieldTable,
    }
    40 31 ExchangeBindOk "exchange.bind-ok" false {}
    40 40 ExchangeUnbind "exchange.unbind" false {
        ticket: u16, destination: ShortStr, source: ShortStr, routing_key: ShortStr,
        nowait: bool, arguments: FieldTable,
    }
    40 51 ExchangeUnbindOk "exchange.unbind-ok" false {}

    50 10 QueueDeclare "queue.declare" false {
        ticket: u16, queue: ShortStr, passive: bool, durable: bool, exclusive: bool,
        auto_delete: bool, nowait: bool, arguments: FieldTable,
    }
    50 11 QueueDeclareOk "queue.declare-ok" false {
        queue: ShortStr, message_count: u32, consumer_count: u32,
    }
    50 20 QueueBind "queue.bind" false {
        ticket: u16, queue: ShortStr, exchange: ShortStr, routing_key: ShortStr,
        nowait: bool, arguments: FieldTable,
    }
    50 21 QueueBindOk "queue.bind-ok" false {}
    50 30 QueuePurge "queue.purge" false { ticket: u16, queue: ShortStr, nowait: bool }
    50 31 QueuePurgeOk "queue.purge-ok" false { message_count: u32 }
    50 40 QueueDelete "queue.delete" false {
        ticket: u16, queue: ShortStr, if_unused: bool, if_empty: bool, nowait: bool,
    }
    50 41 QueueDeleteOk "queue.delete-ok" false { message_count: u32 }
    50 50 QueueUnbind "queue.unbind" false {
        ticket: u16, queue: ShortStr, exchange: ShortStr, routing_key: ShortStr,
        arguments: FieldTable,
    }
    50 51 QueueUnbindOk "queue.unbind-ok" false {}

    60 10 BasicQos "basic.qos" false { prefetch_size: u32, prefetch_count: u16, global: bool }
    60 11 BasicQosOk "basic.qos-ok" false {}
    60 20 BasicConsume "basic.consume" false {
        ticket: u16, queue: ShortStr, consumer_tag: ShortStr, no_local: bool, no_ack: bool,
        exclusive: bool, nowait: bool, arguments: FieldTable,
    }
    60 21 BasicConsumeOk "basic.consume-ok" false { consumer_tag: ShortStr }
    60 30 BasicCancel "basic.cancel" false { consumer_tag: ShortStr, nowait: bool }
    60 31 BasicCancelOk "basic.cancel-ok" false { consumer_tag: ShortStr }
    60 40 BasicPublish "basic.publish" true {
        ticket: u16, exchange: ShortStr, routing_key: ShortStr, mandatory: bool, immediate: bool,
    }
    60 50 BasicReturn "basic.return" true {
        reply_code: u16, reply_text: ShortStr, exchange: ShortStr, routing_key: ShortStr,
    }
    60 60 BasicDeliver "basic.deliver" true {
        consumer_tag: ShortStr, delivery_tag: u64, redelivered: bool, exchange: ShortStr,
        routing_key: ShortStr,
    }
    60 70 BasicGet "basic.get" false { ticket: u16, queue: ShortStr, no_ack: bool }
    60 71 BasicGetOk "basic.get-ok" true {
        delivery_tag: u64, redelivered: bool, exchange: ShortStr, routing_key: ShortStr,
        message_count: u32,
    }
    60 72 BasicGetEmpty "basic.get-empty" false { cluster_id: ShortStr }
    60 80 BasicAck "basic.ack" false { delivery_tag: u64, multiple: bool }
    60 90 BasicReject "basic.reject" false { delivery_tag: u64, requeue: bool }
    60 100 BasicRecoverAsync "basic.recover-async" false { requeue: bool }
    60 110 BasicRecover "basic.recover" false { requeue: bool }
    60 111 BasicRecoverOk "basic.recover-ok" false {}
    // RabbitMQ extension: negative acknowledgements (also used by confirms).
    60 120 BasicNack "basic.nack" false { delivery_tag: u64, multiple: bool, requeue: bool }

    // RabbitMQ extension: publisher confirms.
    85 10 ConfirmSelect "confirm.select" false { nowait: bool }
    85 11 ConfirmSelectOk "confirm.select-ok" false {}

    90 10 TxSelect "tx.select" false {}
    90 11 TxSelectOk "tx.select-ok" false {}
    90 20 TxCommit "tx.commit" false {}
    90 21 TxCommitOk "tx.commit-ok" false {}
    90 30 TxRollback "tx.rollback" false {}
    90 31 TxRollbackOk "tx.rollback-ok" false {}
}

impl Method {
    /// Decodes a method frame's payload: class id, method id, then the fields.
    /// Octets left after the last field are an error rather than ignored, as
    /// they mean the peer and this table disagree about the method.
    pub fn decode(payload: Bytes) -> Result<Method, DecodeError> {
        let mut r = Reader::new(payload);
        let class_id = r.u16()?;
        let method_id = r.u16()?;
        let method = Method::read_fields(class_id, method_id, &mut r)?;
        match r.remaining() {
            0 => Ok(method),
            extra => Err(DecodeError::TrailingBytes {
                class_id,
                method_id,
                extra,
            }),
        }
    }

    /// Appends the method frame payload (ids and fields) to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let mut w = Writer::new(out);
        w.u16(self.class_id());
        w.u16(self.method_id());
        self.write_fields(&mut w);
    }

    /// The table entry for this method.
    pub fn info(&self) -> Option<&'static MethodInfo> {
        let (c, m) = (self.class_id(), self.method_id());
        METHODS.iter().find(|i| i.class_id == c && i.method_id == m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::FieldValue;
    use crate::testutil::Gen;

    fn encode(m: &Method) -> Bytes {
        let mut out = BytesMut::new();
        m.encode(&mut out);
        out.freeze()
    }

    fn check_exact(m: Method, expected: &[u8]) {
        assert_eq!(&encode(&m)[..], expected, "encoding {}", m.name());
        assert_eq!(Method::decode(Bytes::copy_from_slice(expected)), Ok(m));
    }

    #[test]
    fn connection_start_by_hand() {
        let mut props = FieldTable::new();
        props.push(
            ShortStr::from_static("product"),
            FieldValue::LongStr(LongStr::from_static("ferry")),
        );
        let m = Method::ConnectionStart(ConnectionStart {
            version_major: 0,
            version_minor: 9,
            server_properties: props,
            mechanisms: LongStr::from_static("PLAIN"),
            locales: LongStr::from_static("en_US"),
        });
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 10, 0, 10, // connection.start
            0, 9,
            0, 0, 0, 18,
            7, b'p', b'r', b'o', b'd', b'u', b'c', b't',
            b'S', 0, 0, 0, 5, b'f', b'e', b'r', b'r', b'y',
            0, 0, 0, 5, b'P', b'L', b'A', b'I', b'N',
            0, 0, 0, 5, b'e', b'n', b'_', b'U', b'S',
        ];
        check_exact(m, expected);
    }

    #[test]
    fn basic_publish_by_hand() {
        let publish = |mandatory, immediate| {
            Method::BasicPublish(BasicPublish {
                ticket: 0,
                exchange: ShortStr::from_static("ex"),
                routing_key: ShortStr::from_static("key"),
                mandatory,
                immediate,
            })
        };
        let mut expected = vec![0, 60, 0, 40, 0, 0, 2, b'e', b'x', 3, b'k', b'e', b'y', 0b01];
        check_exact(publish(true, false), &expected);
        if let Some(bits) = expected.last_mut() {
            *bits = 0b10;
        }
        check_exact(publish(false, true), &expected);
    }

    #[test]
    fn basic_deliver_by_hand() {
        let m = Method::BasicDeliver(BasicDeliver {
            consumer_tag: ShortStr::from_static("ctag"),
            delivery_tag: 42,
            redelivered: true,
            exchange: ShortStr::default(),
            routing_key: ShortStr::from_static("q"),
        });
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 60, 0, 60,
            4, b'c', b't', b'a', b'g',
            0, 0, 0, 0, 0, 0, 0, 42,
            1,
            0,
            1, b'q',
        ];
        check_exact(m, expected);
    }

    #[test]
    fn queue_declare_packs_five_bits_in_spec_order() {
        let m = Method::QueueDeclare(QueueDeclare {
            ticket: 0,
            queue: ShortStr::from_static("q"),
            passive: false,
            durable: true,
            exclusive: false,
            auto_delete: true,
            nowait: false,
            arguments: FieldTable::new(),
        });
        check_exact(m, &[0, 50, 0, 10, 0, 0, 1, b'q', 0b01010, 0, 0, 0, 0]);
    }

    #[test]
    fn basic_nack_and_confirm_select_by_hand() {
        let m = Method::BasicNack(BasicNack {
            delivery_tag: 1,
            multiple: false,
            requeue: true,
        });
        check_exact(m, &[0, 60, 0, 120, 0, 0, 0, 0, 0, 0, 0, 1, 0b10]);
        let m = Method::ConfirmSelect(ConfirmSelect { nowait: true });
        check_exact(m, &[0, 85, 0, 10, 1]);
    }

    #[test]
    fn every_method_round_trips() {
        let count = METHODS.len();
        for seed in [0, 1, 0x5555, 0xaaaa, 0x1234_5678, u64::MAX] {
            let samples = Method::samples(&mut Gen::new(seed));
            assert_eq!(samples.len(), count);
            for m in samples {
                let bytes = encode(&m);
                assert_eq!(
                    u16::from_be_bytes([bytes[0], bytes[1]]),
                    m.class_id(),
                    "{}",
                    m.name()
                );
                assert_eq!(u16::from_be_bytes([bytes[2], bytes[3]]), m.method_id());
                assert_eq!(
                    Method::decode(bytes),
                    Ok(m.clone()),
                    "{} seed {seed}",
                    m.name()
                );
            }
        }
    }

    #[test]
    fn method_table_is_consistent() {
        for (i, a) in METHODS.iter().enumerate() {
            assert!(
                CLASSES.iter().any(|(id, _)| *id == a.class_id),
                "{}",
                a.name
            );
            for b in &METHODS[i + 1..] {
                assert!(
                    (a.class_id, a.method_id) != (b.class_id, b.method_id),
                    "{} and {} share ids",
                    a.name,
                    b.name
                );
            }
        }
        for m in Method::samples(&mut Gen::new(3)) {
            let info = m.info().expect("every method has a table entry");
            assert_eq!(info.name, m.name());
            assert_eq!(info.has_content, m.has_content());
        }
        let content: Vec<_> = METHODS
            .iter()
            .filter(|m| m.has_content)
            .map(|m| m.name)
            .collect();
        assert_eq!(
            content,
            [
                "basic.publish",
                "basic.return",
                "basic.deliver",
                "basic.get-ok"
            ]
        );
    }

    #[test]
    fn truncation_at_every_offset_is_an_error() {
        for m in Method::samples(&mut Gen::new(0x5a5a)) {
            let bytes = encode(&m);
            for cut in 0..bytes.len() {
                assert_eq!(
                    Method::decode(bytes.slice(..cut)),
                    Err(DecodeError::Truncated),
                    "{} cut at {cut}",
                    m.name()
                );
            }
        }
    }

    #[test]
    fn unknown_ids_and_trailing_octets() {
        let e = Method::decode(Bytes::from_static(&[0, 30, 0, 10])).unwrap_err();
        assert_eq!(e, DecodeError::UnknownClass(30));
        assert_eq!(e.reply_code(), 540);
        let e = Method::decode(Bytes::from_static(&[0, 60, 0, 99])).unwrap_err();
        assert_eq!(
            e,
            DecodeError::UnknownMethod {
                class_id: 60,
                method_id: 99
            }
        );
        assert_eq!(e.reply_code(), 503);
        let e = Method::decode(Bytes::from_static(&[0, 90, 0, 10, 0])).unwrap_err();
        assert_eq!(
            e,
            DecodeError::TrailingBytes {
                class_id: 90,
                method_id: 10,
                extra: 1
            }
        );
        assert_eq!(e.reply_code(), 501);
        let e = Method::decode(Bytes::from_static(&[0, 50, 0, 10, 0])).unwrap_err();
        assert_eq!(e, DecodeError::Truncated);
        assert_eq!(e.reply_code(), 501);
    }

    #[test]
    fn decoded_strings_share_the_payload() {
        let payload = encode(&Method::BasicConsumeOk(BasicConsumeOk {
            consumer_tag: ShortStr::from_static("tag"),
        }));
        let base = payload.as_ptr() as usize;
        let Ok(Method::BasicConsumeOk(m)) = Method::decode(payload) else {
            panic!("decode failed");
        };
        assert_eq!(m.consumer_tag.as_bytes().as_ptr() as usize, base + 5);
    }
}
