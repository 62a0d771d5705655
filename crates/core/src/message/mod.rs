//! Messages as the core sees them: [`Message`], one pointer to an immutable, reference-counted
//! allocation holding a message's content and properties, built from [`MessageParts`] (or
//! from another message with [`Message::derive`]).

mod death;
mod filter;
mod packed;
mod trace;

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

pub use self::death::{Death, DeathHistory, DeathReason};
pub use self::filter::{HeaderMatch, MessageFilter};
use self::packed::{flag, HeadFields, Packed};
pub(crate) use self::trace::ids as trace_ids;
pub use self::trace::{TraceEdit, TRACE_HEADER};
use crate::value::Headers;
use crate::ConnectionId;

/// Bodies shorter than this are copied into the message's own allocation: the copy is a
/// few hundred bytes at most, and it lets go of the read buffer the body arrived in (a
/// queued small message would otherwise keep its whole 64 KiB buffer alive). Longer bodies
/// keep the `Bytes` they came in (usually joined from several frames into an allocation of
/// their own), and a connection sends them without copying (its splice threshold, 8 KiB,
/// is above this).
pub const INLINE_BODY_MAX: usize = 4096;

/// The protocol header exactly as received, kept so a delivery can be re-sent without the core
/// understanding (or re-encoding) it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProtocolHeader {
    /// Encoded 0-10 header segment (delivery-properties and message-properties structs).
    Amqp010(Bytes),
    /// Encoded 0-9-1 content-header properties (the property-flags word and the properties
    /// after it).
    Amqp091(Bytes),
    /// What an AMQP 1.0 delivery needs besides [`Message::body`] to be sent on byte for byte:
    /// its sections other than the body, and how the body was encoded. The layout is the
    /// 1.0 protocol layer's (`ferry-server`'s `amqp1::stored`); the core never looks inside.
    Amqp1(Bytes),
    #[default]
    None,
}

/// A message's [`ProtocolHeader`], borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header<'a> {
    Amqp010(&'a [u8]),
    Amqp091(&'a [u8]),
    Amqp1(&'a [u8]),
    None,
}

const KIND_NONE: u16 = 0;
const KIND_010: u16 = 1;
const KIND_091: u16 = 2;
const KIND_AMQP1: u16 = 3;

impl ProtocolHeader {
    fn split(&self) -> (u16, &[u8]) {
        match self {
            ProtocolHeader::None => (KIND_NONE, &[]),
            ProtocolHeader::Amqp010(h) => (KIND_010, h),
            ProtocolHeader::Amqp091(h) => (KIND_091, h),
            ProtocolHeader::Amqp1(h) => (KIND_AMQP1, h),
        }
    }
}

impl<'a> Header<'a> {
    /// The encoded header whatever its protocol (empty for none).
    pub fn raw(self) -> &'a [u8] {
        match self {
            Header::Amqp010(h) | Header::Amqp091(h) | Header::Amqp1(h) => h,
            Header::None => &[],
        }
    }

    /// An owned copy.
    pub fn to_owned(self) -> ProtocolHeader {
        match self {
            Header::Amqp010(h) => ProtocolHeader::Amqp010(Bytes::copy_from_slice(h)),
            Header::Amqp091(h) => ProtocolHeader::Amqp091(Bytes::copy_from_slice(h)),
            Header::Amqp1(h) => ProtocolHeader::Amqp1(Bytes::copy_from_slice(h)),
            Header::None => ProtocolHeader::None,
        }
    }
}

/// qpidd's `qpid.queue_msg_sequence`: a queue counts the messages arriving on it (from 1,
/// every one, so consumers see gaps where some were dropped or purged) and each carries its
/// number to consumers in the application header the argument names (a 0-10 uint32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequenced {
    pub key: Arc<str>,
    pub number: u32,
}

/// What few messages have, boxed so that the others do not pay for it: parts too long for
/// the head's lengths, a large body kept as it came, and the rarer properties.
#[derive(Default)]
struct Ext {
    routing_key: Bytes,
    exchange: Bytes,
    header: Bytes,
    body: Bytes,
    headers: Option<Arc<Headers>>,
    deaths: Option<Arc<DeathHistory>>,
    sequence: Option<Arc<Sequenced>>,
    trace: Option<Arc<TraceEdit>>,
    publisher: ConnectionId,
    size: u64,
}

