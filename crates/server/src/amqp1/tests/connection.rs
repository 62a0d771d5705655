//! Headers, SASL, open, idle timeouts, close, and what ends a connection.

use std::time::Duration;

use ferry_amqp1::{
    condition, Close, SaslCode, SaslResponse, PROTOCOL_HEADER, SASL_PROTOCOL_HEADER,
};

use super::*;
use crate::config::AuthMode;
use crate::shell::testing::SECOND;

fn required() -> ServerConfig {
    ServerConfig {
        auth: AuthMode::Required,
        auth_failure_delay: Duration::from_millis(1),
        ..ServerConfig::default()
    }
}

fn plain(user: &str, password: &str) -> BytesMut {
    sasl(SaslInit {
        mechanism: Symbol::from("PLAIN"),
        initial_response: Some(Bytes::from(format!("\0{user}\0{password}"))),
        hostname: Some("localhost".into()),
    })
}

#[tokio::test]
async fn anonymous_sasl_then_open_and_close() {
    let mut c = open().await;
    let got = c.perform(0, Close { error: None });
    assert!(matches!(&got[..], [Item::Frame(0, Performative::Close(c), _)] if c.error.is_none()));
    assert_eq!(c.conn.shell.phase, Phase::Finished);
}

#[tokio::test]
async fn the_open_reply_offers_the_anonymous_relay_and_an_idle_timeout() {
    let services = services(ServerConfig {
        heartbeat_max: 30,
        ..ServerConfig::default()
    });
    let mut c = Wire::new(|now| connection(services, peer(), now, false));
    // Without SASL where ANONYMOUS is allowed: our header at once, the open after login.
    assert_eq!(decode(c.take_output()), [Item::Header(PROTOCOL_HEADER)]);
    c.finish_auth().await;
    let got = c.perform(
        0,
        Open {
            container_id: "c".into(),
            ..Open::default()
        },
    );
    let [Item::Frame(0, Performative::Open(open), _)] = &got[..] else {
        panic!("{got:?}");
    };
    let offered: Vec<&str> = open
        .offered_capabilities
        .iter()
        .map(|c| c.as_str())
        .collect();
    // Without SHARED-SUBS Qpid JMS refuses createSharedConsumer before it attaches.
    assert_eq!(offered, ["ANONYMOUS-RELAY", "SHARED-SUBS"]);
    assert_eq!(open.idle_time_out, Some(30_000));
    assert_eq!(open.max_frame_size, 65_535);
    assert_eq!(c.conn.shell.login.user(), "anonymous");
}

#[tokio::test]
async fn without_sasl_a_login_is_required_where_anonymous_is_not_allowed() {
    let services = services(required());
    let mut c = Wire::new(|now| connection(services, peer(), now, false));
    assert_eq!(
        decode(c.take_output()),
        [Item::Header(SASL_PROTOCOL_HEADER)]
    );
    assert_eq!(c.conn.shell.phase, Phase::Finished);
}

#[tokio::test]
async fn plain_logins_are_checked() {
    let services = services(required());
    let mut c = Wire::new(|now| connection(services, peer(), now, true));
    let hello = decode(c.take_output());
    let Item::Sasl(SaslFrame::SaslMechanisms(m)) = &hello[1] else {
        panic!("{hello:?}");
    };
    let offered: Vec<&str> = m
        .sasl_server_mechanisms
        .iter()
        .map(|s| s.as_str())
        .collect();
    assert_eq!(offered, ["SCRAM-SHA-256", "PLAIN"]);
    c.send(&plain("guest", "guest"));
    c.finish_auth().await;
    let got = decode(c.take_output());
    assert!(matches!(&got[..], [Item::Sasl(SaslFrame::SaslOutcome(o))] if o.code == SaslCode::Ok));
    assert_eq!(c.conn.shell.login.user(), "guest");

    let services = crate::shell::testing::services(required());
    let mut c = Wire::new(|now| connection(services, peer(), now, true));
    c.take_output();
    c.send(&plain("guest", "wrong"));
    c.finish_auth().await;
    let got = decode(c.take_output());
    assert!(
        matches!(&got[..], [Item::Sasl(SaslFrame::SaslOutcome(o))] if o.code == SaslCode::Auth)
    );
    assert_eq!(c.conn.shell.phase, Phase::Finished);
}

#[tokio::test]
async fn a_response_without_a_challenge_ends_the_connection() {
    let services = services(required());
    let mut c = Wire::new(|now| connection(services, peer(), now, true));
    c.take_output();
    c.send(&sasl(SaslResponse {
        response: Bytes::new(),
    }));
    assert_eq!(c.conn.shell.phase, Phase::Finished);
}

