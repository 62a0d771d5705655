//! AMQP 1.0 codec (OASIS AMQP 1.0): the type system, frames, performatives,
//! SASL, messaging and transactions. Pure: no I/O, no async. Decoded strings,
//! binaries and message sections are slices of the read buffer, not copies.
//!
//! The type tables (performatives, delivery states, sources and targets,
//! message sections, SASL and transaction types) are written by hand from the
//! spec, as declarative macro tables ([`performative`], [`messaging`], ...):
//! the spec's XML is not vendored into the repository. Round trips against
//! Qpid Proton's encodings (`tests/proton_vectors.rs`) check the tables.
//!
//! A server's read path after the protocol header (see [`ProtocolId`]):
//!
//! ```
//! use bytes::{Bytes, BytesMut};
//! use ferry_amqp1::*;
//!
//! // What a client might send: a transfer carrying a message.
//! let mut wire = BytesMut::new();
//! let mut payload = BytesMut::new();
//! Message::data(&b"hello"[..]).encode(&mut payload);
//! let transfer = Transfer {
//!     handle: 0,
//!     delivery_id: Some(0),
//!     delivery_tag: Some(Bytes::from_static(b"1")),
//!     ..Transfer::default()
//! };
//! write_transfer(&mut wire, 0, &transfer, &payload, MIN_MAX_FRAME_SIZE)?;
//!
//! // The broker: frames, then the message split without decoding its body.
//! while let Some(frame) = decode_frame(&mut wire, MIN_MAX_FRAME_SIZE)? {
//!     let FrameBody::Amqp { performative, payload } = frame.decode_body()? else {
//!         continue;
//!     };
//!     assert_eq!(performative.name(), "amqp:transfer:list");
//!     let message = RawMessage::parse(payload)?;
//!     let RawBody::Data(parts) = message.body() else { unreachable!() };
//!     assert_eq!(parts.to_vec(), [Bytes::from_static(b"hello")]);
//!
//!     // Forward it with a header of the broker's own, bare message untouched.
//!     let header = Header { delivery_count: 1, ..Header::default() };
//!     let mut out = BytesMut::new();
//!     message.encode_with(&mut out, Some(&header), None);
//!     assert!(out.ends_with(message.bare()));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Limits on hostile input: nesting is bounded by [`MAX_NESTING`], element
//! counts are checked against the octets present before anything is
//! allocated, and frames against the max-frame-size before they are
//! buffered.

#![forbid(unsafe_code)]

#[macro_use]
mod field;

pub mod condition;
mod decode;
pub mod definitions;
mod encode;
mod error;
mod format;
mod frame;
mod fuzz;
pub mod message;
pub mod messaging;
pub mod performative;
mod primitive;
pub mod sasl;
#[cfg(test)]
mod testutil;
pub mod transaction;
mod value;

pub use decode::{Decoder, MAX_NESTING, ZERO_WIDTH_ALLOWANCE};
pub use definitions::{Error, Fields, ReceiverSettleMode, Role, SenderSettleMode};
pub use error::{DecodeError, FrameError, FrameSizeTooSmall};
pub use field::{Composite, Field, FieldReader};
pub use format::Type;
pub use frame::{
    decode_frame, write_empty_frame, write_frame, write_sasl_frame, write_transfer, Frame,
    FrameBody, FrameType, ProtocolId, FRAME_HEADER_SIZE, MIN_MAX_FRAME_SIZE, PROTOCOL_HEADER,
    SASL_PROTOCOL_HEADER, TLS_PROTOCOL_HEADER,
};
pub use fuzz::fuzz_decode;
pub use message::{write_message, Body, Message, Parts, PartsIter, RawBody, RawMessage};
pub use messaging::{
    Accepted, AnnotationKey, Annotations, ApplicationProperties, DeliveryState, FilterSet, Header,
    LifetimePolicy, MessageId, Modified, Outcome, Properties, Received, Rejected, Released, Source,
    Target, TerminusDurability, TerminusExpiryPolicy,
};
pub use performative::{
    Attach, Begin, Close, Detach, Disposition, End, Flow, LinkTarget, Open, Performative, Transfer,
};
pub use primitive::{Decimal128, Decimal32, Decimal64, Str, Symbol, Timestamp, Uuid};
pub use sasl::{
    SaslChallenge, SaslCode, SaslFrame, SaslInit, SaslMechanisms, SaslOutcome, SaslResponse,
};
pub use transaction::{Coordinator, Declare, Declared, Discharge, TransactionalState};
pub use value::{known_descriptors, Array, Described, Descriptor, Map, NotHomogeneous, Value};