/// A published message: one pointer, cloned by counting. Routing to N queues clones the
/// handle, never the content. The content and properties never change; a per-queue variant
/// (another expiry, a sequence number, a dead letter's history) is a new message made with
/// [`Message::derive`].
#[derive(Clone)]
pub struct Message(Packed);

/// Everything a message is made of, owned; [`MessageParts::build`] makes the [`Message`].
#[derive(Debug, Clone, Default)]
pub struct MessageParts {
    pub routing_key: Bytes,
    /// Name of the exchange it was published to.
    pub exchange: Bytes,
    pub body: Bytes,
    pub header: ProtocolHeader,
    /// Application headers in neutral form; filled by the protocol layer only when the target
    /// exchange asks for them ([`crate::Exchange::needs_headers`]), since decoding them costs.
    pub headers: Option<Arc<Headers>>,
    /// Absolute expiry in milliseconds since the UNIX epoch.
    pub expires_at: Option<u64>,
    pub priority: u8,
    pub persistent: bool,
    /// A 0-10 publisher sent the body as a segment of its own. Only telling for an empty
    /// body: a zero-length body segment is delivered as one (an empty body), where a
    /// message sent without any is delivered without (qpidd forwards segments as received).
    pub body_segment: bool,
    /// Bytes counted against queue size limits and consumer byte credit; `None`: header +
    /// body, which is what every protocol layer counts.
    pub size: Option<u64>,
    /// Where and why the message was dead-lettered so far; `None` for a message that never
    /// was. Protocol layers render it on delivery (0-9-1 as RabbitMQ's `x-death` headers).
    pub deaths: Option<Arc<DeathHistory>>,
    /// The connection it was published on (0: none known, e.g. recovered from the store).
    /// Kept through rerouting, so a no-local queue knows its owner's messages wherever
    /// they come from (qpidd's `Message::isLocalTo`).
    pub publisher: ConnectionId,
    /// The number a sequencing queue gave the message as it arrived there; protocol layers
    /// deliver it as an application header. `None` on every other queue.
    pub sequence: Option<Arc<Sequenced>>,
    /// What tracing queues and reroutes did to the message's `x-qpid.trace` header;
    /// protocol layers apply it on delivery. `None` for a message they left alone.
    pub trace: Option<Arc<TraceEdit>>,
    /// The store's id, for a message a journal recorded already.
    pub store_id: Option<u64>,
}

/// A message's properties besides its content, as [`Message::derive`] hands them to be
/// changed. They start as the message's own, but for `store_id`: a derived message is a new
/// message for the store unless the caller carries the id over.
#[derive(Debug, Clone)]
pub struct Props {
    /// A new exchange name (`None`: keep the message's).
    pub exchange: Option<Bytes>,
    /// A new routing key (`None`: keep the message's).
    pub routing_key: Option<Bytes>,
    pub headers: Option<Arc<Headers>>,
    pub expires_at: Option<u64>,
    pub priority: u8,
    pub persistent: bool,
    pub deaths: Option<Arc<DeathHistory>>,
    pub publisher: ConnectionId,
    pub sequence: Option<Arc<Sequenced>>,
    pub trace: Option<Arc<TraceEdit>>,
    pub store_id: Option<u64>,
    /// Give the message room for a store id even if it is not persistent (a queue that
    /// journals everything, such as a replicated one, records transient messages too).
    pub store_slot: bool,
}

/// One part of a message being packed: borrowed (copied in if it stays inline) or owned
/// (kept as it is if it goes to the [`Ext`]).
enum Part<'a> {
    Slice(&'a [u8]),
    Shared(&'a Bytes),
}

impl Part<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Part::Slice(s) => s,
            Part::Shared(b) => b,
        }
    }

    fn to_shared(&self) -> Bytes {
        match self {
            Part::Slice(s) => Bytes::copy_from_slice(s),
            Part::Shared(b) => (*b).clone(),
        }
    }
}

struct Content<'a> {
    routing_key: Part<'a>,
    exchange: Part<'a>,
    kind: u16,
    header: Part<'a>,
    body: Part<'a>,
}

