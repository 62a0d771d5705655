//! Journal records: framing and payloads.
//!
//! A frame is `crc:u32 len:u32 seq:u64 type:u8 payload[len]`, little-endian. The CRC-32C
//! covers everything after itself, so a torn write (a frame whose tail never reached the
//! disk), a bit flip or stale bytes from a recycled file all fail the check. Zero bytes
//! (the pre-filled rest of a segment) read as the end of the data.

use bytes::Bytes;
use std::sync::Arc;

use ferry_core::{
    Arguments, Death, DeathHistory, DeathReason, ExchangeKind, Header, LimitPolicy, LimitScope,
    Message, MessageParts, ProtocolHeader, QueueLimits,
};

use crate::codec::{
    put_arguments, put_bytes, put_count, put_opt_str, put_str, put_u32, put_u64, put_u8,
    DecodeError, Reader,
};

pub const FRAME_HEADER: usize = 17;

/// What the front of a segment's remaining bytes holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Record {
        seq: u64,
        kind: u8,
        payload: &'a [u8],
        /// Frame length, header included.
        len: usize,
    },
    /// Zero fill or nothing: the data ends here.
    End,
    /// A frame cut short: its length runs past the data we have.
    Torn,
    /// The checksum does not match.
    Corrupt,
}

pub fn read_frame(buf: &[u8]) -> Frame<'_> {
    let Some(header) = buf.get(..FRAME_HEADER) else {
        return if buf.iter().all(|b| *b == 0) {
            Frame::End
        } else {
            Frame::Torn
        };
    };
    let word =
        |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (crc, len) = (word(0), word(4) as usize);
    if crc == 0 && len == 0 {
        return Frame::End;
    }
    let Some(frame) = buf.get(..FRAME_HEADER.saturating_add(len)) else {
        return Frame::Torn;
    };
    if crc32c::crc32c(&frame[4..]) != crc {
        return Frame::Corrupt;
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&header[8..16]);
    Frame::Record {
        seq: u64::from_le_bytes(seq),
        kind: header[16],
        payload: &frame[FRAME_HEADER..],
        len: frame.len(),
    }
}

/// Appends one frame to `out`, the payload written by `payload`.
pub fn write_frame(out: &mut Vec<u8>, seq: u64, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER]);
    payload(out);
    let len = u32::try_from(out.len() - start - FRAME_HEADER).unwrap_or(u32::MAX);
    out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
    out[start + 8..start + 16].copy_from_slice(&seq.to_le_bytes());
    out[start + 16] = kind;
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

