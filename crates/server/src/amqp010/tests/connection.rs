//! Connection-level behaviour: the handshake (mechanisms, PLAIN and SCRAM, refused logins,
//! tune limits), connection controls, heartbeats, the end of a connection and what it
//! releases, and the faults that close it with framing-error (and the command faults that
//! only fail a session).

use std::time::Duration;

use bytes::BufMut;
use ferry_amqp010::{
    ConnectionHeartbeat, ConnectionSecureOk, ConnectionTune, FrameHeader, SegmentType,
};
use std::sync::Arc;

use ferry_core::{BrokerConfig, Queue, Watermarks};

use super::*;
use crate::config::AuthMode;
use crate::shell::testing::services_with;

/// A broker that checks passwords (the built-in guest/guest), refusing without delay.
fn verifying() -> ServerConfig {
    ServerConfig {
        auth: AuthMode::Required,
        auth_failure_delay: Duration::ZERO,
        ..ServerConfig::default()
    }
}

/// A fresh connection to a broker of its own; returns it and the connection.start it sent.
fn fresh(config: ServerConfig) -> (Client, ferry_amqp010::ConnectionStart) {
    let services = services(config);
    let mut c = Wire::new(|now| connection(services, peer(), now));
    let out = decode(c.take_output());
    let [Item::Control(0, Control::ConnectionStart(start))] = &out[..] else {
        panic!("{out:?}");
    };
    let start = start.clone();
    (c, start)
}

fn start_ok(mechanism: &str, response: &'static [u8]) -> ConnectionStartOk {
    ConnectionStartOk {
        client_properties: None,
        mechanism: Some(Str::from(mechanism)),
        response: Some(Bytes::from_static(response)),
        locale: Some(Str::from("en_US")),
    }
}

/// A connection past start-ok (PLAIN as guest) that has received connection.tune.
async fn at_tune(config: ServerConfig) -> (Client, ConnectionTune) {
    let (mut c, _) = fresh(config);
    c.send(&control(0, start_ok("PLAIN", b"\0guest\0guest")));
    c.finish_auth().await;
    let out = decode(c.take_output());
    let [Item::Control(0, Control::ConnectionTune(tune))] = &out[..] else {
        panic!("{out:?}");
    };
    let tune = tune.clone();
    (c, tune)
}

fn tune_ok(channel_max: Option<u16>, max_frame: Option<u16>, heartbeat: u16) -> ConnectionTuneOk {
    ConnectionTuneOk {
        channel_max,
        max_frame_size: max_frame,
        heartbeat: Some(heartbeat),
    }
}

/// Asserts that `out` ends with connection.close `code` (its text starting with `text`)
/// and that the connection now waits for close-ok.
#[track_caller]
fn assert_closed(c: &Client, out: &[Item], code: CloseCode, text: &str) {
    match out.last() {
        Some(Item::Control(0, Control::ConnectionClose(cl))) => {
            assert_eq!(cl.reply_code, Some(code), "{cl:?}");
            let got = cl
                .reply_text
                .as_ref()
                .map(|t| t.to_str_lossy().into_owned())
                .unwrap_or_default();
            assert!(
                got.starts_with(text),
                "{got:?} does not start with {text:?}"
            );
        }
        other => panic!("expected connection.close {code:?}: {other:?} in {out:?}"),
    }
    assert_eq!(c.conn.shell.phase, Phase::Closing);
}

