//! Decoding and encoding whole control and command segments.

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::generated::{Command, Control, ExecutionResult, SessionHeader};
use crate::value::{CodedStruct, Struct32};

/// The session header every command segment carries after its codes (the sync flag).
pub type CommandHeader = SessionHeader;

impl CommandHeader {
    pub fn sync(sync: bool) -> Self {
        SessionHeader { sync }
    }
}

impl Control {
    /// Decodes a complete control segment.
    pub fn decode(payload: Bytes) -> Result<Control, DecodeError> {
        let mut r = Reader::new(payload);
        let class_code = r.u8()?;
        let code = r.u8()?;
        // Bytes after the last flagged field are ignored, as qpidd does: they can only be
        // fields of a later protocol revision.
        Control::read_op(class_code, code, &mut r)
    }

    /// Writes the control segment's payload. On error nothing is appended.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        codec::atomically(out, |out| {
            out.put_u8(self.class_code());
            out.put_u8(self.code());
            self.write_fields(out)
        })
    }
}

impl Command {
    /// Decodes a complete command segment.
    pub fn decode(payload: Bytes) -> Result<(CommandHeader, Command), DecodeError> {
        let mut r = Reader::new(payload);
        let class_code = r.u8()?;
        let code = r.u8()?;
        let header = CommandHeader::decode(&mut r)?;
        let command = Command::read_op(class_code, code, &mut r)?;
        Ok((header, command))
    }

    /// Writes the command segment's payload: codes, session header, fields. On error
    /// nothing is appended.
    pub fn encode(&self, header: CommandHeader, out: &mut BytesMut) -> Result<(), EncodeError> {
        codec::atomically(out, |out| {
            out.put_u8(self.class_code());
            out.put_u8(self.code());
            header.encode(out)?;
            self.write_fields(out)
        })
    }
}

impl ExecutionResult {
    /// An `execution.result` answering command `command_id` with `value` (e.g. a
    /// `QueueQueryResult`).
    pub fn with_value<T: CodedStruct>(command_id: u32, value: &T) -> Result<Self, EncodeError> {
        Ok(ExecutionResult {
            command_id: Some(command_id),
            value: Some(Struct32::from_struct(value)?),
        })
    }
}

#[cfg(test)]
mod tests;
