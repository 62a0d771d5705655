//! AMQP 0-10 codec: types, frames, segment assembly, controls, commands and structs.
//! Pure functions over `bytes`; no I/O.
//!
//! Receiving: cut frames from the read buffer with [`decode_frame`], feed each channel's
//! [`Assembler`], act on the [`Incoming`] items. Sending: [`write_control`],
//! [`write_command`], [`write_transfer`].

mod assembly;
pub mod codec;
mod error;
mod frame;
mod generated;
mod header;
mod ops;
mod sequence;
mod str;
pub mod value;
mod write;

pub use assembly::{Assembler, Body, Incoming, DEFAULT_MAX_COMMAND_SIZE};
pub use error::{
    AssemblyError, CommandError, CommandErrorKind, DecodeError, EncodeError, FrameError,
};
pub use frame::{
    decode_frame, Frame, FrameHeader, ProtocolHeader, FRAME_HEADER_SIZE, MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE, PROTOCOL_HEADER,
};
pub use generated::*;
pub use header::{
    is_redelivered, with_redelivered, with_timestamp, write_with_exchange, ExchangeSet,
    ExchangeWritten, MessageHeader,
};
pub use ops::CommandHeader;
pub use sequence::{serial_le, serial_lt, ByteRanges, SequenceSet};
pub use str::Str;
pub use value::{Array, CodedStruct, List, Map, Struct32, Value};
pub use write::{
    write_command, write_control, write_control_framed, write_transfer,
    write_transfer_placing_body, write_transfer_with_body_segment, TransferHead,
};
