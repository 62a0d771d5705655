//! The few bytes netbench's two ends agree on: a hello naming the test, then raw messages.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::error::{IoContext, ToolError};

const MAGIC: &[u8; 4] = b"FNB1";
const HELLO_LEN: usize = 4 + 1 + 4 + 8;
/// Largest message a server agrees to echo; keeps a bad hello from allocating gigabytes.
pub const MAX_SIZE: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Echo `count` messages of `size` bytes back, one at a time.
    Echo,
    /// Swallow bytes until end of stream, then reply with the byte count (u64 LE).
    Sink,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub kind: Kind,
    pub size: u32,
    pub count: u64,
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4] = match self.kind {
            Kind::Echo => 1,
            Kind::Sink => 2,
        };
        b[5..9].copy_from_slice(&self.size.to_le_bytes());
        b[9..].copy_from_slice(&self.count.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, ToolError> {
        if &b[..4] != MAGIC {
            return Err(ToolError::Protocol("not a netbench client".into()));
        }
        let kind = match b[4] {
            1 => Kind::Echo,
            2 => Kind::Sink,
            k => return Err(ToolError::Protocol(format!("unknown test kind {k}"))),
        };
        let mut size = [0u8; 4];
        size.copy_from_slice(&b[5..9]);
        let mut count = [0u8; 8];
        count.copy_from_slice(&b[9..]);
        let size = u32::from_le_bytes(size);
        if size == 0 || size as usize > MAX_SIZE {
            return Err(ToolError::Protocol(format!(
                "message size {size} out of range"
            )));
        }
        Ok(Hello {
            kind,
            size,
            count: u64::from_le_bytes(count),
        })
    }

    pub fn write_to(&self, s: &mut TcpStream) -> Result<(), ToolError> {
        s.write_all(&self.encode()).ctx("sending hello")
    }

    pub fn read_from(s: &mut TcpStream) -> Result<Hello, ToolError> {
        let mut b = [0u8; HELLO_LEN];
        s.read_exact(&mut b).ctx("reading hello")?;
        Hello::decode(&b)
    }
}

/// Blocking-socket setup used by every netbench connection: optional TCP_NODELAY and a read
/// timeout, so a vanished peer ends the run with an error instead of hanging it.
pub fn configure(s: &TcpStream, nodelay: bool, read_timeout: Duration) -> Result<(), ToolError> {
    s.set_nodelay(nodelay).ctx("setting TCP_NODELAY")?;
    s.set_read_timeout(Some(read_timeout))
        .ctx("setting read timeout")
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip() {
        let h = Hello {
            kind: Kind::Sink,
            size: 256,
            count: 1 << 40,
        };
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn bad_hellos_are_refused() {
        let mut b = Hello {
            kind: Kind::Echo,
            size: 8,
            count: 1,
        }
        .encode();
        b[0] = b'X';
        assert!(Hello::decode(&b).is_err());
        let mut b = Hello {
            kind: Kind::Echo,
            size: 8,
            count: 1,
        }
        .encode();
        b[4] = 9;
        assert!(Hello::decode(&b).is_err());
        let b = Hello {
            kind: Kind::Echo,
            size: (MAX_SIZE + 1) as u32,
            count: 1,
        }
        .encode();
        assert!(Hello::decode(&b).is_err());
        let b = Hello {
            kind: Kind::Echo,
            size: 0,
            count: 1,
        }
        .encode();
        assert!(Hello::decode(&b).is_err());
    }
}