/// Where `part` starts inside `whole`, if it is a slice of it (the 0-10 header segment
/// carries the routing key and exchange a transfer names: they need not be stored twice).
fn offset_in(part: &[u8], whole: &[u8]) -> Option<usize> {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    (p >= w && p + part.len() <= w + whole.len()).then(|| p - w)
}

/// Where a routing key or exchange name goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Empty, or a slice of the header at this offset: nothing to store.
    InHeader(u8),
    /// Copied into the content, before the header.
    Extra,
    /// Too long for the head's length field: in the [`Ext`].
    Ext,
}

fn place(part: &[u8], header: &[u8], header_inline: bool, max_len: usize) -> Place {
    if part.is_empty() {
        return Place::InHeader(0);
    }
    if part.len() > max_len {
        return Place::Ext;
    }
    match offset_in(part, header).and_then(|at| u8::try_from(at).ok()) {
        Some(at) if header_inline => Place::InHeader(at),
        _ => Place::Extra,
    }
}

fn ext_of(ext: &mut Option<Box<Ext>>) -> &mut Ext {
    ext.get_or_insert_with(Box::default)
}

/// A length for the head: the length itself, or `u32::MAX` for one that does not fit (the
/// part then lives in the `Ext` and the size there).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn pack(c: Content<'_>, p: Props, body_segment: bool, size: Option<u64>) -> Message {
    let mut flags = c.kind << flag::KIND_SHIFT;
    if p.persistent {
        flags |= flag::PERSISTENT;
    }
    if body_segment {
        flags |= flag::BODY_SEGMENT;
    }
    // Built only for the few messages that need it.
    let mut ext: Option<Box<Ext>> = None;
    let header = c.header.bytes();
    let body = c.body.bytes();
    let header_inline = u32::try_from(header.len()).is_ok();
    if !header_inline {
        flags |= flag::HEADER_EXT;
        ext_of(&mut ext).header = c.header.to_shared();
    }
    let body_inline = body.len() < INLINE_BODY_MAX;
    if !body_inline {
        flags |= flag::BODY_EXT;
        ext_of(&mut ext).body = c.body.to_shared();
    }
    let rk = match &p.routing_key {
        Some(k) => &k[..],
        None => c.routing_key.bytes(),
    };
    let rk_place = place(rk, header, header_inline, usize::from(u16::MAX));
    match rk_place {
        Place::InHeader(_) => {}
        Place::Extra => flags |= flag::RK_EXTRA,
        Place::Ext => {
            flags |= flag::RK_EXT;
            ext_of(&mut ext).routing_key = match &p.routing_key {
                Some(k) => k.clone(),
                None => c.routing_key.to_shared(),
            };
        }
    }
    let ex = match &p.exchange {
        Some(e) => &e[..],
        None => c.exchange.bytes(),
    };
    let ex_place = place(ex, header, header_inline, usize::from(u8::MAX));
    match ex_place {
        Place::InHeader(_) => {}
        Place::Extra => flags |= flag::EX_EXTRA,
        Place::Ext => {
            flags |= flag::EX_EXT;
            ext_of(&mut ext).exchange = match &p.exchange {
                Some(e) => e.clone(),
                None => c.exchange.to_shared(),
            };
        }
    }
    let publisher = match u32::try_from(p.publisher) {
        Ok(id) => id,
        Err(_) => {
            flags |= flag::PUBLISHER_EXT;
            ext_of(&mut ext).publisher = p.publisher;
            0
        }
    };
    let (header_len, body_len) = (len32(header.len()), len32(body.len()));
    let counted = u64::from(header_len) + u64::from(body_len);
    let size = match size {
        Some(s) => Some(s),
        // A part too long for its length field: its true length counts.
        None if header_len == u32::MAX || body_len == u32::MAX => {
            Some((header.len() as u64).saturating_add(body.len() as u64))
        }
        None => None,
    };
    match size.filter(|s| *s != counted) {
        None => {}
        Some(size) if size == counted + 1 => flags |= flag::SIZE_PLUS_ONE,
        Some(size) => {
            flags |= flag::SIZE_EXT;
            ext_of(&mut ext).size = size;
        }
    }
    if p.headers.is_some() || p.deaths.is_some() || p.sequence.is_some() || p.trace.is_some() {
        let e = ext_of(&mut ext);
        e.headers = p.headers;
        e.deaths = p.deaths;
        e.sequence = p.sequence;
        e.trace = p.trace;
    }
    let at = |place: Place| match place {
        Place::InHeader(at) => at,
        Place::Extra | Place::Ext => 0,
    };
    let fields = HeadFields {
        body_len,
        header_len,
        publisher,
        flags,
        rk_len: if rk_place == Place::Ext {
            0
        } else {
            rk.len() as u16
        },
        ex_len: if ex_place == Place::Ext {
            0
        } else {
            ex.len() as u8
        },
        rk_at: at(rk_place),
        ex_at: at(ex_place),
        priority: p.priority,
    };
    let stored =
        (p.persistent || p.store_slot || p.store_id.is_some()).then(|| p.store_id.unwrap_or(0));
    let empty: &[u8] = &[];
    let parts = [
        if rk_place == Place::Extra { rk } else { empty },
        if ex_place == Place::Extra { ex } else { empty },
        if header_inline { header } else { empty },
        if body_inline { body } else { empty },
    ];
    Message(Packed::new(fields, ext, stored, p.expires_at, parts))
}

