//! The far end of pingpong and stream: echoes or swallows what a client sends.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::wire::{configure, Hello, Kind};
use crate::error::{IoContext, ToolError};

/// How long a server connection waits on a silent client before giving up on it.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one connection according to its hello.
pub fn handle(mut s: TcpStream, nodelay: bool) -> Result<(), ToolError> {
    configure(&s, nodelay, IDLE_TIMEOUT)?;
    let hello = Hello::read_from(&mut s)?;
    match hello.kind {
        Kind::Echo => echo(&mut s, &hello),
        Kind::Sink => sink(&mut s),
    }
}

fn echo(s: &mut TcpStream, hello: &Hello) -> Result<(), ToolError> {
    let mut buf = vec![0u8; hello.size as usize];
    for _ in 0..hello.count {
        match s.read_exact(&mut buf) {
            Ok(()) => {}
            // A client that stopped early (its time limit) just closes.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(ToolError::io("echo read", e)),
        }
        s.write_all(&buf).ctx("echo write")?;
    }
    Ok(())
}

fn sink(s: &mut TcpStream) -> Result<(), ToolError> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = s.read(&mut buf).ctx("sink read")?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    s.write_all(&total.to_le_bytes()).ctx("sink reply")
}

/// A loopback listener on an ephemeral port serving exactly one connection in a thread:
/// the in-process far end of a run.
pub fn spawn_one(
    nodelay: bool,
) -> Result<(std::net::SocketAddr, JoinHandle<Result<(), ToolError>>), ToolError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).ctx("binding 127.0.0.1:0")?;
    let addr = listener.local_addr().ctx("listener address")?;
    let handle = thread::spawn(move || {
        let (s, _) = listener.accept().ctx("accepting")?;
        handle(s, nodelay)
    });
    Ok((addr, handle))
}

/// `ferry netbench serve`: serves up to `max_connections` clients on 127.0.0.1:`port`,
/// each on its own thread, then returns.
pub fn serve(port: u16, nodelay: bool, max_connections: u64) -> Result<(), ToolError> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).ctx("binding the netbench server")?;
    let addr = listener.local_addr().ctx("listener address")?;
    eprintln!("netbench: serving on {addr} for up to {max_connections} connections");
    let mut workers = Vec::new();
    for _ in 0..max_connections {
        let (s, peer) = listener.accept().ctx("accepting")?;
        workers.push(thread::spawn(move || {
            if let Err(e) = handle(s, nodelay) {
                eprintln!("netbench: {peer}: {e}");
            }
        }));
        // Reap finished connections so a long serve does not keep every handle.
        workers.retain(|w| !w.is_finished());
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}
