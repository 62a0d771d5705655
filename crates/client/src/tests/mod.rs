//! Tests against the in-process fake server in `fake.rs`.

mod connection;
mod fake;
mod messages;
mod session;

use fake::{connected, default_tune, Peer};

use crate::{ConnectOptions, Connection, Session, SessionOptions};

/// A connection with one attached session, and the server's side of it.
async fn with_session(session: SessionOptions) -> (Connection, Session, Peer, u16) {
    let options = ConnectOptions {
        session,
        ..Default::default()
    };
    let (conn, mut peer) = connected(options, default_tune()).await;
    let (s, (channel, _)) = tokio::join!(conn.session(), peer.attach());
    (conn, s.unwrap(), peer, channel)
}
