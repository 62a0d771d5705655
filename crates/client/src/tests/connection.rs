use std::collections::HashSet;

use ferry_amqp010::{
    Array, CloseCode, ConnectionClose, ConnectionStart, ConnectionTune, Control, SessionDetached,
    PROTOCOL_HEADER,
};
use tokio::io::AsyncWriteExt;

use super::fake::{connected, default_tune, Listener};
use super::with_session;
use crate::{ClientError, ConnectOptions, Connection, SessionOptions};

#[tokio::test]
async fn handshake_honours_the_server_limits_and_sends_plain() {
    let listener = Listener::bind().await;
    let options = ConnectOptions {
        username: Some("guest".into()),
        password: Some("secret".into()),
        max_frame_size: 8192,
        ..Default::default()
    };
    let tune = ConnectionTune {
        channel_max: Some(3),
        max_frame_size: Some(4096),
        heartbeat_min: Some(0),
        heartbeat_max: Some(0),
    };
    let server = async {
        let mut peer = listener.accept().await;
        let start_ok = peer.handshake(tune).await;
        (peer, start_ok)
    };
    let (conn, (peer, start_ok)) =
        tokio::join!(Connection::connect(listener.addr, options), server);
    let conn = conn.unwrap();
    assert_eq!(start_ok.mechanism.unwrap(), "PLAIN");
    assert_eq!(start_ok.response.as_deref(), Some(&b"\0guest\0secret"[..]));
    assert_eq!(
        peer.max_frame, 4096,
        "tune-ok carries the smaller frame size"
    );
    assert_eq!(conn.max_frame_size(), 4096);
    assert_eq!(conn.channel_max(), 3);
}

#[tokio::test]
async fn anonymous_without_a_username() {
    let listener = Listener::bind().await;
    let server = async {
        let mut peer = listener.accept().await;
        peer.handshake(default_tune()).await
    };
    let (conn, start_ok) = tokio::join!(
        Connection::connect(listener.addr, ConnectOptions::default()),
        server
    );
    conn.unwrap();
    assert_eq!(start_ok.mechanism.unwrap(), "ANONYMOUS");
}

#[tokio::test]
async fn another_protocol_header_is_a_mismatch() {
    let listener = Listener::bind().await;
    let server = async {
        let mut peer = listener.accept().await;
        peer.read_protocol_header().await;
        peer.stream
            .write_all(b"AMQP\x00\x00\x09\x01")
            .await
            .unwrap();
        peer
    };
    let (conn, _peer) = tokio::join!(
        Connection::connect(listener.addr, ConnectOptions::default()),
        server
    );
    match conn {
        Err(ClientError::ProtocolMismatch { received }) => {
            assert_eq!(&received, b"AMQP\x00\x00\x09\x01")
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn close_during_negotiation_reports_code_and_text() {
    let listener = Listener::bind().await;
    let server = async {
        let mut peer = listener.accept().await;
        peer.read_protocol_header().await;
        peer.stream.write_all(&PROTOCOL_HEADER).await.unwrap();
        peer.control(
            0,
            ConnectionStart {
                mechanisms: Some(Array::of_str16(["PLAIN", "ANONYMOUS"])),
                ..Default::default()
            },
        )
        .await;
        let _start_ok = peer.expect_control().await;
        peer.control(
            0,
            ConnectionClose {
                reply_code: Some(CloseCode::ConnectionForced),
                reply_text: Some("Authentication failed".into()),
            },
        )
        .await;
        peer.expect_control().await.1
    };
    let (conn, close_ok) = tokio::join!(
        Connection::connect(listener.addr, ConnectOptions::default()),
        server
    );
    assert!(matches!(close_ok, Control::ConnectionCloseOk(_)));
    match conn {
        Err(ClientError::ConnectionClosed { code, text }) => {
            assert_eq!((code, text.as_str()), (320, "Authentication failed"))
        }
        other => panic!("expected connection closed, got {other:?}"),
    }
}

#[tokio::test]
async fn server_close_ends_every_session() {
    let (_conn, session, mut peer, _) = with_session(SessionOptions::default()).await;
    peer.control(
        0,
        ConnectionClose {
            reply_code: Some(CloseCode::ConnectionForced),
            reply_text: Some("shutting down".into()),
        },
    )
    .await;
    peer.control_where(|c| matches!(c, Control::ConnectionCloseOk(_)))
        .await;
    let err = session.sync().await.unwrap_err();
    assert!(
        matches!(err, ClientError::ConnectionClosed { code: 320, ref text } if text == "shutting down"),
        "{err:?}"
    );
}

#[tokio::test]
async fn sessions_get_distinct_channels_and_names_and_detach_cleanly() {
    let (conn, mut peer) = connected(ConnectOptions::default(), default_tune()).await;
    let mut names = HashSet::new();
    let mut channels = HashSet::new();
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let (s, (channel, name)) = tokio::join!(conn.session(), peer.attach());
        let s = s.unwrap();
        assert_eq!(s.channel(), channel);
        assert_eq!(s.name(), &name[..]);
        names.insert(name);
        channels.insert(channel);
        sessions.push(s);
    }
    assert_eq!((names.len(), channels.len()), (3, 3));

    let first = sessions.remove(0);
    let server = async {
        let (ch, id, sync, _, _, _) = peer.expect_command().await;
        assert!(sync, "close syncs first");
        peer.complete(ch, id, id).await;
        let (ch, c) = peer
            .control_where(|c| matches!(c, Control::SessionDetach(_)))
            .await;
        let Control::SessionDetach(d) = c else {
            unreachable!()
        };
        peer.control(
            ch,
            SessionDetached {
                name: d.name,
                code: Some(ferry_amqp010::DetachCode::Normal),
            },
        )
        .await;
        ch
    };
    let (closed, ch) = tokio::join!(first.close(), server);
    closed.unwrap();
    assert!(matches!(first.sync().await, Err(ClientError::Closed)));
    // The channel is free again.
    let (s, (again, _)) = tokio::join!(conn.session(), peer.attach());
    s.unwrap();
    assert_eq!(again, ch);
}

#[tokio::test]
async fn channel_max_bounds_the_sessions() {
    let tune = ConnectionTune {
        channel_max: Some(1),
        ..default_tune()
    };
    let (conn, mut peer) = connected(ConnectOptions::default(), tune).await;
    let (s, _) = tokio::join!(conn.session(), peer.attach());
    let _s = s.unwrap();
    assert!(matches!(
        conn.session().await,
        Err(ClientError::NoChannel(1))
    ));
}

#[tokio::test]
async fn close_waits_for_close_ok() {
    let (conn, mut peer) = connected(ConnectOptions::default(), default_tune()).await;
    let server = async {
        let (_, c) = peer.expect_control().await;
        assert!(matches!(c, Control::ConnectionClose(_)));
        peer.control(0, ferry_amqp010::ConnectionCloseOk {}).await;
        peer
    };
    let (closed, _peer) = tokio::join!(conn.close(), server);
    closed.unwrap();
}

#[tokio::test]
async fn silence_beyond_twice_the_heartbeat_ends_the_connection() {
    let options = ConnectOptions {
        heartbeat: 1,
        ..Default::default()
    };
    let (conn, mut peer) = connected(options, default_tune()).await;
    // The client heartbeats while idle...
    let (_, c) = peer.expect_control().await;
    assert!(matches!(c, Control::ConnectionHeartbeat(_)));
    // ...and gives up on a server that says nothing for two intervals.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert!(matches!(conn.error(), Some(ClientError::HeartbeatTimeout)));
}
