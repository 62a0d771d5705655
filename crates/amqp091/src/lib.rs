//! AMQP 0-9-1 codec, with the RabbitMQ extensions real clients rely on:
//! frames, methods, content headers, field tables and per-channel content
//! assembly. Pure: no I/O, no async, no allocation beyond what decoded values
//! need (strings, tables and single-frame bodies are slices of the read
//! buffer).
//!
//! A server's read path, after the 8-octet `PROTOCOL_HEADER` (connection-level
//! frames on channel 0 handled elsewhere):
//!
//! ```
//! use bytes::BytesMut;
//! use ferry_amqp091::*;
//!
//! let mut wire = BytesMut::new();
//! let publish = Method::BasicPublish(BasicPublish {
//!     routing_key: ShortStr::from_static("jobs"),
//!     ..Default::default()
//! });
//! write_content(&mut wire, 1, &publish, &BasicProperties::default(), b"hi", 131_072);
//!
//! let mut channel_1 = ContentAssembler::new(16 << 20);
//! let mut got = None;
//! while let Some(frame) = decode_frame(&mut wire, 131_072)? {
//!     if let Some(done) = channel_1.push(frame)? {
//!         got = Some(done);
//!     }
//! }
//! let Some(Assembled::Message(m)) = got else { panic!("no message") };
//! assert_eq!(m.method, publish);
//! assert_eq!(&m.body[..], b"hi");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assembler;
mod codec;
mod frame;
mod fuzz;
mod method;
mod properties;
pub mod reply;
mod strings;
mod table;
#[cfg(test)]
mod testutil;

pub use assembler::{
    Assembled, AssemblyError, AssemblyProgress, Content, ContentAssembler, Expecting, Message,
    Publication,
};
pub use codec::{DecodeError, FieldKind};
pub use frame::{
    decode_frame, write_body, write_body_placing, write_content, write_content_header,
    write_content_raw, write_content_raw_head, write_deliver, write_frame, write_frame_header,
    write_heartbeat, write_method, write_raw_content_header, DeliverRef, Frame, FrameError,
    FrameType, FRAME_END, FRAME_HEADER_SIZE, FRAME_MIN_SIZE, FRAME_OVERHEAD, PROTOCOL_HEADER,
};
pub use fuzz::fuzz_decode;
pub use method::*;
pub use properties::{
    BasicProperties, ContentHeader, PropertySummary, RawContentHeader, RawProperties, BASIC_CLASS,
    PROPERTIES, PROPERTIES_OFFSET,
};
pub use strings::{LongStr, ShortStr, StringTooLong};
pub use table::{FieldTable, FieldValue, MAX_NESTING};
