//! Connection negotiation: protocol header, start/start-ok (SASL PLAIN or ANONYMOUS),
//! tune/tune-ok, open/open-ok. Runs before the reader and writer tasks exist.

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp010::{
    decode_frame, write_control, Assembler, ConnectionClose, ConnectionCloseOk, ConnectionOpen,
    ConnectionStart, ConnectionStartOk, ConnectionTune, ConnectionTuneOk, Control, Incoming, Map,
    Str, Value, MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE, PROTOCOL_HEADER,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::ClientError;
use crate::options::{ConnectOptions, Mechanism};

/// What the handshake settled.
#[derive(Debug, Clone)]
pub(crate) struct Negotiated {
    pub max_frame_size: u16,
    pub channel_max: u16,
    pub heartbeat: u16,
    pub server_properties: Map,
}

struct ControlReader {
    buf: BytesMut,
    assembler: Assembler,
}

impl ControlReader {
    async fn next<S: AsyncRead + Unpin>(&mut self, s: &mut S) -> Result<Control, ClientError> {
        loop {
            while let Some(frame) = decode_frame(&mut self.buf, MAX_FRAME_SIZE)? {
                match self.assembler.push(frame)? {
                    Some(Incoming::Control(c)) => return Ok(c),
                    Some(Incoming::Command { .. }) => {
                        return Err(ClientError::Protocol(
                            "command during connection negotiation".into(),
                        ))
                    }
                    None => {}
                }
            }
            read_more(s, &mut self.buf).await?;
        }
    }
}

async fn read_more<S: AsyncRead + Unpin>(s: &mut S, buf: &mut BytesMut) -> Result<(), ClientError> {
    buf.reserve(4096);
    if s.read_buf(buf).await? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the server closed the connection during negotiation",
        )
        .into());
    }
    Ok(())
}

async fn send<S: AsyncWrite + Unpin>(s: &mut S, control: Control) -> Result<(), ClientError> {
    let mut out = BytesMut::new();
    write_control(&mut out, 0, &control)?;
    s.write_all(&out).await?;
    Ok(())
}

/// Handles the controls that may end negotiation early.
async fn unexpected<S: AsyncWrite + Unpin>(
    s: &mut S,
    control: Control,
    waiting_for: &str,
) -> ClientError {
    match control {
        Control::ConnectionClose(c) => {
            let _ = send(s, ConnectionCloseOk {}.into()).await;
            closed(&c)
        }
        Control::ConnectionRedirect(r) => ClientError::Redirected {
            host: r
                .host
                .map(|h| h.to_str_lossy().into_owned())
                .unwrap_or_default(),
        },
        other => ClientError::Protocol(format!("expected {waiting_for}, got {:?}", other.name())),
    }
}

pub(crate) fn closed(c: &ConnectionClose) -> ClientError {
    ClientError::ConnectionClosed {
        code: c.reply_code.map_or(0, |c| c.code()),
        text: c
            .reply_text
            .as_ref()
            .map(|t| t.to_str_lossy().into_owned())
            .unwrap_or_default(),
    }
}

/// Runs the handshake; returns the settled parameters and any octets read past it.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    options: &ConnectOptions,
) -> Result<(Negotiated, BytesMut), ClientError> {
    s.write_all(&PROTOCOL_HEADER).await?;
    let mut buf = BytesMut::with_capacity(8192);
    while buf.len() < PROTOCOL_HEADER.len() {
        read_more(s, &mut buf).await?;
    }
    let header = buf.split_to(PROTOCOL_HEADER.len());
    if header[..] != PROTOCOL_HEADER {
        let mut received = [0u8; 8];
        received.copy_from_slice(&header);
        return Err(ClientError::ProtocolMismatch { received });
    }
    let mut reader = ControlReader {
        buf,
        assembler: Assembler::new(MAX_FRAME_SIZE),
    };

    let start = match reader.next(s).await? {
        Control::ConnectionStart(start) => start,
        other => return Err(unexpected(s, other, "connection.start").await),
    };
    send(s, start_ok(&start, options)?.into()).await?;

    let tune = match reader.next(s).await? {
        Control::ConnectionTune(tune) => tune,
        Control::ConnectionSecure(_) => {
            return Err(ClientError::Protocol(
                "connection.secure: PLAIN and ANONYMOUS need no challenge".into(),
            ))
        }
        other => return Err(unexpected(s, other, "connection.tune").await),
    };
    let negotiated = tune_ok(&tune, options, start.server_properties.unwrap_or_default());
    send(
        s,
        ConnectionTuneOk {
            channel_max: Some(negotiated.channel_max),
            max_frame_size: Some(negotiated.max_frame_size),
            heartbeat: Some(negotiated.heartbeat),
        }
        .into(),
    )
    .await?;
    send(
        s,
        ConnectionOpen {
            virtual_host: Some(Str::from(options.virtual_host.as_str())),
            capabilities: None,
            insist: false,
        }
        .into(),
    )
    .await?;
    match reader.next(s).await? {
        Control::ConnectionOpenOk(_) => {}
        other => return Err(unexpected(s, other, "connection.open-ok").await),
    }
    if !reader.assembler.is_idle() {
        return Err(ClientError::Protocol(
            "partial control after connection.open-ok".into(),
        ));
    }
    Ok((negotiated, reader.buf))
}

