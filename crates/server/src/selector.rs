//! JMS message selectors on consumers (1.0's `apache.org:selector-filter:string`): parsed
//! once, when the link attaches, and evaluated against each queued message it is asked
//! about, whatever protocol published it, through the names JMS gives a message's fields.
//!
//! 0-10 and 0-9-1 subscriptions carry one as an argument: `x-filter-jms-selector` (the Qpid
//! JMS 0-x client's, sent with every subscription, empty for none) or qpidd's
//! `x-apache-selector`. Their consumers never drop what they do not match: a queue a
//! session owns outlives its consumers, and another consumer may still want it.
//!
//! The header fields map as Qpid JMS and Qpid Broker-J have them: `JMSType` is the 1.0
//! subject, `JMSMessageID` the message-id in Qpid JMS's text form, `JMSTimestamp` the
//! creation time. A 1.0 message's fields also go by qpidd's `amqp.` names, as they are
//! (`amqp.message_id`, `amqp.priority`, ...). Any other name is an application property
//! (application headers in 0-10 and 0-9-1).

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use ferry_amqp091::{BasicProperties, FieldValue, RawProperties};
use ferry_amqp1::{ApplicationProperties, Header, MessageId, Properties, Value as V1};
use ferry_core::{
    Arguments, BindingFilters, ConsumerFilter, Header as CoreHeader, HeaderValue, Message,
    MessageFilter,
};
use ferry_selector::{Fields, Selector, SelectorError, Value};

use crate::bridge::amqp1::stored::Stored;
use crate::bridge::from_amqp010_header;

#[derive(Debug)]
pub struct JmsSelector(Selector);

impl JmsSelector {
    /// `None` for blank text, which JMS takes as no selector at all.
    pub fn parse(text: &str) -> Result<Option<JmsSelector>, SelectorError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        Selector::parse(text).map(|s| Some(JmsSelector(s)))
    }

    /// The text it was parsed from.
    pub fn text(&self) -> &str {
        self.0.text()
    }
}

/// The text of the first of `names` that `arguments` carry as a string.
fn argument_text<'a>(arguments: &'a Arguments, names: &[&str]) -> Option<Cow<'a, str>> {
    names
        .iter()
        .find_map(|name| arguments.get(name))
        .and_then(|v| match v {
            HeaderValue::Str(s) => Some(Cow::Borrowed(s.as_str())),
            HeaderValue::Bytes(b) => Some(String::from_utf8_lossy(b)),
            _ => None,
        })
}

/// Why a selector was refused, for the peer: the parser's words, bounded (they may quote
/// the peer's text).
pub fn refusal(e: &SelectorError) -> String {
    crate::text::truncated(&format!("JMS selector refused: {e}"), 512).to_owned()
}

/// The argument a queue binding carries a selector in: Qpid JMS 0-x binds a topic
/// subscriber's queue with it, and Qpid Broker-J applies it there.
pub const BINDING_SELECTOR_ARGUMENT: &str = "x-filter-jms-selector";

/// The broker's [`BindingFilters`]: a queue binding with a selector in its arguments admits
/// only what the selector matches, so a topic subscriber's queue (durable ones included)
/// never holds what its selector rejects. A selector that does not parse refuses the
/// binding.
pub fn binding_filters() -> BindingFilters {
    BindingFilters(Arc::new(|arguments: &Arguments| {
        let Some(text) = argument_text(arguments, &[BINDING_SELECTOR_ARGUMENT]) else {
            return Ok(None);
        };
        match JmsSelector::parse(&text) {
            Ok(selector) => Ok(selector.map(|s| Arc::new(s) as Arc<dyn MessageFilter>)),
            Err(e) => Err(refusal(&e)),
        }
    }))
}

/// Subscription arguments that carry a selector, in the order they are looked for.
const SELECTOR_ARGUMENTS: [&str; 2] = ["x-filter-jms-selector", "x-apache-selector"];

/// The filter a 0-10 or 0-9-1 consumer's `arguments` ask for (`None`: no selector, or a
/// blank one).
pub fn consumer_filter(arguments: &Arguments) -> Result<Option<ConsumerFilter>, SelectorError> {
    let text = argument_text(arguments, &SELECTOR_ARGUMENTS);
    let Some(selector) = text
        .as_deref()
        .map(JmsSelector::parse)
        .transpose()?
        .flatten()
    else {
        return Ok(None);
    };
    Ok(Some(ConsumerFilter {
        matches: Arc::new(selector),
        drop_unmatched: false,
    }))
}

