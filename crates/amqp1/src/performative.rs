//! The transport performatives (part 2 of the spec): the frame bodies of
//! AMQP frames, and the [`Performative`] enum over them.

use bytes::Bytes;

use crate::definitions::{Error, Fields, ReceiverSettleMode, Role, SenderSettleMode};
use crate::messaging::{DeliveryState, Source, Target};
use crate::primitive::{Str, Symbol};
use crate::transaction::Coordinator;
use crate::value::{Map, Value};

/// The message format of plain AMQP 1.0 messages (`transfer.message-format`).
pub const MESSAGE_FORMAT: u32 = 0;

composites! {
    /// Opens a connection (the first frame each way after the header).
    Open 0x10 "amqp:open:list" {
        container_id: req Str,
        hostname: opt Str,
        max_frame_size: def u32 = u32::MAX,
        channel_max: def u16 = u16::MAX,
        /// Milliseconds; the peer must send something (an empty frame if
        /// nothing else) at least this often.
        idle_time_out: opt u32,
        outgoing_locales: multi Symbol,
        incoming_locales: multi Symbol,
        offered_capabilities: multi Symbol,
        desired_capabilities: multi Symbol,
        properties: opt Fields,
    }

    /// Begins a session on a channel.
    Begin 0x11 "amqp:begin:list" {
        /// The peer's channel, when answering its begin.
        remote_channel: opt u16,
        next_outgoing_id: req u32,
        incoming_window: req u32,
        outgoing_window: req u32,
        handle_max: def u32 = u32::MAX,
        offered_capabilities: multi Symbol,
        desired_capabilities: multi Symbol,
        properties: opt Fields,
    }

    /// Attaches a link to a session.
    Attach 0x12 "amqp:attach:list" {
        name: req Str,
        handle: req u32,
        role: req Role,
        snd_settle_mode: def SenderSettleMode = SenderSettleMode::Mixed,
        rcv_settle_mode: def ReceiverSettleMode = ReceiverSettleMode::First,
        /// `None` (null) in a reply means the peer refuses the link.
        source: opt Source,
        target: opt LinkTarget,
        /// Delivery tag to delivery state (or null), for resuming a link.
        unsettled: opt Map<Bytes, Value>,
        incomplete_unsettled: def bool = false,
        initial_delivery_count: opt u32,
        max_message_size: opt u64,
        offered_capabilities: multi Symbol,
        desired_capabilities: multi Symbol,
        properties: opt Fields,
    }

    /// Updates session and link flow state (credit).
    Flow 0x13 "amqp:flow:list" {
        next_incoming_id: opt u32,
        incoming_window: req u32,
        next_outgoing_id: req u32,
        outgoing_window: req u32,
        handle: opt u32,
        delivery_count: opt u32,
        link_credit: opt u32,
        available: opt u32,
        drain: def bool = false,
        echo: def bool = false,
        properties: opt Fields,
    }

    /// Carries (part of) a message; the message's octets follow in the frame.
    Transfer 0x14 "amqp:transfer:list" {
        handle: req u32,
        /// Mandatory on a delivery's first transfer, optional on the rest.
        delivery_id: opt u32,
        delivery_tag: opt Bytes,
        message_format: opt u32,
        settled: opt bool,
        /// More transfers of this delivery follow.
        more: def bool = false,
        rcv_settle_mode: opt ReceiverSettleMode,
        state: opt DeliveryState,
        resume: def bool = false,
        aborted: def bool = false,
        batchable: def bool = false,
    }

    /// Settles or changes the state of a range of deliveries.
    Disposition 0x15 "amqp:disposition:list" {
        role: req Role,
        first: req u32,
        last: opt u32,
        settled: def bool = false,
        state: opt DeliveryState,
        batchable: def bool = false,
    }

    /// Detaches a link (and closes it if `closed`).
    Detach 0x16 "amqp:detach:list" {
        handle: req u32,
        closed: def bool = false,
        error: opt Error,
    }

    /// Ends a session.
    End 0x17 "amqp:end:list" {
        error: opt Error,
    }

    /// Closes the connection.
    Close 0x18 "amqp:close:list" {
        error: opt Error,
    }
}

described_union! {
    /// What an attach's target may be: a node, or a transaction coordinator.
    LinkTarget "target" {
        Target(Target),
        Coordinator(Coordinator),
    }
}

