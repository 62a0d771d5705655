//! QMF v2 messages on AMQP 0-10: reading a request out of a core message, and making the core
//! message of a reply (0-10 header segment built with the codec, as the protocol bridge
//! does for 0-9-1 messages).
//!
//! A request is a message with message-properties `app-id` "qmf2", a `reply-to`, an optional
//! `correlation-id` (echoed) and application headers `method` and `qmf.opcode`; its body is
//! a 0-10 encoded map. Replies carry `app-id` "qmf2", the correlation id, a content type
//! (`amqp/map` or `amqp/list`) and headers `method`, `qmf.opcode`, `qmf.agent` (plus
//! `qmf.content` and `partial` on query responses), as qpidd's `ManagementAgent::sendBuffer`
//! writes them.

use bytes::{Bytes, BytesMut};
use ferry_amqp010::codec::Reader;
use ferry_amqp010::{
    DecodeError, DeliveryProperties, List, Map, MessageHeader, MessageProperties, Str, Value,
};
use ferry_core::{Header, Message, MessageParts, ProtocolHeader};

use crate::value::{header_text, read_text};

/// Largest request body the agent reads. qpidd drops larger requests unanswered (its QMF
/// buffer is 64 KiB); every request a console makes is far smaller.
pub const MAX_REQUEST_BODY: usize = 65536;

/// qpidd's default priority for a message without one.
const DEFAULT_PRIORITY: u8 = 4;

/// Where a reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyAddress {
    pub exchange: String,
    pub routing_key: String,
    pub correlation_id: Option<Bytes>,
}

/// A QMF request: v2 (app-id "qmf2": opcode in the headers, a map body) or v1 (binary body,
/// see `crate::v1`).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub qmf2: bool,
    /// The v2 opcode (empty for v1).
    pub opcode: String,
    pub reply: ReplyAddress,
    /// The message's user-id, unverified (logged, not trusted: see the crate doc).
    pub user_id: Option<String>,
    pub body: Bytes,
}

/// Why a message got no answer. qpidd ignores all of these silently.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NotARequest {
    #[error("not an AMQP 0-10 message")]
    NotAmqp010,
    #[error("malformed header: {0}")]
    Header(#[from] DecodeError),
    #[error("no reply-to")]
    NoReplyTo,
    #[error("body of {0} bytes is over the {MAX_REQUEST_BODY}-byte limit")]
    TooLarge(usize),
}

impl Request {
    pub fn parse(message: &Message) -> Result<Request, NotARequest> {
        let Header::Amqp010(segment) = message.header() else {
            return Err(NotARequest::NotAmqp010);
        };
        let props = MessageHeader::decode(Bytes::copy_from_slice(segment))?
            .properties
            .unwrap_or_default();
        let reply_to = props.reply_to.ok_or(NotARequest::NoReplyTo)?;
        if message.body().len() > MAX_REQUEST_BODY {
            return Err(NotARequest::TooLarge(message.body().len()));
        }
        let headers = props.application_headers.unwrap_or_default();
        let qmf2 = props.app_id.as_deref() == Some(b"qmf2".as_slice());
        let text = |s: Option<Str>| s.map(|s| s.to_str_lossy().into_owned()).unwrap_or_default();
        Ok(Request {
            qmf2,
            opcode: headers
                .get("qmf.opcode")
                .and_then(read_text)
                .unwrap_or_default()
                .to_owned(),
            reply: ReplyAddress {
                exchange: text(reply_to.exchange),
                routing_key: text(reply_to.routing_key),
                correlation_id: props.correlation_id.filter(|c| !c.is_empty()),
            },
            user_id: props
                .user_id
                .map(|u| String::from_utf8_lossy(&u).into_owned()),
            body: message.body_bytes(),
        })
    }

    /// The body as a map (`amqp/map`). An empty body is an empty map, as qpidd's codec
    /// reads it.
    pub fn map(&self) -> Result<Map, DecodeError> {
        if self.body.is_empty() {
            return Ok(Map::new());
        }
        Map::decode(&mut Reader::new(self.body.clone()))
    }
}

/// A reply's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Map(Map),
    List(List),
}

/// A reply: opcode, the `method` header (request/response/indication), content and any
/// further application headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub method: &'static str,
    pub opcode: &'static str,
    pub content: Content,
    pub headers: Vec<(&'static str, Value)>,
}

impl Reply {
    pub fn map(method: &'static str, opcode: &'static str, map: Map) -> Reply {
        Reply {
            method,
            opcode,
            content: Content::Map(map),
            headers: Vec::new(),
        }
    }