impl MessageFilter for JmsSelector {
    fn matches(&self, message: &Message) -> bool {
        let decoded = decoded(message);
        match &*decoded {
            Decoded::Amqp1(sections) => self.0.matches(&Amqp1Fields { message, sections }),
            Decoded::Basic { props, amqp010 } => self.0.matches(&BasicFields {
                message,
                props,
                amqp010: *amqp010,
            }),
        }
    }

    fn text(&self) -> Option<&str> {
        Some(self.0.text())
    }
}

/// The fields the core knows for every message, by their JMS names.
fn core_field<'a>(message: &Message, name: &str) -> Option<Value<'a>> {
    Some(match name {
        "JMSDeliveryMode" => Value::Str(Cow::Borrowed(if message.persistent() {
            "PERSISTENT"
        } else {
            "NON_PERSISTENT"
        })),
        "JMSPriority" => Value::Int(i64::from(message.priority())),
        // JMS's 0 is "never".
        "JMSExpiration" => Value::Int(message.expires_at().map_or(0, |at| at as i64)),
        _ => return None,
    })
}

/// A message's header fields, decoded for selectors.
enum Decoded {
    Amqp1(Amqp1Sections),
    /// Published over 0-9-1, or over 0-10 (through the 0-9-1 properties it maps to).
    Basic {
        props: BasicProperties,
        amqp010: bool,
    },
}

/// Messages larger than this are decoded again for each selector rather than kept: the
/// cache holds the message it decoded.
const CACHED_MESSAGE_MAX: u64 = 64 * 1024;

thread_local! {
    /// The last message a selector looked at on this thread, decoded. A message routed to
    /// many selective queues (a topic's subscribers, each with a selector) is looked at
    /// by each in turn on the publishing thread, and is decoded once instead of once per
    /// queue. Keyed by identity: message contents never change once built, and the cache
    /// holds the message, so its address cannot be reused while cached.
    static LAST_DECODED: RefCell<Option<(Message, Rc<Decoded>)>> = const { RefCell::new(None) };
}

fn decoded(message: &Message) -> Rc<Decoded> {
    LAST_DECODED.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((m, d)) = last.as_ref() {
            if Message::ptr_eq(m, message) {
                return d.clone();
            }
        }
        let d = Rc::new(decode(message));
        *last = (message.size() <= CACHED_MESSAGE_MAX).then(|| (message.clone(), d.clone()));
        d
    })
}

fn decode(message: &Message) -> Decoded {
    match message.header() {
        CoreHeader::Amqp1(_) => Decoded::Amqp1(Amqp1Sections::of(message)),
        CoreHeader::Amqp010(segment) => Decoded::Basic {
            props: from_amqp010_header(segment),
            amqp010: true,
        },
        CoreHeader::Amqp091(_) => Decoded::Basic {
            props: RawProperties::parse(message.header_bytes())
                .map(|p| p.decode())
                .unwrap_or_default(),
            amqp010: false,
        },
        CoreHeader::None => Decoded::Basic {
            props: BasicProperties::default(),
            amqp010: false,
        },
    }
}

/// A message published over 1.0: its sections, decoded. Sections that do not decode are
/// taken as absent (they were only split on the way in).
struct Amqp1Sections {
    header: Header,
    properties: Properties,
    application: Option<ApplicationProperties>,
}

impl Amqp1Sections {
    fn of(message: &Message) -> Amqp1Sections {
        let stored = Stored::parse(&message.header_bytes()).ok();
        let sections = stored.as_ref().map(|s| &s.sections);
        Amqp1Sections {
            header: sections
                .and_then(|s| s.header().ok().flatten())
                .unwrap_or_default(),
            properties: sections
                .and_then(|s| s.properties().ok().flatten())
                .unwrap_or_default(),
            application: sections.and_then(|s| s.application_properties().ok().flatten()),
        }
    }
}

struct Amqp1Fields<'m> {
    message: &'m Message,
    sections: &'m Amqp1Sections,
}

impl Fields for Amqp1Fields<'_> {
    fn get(&self, name: &str) -> Value<'_> {
        if let Some(v) = core_field(self.message, name) {
            return v;
        }
        let p = &self.sections.properties;
        match name {
            "JMSMessageID" => p.message_id.as_ref().map_or(Value::Null, message_id),
            "JMSCorrelationID" => p
                .correlation_id
                .as_ref()
                .map_or(Value::Null, correlation_id),
            "JMSType" => amqp1_text(p.subject.as_ref()),
            "JMSTimestamp" => p.creation_time.map_or(Value::Null, |t| Value::Int(t.0)),
            "JMSXUserID" => p.user_id.as_deref().map_or(Value::Null, utf8),
            "JMSXGroupID" => amqp1_text(p.group_id.as_ref()),
            "JMSXGroupSeq" => p
                .group_sequence
                .map_or(Value::Null, |n| Value::Int(i64::from(n))),
            "JMSXDeliveryCount" => Value::Int(i64::from(self.sections.header.delivery_count) + 1),
            _ if name.starts_with("amqp.") => self.amqp_field(name),
            _ => self
                .sections
                .application
                .as_ref()
                .and_then(|a| a.get(name))
                .map_or(Value::Null, amqp1_value),
        }
    }
}