#[tokio::test]
async fn a_wrong_header_after_sasl_gets_ours_and_the_end() {
    let services = services(ServerConfig::default());
    let mut c = Wire::new(|now| connection(services, peer(), now, true));
    c.take_output();
    c.send(&sasl(SaslInit {
        mechanism: Symbol::from("ANONYMOUS"),
        initial_response: None,
        hostname: None,
    }));
    c.finish_auth().await;
    c.take_output();
    c.send(b"AMQP\x00\x00\x09\x01");
    assert_eq!(decode(c.take_output()), [Item::Header(PROTOCOL_HEADER)]);
    assert_eq!(c.conn.shell.phase, Phase::Finished);
}

#[tokio::test]
async fn idle_timeouts_both_ways() {
    let config = ServerConfig {
        heartbeat_max: 3,
        ..ServerConfig::default()
    };
    // The client wants a frame every second at least: we send one every half second.
    let mut c = open_with(config, Some(1000)).await;
    let quiet = c.advance(Duration::from_millis(600));
    assert_eq!(decode(quiet), [Item::Empty]);
    // The client keeps quiet past our 3 s: a close saying why, and the end.
    let mut written = c.advance(3 * SECOND);
    // The last words are written as the connection is dropped: still in its output.
    written.extend_from_slice(c.conn.output());
    let got = decode(written);
    let close = got.iter().find_map(|i| match i {
        Item::Frame(0, Performative::Close(c), _) => c.error.clone(),
        _ => None,
    });
    assert_eq!(
        close.map(|e| e.condition),
        Some(condition::RESOURCE_LIMIT_EXCEEDED)
    );
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn frames_the_client_keeps_sending_hold_the_connection_open() {
    let config = ServerConfig {
        heartbeat_max: 2,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, None).await;
    for _ in 0..5 {
        c.advance(SECOND);
        let mut empty = BytesMut::new();
        ferry_amqp1::write_empty_frame(&mut empty);
        c.send(&empty);
    }
    assert!(!c.conn.is_done());
    // Without an idle-time-out of its own the client gets no empty frames from us.
    assert!(decode(c.take_output()).is_empty());
}

#[tokio::test]
async fn undecodable_frames_close_with_the_spec_conditions() {
    let mut c = open().await;
    // A frame whose body is not a performative.
    let got = c.exchange(BytesMut::from(&[0, 0, 0, 10, 2, 0, 0, 0, 0xa1, 0][..]));
    assert_eq!(error_of(&got).as_deref(), Some("amqp:decode-error"));
    assert_eq!(c.conn.shell.phase, Phase::Closing);
    let got = c.perform(0, Close { error: None });
    assert!(got.is_empty());
    assert_eq!(c.conn.shell.phase, Phase::Finished);

    let mut c = open().await;
    // Larger than our max-frame-size.
    let got = c.exchange(BytesMut::from(&[0, 1, 0, 0, 2, 0, 0, 0][..]));
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:connection:framing-error")
    );

    let mut c = open().await;
    let got = c.perform(3, Flow::default());
    assert_eq!(error_of(&got).as_deref(), Some("amqp:not-allowed"));
}

#[tokio::test]
async fn a_frame_before_open_is_answered_with_open_and_close() {
    let services = services(ServerConfig::default());
    let mut c = Wire::new(|now| connection(services, peer(), now, false));
    c.take_output();
    c.finish_auth().await;
    let got = c.perform(0, Begin::default());
    assert!(
        matches!(&got[0], Item::Frame(0, Performative::Open(_), _)),
        "{got:?}"
    );
    assert_eq!(error_of(&got).as_deref(), Some("amqp:illegal-state"));
}

#[tokio::test]
async fn channels_beyond_channel_max_are_refused() {
    let mut c = open_with(
        ServerConfig {
            channel_max: 4,
            ..ServerConfig::default()
        },
        None,
    )
    .await;
    c.begin(3);
    let got = c.perform(
        4,
        Begin {
            incoming_window: 10,
            outgoing_window: 10,
            ..Begin::default()
        },
    );
    assert_eq!(
        error_of(&got).as_deref(),
        Some("amqp:connection:framing-error")
    );
}

#[tokio::test]
async fn management_sees_the_connection_and_its_sessions() {
    let mut c = open().await;
    c.begin(0);
    c.begin(5);
    use crate::shell::Protocol;
    assert_eq!(c.conn.protocol.channel_count(), 2);
    let channels: Vec<u16> = c
        .conn
        .protocol
        .sessions()
        .iter()
        .map(|s| s.channel)
        .collect();
    assert_eq!(channels.len(), 2);
    assert!(channels.contains(&5));
}