frame_body_enum! {
    /// The body of an AMQP frame (frame type 0x00).
    Performative "performative" {
        Open, Begin, Attach, Flow, Transfer, Disposition, Detach, End, Close
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DecodeError;
    use crate::field::Composite;
    use crate::testutil::Gen;
    use bytes::BytesMut;

    fn encode(p: &Performative) -> Bytes {
        let mut out = BytesMut::new();
        p.encode(&mut out);
        out.freeze()
    }

    #[test]
    fn every_performative_round_trips() {
        for seed in (0..100).chain([0x5555, 0xaaaa, 0x1234_5678, u64::MAX]) {
            for p in Performative::samples(&mut Gen::new(seed)) {
                let mut buf = encode(&p);
                assert_eq!(&buf[..3], &[0x00, 0x53, p.code() as u8], "{}", p.name());
                assert_eq!(Performative::decode(&mut buf), Ok(p.clone()), "seed {seed}");
                assert!(buf.is_empty());
            }
        }
    }

    #[test]
    fn truncation_at_every_offset_is_an_error() {
        for seed in [3, 0x77] {
            for p in Performative::samples(&mut Gen::new(seed)) {
                let bytes = encode(&p);
                for cut in 0..bytes.len() {
                    let mut buf = bytes.slice(..cut);
                    assert!(
                        Performative::decode(&mut buf).is_err(),
                        "{} cut at {cut} of {}",
                        p.name(),
                        bytes.len()
                    );
                }
            }
        }
    }

    #[test]
    fn open_by_hand() {
        let open = Open {
            container_id: Str::from("c"),
            hostname: Some(Str::from("h")),
            max_frame_size: 512,
            ..Open::default()
        };
        let mut buf = encode(&open.clone().into());
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x53, 0x10,
            0xc0, 12, 3,
            0xa1, 1, b'c',
            0xa1, 1, b'h',
            0x70, 0x00, 0x00, 0x02, 0x00,
        ];
        assert_eq!(&buf[..], expected);
        assert_eq!(Performative::decode(&mut buf), Ok(Performative::Open(open)));
    }

    #[test]
    fn flow_and_transfer_by_hand() {
        let flow = Flow {
            incoming_window: 2048,
            next_outgoing_id: 1,
            outgoing_window: u32::MAX,
            handle: Some(0),
            delivery_count: Some(0),
            link_credit: Some(100),
            ..Flow::default()
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x53, 0x13,
            0xc0, 18, 7,
            0x40,                         // next-incoming-id
            0x70, 0x00, 0x00, 0x08, 0x00, // incoming-window
            0x52, 1,                      // next-outgoing-id
            0x70, 0xff, 0xff, 0xff, 0xff, // outgoing-window
            0x43,                         // handle
            0x43,                         // delivery-count
            0x52, 100,                    // link-credit
        ];
        assert_eq!(&encode(&flow.into())[..], expected);

        let transfer = Transfer {
            handle: 0,
            delivery_id: Some(0),
            delivery_tag: Some(Bytes::from_static(&[1])),
            message_format: Some(0),
            settled: Some(true),
            ..Transfer::default()
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x53, 0x14,
            0xc0, 8, 5,
            0x43, 0x43, 0xa0, 1, 1, 0x43, 0x41,
        ];
        assert_eq!(&encode(&transfer.into())[..], expected);
    }

    #[test]
    fn missing_mandatory_fields_and_wrong_descriptors() {
        // begin with only remote-channel.
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x11, 0xc0, 2, 1, 0x40]);
        assert_eq!(
            Performative::decode(&mut buf),
            Err(DecodeError::MissingField {
                composite: "amqp:begin:list",
                field: "next_outgoing_id"
            })
        );
        // accepted is not a performative.
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x24, 0x45]);
        assert_eq!(
            Performative::decode(&mut buf),
            Err(DecodeError::UnexpectedDescriptor {
                expected: "performative",
                found: crate::Descriptor::Code(0x24)
            })
        );
        // A list where the described type should be.
        let mut buf = Bytes::from_static(&[0x45]);
        assert_eq!(
            Performative::decode(&mut buf),
            Err(DecodeError::UnexpectedType {
                expected: "performative",
                found: 0x45
            })
        );
        // A field of the wrong type: container-id as a symbol.
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x10, 0xc0, 4, 1, 0xa3, 1, b'c']);
        assert_eq!(
            Performative::decode(&mut buf),
            Err(DecodeError::UnexpectedType {
                expected: "string",
                found: 0xa3
            })
        );
    }

    #[test]
    fn extra_fields_from_a_later_version_are_skipped() {
        // end with error=null and two unknown trailing fields.
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x17, 0xc0, 5, 3, 0x40, 0x52, 9, 0x41]);
        assert_eq!(
            Performative::decode(&mut buf),
            Ok(Performative::End(End { error: None }))
        );
    }

    #[test]
    fn multiple_fields_accept_one_value_or_an_array() {
        // open("c") with offered-capabilities as a single symbol.
        let mut buf = Bytes::from_static(&[
            0x00, 0x53, 0x10, 0xc0, 13, 8, 0xa1, 1, b'c', 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0xa3,
            1, b'x',
        ]);
        let Ok(Performative::Open(open)) = Performative::decode(&mut buf) else {
            panic!("decode failed");
        };
        assert_eq!(open.offered_capabilities, vec![Symbol::from("x")]);
        // As an array it is written.
        let mut out = BytesMut::new();
        open.encode(&mut out);
        assert_eq!(&out[out.len() - 6..], &[0xe0, 4, 1, 0xa3, 1, b'x']);
        // Anything else is refused.
        let mut buf = Bytes::from_static(&[
            0x00, 0x53, 0x10, 0xc0, 13, 8, 0xa1, 1, b'c', 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0xa1,
            1, b'x',
        ]);
        assert!(Performative::decode(&mut buf).is_err());
    }
}