impl Amqp1Fields<'_> {
    /// qpidd's names for the header and properties fields, their values as they are.
    fn amqp_field(&self, name: &str) -> Value<'_> {
        let (h, p) = (&self.sections.header, &self.sections.properties);
        let int = |n: Option<u32>| n.map_or(Value::Null, |n| Value::Int(i64::from(n)));
        let time = |t: Option<ferry_amqp1::Timestamp>| t.map_or(Value::Null, |t| Value::Int(t.0));
        match name {
            "amqp.durable" => Value::Bool(h.durable),
            "amqp.priority" => Value::Int(i64::from(h.priority)),
            "amqp.delivery_count" => Value::Int(i64::from(h.delivery_count)),
            "amqp.message_id" => p.message_id.as_ref().map_or(Value::Null, raw_id),
            "amqp.correlation_id" => p.correlation_id.as_ref().map_or(Value::Null, raw_id),
            "amqp.user_id" => p.user_id.as_deref().map_or(Value::Null, utf8),
            "amqp.to" => amqp1_text(p.to.as_ref()),
            "amqp.subject" => amqp1_text(p.subject.as_ref()),
            "amqp.reply_to" => amqp1_text(p.reply_to.as_ref()),
            "amqp.content_type" => symbol_text(p.content_type.as_ref()),
            "amqp.content_encoding" => symbol_text(p.content_encoding.as_ref()),
            "amqp.absolute_expiry_time" => time(p.absolute_expiry_time),
            "amqp.creation_time" => time(p.creation_time),
            "amqp.group_id" => amqp1_text(p.group_id.as_ref()),
            "amqp.group_sequence" => int(p.group_sequence),
            "amqp.reply_to_group_id" => amqp1_text(p.reply_to_group_id.as_ref()),
            _ => Value::Null,
        }
    }
}

/// A message-id or correlation-id as it is: a string, a number, a UUID's text; a binary
/// one if it is UTF-8.
fn raw_id(id: &MessageId) -> Value<'_> {
    match id {
        MessageId::String(s) => Value::Str(Cow::Borrowed(s.as_str())),
        MessageId::Ulong(n) => i64::try_from(*n).map_or(Value::Float(*n as f64), Value::Int),
        MessageId::Uuid(u) => Value::Str(Cow::Owned(crate::bridge::uuid_text(&u.0))),
        MessageId::Binary(b) => utf8(b),
    }
}

/// Qpid JMS's text for a message-id: strings as sent when they carry its `ID:` prefix,
/// other types tagged with theirs.
fn message_id(id: &MessageId) -> Value<'_> {
    match id {
        MessageId::String(s) if s.as_str().starts_with("ID:") => {
            Value::Str(Cow::Borrowed(s.as_str()))
        }
        other => Value::Str(Cow::Owned(format!("ID:{}", tagged_id(other)))),
    }
}

/// A correlation-id that is a string is the application's own, as it is.
fn correlation_id(id: &MessageId) -> Value<'_> {
    match id {
        MessageId::String(s) => Value::Str(Cow::Borrowed(s.as_str())),
        other => Value::Str(Cow::Owned(format!("ID:{}", tagged_id(other)))),
    }
}

fn tagged_id(id: &MessageId) -> String {
    match id {
        MessageId::String(s) => format!("AMQP_NO_PREFIX:{}", s.as_str()),
        MessageId::Uuid(u) => format!("AMQP_UUID:{}", crate::bridge::uuid_text(&u.0)),
        MessageId::Ulong(n) => format!("AMQP_ULONG:{n}"),
        MessageId::Binary(b) => {
            let hex: String = b.iter().map(|b| format!("{b:02X}")).collect();
            format!("AMQP_BINARY:{hex}")
        }
    }
}

fn amqp1_text(s: Option<&ferry_amqp1::Str>) -> Value<'_> {
    s.map_or(Value::Null, |s| Value::Str(Cow::Borrowed(s.as_str())))
}