fn strs(array: &Option<ferry_amqp010::Array>) -> Vec<String> {
    array
        .as_ref()
        .map(|a| a.strs().map(|s| s.to_str_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// One frame holding a whole segment of `segment_type` with `payload`.
fn raw_frame(
    channel: u16,
    segment_type: SegmentType,
    (first_segment, last_segment): (bool, bool),
    payload: &[u8],
) -> BytesMut {
    let header = FrameHeader {
        first_segment,
        last_segment,
        first_frame: true,
        last_frame: true,
        segment_type,
        track: u8::from(segment_type != SegmentType::Control),
        channel,
        size: (12 + payload.len()) as u16,
    };
    let mut out = BytesMut::new();
    header.write(&mut out);
    out.put_slice(payload);
    out
}

#[tokio::test]
async fn connection_start_offers_the_mechanisms_of_the_auth_mode_and_names_the_broker() {
    let (_, start) = fresh(ServerConfig::default());
    assert_eq!(strs(&start.mechanisms), ["PLAIN", "ANONYMOUS"]);
    assert_eq!(strs(&start.locales), ["en_US"]);
    let props = start.server_properties.expect("server properties");
    assert_eq!(
        props.get("product"),
        Some(&ferry_amqp010::Value::Str16(Str::from("ferryd")))
    );
    assert!(props.get("version").is_some() && props.get("platform").is_some());
    assert_eq!(
        props.get("qpid.features"),
        Some(&ferry_amqp010::Value::List(ferry_amqp010::List(vec![
            ferry_amqp010::Value::Str16(Str::from("qpid.jms-selector"))
        ]))),
        "selectors are applied by the broker"
    );
    // Checking passwords: SCRAM first, no ANONYMOUS.
    let (_, start) = fresh(verifying());
    assert_eq!(strs(&start.mechanisms), ["SCRAM-SHA-256", "PLAIN"]);
}

#[tokio::test]
async fn tune_offers_the_configured_limits() {
    let (_, tune) = at_tune(ServerConfig::default()).await;
    assert_eq!(
        (
            tune.channel_max,
            tune.max_frame_size,
            tune.heartbeat_min,
            tune.heartbeat_max
        ),
        (Some(2047), Some(65535), Some(0), Some(120))
    );
    let config = ServerConfig {
        channel_max: 8,
        max_frame_size: 8192,
        heartbeat_max: 30,
        ..ServerConfig::default()
    };
    let (_, tune) = at_tune(config).await;
    assert_eq!(
        (tune.channel_max, tune.max_frame_size, tune.heartbeat_max),
        (Some(8), Some(8192), Some(30))
    );
}

#[tokio::test]
async fn a_refused_login_is_connection_forced_saying_authentication_failed() {
    for (mechanism, response) in [
        ("PLAIN", &b"\0guest\0wrong"[..]),
        ("PLAIN", &b"\0nobody\0guest"[..]),
        ("PLAIN", &b"no separators"[..]),
        ("CRAM-MD5", &b"x"[..]),
    ] {
        let (mut c, _) = fresh(verifying());
        c.send(&control(0, start_ok(mechanism, response)));
        assert_eq!(c.conn.shell.phase, Phase::Authenticating);
        // What the client pipelines meanwhile waits, and is then ignored.
        c.send(&control(0, tune_ok(None, None, 0)));
        assert!(c.pending_input() > 0);
        c.finish_auth().await;
        let out = decode(c.take_output());
        assert_eq!(out.len(), 1, "{mechanism}: {out:?}");
        assert_closed(
            &c,
            &out,
            CloseCode::ConnectionForced,
            "not-allowed: authentication failed",
        );
        let out = c.exchange(control(0, ferry_amqp010::ConnectionCloseOk {}));
        assert!(out.is_empty(), "{out:?}");
        assert!(c.conn.is_finished());
    }
}

#[tokio::test]
async fn scram_challenges_with_connection_secure_and_a_wrong_proof_is_refused() {
    let (mut c, _) = fresh(verifying());
    c.send(&control(
        0,
        start_ok("SCRAM-SHA-256", b"n,,n=guest,r=clientnonce"),
    ));
    c.finish_auth().await;
    let out = decode(c.take_output());
    let [Item::Control(0, Control::ConnectionSecure(secure))] = &out[..] else {
        panic!("{out:?}");
    };
    let challenge = String::from_utf8(secure.challenge.clone().unwrap().to_vec()).unwrap();
    let nonce = challenge
        .split(',')
        .find_map(|f| f.strip_prefix("r="))
        .expect("a nonce");
    assert!(nonce.starts_with("clientnonce") && nonce.len() > "clientnonce".len());
    assert!(challenge.contains(",s=") && challenge.contains(",i="));
    assert_eq!(c.conn.shell.phase, Phase::AwaitSecureOk);
    let proof = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let response = format!("c=biws,r={nonce},p={proof}");
    let secure_ok = ConnectionSecureOk {
        response: Some(Bytes::from(response.into_bytes())),
    };
    c.send(&control(0, secure_ok));
    assert_eq!(c.conn.shell.phase, Phase::Authenticating);
    c.finish_auth().await;
    let out = decode(c.take_output());
    assert_closed(
        &c,
        &out,
        CloseCode::ConnectionForced,
        "not-allowed: authentication failed",
    );
}

#[tokio::test]
async fn a_handshake_control_out_of_turn_is_a_framing_error() {
    // tune-ok before start-ok.
    let (mut c, _) = fresh(ServerConfig::default());
    let out = c.exchange(control(0, tune_ok(None, None, 0)));
    assert_closed(
        &c,
        &out,
        CloseCode::FramingError,
        "unexpected connection.tune-ok",
    );
    // secure-ok without a challenge.
    let (mut c, _) = at_tune(ServerConfig::default()).await;
    let secure_ok = ConnectionSecureOk {
        response: Some(Bytes::from_static(b"x")),
    };
    let out = c.exchange(control(0, secure_ok));
    assert_closed(
        &c,
        &out,
        CloseCode::FramingError,
        "unexpected connection.secure-ok",
    );
    // A second connection.open once open.
    let mut c = open().await;
    let out = c.exchange(control(0, ConnectionOpen::default()));
    assert_closed(
        &c,
        &out,
        CloseCode::FramingError,
        "unexpected connection.open",
    );
    // A connection control on a session's channel.
    let mut c = open().await;
    let close = ConnectionClose {
        reply_code: Some(CloseCode::Normal),
        reply_text: None,
    };
    let mut bytes = control(0, ConnectionHeartbeat {});
    bytes.extend_from_slice(&control(1, ConnectionOpen::default()));
    let out = c.exchange(bytes);
    assert_closed(
        &c,
        &out,
        CloseCode::FramingError,
        "unexpected connection.open on channel 1",
    );
    // While closing, the client's own close is answered and ends the connection.
    let out = c.exchange(control(0, close));
    assert!(out.is_empty(), "only close-ok is read now: {out:?}");
    c.send(&control(0, ferry_amqp010::ConnectionCloseOk {}));
    assert!(c.conn.is_finished());
}

#[tokio::test]
async fn tune_ok_max_frame_size_outside_the_offer_is_a_framing_error() {
    for frame in [4095, 512] {
        let (mut c, _) = at_tune(ServerConfig::default()).await;
        let out = c.exchange(control(0, tune_ok(None, Some(frame), 0)));
        assert_closed(
            &c,
            &out,
            CloseCode::FramingError,
            &format!("tune-ok max-frame-size {frame} outside [4096, 65535]"),
        );
    }
    let config = ServerConfig {
        max_frame_size: 8192,
        ..ServerConfig::default()
    };
    let (mut c, _) = at_tune(config).await;
    let out = c.exchange(control(0, tune_ok(None, Some(8193), 0)));
    assert_closed(&c, &out, CloseCode::FramingError, "tune-ok max-frame-size");
}

#[tokio::test]
async fn tune_ok_without_values_takes_the_offer_and_heartbeats_are_capped() {
    let config = ServerConfig {
        heartbeat_max: 10,
        ..ServerConfig::default()
    };
    let (mut c, _) = at_tune(config).await;
    c.send(&control(0, tune_ok(Some(0), None, 600)));
    let out = c.exchange(control(0, ConnectionOpen::default()));
    let [Item::Control(0, Control::ConnectionOpenOk(ok))] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(strs(&ok.known_hosts), Vec::<String>::new());
    assert_eq!(c.conn.protocol.max_frame, 65535);
    assert_eq!(c.conn.protocol.channel_max, 2047);
    assert_eq!(c.conn.poll_timeout(), Some(c.now + 5 * SECOND));
    let listed = c.conn.broker().connections().list();
    assert_eq!(
        (listed[0].meta.heartbeat, listed[0].meta.frame_max),
        (10, 65535)
    );
}

#[tokio::test]
async fn a_channel_at_or_above_the_negotiated_channel_max_is_a_framing_error() {
    let (mut c, _) = at_tune(ServerConfig::default()).await;
    c.send(&control(0, tune_ok(Some(2), None, 0)));
    c.exchange(control(0, ConnectionOpen::default()));
    c.attach(1, "s1");
    let attach = SessionAttach {
        name: Some(Bytes::from_static(b"s2")),
        force: false,
    };
    let out = c.exchange(control(2, attach));
    assert_closed(
        &c,
        &out,
        CloseCode::FramingError,
        "channel 2 exceeds channel-max 2",
    );
    // A client cannot raise the broker's limit.
    let config = ServerConfig {
        channel_max: 4,
        ..ServerConfig::default()
    };
    let (mut c, _) = at_tune(config).await;
    c.send(&control(0, tune_ok(Some(100), None, 0)));
    c.exchange(control(0, ConnectionOpen::default()));
    assert_eq!(c.conn.protocol.channel_max, 4);
}

#[tokio::test]
async fn a_smaller_max_frame_size_cuts_what_the_broker_sends() {
    let (mut c, _) = at_tune(ServerConfig::default()).await;
    c.send(&control(0, tune_ok(None, Some(4096), 0)));
    c.exchange(control(0, ConnectionOpen::default()));
    c.attach(1, "s1");
    c.call(1, declare("q"));
    // The client cuts its frames to the limit too.
    let mut raw = BytesMut::new();
    keyed("q").encode(&mut raw).unwrap();
    let transfer = MessageTransfer {
        destination: Some(Str::from("")),
        accept_mode: Some(AcceptMode::None),
        acquire_mode: Some(AcquireMode::PreAcquired),
    };
    let mut frames = BytesMut::new();
    let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    write_transfer(&mut frames, 1, &transfer, false, &raw, &body, 4096).unwrap();
    assert_eq!(exception(&c.exchange(frames)), None);
    c.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    c.send(&command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    c.send(&command(1, flow("d", CreditUnit::Message, 1), false));
    let mut out = c.take_output();
    let mut sizes = Vec::new();
    let mut all = BytesMut::new();
    while let Some(frame) = decode_frame(&mut out, 4096).expect("frames fit the limit") {
        sizes.push(frame.payload.len());
        frame.header.write(&mut all);
        all.put_slice(&frame.payload);
    }
    assert!(sizes.iter().all(|s| *s <= 4096 - 12), "{sizes:?}");
    let got = delivered(all);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].channel, 1);
    assert_eq!(got[0].transfer.destination, Some(Str::from("d")));
    assert_eq!(
        &got[0].body[..],
        &body[..],
        "sent on in order, frame by frame"
    );
}

#[tokio::test]
async fn a_frame_larger_than_the_negotiated_size_is_a_framing_error() {
    let (mut c, _) = at_tune(ServerConfig::default()).await;
    c.send(&control(0, tune_ok(None, Some(4096), 0)));
    c.exchange(control(0, ConnectionOpen::default()));
    c.attach(1, "s1");
    c.call(1, declare("q"));
    // A transfer cut into frames of 8 KiB.
    let mut raw = BytesMut::new();
    keyed("q").encode(&mut raw).unwrap();
    let transfer = MessageTransfer {
        destination: Some(Str::from("")),
        accept_mode: Some(AcceptMode::None),
        acquire_mode: Some(AcquireMode::PreAcquired),
    };
    let mut big = BytesMut::new();
    write_transfer(&mut big, 1, &transfer, false, &raw, &[1; 10_000], 8192).unwrap();
    let out = c.exchange(big);
    assert_closed(&c, &out, CloseCode::FramingError, "");
    assert_eq!(c.conn.broker().queue("q").unwrap().message_count(), 0);
}

#[tokio::test]
async fn malformed_frames_and_segments_are_framing_errors() {
    let cases: Vec<(&str, BytesMut)> = vec![
        ("reserved bits", {
            let mut b = control(0, ConnectionHeartbeat {});
            b[0] |= 0x10;
            b
        }),
        ("unknown segment type", {
            let mut b = control(0, ConnectionHeartbeat {});
            b[1] = 9;
            b
        }),
        (
            "a header segment without a command",
            raw_frame(1, SegmentType::Header, (true, true), b""),
        ),
        (
            "a body segment without a command",
            raw_frame(1, SegmentType::Body, (true, true), b"x"),
        ),
        (
            "an unknown control",
            raw_frame(1, SegmentType::Control, (true, true), &[2, 0x7f]),
        ),
        (
            "a control that does not decode",
            // session.attach announcing a name it does not carry.
            raw_frame(1, SegmentType::Control, (true, true), &[2, 1, 1, 0, 9]),
        ),
        (
            "a control in two segments",
            raw_frame(1, SegmentType::Control, (true, false), &[0, 7]),
        ),
    ];
    for (what, bytes) in cases {
        let mut c = open().await;
        c.attach(1, "s1");
        let out = c.exchange(bytes);
        assert!(
            matches!(
                out.last(),
                Some(Item::Control(0, Control::ConnectionClose(_)))
            ),
            "{what}: {out:?}"
        );
        assert_closed(&c, &out, CloseCode::FramingError, "");
    }
}

#[tokio::test]
async fn an_unknown_command_is_not_implemented_and_a_bad_field_an_invalid_argument() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    // Class queue, code 0x7f: unknown. The session header says no sync.
    let out = c.exchange(raw_frame(
        1,
        SegmentType::Command,
        (true, true),
        &[8, 0x7f, 1, 0],
    ));
    let (code, id, text) = failure(&out);
    assert_eq!((code, id), (ErrorCode::NotImplemented, 0), "{text}");
    let e = &exceptions(&out)[0].1;
    assert_eq!((e.class_code, e.command_code), (Some(8), Some(0x7f)));
    assert!(matches!(
        out.last(),
        Some(Item::Control(1, Control::SessionDetach(_)))
    ));
    // A command segment too short for its session header.
    c.attach(3, "s3");
    let out = c.exchange(raw_frame(3, SegmentType::Command, (true, true), &[8, 1]));
    assert_eq!(failure(&out).0, ErrorCode::InvalidArgument, "{out:?}");
    // queue.declare whose queue name claims more octets than there are: field 0.
    c.call(2, declare("fine"));
    let out = c.exchange(raw_frame(
        2,
        SegmentType::Command,
        (true, true),
        &[8, 1, 1, 0, 1, 0, 10, b'q'],
    ));
    let (code, id, _) = failure(&out);
    assert_eq!((code, id), (ErrorCode::InvalidArgument, 1));
    assert_eq!(exceptions(&out)[0].1.field_index, Some(0));
    assert_eq!(c.conn.shell.phase, Phase::Open);
}

#[tokio::test]
async fn a_message_over_the_size_limit_fails_its_session_with_resource_limit_exceeded() {
    let config = ServerConfig {
        max_message_size: 1000,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    c.attach(1, "s1");
    c.attach(2, "s2");
    c.call(1, declare("q"));
    let out = c.publish(1, "", &keyed("q"), &[0; 2000]);
    let (code, id, text) = failure(&out);
    assert_eq!((code, id), (ErrorCode::ResourceLimitExceeded, 1), "{text}");
    assert_eq!(c.conn.broker().queue("q").unwrap().message_count(), 0);
    // Only that session failed; a message under the limit goes through on another.
    let out = c.publish(2, "", &keyed("q"), &[0; 500]);
    assert_eq!(exception(&out), None, "{out:?}");
    assert_eq!(c.conn.broker().queue("q").unwrap().message_count(), 1);
}

#[tokio::test]
async fn connection_open_refused_by_the_acl_or_the_per_user_limit_is_connection_forced() {
    let (acl, _) = ferry_acl::parse("acl deny guest create connection\nacl allow all all\n")
        .expect("rules parse");
    let denying = Services {
        state: std::sync::Arc::new(crate::state::ServerState::new(Some(std::sync::Arc::new(
            ferry_acl::SharedAcl::with_rules("test.acl", acl),
        )))),
        ..services(ServerConfig::default())
    };
    let mut c = Wire::new(|now| connection(denying, peer(), now));
    c.take_output();
    c.send(&control(0, start_ok("PLAIN", b"\0guest\0guest")));
    c.finish_auth().await;
    c.take_output();
    c.send(&control(0, tune_ok(None, None, 0)));
    let out = c.exchange(control(0, ConnectionOpen::default()));
    assert_closed(
        &c,
        &out,
        CloseCode::ConnectionForced,
        "ACL denied connection for user guest",
    );

    let config = ServerConfig {
        connection_limit_per_user: 1,
        ..ServerConfig::default()
    };
    let services = services(config);
    let first = open_on(services.clone(), 0).await;
    let mut second = Wire::new(|now| connection(services.clone(), peer(), now));
    second.take_output();
    second.send(&control(0, start_ok("PLAIN", b"\0guest\0guest")));
    second.finish_auth().await;
    second.take_output();
    second.send(&control(0, tune_ok(None, None, 0)));
    let out = second.exchange(control(0, ConnectionOpen::default()));
    assert_closed(
        &second,
        &out,
        CloseCode::ConnectionForced,
        "user guest already has 1 connections (the limit)",
    );
    // Once the first has gone, the slot is free again.
    drop(first);
    drop(second);
    open_on(services, 0).await;
}

#[tokio::test]
async fn the_client_properties_reach_management_as_text() {
    let (mut c, _) = fresh(ServerConfig::default());
    let mut props = ferry_amqp010::Map::new();
    use ferry_amqp010::Value;
    props.insert("product", Value::Str16(Str::from("unit-test")));
    props.insert("qpid.client_pid", Value::Uint32(4242));
    props.insert("qpid.session_flow", Value::Int64(-1));
    props.insert("flag", Value::Bool(true));
    props.insert("bin", Value::Vbin16(Bytes::from_static(b"raw")));
    props.insert("small", Value::Uint8(7));
    props.insert("s8", Value::Str8(Str::from("short")));
    props.insert("b8", Value::Vbin8(Bytes::from_static(b"v8")));
    props.insert("b32", Value::Vbin32(Bytes::from_static(b"v32")));
    props.insert("i8", Value::Int8(-8));
    props.insert("i16", Value::Int16(-16));
    props.insert("u16", Value::Uint16(16));
    props.insert("i32", Value::Int32(-32));
    props.insert("u64", Value::Uint64(64));
    props.insert("nested", Value::Map(ferry_amqp010::Map::new()));
    let start_ok = ConnectionStartOk {
        client_properties: Some(props),
        ..start_ok("PLAIN", b"\0guest\0guest")
    };
    c.send(&control(0, start_ok));
    c.finish_auth().await;
    c.take_output();
    c.send(&control(0, tune_ok(None, None, 0)));
    c.exchange(control(0, ConnectionOpen::default()));
    let listed = c.conn.broker().connections().list();
    let mut seen = listed[0].meta.client_properties.clone();
    seen.sort();
    let expected: Vec<(String, String)> = [
        ("b32", "v32"),
        ("b8", "v8"),
        ("bin", "raw"),
        ("flag", "true"),
        ("i16", "-16"),
        ("i32", "-32"),
        ("i8", "-8"),
        ("product", "unit-test"),
        ("qpid.client_pid", "4242"),
        ("qpid.session_flow", "-1"),
        ("s8", "short"),
        ("small", "7"),
        ("u16", "16"),
        ("u64", "64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(seen, expected);
    assert_eq!(listed[0].meta.user, "guest");
}

#[tokio::test]
async fn a_client_heartbeat_is_read_and_keeps_the_connection_alive() {
    let mut c = open_with(ServerConfig::default(), 1).await;
    for _ in 0..10 {
        c.send(&control(0, ConnectionHeartbeat {}));
        let out = decode(c.advance(SECOND));
        assert!(out
            .iter()
            .all(|i| matches!(i, Item::Control(0, Control::ConnectionHeartbeat(_)))));
    }
    assert_eq!(c.conn.shell.phase, Phase::Open);
    // Without heartbeats (0) no timer runs at all.
    let c = open().await;
    assert_eq!(c.conn.poll_timeout(), None);
}

#[tokio::test]
async fn the_handshake_must_finish_in_time() {
    let config = ServerConfig {
        handshake_timeout: 3 * SECOND,
        ..ServerConfig::default()
    };
    let (mut c, _) = fresh(config);
    let out = decode(c.advance(3 * SECOND));
    assert_closed(&c, &out, CloseCode::ConnectionForced, "handshake timed out");
    // No close-ok comes: the connection gives up after the grace period.
    c.advance(5 * SECOND);
    assert!(c.conn.is_done());
}

#[tokio::test]
async fn a_broker_shutdown_closes_with_connection_forced() {
    let mut c = open().await;
    c.attach(1, "s1");
    c.conn.handle_shutdown(c.now);
    let out = decode(c.take_output());
    assert_closed(
        &c,
        &out,
        CloseCode::ConnectionForced,
        "broker shutting down",
    );
    // Everything but close-ok is ignored while closing, even undecodable input on a channel.
    let mut junk = command(1, declare("q"), true);
    junk.extend_from_slice(&raw_frame(1, SegmentType::Body, (true, true), b"x"));
    assert!(c.exchange(junk).is_empty());
    assert!(c.conn.broker().queue("q").is_none());
    c.send(&control(0, ferry_amqp010::ConnectionCloseOk {}));
    assert!(c.conn.is_finished());
}

#[tokio::test]
async fn closing_the_connection_releases_what_its_sessions_had_not_settled() {
    let services = services(ServerConfig::default());
    let mut a = open_on(services.clone(), 0).await;
    a.attach(1, "s1");
    a.call(1, declare("work"));
    for body in ["m1", "m2", "m3"] {
        a.publish(1, "", &keyed("work"), body.as_bytes());
    }
    a.subscribe(
        1,
        "work",
        "d",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    let got = a.grant(1, "d", 3);
    assert_eq!(bodies(&got), [&b"m1"[..], b"m2", b"m3"]);
    // The second transfer (our command 1) is accepted.
    a.call(
        1,
        MessageAccept {
            transfers: Some(set(&[1])),
        },
    );
    let close = ConnectionClose {
        reply_code: Some(CloseCode::Normal),
        reply_text: None,
    };
    let out = a.exchange(control(0, close));
    assert!(matches!(
        &out[..],
        [Item::Control(0, Control::ConnectionCloseOk(_))]
    ));
    assert!(a.conn.is_finished());
    a.conn.teardown();
    let q = services.broker.queue("work").unwrap();
    assert_eq!(q.consumer_count(), 0);
    // m1 and m3 are back, in order and marked redelivered.
    let mut b = open_on(services, 0).await;
    b.attach(1, "s1");
    b.subscribe(1, "work", "e", AcceptMode::None, AcquireMode::PreAcquired);
    let got = b.grant(1, "e", 10);
    assert_eq!(bodies(&got), [&b"m1"[..], b"m3"]);
    assert!(got.iter().all(Delivered::redelivered));
}

/// Accept-mode none: transfers are accepted on their queue together once the outbox drain
/// that wrote them ends, whether the drain is the event loop's or the one a batch of
/// commands ends with (`deliver_waiting`).
#[tokio::test]
async fn transfers_settled_as_sent_are_accepted_when_the_drain_ends() {
    let services = services(ServerConfig::default());
    let mut a = open_on(services.clone(), 0).await;
    a.attach(1, "s1");
    a.call(1, declare("work"));
    for body in [b"m1", b"m2"] {
        a.publish(1, "", &keyed("work"), body);
    }
    a.subscribe(1, "work", "d", AcceptMode::None, AcquireMode::PreAcquired);
    let q = services.broker.queue("work").unwrap();
    // The credit's transfers go out at the end of the batch that granted it.
    a.send(&command(1, flow("d", CreditUnit::Byte, u32::MAX), false));
    a.send(&command(1, flow("d", CreditUnit::Message, 10), false));
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 0));
    assert_eq!(bodies(&delivered(a.take_output())), [&b"m1"[..], b"m2"]);
    // Published on another connection: the event loop's drain writes it.
    let mut b = open_on(services.clone(), 0).await;
    b.attach(1, "s1");
    b.publish(1, "", &keyed("work"), b"m3");
    a.conn.handle_outbox(&mut Vec::new(), a.now);
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 0));
    assert_eq!(bodies(&delivered(a.take_output())), [&b"m3"[..]]);
}

#[tokio::test]
async fn a_connection_fault_releases_the_sessions_at_once() {
    let services = services(ServerConfig::default());
    let mut a = open_on(services.clone(), 0).await;
    a.attach(1, "s1");
    a.call(1, declare("work"));
    a.publish(1, "", &keyed("work"), b"held");
    a.subscribe(
        1,
        "work",
        "d",
        AcceptMode::Explicit,
        AcquireMode::PreAcquired,
    );
    assert_eq!(a.grant(1, "d", 1).len(), 1);
    let q = services.broker.queue("work").unwrap();
    assert_eq!((q.message_count(), q.unsettled_count()), (0, 1));
    let out = a.exchange(raw_frame(1, SegmentType::Body, (true, true), b"x"));
    assert_closed(&a, &out, CloseCode::FramingError, "");
    // No close-ok needed: the message is available again and the consumer gone.
    assert_eq!(q.consumer_count(), 0);
    assert_eq!(q.info().message_count, 1);
    assert_eq!(q.unsettled_count(), 0);
}

#[tokio::test]
async fn a_publisher_is_paused_while_the_memory_alarm_is_raised() {
    let broker = BrokerConfig {
        memory_watermarks: Some(Watermarks {
            high: 1000,
            low: 100,
        }),
        ..BrokerConfig::default()
    };
    let services = services_with(ServerConfig::default(), broker);
    let mut publisher = open_on(services.clone(), 0).await;
    let mut other = open_on(services.clone(), 0).await;
    publisher.attach(1, "p");
    other.attach(1, "o");
    publisher.call(1, declare("q"));
    publisher.publish(1, "", &keyed("q"), &[1; 600]);
    publisher.publish(1, "", &keyed("q"), &[2; 600]);
    assert!(services.broker.alarms().blocked());
    publisher.poll_flow();
    other.poll_flow();
    // 0-10 has no notice: the publisher's input just waits.
    assert!(publisher.take_output().is_empty());
    let held = publisher.publish(1, "", &keyed("q"), b"held");
    assert!(held.is_empty(), "{held:?}");
    assert!(publisher.pending_input() > 0);
    let q = services.broker.queue("q").unwrap();
    assert_eq!(q.message_count(), 2);
    // A connection that never published is not paused.
    let purge = ferry_amqp010::QueuePurge {
        queue: Some(Str::from("q")),
    };
    assert_eq!(exception(&other.call(1, purge)), None);
    assert_eq!(services.broker.check_memory(), Some(false));
    publisher.poll_flow();
    assert_eq!(publisher.pending_input(), 0);
    assert_eq!(q.message_count(), 1);
    // The held transfer's completion goes out with the next report.
    let out = decode(publisher.take_output());
    assert!(
        completions(&out, 1).iter().any(|s| s.contains(3)),
        "{out:?}"
    );
}

/// A publisher on its own connection that has filled queue `q` past a 1000-byte backlog
/// hold (two 600-byte messages), with a consumer on another connection that has no credit
/// yet, and a third transfer waiting unprocessed. Both connections' clocks stand still.
async fn held_publisher() -> (Client, Client, Arc<Queue>) {
    let broker = BrokerConfig {
        backlog_hold: Some(1000),
        ..BrokerConfig::default()
    };
    let services = services_with(ServerConfig::default(), broker);
    let mut publisher = open_on(services.clone(), 0).await;
    let mut consumer = open_on(services.clone(), 0).await;
    publisher.attach(1, "p");
    consumer.attach(1, "c");
    consumer.call(1, declare("q"));
    consumer.subscribe(1, "q", "d", AcceptMode::None, AcquireMode::PreAcquired);
    publisher.publish(1, "", &keyed("q"), &[1; 600]);
    publisher.publish(1, "", &keyed("q"), &[2; 600]);
    assert!(publisher.publish(1, "", &keyed("q"), b"held").is_empty());
    assert!(publisher.pending_input() > 0, "held");
    let q = services.broker.queue("q").unwrap();
    assert_eq!((q.message_count(), q.held_publishers()), (2, 1));
    (publisher, consumer, q)
}

#[tokio::test]
async fn a_held_publisher_goes_on_as_soon_as_its_consumers_catch_up() {
    let (mut publisher, mut consumer, q) = held_publisher().await;
    // The consumer's own connection is never held: 2400 bytes queued.
    consumer.publish(1, "", &keyed("q"), &[3; 600]);
    consumer.publish(1, "", &keyed("q"), &[4; 600]);
    assert_eq!(consumer.grant(1, "d", 1).len(), 1);
    publisher.poll_flow();
    assert!(publisher.pending_input() > 0, "still held at 1800 bytes");
    // 600 bytes: within the hold. The queue lets the publisher go at once: its clock has
    // not moved, so no timer of its own can have done it.
    assert_eq!(consumer.grant(1, "d", 2).len(), 2);
    publisher.poll_flow();
    assert_eq!(publisher.pending_input(), 0, "let go without a timer tick");
    assert_eq!((q.message_count(), q.held_publishers()), (2, 0));
    assert_eq!(bodies(&consumer.grant(1, "d", 2))[1], b"held");
}

#[tokio::test]
async fn a_publisher_held_by_a_stuck_consumer_is_let_go_after_the_stall() {
    let (mut publisher, _consumer, q) = held_publisher().await;
    publisher.advance(Duration::from_millis(50));
    publisher.poll_flow();
    assert!(publisher.pending_input() > 0, "still held after 50 ms");
    publisher.advance(Duration::from_millis(60));
    publisher.poll_flow();
    assert_eq!(
        publisher.pending_input(),
        0,
        "let go after 110 ms without deliveries"
    );
    assert_eq!((q.message_count(), q.held_publishers()), (3, 0));
}

#[tokio::test]
async fn a_held_publisher_that_closes_is_forgotten_by_its_queue() {
    let (publisher, _consumer, q) = held_publisher().await;
    let mut publisher = publisher;
    publisher.conn.teardown();
    assert_eq!(q.held_publishers(), 0);
}

/// A cluster's members, as ferryd's cluster gate reports them.
struct Members;

impl crate::gate::Gate for Members {
    fn route(&self) -> crate::gate::GateRoute {
        crate::gate::GateRoute::Serve
    }
    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        tokio::sync::watch::channel(0).1
    }
    fn known_hosts(&self) -> Vec<String> {
        vec!["127.0.0.11:5672".into(), "127.0.0.12:5672".into()]
    }
}

