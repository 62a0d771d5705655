//! Errors of the codec. Every one maps to the error condition a server closes
//! the connection (or session, or link) with, so callers never need to guess.

use crate::condition;
use crate::primitive::Symbol;
use crate::value::Descriptor;

/// Encoded data that could not be decoded: a value, a performative or a
/// message section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("data ends in the middle of a value")]
    Truncated,
    #[error("{0:#04x} is not an AMQP 1.0 format code")]
    InvalidFormatCode(u8),
    #[error("expected {expected}, found format code {found:#04x}")]
    UnexpectedType { expected: &'static str, found: u8 },
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("{0:#x} is not a Unicode scalar value")]
    InvalidChar(u32),
    #[error("values nested deeper than {0}")]
    NestingTooDeep(usize),
    #[error("compound of {size} octets cannot hold {count} elements")]
    CountExceedsSize { count: u64, size: usize },
    #[error("array elements exceed what the input can stand for")]
    TooManyElements,
    #[error("{0} octets left inside a compound after its last element")]
    SizeMismatch(usize),
    #[error("map with an odd element count {0}")]
    OddMapCount(u64),
    #[error("compound size field {0} is smaller than its count field")]
    InvalidSize(u64),
    #[error("descriptor is neither a ulong nor a symbol (format code {0:#04x})")]
    InvalidDescriptor(u8),
    #[error("expected {expected}, found descriptor {found}")]
    UnexpectedDescriptor {
        expected: &'static str,
        found: Descriptor,
    },
    #[error("{composite}: mandatory field {field} is null")]
    MissingField {
        composite: &'static str,
        field: &'static str,
    },
    #[error("{value} is not a valid {what}")]
    InvalidValue { what: &'static str, value: u64 },
    #[error("unknown {what} symbol {value:?}")]
    InvalidSymbol { what: &'static str, value: Symbol },
    #[error("array elements do not all have the array's type")]
    HeterogeneousArray,
    #[error("{0} octets after the value")]
    TrailingBytes(usize),
    #[error("message section {found} after {after}")]
    SectionOrder {
        found: &'static str,
        after: &'static str,
    },
    #[error("{0} octets of a SASL frame after its performative")]
    SaslPayload(usize),
}

impl DecodeError {
    /// The error condition to close with (`amqp:decode-error` for all but
    /// oversized input, which the spec files under resource limits).
    pub fn condition(&self) -> Symbol {
        match self {
            DecodeError::NestingTooDeep(_) | DecodeError::TooManyElements => {
                condition::RESOURCE_LIMIT_EXCEEDED
            }
            _ => condition::DECODE_ERROR,
        }
    }
}

/// A frame the connection cannot continue after.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame size {0} is smaller than the 8-octet header")]
    TooSmall(u32),
    #[error("data offset {doff} (in 4-octet words) does not fit a frame of {size} octets")]
    BadDataOffset { doff: u8, size: u32 },
    #[error("frame of {size} octets exceeds max-frame-size {max}")]
    TooLarge { size: u32, max: u32 },
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    #[error("not an AMQP 1.0 protocol header: {0:02x?}")]
    BadProtocolHeader([u8; 8]),
}

impl FrameError {
    pub fn condition(&self) -> Symbol {
        condition::FRAMING_ERROR
    }
}

/// A frame that cannot be written within the negotiated max-frame-size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("max-frame-size {max} cannot hold a {needed}-octet frame")]
pub struct FrameSizeTooSmall {
    pub needed: usize,
    pub max: u32,
}

impl FrameSizeTooSmall {
    pub fn condition(&self) -> Symbol {
        condition::FRAME_SIZE_TOO_SMALL
    }
}