fn symbol_text(s: Option<&ferry_amqp1::Symbol>) -> Value<'_> {
    s.map_or(Value::Null, |s| Value::Str(Cow::Borrowed(s.as_str())))
}

fn short_text(s: Option<&ferry_amqp091::ShortStr>) -> Value<'_> {
    s.map_or(Value::Null, |s| utf8(s.as_bytes()))
}

fn utf8(b: &[u8]) -> Value<'_> {
    std::str::from_utf8(b).map_or(Value::Null, |s| Value::Str(Cow::Borrowed(s)))
}

/// JMS property types: booleans, numbers and strings; anything else is no value.
fn amqp1_value(v: &V1) -> Value<'_> {
    match v {
        V1::Bool(b) => Value::Bool(*b),
        V1::Ubyte(n) => Value::Int(i64::from(*n)),
        V1::Ushort(n) => Value::Int(i64::from(*n)),
        V1::Uint(n) => Value::Int(i64::from(*n)),
        V1::Ulong(n) => i64::try_from(*n).map_or(Value::Float(*n as f64), Value::Int),
        V1::Byte(n) => Value::Int(i64::from(*n)),
        V1::Short(n) => Value::Int(i64::from(*n)),
        V1::Int(n) => Value::Int(i64::from(*n)),
        V1::Long(n) => Value::Int(*n),
        V1::Float(f) => Value::Float(f64::from(*f)),
        V1::Double(f) => Value::Float(*f),
        V1::Char(c) => Value::Str(Cow::Owned(c.to_string())),
        V1::Timestamp(t) => Value::Int(t.0),
        V1::String(s) => Value::Str(Cow::Borrowed(s.as_str())),
        V1::Symbol(s) => Value::Str(Cow::Borrowed(s.as_str())),
        _ => Value::Null,
    }
}

/// A message published over 0-9-1, or over 0-10 (through the 0-9-1 properties it maps to).
struct BasicFields<'m> {
    message: &'m Message,
    props: &'m BasicProperties,
    /// Qpid JMS 0-x over 0-10 shows the message-id (a UUID) as `ID:<uuid>` and keeps
    /// JMSType in the `x-jms-type` application header.
    amqp010: bool,
}

/// Where Qpid JMS 0-x over 0-10 keeps JMSType.
const JMS_TYPE_HEADER: &str = "x-jms-type";

impl Fields for BasicFields<'_> {
    fn get(&self, name: &str) -> Value<'_> {
        if let Some(v) = core_field(self.message, name) {
            return v;
        }
        let p = &self.props;
        match name {
            "JMSMessageID" if self.amqp010 => match short_text(p.message_id.as_ref()) {
                Value::Str(id) => Value::Str(Cow::Owned(format!("ID:{id}"))),
                other => other,
            },
            "JMSMessageID" => short_text(p.message_id.as_ref()),
            "JMSCorrelationID" => short_text(p.correlation_id.as_ref()),
            "JMSType" if self.amqp010 => self.header(JMS_TYPE_HEADER),
            "JMSType" => short_text(p.kind.as_ref()),
            "JMSTimestamp" => p.timestamp.map_or(Value::Null, |t| {
                i64::try_from(t).map_or(Value::Null, Value::Int)
            }),
            "JMSXUserID" => short_text(p.user_id.as_ref()),
            _ => self.header(name),
        }
    }
}

impl BasicFields<'_> {
    fn header(&self, name: &str) -> Value<'_> {
        self.props
            .headers
            .as_ref()
            .and_then(|h| h.get(name))
            .map_or(Value::Null, amqp091_value)
    }
}

fn amqp091_value(v: &FieldValue) -> Value<'_> {
    match v {
        FieldValue::Bool(b) => Value::Bool(*b),
        FieldValue::I8(n) => Value::Int(i64::from(*n)),
        FieldValue::U8(n) => Value::Int(i64::from(*n)),
        FieldValue::I16(n) => Value::Int(i64::from(*n)),
        FieldValue::U16(n) => Value::Int(i64::from(*n)),
        FieldValue::I32(n) => Value::Int(i64::from(*n)),
        FieldValue::U32(n) => Value::Int(i64::from(*n)),
        FieldValue::I64(n) => Value::Int(*n),
        FieldValue::F32(f) => Value::Float(f64::from(*f)),
        FieldValue::F64(f) => Value::Float(*f),
        FieldValue::Decimal { scale, value } => {
            Value::Float(f64::from(*value) / 10f64.powi(i32::from(*scale)))
        }
        FieldValue::LongStr(s) => utf8(s.as_bytes()),
        FieldValue::Timestamp(t) => i64::try_from(*t).map_or(Value::Null, Value::Int),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests;