#[tokio::test]
async fn open_ok_lists_a_clusters_members_as_known_hosts() {
    // qpidd's clients (the C++ messaging API among them) fail over through these URLs.
    let config = ServerConfig {
        gate: Some(crate::gate::GateHandle(std::sync::Arc::new(Members))),
        ..ServerConfig::default()
    };
    let (mut c, _) = at_tune(config).await;
    c.send(&control(0, tune_ok(Some(0), None, 0)));
    let out = c.exchange(control(0, ConnectionOpen::default()));
    let [Item::Control(0, Control::ConnectionOpenOk(ok))] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(
        strs(&ok.known_hosts),
        ["amqp:tcp:127.0.0.11:5672", "amqp:tcp:127.0.0.12:5672"]
    );
}

/// A transfer of `size` octets to queue `queue` (default exchange) on `channel`, split in
/// two: all its frames but the last, and the last.
fn transfer_in_two(channel: u16, queue: &str, size: usize) -> (BytesMut, BytesMut) {
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            routing_key: Some(Str::from(queue)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut all = transfer_frames(channel, "", &header, &vec![0u8; size], false);
    let mut frames = Vec::new();
    while let Some(frame) = decode_frame(&mut all, MAX_FRAME).expect("well-formed") {
        let mut bytes = BytesMut::new();
        frame.header.write(&mut bytes);
        bytes.extend_from_slice(&frame.payload);
        frames.push(bytes);
    }
    let last = frames.pop().expect("frames");
    (frames.concat().as_slice().into(), last)
}

/// The frames of a 200,000-octet transfer on `channel`, all but the last: a message the
/// peer never finishes.
fn unfinished_transfer(channel: u16) -> BytesMut {
    transfer_in_two(channel, "", 200_000).0
}

#[tokio::test]
async fn frames_on_channels_without_a_session_are_not_assembled() {
    // Before login, and after it on a channel nobody attached: what the peer sends there is
    // dropped frame by frame, not kept on each channel until a message ends.
    let (mut c, _) = fresh(ServerConfig::default());
    let idle = |c: &Client, channel: usize| {
        c.conn
            .protocol
            .channels
            .get(channel)
            .and_then(|ch| ch.as_ref())
            .is_none_or(|ch| ch.assembler.is_idle())
    };
    c.send(&unfinished_transfer(3));
    assert!(idle(&c, 3));
    let mut c = open().await;
    c.send(&unfinished_transfer(5));
    assert!(idle(&c, 5));
    // An attach there still works, and so does the session.
    c.attach(5, "late");
    c.exchange(command(5, declare("q5"), false));
    assert!(c.conn.shell.broker.queue("q5").is_some());
}

#[tokio::test]
async fn messages_begun_on_a_connection_are_bounded_together() {
    // Each within the size limit, the two unfinished messages would hold more than the
    // connection may: the second fails its session with resource-limit-exceeded, and the
    // first is still taken when it ends.
    let config = ServerConfig {
        max_message_size: 600 * 1024,
        max_unfinished_per_connection: 900 * 1024,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    c.attach(1, "first");
    c.attach(2, "second");
    c.exchange(command(1, declare("q"), false));
    let (first, first_end) = transfer_in_two(1, "q", 500_000);
    c.send(&first);
    let (second, _) = transfer_in_two(2, "q", 590_000);
    let out = c.exchange(second);
    let failed = exceptions(&out);
    assert_eq!(failed.len(), 1, "{out:?}");
    assert_eq!(failed[0].0, 2);
    assert_eq!(
        failed[0].1.error_code,
        Some(ErrorCode::ResourceLimitExceeded)
    );
    c.send(&first_end);
    assert_eq!(
        c.conn.shell.broker.queue("q").map(|q| q.depth().ready),
        Some(1)
    );
}