impl MessageParts {
    /// The parts of a message with no protocol header (see [`Message::new`]).
    pub fn new(exchange: impl Into<Bytes>, routing_key: impl Into<Bytes>, body: Bytes) -> Self {
        MessageParts {
            exchange: exchange.into(),
            routing_key: routing_key.into(),
            body,
            ..MessageParts::default()
        }
    }

    /// The message these parts make.
    pub fn build(self) -> Message {
        let content = Content {
            routing_key: Part::Shared(&self.routing_key),
            exchange: Part::Shared(&self.exchange),
            kind: self.header.split().0,
            header: match &self.header {
                ProtocolHeader::None => Part::Slice(&[]),
                ProtocolHeader::Amqp010(h)
                | ProtocolHeader::Amqp091(h)
                | ProtocolHeader::Amqp1(h) => Part::Shared(h),
            },
            body: Part::Shared(&self.body),
        };
        // Fields moved out one by one (not through a `&mut self` helper): what is left is
        // dropped field by field, inline, rather than through a call to the whole struct's
        // drop glue (some 40 instructions a message).
        let props = Props {
            exchange: None,
            routing_key: None,
            headers: self.headers,
            expires_at: self.expires_at,
            priority: self.priority,
            persistent: self.persistent,
            deaths: self.deaths,
            publisher: self.publisher,
            sequence: self.sequence,
            trace: self.trace,
            store_id: self.store_id,
            store_slot: false,
        };
        pack(content, props, self.body_segment, self.size)
    }

    /// Like [`build`](Self::build), with the header, routing key and exchange borrowed
    /// instead (the routing key and exchange may be slices of that header, which then holds
    /// them once): for a protocol layer that rewrites a header on receipt in a buffer of its
    /// own, so that the rewrite costs no allocation. `self.header` says only which
    /// protocol's encoding it is in; its bytes, and those of `self.routing_key` and
    /// `self.exchange`, are not used.
    pub fn build_with_header(self, header: &[u8], routing_key: &[u8], exchange: &[u8]) -> Message {
        let content = Content {
            routing_key: Part::Slice(routing_key),
            exchange: Part::Slice(exchange),
            kind: self.header.split().0,
            header: Part::Slice(header),
            body: Part::Shared(&self.body),
        };
        let props = Props {
            exchange: None,
            routing_key: None,
            headers: self.headers,
            expires_at: self.expires_at,
            priority: self.priority,
            persistent: self.persistent,
            deaths: self.deaths,
            publisher: self.publisher,
            sequence: self.sequence,
            trace: self.trace,
            store_id: self.store_id,
            store_slot: false,
        };
        pack(content, props, self.body_segment, self.size)
    }
}

impl From<MessageParts> for Message {
    fn from(parts: MessageParts) -> Message {
        parts.build()
    }
}

/// The parts [`Message::shared`] hands out as `Bytes`.
#[derive(Clone, Copy)]
enum Shared {
    Header,
    Body,
}

/// A `Bytes` owner for a part of a message kept in its own allocation.
struct PartOf(Message, Shared);

impl AsRef<[u8]> for PartOf {
    fn as_ref(&self) -> &[u8] {
        match self.1 {
            Shared::Header => self.0.header_raw(),
            Shared::Body => self.0.body(),
        }
    }
}