    /// An `_exception` indication: `{_values: {error_code, error_text}}`, qpidd's
    /// `sendException`.
    pub fn exception(code: u32, text: &str) -> Reply {
        let mut values = Map::new();
        values.insert("error_code", Value::Uint32(code));
        values.insert("error_text", crate::value::text(text));
        let mut map = Map::new();
        map.insert("_values", Value::Map(values));
        Reply::map("indication", "_exception", map)
    }

    /// The core message carrying this reply to `to`, sent by agent `agent` (its QMF name).
    pub fn to_message(
        &self,
        to: &ReplyAddress,
        agent: &str,
    ) -> Result<Message, ferry_amqp010::EncodeError> {
        let mut body = BytesMut::new();
        let content_type = match &self.content {
            Content::Map(m) => {
                m.encode(&mut body)?;
                "amqp/map"
            }
            Content::List(l) => {
                l.encode(&mut body)?;
                "amqp/list"
            }
        };
        let body = body.freeze();
        let mut headers = Map::new();
        headers.insert("method", header_text(self.method));
        headers.insert("qmf.opcode", header_text(self.opcode));
        headers.insert("qmf.agent", header_text(agent));
        for (k, v) in &self.headers {
            headers.insert(*k, v.clone());
        }
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                exchange: Some(Str::from(to.exchange.as_str())),
                routing_key: Some(Str::from(to.routing_key.as_str())),
                ..DeliveryProperties::default()
            }),
            properties: Some(MessageProperties {
                content_length: Some(body.len() as u64),
                correlation_id: to.correlation_id.clone(),
                content_type: Some(Str::from(content_type)),
                app_id: Some(Bytes::from_static(b"qmf2")),
                application_headers: Some(headers),
                ..MessageProperties::default()
            }),
            other: Vec::new(),
        };
        let mut segment = BytesMut::new();
        header.encode(&mut segment)?;
        Ok(core_message(to, segment.freeze(), body))
    }
}

/// A QMF v1 reply: the binary body with only a content length and a routing key, as qpidd
/// sends them.
pub fn v1_message(
    exchange: &str,
    routing_key: &str,
    body: Bytes,
) -> Result<Message, ferry_amqp010::EncodeError> {
    let header = MessageHeader {
        delivery: Some(DeliveryProperties {
            exchange: Some(Str::from(exchange)),
            routing_key: Some(Str::from(routing_key)),
            ..DeliveryProperties::default()
        }),
        properties: Some(MessageProperties {
            content_length: Some(body.len() as u64),
            ..MessageProperties::default()
        }),
        other: Vec::new(),
    };
    let mut segment = BytesMut::new();
    header.encode(&mut segment)?;
    let to = ReplyAddress {
        exchange: exchange.to_owned(),
        routing_key: routing_key.to_owned(),
        correlation_id: None,
    };
    Ok(core_message(&to, segment.freeze(), body))
}

