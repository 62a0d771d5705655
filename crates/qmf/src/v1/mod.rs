//! QMF v1 (binary, on `qpid.management`): what consoles built on `qmf.console` need before
//! they switch to v2 for a broker that has the v2 exchanges: the broker id (`B` → `b`), the
//! package list (`P` → `p`, `z`), the classes and events of a package (`Q` → `q`…, `z`) and
//! their schemas (`S` → `s`); and, for consoles on the older `qpid.management` API, object
//! queries (`G`) and method calls (`M`) (see [`content`]). Other opcodes are ignored, as
//! qpidd ignores an opcode it does not know.
//!
//! A v1 message is a sequence of requests, each `"AM2"`, an opcode octet and a 32-bit
//! sequence number, then the opcode's fields; replies go to `amq.direct` under the
//! request's reply-to key, one per message (qpidd's `ManagementAgent::dispatchAgentCommand`).

pub mod content;
pub mod schema;

use bytes::{BufMut, Bytes, BytesMut};
use ferry_amqp010::codec::Reader;
use ferry_amqp010::{EncodeError, Map, Str, Value};

use crate::schema::{hash_of, Class, PACKAGE};
use schema::{class_schema, Argument, ClassSchema, EVENTS};

/// Where v1 replies go (qpidd's `dExchange`).
pub const REPLY_EXCHANGE: &str = "amq.direct";

/// Class kinds in class indications and schemas.
const KIND_TABLE: u8 = 1;
const KIND_EVENT: u8 = 2;

/// Does this body hold v1 requests?
pub fn is_v1(body: &[u8]) -> bool {
    body.starts_with(b"AM2")
}

fn header(out: &mut BytesMut, opcode: u8, seq: u32) {
    out.put_slice(b"AM2");
    out.put_u8(opcode);
    out.put_u32(seq);
}

fn str8(out: &mut BytesMut, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(255)];
    out.put_u8(bytes.len() as u8);
    out.put_slice(bytes);
}

fn read_str8(r: &mut Reader) -> Option<String> {
    let s = r.str8().ok()?;
    Some(s.to_str_lossy().into_owned())
}

/// Answers the requests in `body`; one reply body per message to send. Stops at the first
/// request it cannot read or does not implement (its length is unknown).
pub fn answer(body: Bytes, broker_id: &[u8; 16], agent: &dyn content::Agent) -> Vec<Bytes> {
    let mut replies = Vec::new();
    let mut r = Reader::new(body);
    while r.remaining() >= 8 {
        let Ok(magic) = r.bytes(3) else { break };
        if &magic[..] != b"AM2" {
            break;
        }
        let (Ok(opcode), Ok(seq)) = (r.u8(), r.u32()) else {
            break;
        };
        let handled = match opcode {
            b'B' => {
                let mut out = BytesMut::new();
                header(&mut out, b'b', seq);
                out.put_slice(broker_id);
                replies.push(out.freeze());
                true
            }
            b'P' => {
                let mut out = BytesMut::new();
                header(&mut out, b'p', seq);
                str8(&mut out, PACKAGE);
                replies.push(out.freeze());
                replies.push(complete(seq));
                true
            }
            b'Q' => match read_str8(&mut r) {
                Some(package) => {
                    if package == PACKAGE {
                        replies.extend(class_indications(seq));
                    }
                    replies.push(complete(seq));
                    true
                }
                None => false,
            },
            b'S' => {
                let key = (read_str8(&mut r), read_str8(&mut r), r.array::<16>().ok());
                match key {
                    (Some(package), Some(class), Some(hash)) => {
                        if let Some(Ok(s)) = schema_response(seq, &package, &class, &hash) {
                            replies.push(s);
                        }
                        true
                    }
                    _ => false,
                }
            }
            b'G' => match content::get(&mut r, seq, agent) {
                Some(got) => {
                    replies.extend(got);
                    true
                }
                None => false,
            },
            b'M' => match content::method(&mut r, seq, agent) {
                Some(reply) => {
                    replies.push(reply);
                    true
                }
                None => false,
            },
            _ => false,
        };
        if !handled {
            break;
        }
    }
    replies
}

/// `z`: command complete, status 0 "OK".
fn complete(seq: u32) -> Bytes {
    let mut out = BytesMut::new();
    header(&mut out, b'z', seq);
    out.put_u32(0);
    str8(&mut out, "OK");
    out.freeze()
}

fn class_indications(seq: u32) -> Vec<Bytes> {
    let tables = Class::ALL.iter().map(|c| (KIND_TABLE, c.name()));
    let events = EVENTS.iter().map(|(name, _)| (KIND_EVENT, *name));
    tables
        .chain(events)
        .map(|(kind, name)| {
            let mut out = BytesMut::new();
            header(&mut out, b'q', seq);
            out.put_u8(kind);
            str8(&mut out, PACKAGE);
            str8(&mut out, name);
            out.put_slice(&hash_of(name));
            out.freeze()
        })
        .collect()
}

fn int(v: u8) -> Value {
    Value::Int32(i32::from(v))
}

fn text(s: &str) -> Value {
    Value::Str16(Str::from(s))
}

fn argument_map(arg: &Argument) -> Map {
    let mut m = Map::new();
    m.insert("name", text(arg.name));
    m.insert("type", int(arg.ty));
    if !arg.dir.is_empty() {
        m.insert("dir", text(arg.dir));
    }
    m
}

/// `s`: the schema of a class or event of ours, if `hash` is its hash; `None` otherwise
/// (qpidd answers nothing for a schema it does not have).
fn schema_response(
    seq: u32,
    package: &str,
    name: &str,
    hash: &[u8; 16],
) -> Option<Result<Bytes, EncodeError>> {
    if package != PACKAGE || *hash != hash_of(name) {
        return None;
    }
    let mut out = BytesMut::new();
    header(&mut out, b's', seq);
    if let Some(class) = Class::from_name(name) {
        out.put_u8(KIND_TABLE);
        str8(&mut out, package);
        str8(&mut out, name);
        out.put_slice(hash);
        Some(table_schema(&mut out, &class_schema(class)).map(|()| out.freeze()))
    } else {
        let (_, args) = EVENTS.iter().find(|(n, _)| *n == name)?;
        out.put_u8(KIND_EVENT);
        str8(&mut out, package);
        str8(&mut out, name);
        out.put_slice(hash);
        out.put_u16(args.len() as u16);
        let encoded: Result<(), EncodeError> = args
            .iter()
            .try_for_each(|a| argument_map(a).encode(&mut out));
        Some(encoded.map(|()| out.freeze()))
    }
}

fn table_schema(out: &mut BytesMut, s: &ClassSchema) -> Result<(), EncodeError> {
    out.put_u16(s.properties.len() as u16);
    out.put_u16(s.statistics.len() as u16);
    out.put_u16(s.methods.len() as u16);
    for p in s.properties {
        let mut m = Map::new();
        m.insert("name", text(p.name));
        m.insert("type", int(p.ty));
        m.insert("access", int(p.access));
        m.insert("index", int(u8::from(p.index)));
        m.insert("optional", int(u8::from(p.optional)));
        m.encode(out)?;
    }
    for st in s.statistics {
        let mut m = Map::new();
        m.insert("name", text(st.name));
        m.insert("type", int(st.ty));
        m.encode(out)?;
    }
    for method in s.methods {
        let mut m = Map::new();
        m.insert("name", text(method.name));
        m.insert("argCount", int(method.args.len() as u8));
        m.encode(out)?;
        for arg in method.args {
            argument_map(arg).encode(out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