pub mod kind {
    /// Closes a segment the writer moved on from. Its sequence number is the next frame's
    /// (it consumes none). Without it, the unused end of a recycled segment (stale bytes of
    /// an earlier life) would look like a torn write.
    pub const SEGMENT_END: u8 = 0;
    pub const EXCHANGE_DECLARE: u8 = 1;
    pub const EXCHANGE_DELETE: u8 = 2;
    pub const QUEUE_DECLARE: u8 = 3;
    pub const QUEUE_DELETE: u8 = 4;
    pub const BIND: u8 = 5;
    pub const UNBIND: u8 = 6;
    pub const MESSAGE: u8 = 7;
    pub const DEQUEUE: u8 = 8;
    /// A message and a dequeue inside a transaction's commit: they count only once the
    /// transaction's commit record is read.
    pub const TX_MESSAGE: u8 = 9;
    pub const TX_DEQUEUE: u8 = 10;
    pub const TX_COMMIT: u8 = 11;
    pub const EXCHANGE_BIND: u8 = 12;
    pub const EXCHANGE_UNBIND: u8 = 13;
    /// A distributed transaction's branch is prepared: its records so far stay in doubt,
    /// across restarts, until its `TX_COMMIT` or `TX_ABORT`.
    pub const TX_PREPARE: u8 = 14;
    pub const TX_ABORT: u8 = 15;
    /// A message came back to a queue after a delivery: how many times so far. Kept for
    /// queues with a delivery limit, which judges the message by it.
    pub const RETURNED: u8 = 16;
    /// A binding whose arguments are part of its identity (0-9-1's): it joins the others
    /// under its (exchange, queue, key) unless one has the same arguments. `BIND` replaces
    /// them all, as 0-10's binds did and do.
    pub const BIND_VARIANT: u8 = 17;
    /// Removes the one binding under (exchange, queue, key) with these arguments; `UNBIND`
    /// removes them all.
    pub const UNBIND_VARIANT: u8 = 18;
    /// An exchange-to-exchange binding that joins the others under its (destination,
    /// source, key) unless one has the same arguments, as `BIND_VARIANT` does for a queue.
    /// `EXCHANGE_BIND` replaces them all, as exchange-to-exchange binds did before.
    pub const EXCHANGE_BIND_VARIANT: u8 = 19;
    /// Removes the one exchange-to-exchange binding under (destination, source, key) with
    /// these arguments; `EXCHANGE_UNBIND` removes them all.
    pub const EXCHANGE_UNBIND_VARIANT: u8 = 20;
    /// The highest record type, for the fuzz entry point.
    pub const LAST: u8 = EXCHANGE_UNBIND_VARIANT;
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeRec {
    pub name: String,
    pub kind: ExchangeKind,
    pub auto_delete: bool,
    /// Kept in the flags octet with `auto_delete` (bit 1), so journals written before it
    /// existed (0 or 1 there) read as not internal.
    pub internal: bool,
    pub alternate: Option<String>,
    pub arguments: Arguments,
}

/// In a queue record's limit policy octet (the policy in its low bits): the limits count
/// ready messages only ([`LimitScope::Ready`]).
const LIMITS_READY: u8 = 0x80;
/// In the same octet: the scope is recorded. Journals from before it hold 0-2 there, and
/// their scope is inferred from the queue's arguments (`rabbitmq_limits`).
const LIMITS_SCOPED: u8 = 0x40;

/// Whether a queue's limits came from RabbitMQ's arguments, for journals written before the
/// scope was recorded: the 0-9-1 declare (and management's) made them from these.
fn rabbitmq_limits(arguments: &Arguments) -> bool {
    let has = |key| arguments.get(key).is_some();
    (has("x-max-length") || has("x-max-length-bytes"))
        && !has("qpid.max_count")
        && !has("qpid.max_size")
}

const FLAG_AUTO_DELETE: u8 = 1;
const FLAG_INTERNAL: u8 = 2;

fn exchange_flags(e: &ExchangeRec) -> u8 {
    (if e.auto_delete { FLAG_AUTO_DELETE } else { 0 })
        | (if e.internal { FLAG_INTERNAL } else { 0 })
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueueRec {
    pub id: u64,
    pub name: String,
    pub auto_delete: bool,
    pub alternate: Option<String>,
    pub limits: QueueLimits,
    pub arguments: Arguments,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BindingKey {
    pub exchange: String,
    pub queue: u64,
    pub key: String,
}

/// An exchange-to-exchange binding: what `source` routes under `key` goes on through
/// `destination`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExchangeBindingKey {
    pub source: String,
    pub destination: String,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MessageRec {
    pub id: u64,
    pub queues: Vec<u64>,
    /// Everything after the queue list, kept encoded: recovery decodes it only for live
    /// messages, compaction copies it as is.
    pub content: Bytes,
}

/// A prepared transaction: what it holds in doubt. Self-contained, so that this one record
/// (kept live, and copied forward by compaction) is all a restart needs besides the
/// transaction's message records: its dequeue records are never live.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRec {
    pub tx: u64,
    /// The branch's name and what recovery needs to know of it beyond these records,
    /// encoded by the core (opaque here).
    pub branch: Bytes,
    /// (queue, message) pairs the transaction dequeues when it commits.
    pub dequeues: Vec<(u64, u64)>,
    /// Messages the transaction journaled: they die if it aborts.
    pub messages: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    ExchangeDeclare(ExchangeRec),
    ExchangeDelete(String),
    QueueDeclare(QueueRec),
    QueueDelete(u64),
    Bind(BindingKey, Arguments),
    Unbind(BindingKey),
    /// See [`kind::BIND_VARIANT`].
    BindVariant(BindingKey, Arguments),
    /// See [`kind::UNBIND_VARIANT`].
    UnbindVariant(BindingKey, Arguments),
    /// See [`kind::EXCHANGE_BIND_VARIANT`].
    ExchangeBindVariant(ExchangeBindingKey, Arguments),
    /// See [`kind::EXCHANGE_UNBIND_VARIANT`].
    ExchangeUnbindVariant(ExchangeBindingKey, Arguments),
    Message(MessageRec),
    Dequeue {
        queue: u64,
        messages: Vec<u64>,
    },
    /// `tx` is the transaction's name: the sequence number of its first record.
    TxMessage {
        tx: u64,
        message: MessageRec,
    },
    TxDequeue {
        tx: u64,
        queue: u64,
        messages: Vec<u64>,
    },
    TxCommit(u64),
    ExchangeBind(ExchangeBindingKey, Arguments),
    ExchangeUnbind(ExchangeBindingKey),
    TxPrepare(PreparedRec),
    TxAbort(u64),
    /// Message `message` came back to `queue` after a delivery, `returns` times so far; the
    /// latest such record of a message still on its queue is live.
    Returned {
        queue: u64,
        message: u64,
        returns: u32,
    },
}

impl Record {
    pub fn kind(&self) -> u8 {
        match self {
            Record::ExchangeDeclare(_) => kind::EXCHANGE_DECLARE,
            Record::ExchangeDelete(_) => kind::EXCHANGE_DELETE,
            Record::QueueDeclare(_) => kind::QUEUE_DECLARE,
            Record::QueueDelete(_) => kind::QUEUE_DELETE,
            Record::Bind(..) => kind::BIND,
            Record::Unbind(_) => kind::UNBIND,
            Record::Message(_) => kind::MESSAGE,
            Record::Dequeue { .. } => kind::DEQUEUE,
            Record::TxMessage { .. } => kind::TX_MESSAGE,
            Record::TxDequeue { .. } => kind::TX_DEQUEUE,
            Record::TxCommit(_) => kind::TX_COMMIT,
            Record::ExchangeBind(..) => kind::EXCHANGE_BIND,
            Record::ExchangeUnbind(_) => kind::EXCHANGE_UNBIND,
            Record::TxPrepare(_) => kind::TX_PREPARE,
            Record::TxAbort(_) => kind::TX_ABORT,
            Record::Returned { .. } => kind::RETURNED,
            Record::BindVariant(..) => kind::BIND_VARIANT,
            Record::UnbindVariant(..) => kind::UNBIND_VARIANT,
            Record::ExchangeBindVariant(..) => kind::EXCHANGE_BIND_VARIANT,
            Record::ExchangeUnbindVariant(..) => kind::EXCHANGE_UNBIND_VARIANT,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Record::ExchangeDeclare(e) => {
                put_str(out, &e.name);
                put_str(out, e.kind.name());
                put_u8(out, exchange_flags(e));
                put_opt_str(out, e.alternate.as_deref());
                put_arguments(out, &e.arguments);
            }
            Record::ExchangeDelete(name) => put_str(out, name),
            Record::QueueDeclare(q) => {
                put_u64(out, q.id);
                put_str(out, &q.name);
                put_u8(out, u8::from(q.auto_delete));
                put_opt_str(out, q.alternate.as_deref());
                put_opt_u64(out, q.limits.max_count);
                put_opt_u64(out, q.limits.max_size);
                let policy = match q.limits.policy {
                    LimitPolicy::Reject => 0,
                    LimitPolicy::DropHead => 1,
                    LimitPolicy::Ring => 2,
                };
                let scope = match q.limits.scope {
                    LimitScope::Depth => LIMITS_SCOPED,
                    LimitScope::Ready => LIMITS_SCOPED | LIMITS_READY,
                };
                put_u8(out, policy | scope);
                put_arguments(out, &q.arguments);
            }
            Record::QueueDelete(id) => put_u64(out, *id),
            Record::Bind(b, args)
            | Record::BindVariant(b, args)
            | Record::UnbindVariant(b, args) => {
                put_binding(out, b);
                put_arguments(out, args);
            }
            Record::Unbind(b) => put_binding(out, b),
            Record::Message(m) => {
                put_message_head(out, m.id, &m.queues);
                out.extend_from_slice(&m.content);
            }
            Record::Dequeue { queue, messages } => {
                put_u64(out, *queue);
                put_ids(out, messages);
            }
            Record::TxMessage { tx, message: m } => {
                put_u64(out, *tx);
                put_message_head(out, m.id, &m.queues);
                out.extend_from_slice(&m.content);
            }
            Record::TxDequeue {
                tx,
                queue,
                messages,
            } => {
                put_u64(out, *tx);
                put_u64(out, *queue);
                put_ids(out, messages);
            }
            Record::TxCommit(tx) => put_u64(out, *tx),
            Record::ExchangeBind(b, args)
            | Record::ExchangeBindVariant(b, args)
            | Record::ExchangeUnbindVariant(b, args) => {
                put_exchange_binding(out, b);
                put_arguments(out, args);
            }
            Record::ExchangeUnbind(b) => put_exchange_binding(out, b),
            Record::TxPrepare(p) => {
                put_u64(out, p.tx);
                put_bytes(out, &p.branch);
                put_count(out, p.dequeues.len());
                for (queue, message) in &p.dequeues {
                    put_u64(out, *queue);
                    put_u64(out, *message);
                }
                put_ids(out, &p.messages);
            }
            Record::TxAbort(tx) => put_u64(out, *tx),
            Record::Returned {
                queue,
                message,
                returns,
            } => {
                put_u64(out, *queue);
                put_u64(out, *message);
                put_u32(out, *returns);
            }
        }
    }

    pub fn decode(kind: u8, payload: Bytes) -> Result<Record, DecodeError> {
        let mut r = Reader::new(payload);
        let rec = match kind {
            kind::EXCHANGE_DECLARE => {
                let name = r.string()?;
                let kind_name = r.string()?;
                let kind = ExchangeKind::from_name(&kind_name)
                    .ok_or(DecodeError::BadExchangeKind(kind_name))?;
                let flags = r.u8()?;
                Record::ExchangeDeclare(ExchangeRec {
                    name,
                    kind,
                    auto_delete: flags & FLAG_AUTO_DELETE != 0,
                    internal: flags & FLAG_INTERNAL != 0,
                    alternate: r.opt_string()?,
                    arguments: r.arguments()?,
                })
            }
            kind::EXCHANGE_DELETE => Record::ExchangeDelete(r.string()?),
            kind::QUEUE_DECLARE => {
                let (id, name, auto_delete) = (r.u64()?, r.string()?, r.u8()? != 0);
                let alternate = r.opt_string()?;
                let (max_count, max_size) = (opt_u64(&mut r)?, opt_u64(&mut r)?);
                let octet = r.u8()?;
                let policy = match octet & !(LIMITS_READY | LIMITS_SCOPED) {
                    0 => LimitPolicy::Reject,
                    1 => LimitPolicy::DropHead,
                    2 => LimitPolicy::Ring,
                    t => return Err(DecodeError::BadTag(t)),
                };
                let arguments = r.arguments()?;
                let ready = if octet & LIMITS_SCOPED != 0 {
                    octet & LIMITS_READY != 0
                } else {
                    rabbitmq_limits(&arguments)
                };
                let scope = if ready {
                    LimitScope::Ready
                } else {
                    LimitScope::Depth
                };
                Record::QueueDeclare(QueueRec {
                    id,
                    name,
                    auto_delete,
                    alternate,
                    limits: QueueLimits {
                        max_count,
                        max_size,
                        policy,
                        scope,
                    },
                    arguments,
                })
            }
            kind::QUEUE_DELETE => Record::QueueDelete(r.u64()?),
            kind::BIND => {
                let b = binding(&mut r)?;
                Record::Bind(b, r.arguments()?)
            }
            kind::UNBIND => Record::Unbind(binding(&mut r)?),
            kind::BIND_VARIANT => {
                let b = binding(&mut r)?;
                Record::BindVariant(b, r.arguments()?)
            }
            kind::UNBIND_VARIANT => {
                let b = binding(&mut r)?;
                Record::UnbindVariant(b, r.arguments()?)
            }
            kind::MESSAGE => Record::Message(message_rec(&mut r)?),
            kind::DEQUEUE => Record::Dequeue {
                queue: r.u64()?,
                messages: ids(&mut r)?,
            },
            kind::TX_MESSAGE => Record::TxMessage {
                tx: r.u64()?,
                message: message_rec(&mut r)?,
            },
            kind::TX_DEQUEUE => Record::TxDequeue {
                tx: r.u64()?,
                queue: r.u64()?,
                messages: ids(&mut r)?,
            },
            kind::TX_COMMIT => Record::TxCommit(r.u64()?),
            kind::EXCHANGE_BIND => {
                let b = exchange_binding(&mut r)?;
                Record::ExchangeBind(b, r.arguments()?)
            }
            kind::EXCHANGE_UNBIND => Record::ExchangeUnbind(exchange_binding(&mut r)?),
            kind::EXCHANGE_BIND_VARIANT => {
                let b = exchange_binding(&mut r)?;
                Record::ExchangeBindVariant(b, r.arguments()?)
            }
            kind::EXCHANGE_UNBIND_VARIANT => {
                let b = exchange_binding(&mut r)?;
                Record::ExchangeUnbindVariant(b, r.arguments()?)
            }
            kind::TX_PREPARE => Record::TxPrepare(prepared_rec(&mut r)?),
            kind::TX_ABORT => Record::TxAbort(r.u64()?),
            kind::RETURNED => Record::Returned {
                queue: r.u64()?,
                message: r.u64()?,
                returns: r.u32()?,
            },
            other => return Err(DecodeError::BadType(other)),
        };
        Ok(rec)
    }
}

impl Record {
    /// A record as recovery's first pass needs it: for a message only its id and queues
    /// (and transaction), the content left out; anything else decoded in full.
    pub fn decode_head(kind: u8, payload: &[u8]) -> Result<Record, DecodeError> {
        let tx = match kind {
            kind::MESSAGE => None,
            kind::TX_MESSAGE => Some(le_u64(payload, 0)?),
            _ => return Record::decode(kind, Bytes::copy_from_slice(payload)),
        };
        let mut at = if tx.is_some() { 8 } else { 0 };
        let id = le_u64(payload, at)?;
        let n = le_u32(payload, at + 8)? as usize;
        at += 12;
        // A count the payload cannot hold is an error, not an allocation.
        if n > payload.len().saturating_sub(at) / 8 {
            return Err(DecodeError::Short);
        }
        let queues = (0..n)
            .map(|i| le_u64(payload, at + 8 * i))
            .collect::<Result<Vec<u64>, _>>()?;
        let message = MessageRec {
            id,
            queues,
            content: Bytes::new(),
        };
        Ok(match tx {
            None => Record::Message(message),
            Some(tx) => Record::TxMessage { tx, message },
        })
    }
}

fn le_u64(b: &[u8], at: usize) -> Result<u64, DecodeError> {
    let bytes = b.get(at..at.saturating_add(8)).ok_or(DecodeError::Short)?;
    Ok(u64::from_le_bytes(
        bytes.try_into().map_err(|_| DecodeError::Short)?,
    ))
}

fn le_u32(b: &[u8], at: usize) -> Result<u32, DecodeError> {
    let bytes = b.get(at..at.saturating_add(4)).ok_or(DecodeError::Short)?;
    Ok(u32::from_le_bytes(
        bytes.try_into().map_err(|_| DecodeError::Short)?,
    ))
}

fn message_rec(r: &mut Reader) -> Result<MessageRec, DecodeError> {
    let id = r.u64()?;
    let queues = ids(r)?;
    Ok(MessageRec {
        id,
        queues,
        content: r.rest(),
    })
}

fn prepared_rec(r: &mut Reader) -> Result<PreparedRec, DecodeError> {
    let (tx, branch) = (r.u64()?, r.bytes()?);
    let n = r.u32()? as usize;
    // As for ids: a count the payload cannot hold fails on reading, not on allocating.
    let mut dequeues = Vec::with_capacity(n.min(1 << 15));
    for _ in 0..n {
        dequeues.push((r.u64()?, r.u64()?));
    }
    Ok(PreparedRec {
        tx,
        branch,
        dequeues,
        messages: ids(r)?,
    })
}

fn put_opt_u64(out: &mut Vec<u8>, v: Option<u64>) {
    put_u64(out, v.map_or(0, |n| n.max(1)));
}

/// Limits of 0 mean "none" in the core, so 0 can stand for absent.
fn opt_u64(r: &mut Reader) -> Result<Option<u64>, DecodeError> {
    Ok(Some(r.u64()?).filter(|n| *n != 0))
}

fn put_binding(out: &mut Vec<u8>, b: &BindingKey) {
    put_str(out, &b.exchange);
    put_u64(out, b.queue);
    put_str(out, &b.key);
}

fn binding(r: &mut Reader) -> Result<BindingKey, DecodeError> {
    Ok(BindingKey {
        exchange: r.string()?,
        queue: r.u64()?,
        key: r.string()?,
    })
}

fn put_exchange_binding(out: &mut Vec<u8>, b: &ExchangeBindingKey) {
    put_str(out, &b.source);
    put_str(out, &b.destination);
    put_str(out, &b.key);
}

fn exchange_binding(r: &mut Reader) -> Result<ExchangeBindingKey, DecodeError> {
    Ok(ExchangeBindingKey {
        source: r.string()?,
        destination: r.string()?,
        key: r.string()?,
    })
}

pub fn put_ids(out: &mut Vec<u8>, ids: &[u64]) {
    put_count(out, ids.len());
    for id in ids {
        put_u64(out, *id);
    }
}

fn ids(r: &mut Reader) -> Result<Vec<u64>, DecodeError> {
    let n = r.u32()? as usize;
    // Each id takes 8 bytes: a count the payload cannot hold is an error, not an allocation.
    let mut v = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        v.push(r.u64()?);
    }
    Ok(v)
}

pub fn put_message_head(out: &mut Vec<u8>, id: u64, queues: &[u64]) {
    put_u64(out, id);
    put_ids(out, queues);
}

/// Optional sections after the body of a message record, each a tag and its data.
const SECTION_HEADERS: u8 = 1;
const SECTION_DEATHS: u8 = 2;

const HEADER_NONE: u8 = 0;
const HEADER_010: u8 = 1;
const HEADER_091: u8 = 2;
/// Added with AMQP 1.0; journals written before it never hold the tag, so they load as before.
const HEADER_AMQP1: u8 = 3;

/// The content of a message record (after its id and queue list).
pub fn put_message_content(out: &mut Vec<u8>, m: &Message) {
    put_u64(out, m.expires_at().unwrap_or(0));
    put_u8(out, m.priority());
    let (kind, header): (u8, &[u8]) = match m.header() {
        Header::None => (HEADER_NONE, &[]),
        Header::Amqp010(h) => (HEADER_010, h),
        Header::Amqp091(h) => (HEADER_091, h),
        Header::Amqp1(h) => (HEADER_AMQP1, h),
    };
    put_u8(out, kind);
    put_bytes(out, header);
    put_bytes(out, m.exchange());
    put_bytes(out, m.routing_key());
    put_u64(out, m.size());
    put_bytes(out, m.body());
    // The decoded application headers, when routing needed them: a last-value queue keys on
    // them after a restart too, a headers exchange routes a dead letter by them.
    if let Some(h) = &m.headers() {
        put_u8(out, SECTION_HEADERS);
        put_arguments(out, h);
    }
    if let Some(d) = &m.deaths() {
        put_u8(out, SECTION_DEATHS);
        put_count(out, d.entries.len());
        for death in &d.entries {
            put_death(out, death);
        }
        match &d.first {
            None => put_u8(out, 0),
            Some(first) => {
                put_u8(out, 1);
                put_death(out, first);
            }
        }
    }
}

fn put_death(out: &mut Vec<u8>, d: &Death) {
    put_str(out, &d.queue);
    put_u8(
        out,
        match d.reason {
            DeathReason::Rejected => 0,
            DeathReason::Expired => 1,
            DeathReason::Maxlen => 2,
            DeathReason::DeliveryLimit => 3,
        },
    );
    put_u64(out, d.count);
    put_bytes(out, &d.exchange);
    put_bytes(out, &d.routing_key);
    put_u64(out, d.time);
}

fn death(r: &mut Reader) -> Result<Death, DecodeError> {
    Ok(Death {
        queue: r.string()?,
        reason: match r.u8()? {
            0 => DeathReason::Rejected,
            1 => DeathReason::Expired,
            2 => DeathReason::Maxlen,
            3 => DeathReason::DeliveryLimit,
            t => return Err(DecodeError::BadTag(t)),
        },
        count: r.u64()?,
        exchange: r.bytes()?,
        routing_key: r.bytes()?,
        time: r.u64()?,
    })
}

fn deaths(r: &mut Reader) -> Result<DeathHistory, DecodeError> {
    let n = r.u32()?;
    let mut entries = Vec::new();
    for _ in 0..n {
        entries.push(death(r)?);
    }
    let first = match r.u8()? {
        0 => None,
        1 => Some(death(r)?),
        t => return Err(DecodeError::BadTag(t)),
    };
    Ok(DeathHistory { entries, first })
}

/// A message back from its record content, as parts whose byte fields are slices of
/// `content` (the message they build copies what it keeps inline).
pub fn message_from_content(content: Bytes) -> Result<MessageParts, DecodeError> {
    let mut r = Reader::new(content);
    let expires_at = Some(r.u64()?).filter(|t| *t != 0);
    let priority = r.u8()?;
    let kind = r.u8()?;
    let header = r.bytes()?;
    let header = match kind {
        HEADER_NONE => ProtocolHeader::None,
        HEADER_010 => ProtocolHeader::Amqp010(header),
        HEADER_091 => ProtocolHeader::Amqp091(header),
        HEADER_AMQP1 => ProtocolHeader::Amqp1(header),
        t => return Err(DecodeError::BadTag(t)),
    };
    let mut m = MessageParts {
        exchange: r.bytes()?,
        routing_key: r.bytes()?,
        size: Some(r.u64()?),
        body: r.bytes()?,
        header,
        expires_at,
        priority,
        persistent: true,
        ..MessageParts::default()
    };
    while !r.is_empty() {
        match r.u8()? {
            SECTION_HEADERS => m.headers = Some(Arc::new(r.arguments()?)),
            SECTION_DEATHS => m.deaths = Some(Arc::new(deaths(&mut r)?)),
            t => return Err(DecodeError::BadTag(t)),
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::HeaderValue;

    fn frame(seq: u64, rec: &Record) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, seq, rec.kind(), |o| rec.encode(o));
        out
    }

    fn decode_one(buf: &[u8]) -> (u64, Record) {
        match read_frame(buf) {
            Frame::Record {
                seq, kind, payload, ..
            } => (
                seq,
                Record::decode(kind, Bytes::copy_from_slice(payload)).unwrap(),
            ),
            other => panic!("{other:?}"),
        }
    }

    /// The limits a queue record with this policy octet and these arguments decodes to.
    fn queue_limits(
        octet: u8,
        arguments: &[(&str, HeaderValue)],
    ) -> Result<(LimitPolicy, LimitScope), DecodeError> {
        let mut out = Vec::new();
        put_u64(&mut out, 3);
        put_str(&mut out, "q");
        put_u8(&mut out, 0);
        put_opt_str(&mut out, None);
        put_opt_u64(&mut out, Some(10));
        put_opt_u64(&mut out, None);
        put_u8(&mut out, octet);
        put_arguments(&mut out, &arguments.iter().cloned().collect());
        match Record::decode(kind::QUEUE_DECLARE, Bytes::from(out))? {
            Record::QueueDeclare(q) => Ok((q.limits.policy, q.limits.scope)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_queue_records_limit_scope_rides_in_its_policy_octet() {
        assert_eq!(
            queue_limits(LIMITS_SCOPED | 1, &[]).unwrap(),
            (LimitPolicy::DropHead, LimitScope::Depth)
        );
        assert_eq!(
            queue_limits(LIMITS_SCOPED | LIMITS_READY | 1, &[]).unwrap(),
            (LimitPolicy::DropHead, LimitScope::Ready)
        );
        // Journals from before the scope existed, without RabbitMQ's arguments: qpidd's.
        assert_eq!(
            queue_limits(2, &[]).unwrap(),
            (LimitPolicy::Ring, LimitScope::Depth)
        );
        assert!(queue_limits(LIMITS_SCOPED | 3, &[]).is_err());
    }

    #[test]
    fn an_older_journals_queue_with_rabbitmq_limits_counts_ready_messages() {
        let scope =
            |octet, arguments: &[(&str, HeaderValue)]| queue_limits(octet, arguments).unwrap().1;
        let x_max_length = [("x-max-length", HeaderValue::Int(10))];
        assert_eq!(scope(1, &x_max_length), LimitScope::Ready);
        assert_eq!(
            scope(1, &[("x-max-length-bytes", HeaderValue::Int(10))]),
            LimitScope::Ready
        );
        assert_eq!(
            scope(1, &[("qpid.max_count", HeaderValue::Int(10))]),
            LimitScope::Depth
        );
        assert_eq!(scope(1, &[]), LimitScope::Depth);
        // A recorded scope is what counts.
        assert_eq!(scope(LIMITS_SCOPED | 1, &x_max_length), LimitScope::Depth);
    }

    fn samples() -> Vec<Record> {
        let mut args = Arguments::new();
        args.push("x-message-ttl", HeaderValue::UInt(5));
        let mut m = MessageParts::new("ex", "rk", Bytes::from_static(b"body"));
        m.header = ProtocolHeader::Amqp010(Bytes::from_static(b"hdr"));
        m.expires_at = Some(123);
        m.priority = 7;
        let mut content = Vec::new();
        put_message_content(&mut content, &m.clone().build());
        let key = BindingKey {
            exchange: "amq.topic".into(),
            queue: 3,
            key: "a.#".into(),
        };
        vec![
            Record::ExchangeDeclare(ExchangeRec {
                name: "x".into(),
                kind: ExchangeKind::Headers,
                auto_delete: true,
                internal: false,
                alternate: Some("alt".into()),
                arguments: args.clone(),
            }),
            Record::ExchangeDelete("x".into()),
            Record::QueueDeclare(QueueRec {
                id: 3,
                name: "q".into(),
                auto_delete: false,
                alternate: None,
                limits: QueueLimits {
                    max_count: Some(10),
                    max_size: None,
                    policy: LimitPolicy::DropHead,
                    scope: LimitScope::Ready,
                },
                arguments: args.clone(),
            }),
            Record::QueueDelete(3),
            Record::Bind(key.clone(), args.clone()),
            Record::Unbind(key.clone()),
            Record::Message(MessageRec {
                id: 9,
                queues: vec![3, 4],
                content: Bytes::from(content),
            }),
            Record::Dequeue {
                queue: 3,
                messages: vec![9, 10],
            },
            Record::Returned {
                queue: 3,
                message: 9,
                returns: 70_000,
            },
            Record::TxMessage {
                tx: 11,
                message: MessageRec {
                    id: 12,
                    queues: vec![3],
                    content: Bytes::from_static(b"content"),
                },
            },
            Record::TxDequeue {
                tx: 11,
                queue: 3,
                messages: vec![9],
            },
            Record::TxCommit(11),
            Record::TxPrepare(PreparedRec {
                tx: 11,
                branch: Bytes::from_static(b"branch"),
                dequeues: vec![(3, 9), (4, 9)],
                messages: vec![12],
            }),
            Record::TxAbort(11),
            Record::ExchangeBind(
                ExchangeBindingKey {
                    source: "amq.topic".into(),
                    destination: "x".into(),
                    key: "a.*".into(),
                },
                Arguments::new(),
            ),
            Record::ExchangeUnbind(ExchangeBindingKey {
                source: "amq.topic".into(),
                destination: "x".into(),
                key: "a.*".into(),
            }),
            Record::QueueDeclare(QueueRec {
                id: 4,
                name: "ring".into(),
                auto_delete: false,
                alternate: None,
                limits: QueueLimits {
                    max_count: Some(4),
                    max_size: None,
                    policy: LimitPolicy::Ring,
                    ..Default::default()
                },
                arguments: Arguments::new(),
            }),
            Record::ExchangeDeclare(ExchangeRec {
                name: "i".into(),
                kind: ExchangeKind::Topic,
                auto_delete: false,
                internal: true,
                alternate: None,
                arguments: Arguments::new(),
            }),
            Record::BindVariant(key.clone(), args.clone()),
            Record::UnbindVariant(key, args.clone()),
            Record::ExchangeBindVariant(
                ExchangeBindingKey {
                    source: "h".into(),
                    destination: "x".into(),
                    key: String::new(),
                },
                args.clone(),
            ),
            Record::ExchangeUnbindVariant(
                ExchangeBindingKey {
                    source: "h".into(),
                    destination: "x".into(),
                    key: String::new(),
                },
                args,
            ),
        ]
    }

    #[test]
    fn an_exchange_declared_before_internal_existed_reads_as_not_internal() {
        // The flags octet held only auto-delete: 0 or 1.
        for (flag, auto_delete) in [(0u8, false), (1, true)] {
            let mut payload = Vec::new();
            put_str(&mut payload, "old");
            put_str(&mut payload, "direct");
            put_u8(&mut payload, flag);
            put_opt_str(&mut payload, None);
            put_arguments(&mut payload, &Arguments::new());
            let rec = Record::decode(kind::EXCHANGE_DECLARE, Bytes::from(payload)).unwrap();
            let Record::ExchangeDeclare(e) = rec else {
                panic!("not an exchange")
            };
            assert_eq!((e.auto_delete, e.internal), (auto_delete, false));
        }
    }

    #[test]
    fn every_record_round_trips_through_a_frame() {
        for (i, rec) in samples().into_iter().enumerate() {
            let buf = frame(i as u64 + 1, &rec);
            assert_eq!(decode_one(&buf), (i as u64 + 1, rec));
        }
    }

    #[test]
    fn message_content_round_trips() {
        let Record::Message(m) = samples().remove(6) else {
            unreachable!()
        };
        let back = message_from_content(m.content).unwrap();
        assert_eq!(&back.body[..], b"body");
        assert_eq!(&back.exchange[..], b"ex");
        assert_eq!(&back.routing_key[..], b"rk");
        assert_eq!(
            back.header,
            ProtocolHeader::Amqp010(Bytes::from_static(b"hdr"))
        );
        assert_eq!(
            (back.expires_at, back.priority, back.size),
            (Some(123), 7, Some(7))
        );
        assert!(back.persistent);
        assert!(back.headers.is_none() && back.deaths.is_none());
    }

    #[test]
    fn headers_and_death_history_round_trip() {
        let mut m = MessageParts::new("ex", "rk", Bytes::from_static(b"body"));
        let mut h = Arguments::new();
        h.push("ticker", HeaderValue::Str("IBM".into()));
        m.headers = Some(Arc::new(h.clone()));
        let mut d = DeathHistory::default();
        let (ex, rk) = (Bytes::from_static(b"ex"), Bytes::from_static(b"rk"));
        d.record("q1", DeathReason::Rejected, &ex, &rk, 5);
        d.record(
            "q2",
            DeathReason::Expired,
            &Bytes::from_static(b"dlx"),
            &rk,
            6,
        );
        d.record("q1", DeathReason::Rejected, &ex, &rk, 7);
        m.deaths = Some(Arc::new(d.clone()));
        let mut content = Vec::new();
        put_message_content(&mut content, &m.clone().build());
        let back = message_from_content(Bytes::from(content.clone())).unwrap();
        assert_eq!(back.headers.as_deref(), Some(&h));
        assert_eq!(back.deaths.as_deref(), Some(&d));
        assert_eq!(&back.body[..], b"body");
        for cut in 0..content.len() {
            let _ = message_from_content(Bytes::copy_from_slice(&content[..cut]));
        }
    }

    #[test]
    fn zero_fill_is_the_end_and_a_cut_frame_is_torn() {
        assert_eq!(read_frame(&[0u8; 64]), Frame::End);
        assert_eq!(read_frame(&[]), Frame::End);
        let buf = frame(1, &samples()[0]);
        for cut in 1..buf.len() {
            let r = read_frame(&buf[..cut]);
            assert!(matches!(r, Frame::Torn), "cut at {cut}: {r:?}");
        }
        // The tail of a frame (here: the end of a body) missing, the space zero-filled.
        let buf = frame(2, &samples()[6]);
        assert_eq!(&buf[buf.len() - 3..], b"ody");
        let mut padded = buf[..buf.len() - 3].to_vec();
        padded.extend_from_slice(&[0; 32]);
        assert_eq!(read_frame(&padded), Frame::Corrupt);
    }

    #[test]
    fn any_flipped_bit_is_a_checksum_mismatch() {
        let buf = frame(42, &samples()[6]);
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                match read_frame(&bad) {
                    Frame::Record { .. } => panic!("flip at byte {i} bit {bit} went unnoticed"),
                    Frame::Corrupt | Frame::Torn | Frame::End => {}
                }
            }
        }
    }

    #[test]
    fn the_head_of_a_message_record_is_its_id_and_queues() {
        for rec in samples() {
            let mut out = Vec::new();
            rec.encode(&mut out);
            let head = Record::decode_head(rec.kind(), &out).unwrap();
            match (&rec, head) {
                (Record::Message(m), Record::Message(h))
                | (Record::TxMessage { message: m, .. }, Record::TxMessage { message: h, .. }) => {
                    assert_eq!((h.id, &h.queues), (m.id, &m.queues));
                    assert!(h.content.is_empty());
                }
                (_, head) => assert_eq!(head, rec),
            }
            for cut in 0..out.len() {
                let _ = Record::decode_head(rec.kind(), &out[..cut]);
            }
        }
        let mut huge = Vec::new();
        put_u64(&mut huge, 1);
        put_u32(&mut huge, u32::MAX);
        assert_eq!(
            Record::decode_head(kind::MESSAGE, &huge),
            Err(DecodeError::Short)
        );
    }

    #[test]
    fn bad_payloads_are_errors_not_panics() {
        assert!(Record::decode(99, Bytes::new()).is_err());
        for rec in samples() {
            let mut out = Vec::new();
            rec.encode(&mut out);
            for cut in 0..out.len() {
                let _ = Record::decode(rec.kind(), Bytes::copy_from_slice(&out[..cut]));
            }
        }
        let mut out = Vec::new();
        put_u64(&mut out, 1);
        put_u32(&mut out, u32::MAX);
        assert_eq!(
            Record::decode(kind::DEQUEUE, Bytes::from(out)),
            Err(DecodeError::Short)
        );
    }

    #[test]
    fn amqp1_headers_round_trip() {
        let mut m = MessageParts::new("", "q", Bytes::from_static(b"body"));
        m.header = ProtocolHeader::Amqp1(Bytes::from_static(b"\x00sections"));
        let mut content = Vec::new();
        put_message_content(&mut content, &m.clone().build());
        let back = message_from_content(Bytes::from(content)).unwrap();
        assert_eq!(back.header, m.header);
        assert_eq!(&back.body[..], b"body");
    }

    #[test]
    fn content_written_before_amqp1_still_loads() {
        // A message record's content exactly as the journal wrote it before the 1.0 header
        // kind existed: no expiry, priority 4, a 0-9-1 header (kind 2), exchange "x", key
        // "k", size 5, body "hello". Written out byte by byte so an encoder change cannot
        // hide a format change.
        #[rustfmt::skip]
        let old: &[u8] = &[
            0, 0, 0, 0, 0, 0, 0, 0,      // expires_at (little-endian, as every number)
            4,                           // priority
            2, 2, 0, 0, 0, 0x10, 0x00,   // kind 0-9-1, 2 octets of properties
            1, 0, 0, 0, b'x',            // exchange
            1, 0, 0, 0, b'k',            // routing key
            5, 0, 0, 0, 0, 0, 0, 0,      // size
            5, 0, 0, 0, b'h', b'e', b'l', b'l', b'o',
        ];
        let back = message_from_content(Bytes::from_static(old)).unwrap();
        assert_eq!(
            back.header,
            ProtocolHeader::Amqp091(Bytes::from_static(&[0x10, 0]))
        );
        assert_eq!(
            (&back.exchange[..], &back.routing_key[..]),
            (&b"x"[..], &b"k"[..])
        );
        assert_eq!(
            (&back.body[..], back.size, back.priority),
            (&b"hello"[..], Some(5), 4)
        );
        let mut again = Vec::new();
        put_message_content(&mut again, &back.build());
        assert_eq!(again, old, "the old kinds are written as before");
    }
}