fn core_message(to: &ReplyAddress, segment: Bytes, body: Bytes) -> Message {
    let mut message = MessageParts::new(to.exchange.clone(), to.routing_key.clone(), body);
    message.header = ProtocolHeader::Amqp010(segment);
    message.priority = DEFAULT_PRIORITY;
    message.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_amqp010::ReplyTo;

    fn request_message(app_id: &[u8], reply: bool, body: Bytes) -> Message {
        let mut headers = Map::new();
        headers.insert("method", Value::Str16(Str::from("request")));
        headers.insert(
            "qmf.opcode",
            Value::Vbin16(Bytes::from_static(b"_query_request")),
        );
        let header = MessageHeader {
            delivery: Some(DeliveryProperties {
                routing_key: Some(Str::from("broker")),
                ..Default::default()
            }),
            properties: Some(MessageProperties {
                correlation_id: Some(Bytes::from_static(b"7")),
                reply_to: reply.then(|| ReplyTo {
                    exchange: Some(Str::from("qmf.default.topic")),
                    routing_key: Some(Str::from("direct.abc")),
                }),
                app_id: Some(Bytes::copy_from_slice(app_id)),
                user_id: Some(Bytes::from_static(b"guest")),
                application_headers: Some(headers),
                ..Default::default()
            }),
            other: Vec::new(),
        };
        let mut segment = BytesMut::new();
        header.encode(&mut segment).unwrap();
        let mut m = MessageParts::new("qmf.default.direct", "broker", body);
        m.header = ProtocolHeader::Amqp010(segment.freeze());
        m.build()
    }

    fn encoded(map: &Map) -> Bytes {
        let mut b = BytesMut::new();
        map.encode(&mut b).unwrap();
        b.freeze()
    }

    #[test]
    fn a_request_is_read_from_its_properties() {
        let mut body = Map::new();
        body.insert("_what", Value::Str16(Str::from("OBJECT")));
        let req = Request::parse(&request_message(b"qmf2", true, encoded(&body))).unwrap();
        assert!(req.qmf2);
        assert_eq!(req.opcode, "_query_request");
        assert_eq!(req.reply.exchange, "qmf.default.topic");
        assert_eq!(req.reply.routing_key, "direct.abc");
        assert_eq!(req.reply.correlation_id.as_deref(), Some(b"7".as_slice()));
        assert_eq!(req.user_id.as_deref(), Some("guest"));
        assert_eq!(req.map().unwrap(), body);
    }

    #[test]
    fn what_qpidd_ignores_is_not_a_request() {
        let body = encoded(&Map::new());
        assert_eq!(
            Request::parse(&request_message(b"qmf2", false, body.clone())),
            Err(NotARequest::NoReplyTo)
        );
        let v1 = Request::parse(&request_message(b"qmf1", true, body)).unwrap();
        assert!(!v1.qmf2);
        let big = Bytes::from(vec![0u8; MAX_REQUEST_BODY + 1]);
        assert_eq!(
            Request::parse(&request_message(b"qmf2", true, big)),
            Err(NotARequest::TooLarge(MAX_REQUEST_BODY + 1))
        );
        let plain = Message::new("x", "y", Bytes::new());
        assert_eq!(Request::parse(&plain), Err(NotARequest::NotAmqp010));
        let mut garbled = plain.to_parts();
        garbled.header = ProtocolHeader::Amqp010(Bytes::from_static(b"\x00\x00\x00\x09abc"));
        let garbled = garbled.build();
        assert!(matches!(
            Request::parse(&garbled),
            Err(NotARequest::Header(_))
        ));
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        let mut req =
            Request::parse(&request_message(b"qmf2", true, encoded(&Map::new()))).unwrap();
        for junk in [
            &b"\x00\x00\x00\x05\x00\x00\x00\x01"[..],
            b"\xff\xff\xff\xff",
            b"\x00\x00\x00\x06\x00\x00\x00\x01\x01a",
        ] {
            req.body = Bytes::copy_from_slice(junk);
            assert!(req.map().is_err(), "{junk:?}");
        }
        req.body = Bytes::new();
        assert_eq!(req.map().unwrap(), Map::new());
    }

    #[test]
    fn replies_carry_qmf_properties_and_the_correlation_id() {
        let to = ReplyAddress {
            exchange: "qmf.default.topic".into(),
            routing_key: "direct.abc".into(),
            correlation_id: Some(Bytes::from_static(b"7")),
        };
        let mut reply = Reply::exception(7, "boom");
        reply.headers.push(("partial", Value::Void));
        let m = reply.to_message(&to, "apache.org:qpidd:x").unwrap();
        assert_eq!(m.exchange(), b"qmf.default.topic");
        assert_eq!(m.routing_key(), b"direct.abc");
        let Header::Amqp010(segment) = m.header() else {
            panic!("no 0-10 header")
        };
        assert_eq!(m.size() as usize, segment.len() + m.body().len());
        let h = MessageHeader::decode(Bytes::copy_from_slice(segment)).unwrap();
        let p = h.properties.unwrap();
        assert_eq!(p.app_id.as_deref(), Some(b"qmf2".as_slice()));
        assert_eq!(p.correlation_id.as_deref(), Some(b"7".as_slice()));
        assert_eq!(p.content_type.unwrap(), "amqp/map");
        assert_eq!(p.content_length, Some(m.body().len() as u64));
        let ah = p.application_headers.unwrap();
        assert_eq!(ah.get("qmf.opcode").and_then(read_text), Some("_exception"));
        assert_eq!(ah.get("method").and_then(read_text), Some("indication"));
        assert_eq!(
            ah.get("qmf.agent").and_then(read_text),
            Some("apache.org:qpidd:x")
        );
        assert_eq!(ah.get("partial"), Some(&Value::Void));
        let body = Map::decode(&mut Reader::new(m.body_bytes())).unwrap();
        let Some(Value::Map(values)) = body.get("_values") else {
            panic!("no _values")
        };
        assert_eq!(values.get("error_code"), Some(&Value::Uint32(7)));
        assert_eq!(values.get("error_text").and_then(read_text), Some("boom"));
    }
}