fn start_ok(
    start: &ConnectionStart,
    options: &ConnectOptions,
) -> Result<ConnectionStartOk, ClientError> {
    let mechanism = options.effective_mechanism();
    if let Some(offered) = &start.mechanisms {
        let names: Vec<String> = offered
            .strs()
            .map(|m| m.to_str_lossy().into_owned())
            .collect();
        if !names.iter().any(|n| n == mechanism.name()) {
            return Err(ClientError::NoMechanism { offered: names });
        }
    }
    let response = match mechanism {
        Mechanism::Plain => {
            let user = options.username.as_deref().unwrap_or_default();
            let password = options.password.as_deref().unwrap_or_default();
            let mut r = BytesMut::with_capacity(user.len() + password.len() + 2);
            r.put_u8(0);
            r.put_slice(user.as_bytes());
            r.put_u8(0);
            r.put_slice(password.as_bytes());
            r.freeze()
        }
        Mechanism::Anonymous => Bytes::new(),
    };
    let mut properties = options.client_properties.clone();
    for (key, value) in [
        ("product", "ferry-client"),
        ("version", env!("CARGO_PKG_VERSION")),
        ("platform", std::env::consts::OS),
    ] {
        if properties.get(key).is_none() {
            properties.insert(key, Value::Str16(Str::from(value)));
        }
    }
    if properties.get("qpid.client_pid").is_none() {
        properties.insert("qpid.client_pid", Value::from(std::process::id()));
    }
    Ok(ConnectionStartOk {
        client_properties: Some(properties),
        mechanism: Some(Str::from(mechanism.name())),
        response: Some(response),
        locale: Some(Str::from("en_US")),
    })
}

fn tune_ok(tune: &ConnectionTune, options: &ConnectOptions, server_properties: Map) -> Negotiated {
    let server_frame = tune.max_frame_size.unwrap_or(u16::MAX);
    let max_frame_size = options
        .max_frame_size
        .min(server_frame)
        .max(MIN_MAX_FRAME_SIZE as u16);
    let heartbeat = if options.heartbeat == 0 {
        0
    } else {
        let min = tune.heartbeat_min.unwrap_or(0);
        let max = tune.heartbeat_max.unwrap_or(u16::MAX);
        options.heartbeat.max(min).min(max)
    };
    Negotiated {
        max_frame_size,
        channel_max: tune.channel_max.unwrap_or(u16::MAX),
        heartbeat,
        server_properties,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp010::Array;

    fn mechanisms(names: &[&str]) -> Array {
        Array::of_str16(names.iter().copied())
    }

    #[test]
    fn plain_response_and_default_properties() {
        let options = ConnectOptions {
            username: Some("guest".into()),
            password: Some("pw".into()),
            ..Default::default()
        };
        let start = ConnectionStart {
            mechanisms: Some(mechanisms(&["ANONYMOUS", "PLAIN"])),
            ..Default::default()
        };
        let ok = start_ok(&start, &options).unwrap();
        assert_eq!(ok.mechanism.unwrap(), "PLAIN");
        assert_eq!(ok.response.as_deref(), Some(&b"\0guest\0pw"[..]));
        let props = ok.client_properties.unwrap();
        assert_eq!(
            props.get("product"),
            Some(&Value::Str16(Str::from("ferry-client")))
        );
    }

    #[test]
    fn anonymous_without_a_username_and_refused_when_not_offered() {
        let start = ConnectionStart {
            mechanisms: Some(mechanisms(&["PLAIN"])),
            ..Default::default()
        };
        let err = start_ok(&start, &ConnectOptions::default()).unwrap_err();
        assert!(matches!(err, ClientError::NoMechanism { offered } if offered == ["PLAIN"]));
    }

    #[test]
    fn tune_takes_the_smaller_frame_and_clamps_heartbeat() {
        let tune = ConnectionTune {
            channel_max: Some(32),
            max_frame_size: Some(8192),
            heartbeat_min: Some(5),
            heartbeat_max: Some(60),
        };
        let options = ConnectOptions {
            heartbeat: 1,
            ..Default::default()
        };
        let n = tune_ok(&tune, &options, Map::new());
        assert_eq!(
            (n.max_frame_size, n.channel_max, n.heartbeat),
            (8192, 32, 5)
        );
        let n = tune_ok(&tune, &ConnectOptions::default(), Map::new());
        assert_eq!(n.heartbeat, 0, "no heartbeat unless asked");
        let small = ConnectOptions {
            max_frame_size: 100,
            ..Default::default()
        };
        assert_eq!(tune_ok(&tune, &small, Map::new()).max_frame_size, 4096);
    }
}