impl Message {
    /// A message with no protocol header; its size is the body length.
    pub fn new(exchange: impl Into<Bytes>, routing_key: impl Into<Bytes>, body: Bytes) -> Message {
        MessageParts::new(exchange, routing_key, body).build()
    }

    #[inline]
    fn flags(&self) -> u16 {
        self.0.head().flags
    }

    #[inline]
    fn ext(&self) -> Option<&Ext> {
        self.0.ext()
    }

    /// Bytes before the header in the content: a copied routing key and exchange name.
    #[inline]
    fn extras_len(&self) -> usize {
        let h = self.0.head();
        let mut n = 0;
        if h.flags & flag::RK_EXTRA != 0 {
            n += usize::from(h.rk_len);
        }
        if h.flags & flag::EX_EXTRA != 0 {
            n += usize::from(h.ex_len);
        }
        n
    }

    /// The encoded header, whatever its protocol.
    #[inline]
    fn header_raw(&self) -> &[u8] {
        let h = self.0.head();
        if h.flags & flag::HEADER_EXT != 0 {
            return self.ext().map_or(&[], |e| &e.header[..]);
        }
        let at = self.extras_len();
        &self.0.content()[at..at + h.header_len as usize]
    }

    /// The header as received, tagged with its protocol.
    #[inline]
    pub fn header(&self) -> Header<'_> {
        let raw = self.header_raw();
        match (self.flags() & flag::KIND_MASK) >> flag::KIND_SHIFT {
            KIND_010 => Header::Amqp010(raw),
            KIND_091 => Header::Amqp091(raw),
            KIND_AMQP1 => Header::Amqp1(raw),
            _ => Header::None,
        }
    }

    /// The header as `Bytes` sharing this message (for code that keeps slices of it).
    pub fn header_bytes(&self) -> Bytes {
        self.shared(Shared::Header)
    }

    /// A part as `Bytes` sharing this message's memory: free for one kept as it came (in
    /// the `Ext`); an allocation for an owner holding this message otherwise.
    fn shared(&self, part: Shared) -> Bytes {
        let h = self.0.head();
        let (in_ext, inline_len) = match part {
            Shared::Header => (flag::HEADER_EXT, h.header_len),
            Shared::Body => (flag::BODY_EXT, h.body_len),
        };
        if h.flags & in_ext != 0 {
            let kept = self.ext().map(|e| match part {
                Shared::Header => &e.header,
                Shared::Body => &e.body,
            });
            return kept.cloned().unwrap_or_default();
        }
        if inline_len == 0 {
            return Bytes::new();
        }
        Bytes::from_owner(PartOf(self.clone(), part))
    }

    #[inline]
    pub fn body(&self) -> &[u8] {
        let h = self.0.head();
        if h.flags & flag::BODY_EXT != 0 {
            return self.ext().map_or(&[], |e| &e.body[..]);
        }
        let content = self.0.content();
        &content[content.len() - h.body_len as usize..]
    }

    /// The body as `Bytes` sharing this message's memory: free for a large body (kept as it
    /// came); an allocation for an inline one.
    pub fn body_bytes(&self) -> Bytes {
        self.shared(Shared::Body)
    }

    #[inline]
    pub fn routing_key(&self) -> &[u8] {
        let h = self.0.head();
        if h.flags & flag::RK_EXTRA != 0 {
            &self.0.content()[..usize::from(h.rk_len)]
        } else if h.flags & flag::RK_EXT != 0 {
            self.ext().map_or(&[], |e| &e.routing_key[..])
        } else {
            let at = usize::from(h.rk_at);
            &self.header_raw()[at..at + usize::from(h.rk_len)]
        }
    }

    /// Name of the exchange it was published to.
    #[inline]
    pub fn exchange(&self) -> &[u8] {
        let h = self.0.head();
        if h.flags & flag::EX_EXTRA != 0 {
            let at = if h.flags & flag::RK_EXTRA != 0 {
                usize::from(h.rk_len)
            } else {
                0
            };
            &self.0.content()[at..at + usize::from(h.ex_len)]
        } else if h.flags & flag::EX_EXT != 0 {
            self.ext().map_or(&[], |e| &e.exchange[..])
        } else {
            let at = usize::from(h.ex_at);
            &self.header_raw()[at..at + usize::from(h.ex_len)]
        }
    }

    /// See [`MessageParts::headers`].
    #[inline]
    pub fn headers(&self) -> Option<&Arc<Headers>> {
        self.ext()?.headers.as_ref()
    }

    /// Absolute expiry in milliseconds since the UNIX epoch.
    #[inline]
    pub fn expires_at(&self) -> Option<u64> {
        self.0.expires()
    }

    #[inline]
    pub fn priority(&self) -> u8 {
        self.0.head().priority
    }

    #[inline]
    pub fn persistent(&self) -> bool {
        self.flags() & flag::PERSISTENT != 0
    }

    /// See [`MessageParts::body_segment`].
    #[inline]
    pub fn body_segment(&self) -> bool {
        self.flags() & flag::BODY_SEGMENT != 0
    }

    /// How many handles to this message exist (tests only).
    #[cfg(test)]
    pub(crate) fn handles(&self) -> u32 {
        self.0.handles()
    }

    /// The bytes of its one allocation, if that is all the message holds: none for one that
    /// keeps something else alive (an `Ext`, such as the read buffer a large body shares).
    #[inline]
    pub(crate) fn compact_bytes(&self) -> Option<u64> {
        (self.flags() & flag::HAS_EXT == 0).then(|| self.0.allocated() as u64)
    }

    /// Bytes counted against queue size limits and consumer byte credit.
    #[inline]
    pub fn size(&self) -> u64 {
        let h = self.0.head();
        if h.flags & flag::SIZE_EXT != 0 {
            return self.ext().map_or(0, |e| e.size);
        }
        u64::from(h.header_len) + u64::from(h.body_len) + u64::from(h.flags >> 15)
    }

    /// The body's bytes: what RabbitMQ's `x-max-length-bytes` counts.
    #[inline]
    pub fn body_size(&self) -> u64 {
        self.body().len() as u64
    }

    /// See [`MessageParts::deaths`].
    #[inline]
    pub fn deaths(&self) -> Option<&Arc<DeathHistory>> {
        self.ext()?.deaths.as_ref()
    }

    /// See [`MessageParts::publisher`].
    #[inline]
    pub fn publisher(&self) -> ConnectionId {
        if self.flags() & flag::PUBLISHER_EXT != 0 {
            return self.ext().map_or(0, |e| e.publisher);
        }
        ConnectionId::from(self.0.head().publisher)
    }

    /// See [`MessageParts::sequence`].
    #[inline]
    pub fn sequence(&self) -> Option<&Arc<Sequenced>> {
        self.ext()?.sequence.as_ref()
    }

    /// See [`MessageParts::trace`].
    #[inline]
    pub fn trace(&self) -> Option<&Arc<TraceEdit>> {
        self.ext()?.trace.as_ref()
    }

    /// The message's `x-qpid.trace` list as it stands: as published (from
    /// [`Message::headers`], so empty for a message published without them) with
    /// [`Message::trace`] applied.
    pub(crate) fn trace_list(&self) -> String {
        let published = self
            .headers()
            .and_then(|h| h.get(TRACE_HEADER))
            .and_then(|v| v.as_str());
        match self.trace().and_then(|e| e.apply(published)) {
            Some(list) => list,
            None => published.unwrap_or_default().to_owned(),
        }
    }

    /// The store's id for this message, if a journal recorded it.
    #[inline]
    pub fn store_id(&self) -> Option<u64> {
        match self.0.store_slot()?.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Whether the message has room for a store id (persistent messages, and those made with
    /// [`Props::store_slot`]).
    pub fn has_store_slot(&self) -> bool {
        self.0.store_slot().is_some()
    }

    /// Records the store's id (non-zero) for this message; false if it has no room for one
    /// (see [`Message::has_store_slot`]), which is the caller's bug to avoid.
    #[must_use]
    pub fn set_store_id(&self, id: u64) -> bool {
        match self.0.store_slot() {
            Some(slot) => {
                slot.store(id, Ordering::Release);
                true
            }
            None => false,
        }
    }

    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        self.expires_at().is_some_and(|at| at <= now_ms)
    }

    /// Bytes of the message's own allocation (not counting an [`Ext`] box or a large body
    /// kept as it came).
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.0.allocated()
    }

    /// Whether the two are the same message (not merely equal ones).
    pub fn ptr_eq(a: &Message, b: &Message) -> bool {
        Packed::ptr_eq(&a.0, &b.0)
    }

    /// This message's properties, to change for [`Message::derive`].
    pub fn props(&self) -> Props {
        Props {
            exchange: None,
            routing_key: None,
            headers: self.headers().cloned(),
            expires_at: self.expires_at(),
            priority: self.priority(),
            persistent: self.persistent(),
            deaths: self.deaths().cloned(),
            publisher: self.publisher(),
            sequence: self.sequence().cloned(),
            trace: self.trace().cloned(),
            store_id: None,
            store_slot: false,
        }
    }

    /// A new message with this one's content and the properties `edit` leaves in [`Props`]
    /// (this one's, but for the store id, to begin with). Small content is copied; a large
    /// body is shared.
    pub fn derive(&self, edit: impl FnOnce(&mut Props)) -> Message {
        let mut props = self.props();
        edit(&mut props);
        let ext = self.ext();
        let flags = self.flags();
        let body = match ext.filter(|_| flags & flag::BODY_EXT != 0) {
            Some(e) => Part::Shared(&e.body),
            None => Part::Slice(self.body()),
        };
        let header = match ext.filter(|_| flags & flag::HEADER_EXT != 0) {
            Some(e) => Part::Shared(&e.header),
            None => Part::Slice(self.header_raw()),
        };
        let content = Content {
            routing_key: Part::Slice(self.routing_key()),
            exchange: Part::Slice(self.exchange()),
            kind: (flags & flag::KIND_MASK) >> flag::KIND_SHIFT,
            header,
            body,
        };
        let size = (flags & (flag::SIZE_EXT | flag::SIZE_PLUS_ONE) != 0).then(|| self.size());
        pack(content, props, self.body_segment(), size)
    }

    /// Everything this message is made of, owned (the content copied); the store id is not
    /// carried over.
    pub fn to_parts(&self) -> MessageParts {
        MessageParts {
            routing_key: Bytes::copy_from_slice(self.routing_key()),
            exchange: Bytes::copy_from_slice(self.exchange()),
            body: self.body_bytes(),
            header: self.header().to_owned(),
            headers: self.headers().cloned(),
            expires_at: self.expires_at(),
            priority: self.priority(),
            persistent: self.persistent(),
            body_segment: self.body_segment(),
            size: (self.flags() & (flag::SIZE_EXT | flag::SIZE_PLUS_ONE) != 0).then(|| self.size()),
            deaths: self.deaths().cloned(),
            publisher: self.publisher(),
            sequence: self.sequence().cloned(),
            trace: self.trace().cloned(),
            store_id: None,
        }
    }

    /// A stand-in for a journaled message whose content stays on disk (flow to disk): what
    /// a queue needs to keep it in order, count it and match its last-value key. The queue
    /// reads the whole message back from the journal before anyone else sees it.
    pub fn stub(&self) -> Message {
        MessageParts {
            headers: self.headers().cloned(),
            expires_at: self.expires_at(),
            priority: self.priority(),
            persistent: self.persistent(),
            size: Some(self.size()),
            publisher: self.publisher(),
            sequence: self.sequence().cloned(),
            trace: self.trace().cloned(),
            store_id: self.store_id(),
            ..MessageParts::default()
        }
        .build()
    }
}

impl Default for Message {
    fn default() -> Message {
        MessageParts::default().build()
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("exchange", &String::from_utf8_lossy(self.exchange()))
            .field("routing_key", &String::from_utf8_lossy(self.routing_key()))
            .field("header", &self.header())
            .field("body_len", &self.body().len())
            .field("size", &self.size())
            .field("persistent", &self.persistent())
            .field("priority", &self.priority())
            .field("expires_at", &self.expires_at())
            .field("store_id", &self.store_id())
            .field("publisher", &self.publisher())
            .field("headers", &self.headers())
            .field("deaths", &self.deaths())
            .field("sequence", &self.sequence())
            .field("trace", &self.trace())
            .finish()
    }
}

/// Current time in milliseconds since the UNIX epoch, the unit of [`Message::expires_at`].
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
