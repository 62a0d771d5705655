//! Error types. Frame and assembly errors are connection-level (answer `framing-error`);
//! a [`DecodeError`] inside a [`CommandError`] concerns one command only.

use thiserror::Error;

/// Why bytes could not be decoded as the type expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("truncated: the data ends before the value does")]
    Truncated,
    #[error("invalid value {value} for {domain}")]
    InvalidEnum { domain: &'static str, value: u32 },
    #[error("unknown control: class {class_code:#04x} code {code:#04x}")]
    UnknownControl { class_code: u8, code: u8 },
    #[error("unknown command: class {class_code:#04x} code {code:#04x}")]
    UnknownCommand { class_code: u8, code: u8 },
    #[error("expected struct {expected:04x}, found {found:04x}")]
    UnexpectedStruct { expected: u16, found: u16 },
    #[error("type code {0:#04x} is reserved")]
    ReservedTypeCode(u8),
    #[error("values nested more than {0} deep")]
    TooDeep(usize),
    #[error("invalid {what} size {size}")]
    InvalidSize { what: &'static str, size: u64 },
    #[error("invalid range {lower}..={upper}")]
    InvalidRange { lower: u64, upper: u64 },
    #[error("field {index} ({name}): {source}")]
    Field {
        index: u8,
        name: &'static str,
        source: Box<DecodeError>,
    },
}

impl DecodeError {
    /// Attributes the error to field `index` of the enclosing struct or operation, which
    /// `execution.exception` reports as `field-index`.
    pub fn in_field(self, index: u8, name: &'static str) -> Self {
        DecodeError::Field {
            index,
            name,
            source: Box::new(self),
        }
    }

    /// Index of the outermost field the error occurred in.
    pub fn field_index(&self) -> Option<u8> {
        match self {
            DecodeError::Field { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// The error beneath any field attributions.
    pub fn root(&self) -> &DecodeError {
        match self {
            DecodeError::Field { source, .. } => source.root(),
            other => other,
        }
    }
}

/// Why a value could not be encoded (a length too long for its prefix, an inconsistent
/// array, a frame size too small to carry anything).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    #[error("{what} of {len} octets exceeds the maximum of {max}")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("array of type {element_code:#04x} holds a value of type {found:#04x}")]
    ArrayElementMismatch { element_code: u8, found: u8 },
    #[error("raw value of type {code:#04x} has {len} octets, which that type cannot hold")]
    RawWidth { code: u8, len: usize },
    #[error("type code {0:#04x} is reserved")]
    ReservedTypeCode(u8),
    #[error("values nested more than {0} deep")]
    TooDeep(usize),
    #[error("max frame size {0} leaves no room for payload")]
    FrameSizeTooSmall(usize),
}

/// A frame that cannot be accepted, or frames that do not form valid segments and
/// assemblies. The connection must be closed with `framing-error`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame size {0} is smaller than the 12-octet header")]
    TooSmall(u16),
    #[error("frame size {size} exceeds the maximum of {max}")]
    TooLarge { size: u16, max: usize },
    #[error("reserved bits set in frame header")]
    ReservedBits,
    #[error("unknown segment type {0}")]
    SegmentType(u8),
    #[error("track {0} is not valid for this segment type")]
    Track(u8),
    #[error("frame flags inconsistent with the segment in progress: {0}")]
    FrameOrder(&'static str),
    #[error("segment out of order: {0}")]
    SegmentOrder(&'static str),
    #[error("{what} segment exceeds the limit of {limit} octets")]
    SegmentTooLarge { what: &'static str, limit: usize },
}

/// A complete command segment that could not be decoded, or whose message exceeded the
/// size limit. The command still used up a command id; answer with `execution.exception`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("command (class {class_code:?}, code {code:?}): {error}")]
pub struct CommandError {
    /// Class code, if the segment was long enough to hold one.
    pub class_code: Option<u8>,
    /// Command code within the class, if present.
    pub code: Option<u8>,
    pub error: CommandErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommandErrorKind {
    #[error("{0}")]
    Decode(DecodeError),
    #[error("message of {size} octets exceeds the limit of {limit}")]
    MessageTooLarge { size: usize, limit: usize },
}

/// What the [`crate::Assembler`] rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AssemblyError {
    /// Connection-level: close with `framing-error`.
    #[error("framing error: {0}")]
    Framing(#[from] FrameError),
    /// A control segment that did not decode. Controls have no ids; this is a
    /// connection-level fault too.
    #[error("control: {0}")]
    Control(DecodeError),
    /// One bad command; the session may report it and carry on or detach.
    #[error("{0}")]
    Command(CommandError),
}
