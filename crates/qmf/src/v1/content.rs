//! QMF v1 object queries (`G` → `g` per object, then `z`) and method calls (`M` → `m`), for
//! consoles on the old `qpid.management` API (qpid-python's `managementClient`): objects,
//! method arguments and results encoded field by field in their schema's types, as
//! qpidd's `ManagementAgent` writes them. The objects and methods are the v2 agent's.

use bytes::{BufMut, BytesMut};
use ferry_amqp010::codec::Reader;
use ferry_amqp010::{EncodeError, Map, Value};

use super::schema::{class_schema, ty, ClassSchema};
use super::{header, read_str8, str8};
use crate::objects::QmfObject;
use crate::schema::{fnv1a, hash_of, Class, PACKAGE};
use crate::value::{read_bool, read_text};

/// The routing key v1 consoles send object queries and method calls to: broker 1, bank 0,
/// which every object id the agent gives out names ([`object_id`]).
pub const AGENT_KEY: &str = "agent.1.0";

/// An object's v1 id: flags and sequence 0 (qmf's "durable" ids, stable across restarts),
/// broker 1, bank 0, and a stable hash of its v2 object name as the object number.
pub fn object_id(object_name: &str) -> (u64, u64) {
    (
        1 << 28,
        fnv1a(0xcbf2_9ce4_8422_2325, object_name.as_bytes()),
    )
}

/// What object queries and method calls need from the agent.
pub trait Agent {
    fn objects(&self, class: Class) -> Vec<QmfObject>;
    /// Calls `method` on the object named `object_name`: its output arguments, or a QMF
    /// status code and text.
    fn call(&self, object_name: &str, method: &str, args: &Map) -> Result<Map, (u32, String)>;
}

/// `G`: the objects of the class the request's map names (`_class`), one `g` each, then
/// `z`. `None` if the request does not decode.
pub fn get(r: &mut Reader, seq: u32, agent: &dyn Agent) -> Option<Vec<bytes::Bytes>> {
    let query = Map::decode(r).ok()?;
    let class = query
        .get("_class")
        .and_then(read_text)
        .and_then(Class::from_name);
    let mut replies = Vec::new();
    if let Some(class) = class {
        let schema = class_schema(class);
        for object in agent.objects(class) {
            let mut out = BytesMut::new();
            header(&mut out, b'g', seq);
            match encode_object(&mut out, &schema, &object) {
                Ok(()) => replies.push(out.freeze()),
                Err(e) => tracing::warn!("QMF v1 object not encodable: {e}"),
            }
        }
    }
    replies.push(super::complete(seq));
    Some(replies)
}

/// `M`: a method call on an object, answered by one `m` (status, text, and on success the
/// output arguments). `None` if the request does not decode.
pub fn method(r: &mut Reader, seq: u32, agent: &dyn Agent) -> Option<bytes::Bytes> {
    let (first, second) = (r.u64().ok()?, r.u64().ok()?);
    let package = read_str8(r)?;
    let class_name = read_str8(r)?;
    let hash = r.array::<16>().ok()?;
    let method_name = read_str8(r)?;
    let mut out = BytesMut::new();
    header(&mut out, b'm', seq);
    let class = Class::from_name(&class_name).filter(|_| package == PACKAGE);
    let Some(class) = class.filter(|_| hash == hash_of(&class_name)) else {
        failure(
            &mut out,
            crate::method::status::UNKNOWN_OBJECT,
            "unknown class",
        );
        return Some(out.freeze());
    };
    let schema = class_schema(class);
    let Some(method) = schema.methods.iter().find(|m| m.name == method_name) else {
        failure(
            &mut out,
            crate::method::status::UNKNOWN_METHOD,
            "unknown method",
        );
        return Some(out.freeze());
    };
    let mut args = Map::new();
    for arg in method.args.iter().filter(|a| a.dir.contains('I')) {
        args.insert(arg.name, read_value(r, arg.ty)?);
    }
    let object = agent
        .objects(class)
        .into_iter()
        .find(|o| object_id(&o.object_name()) == (first, second));
    let Some(object) = object else {
        failure(
            &mut out,
            crate::method::status::UNKNOWN_OBJECT,
            "unknown object",
        );
        return Some(out.freeze());
    };
    match agent.call(&object.object_name(), method_name.as_str(), &args) {
        Ok(results) => {
            out.put_u32(0);
            str16(&mut out, "OK");
            let outputs = method.args.iter().filter(|a| a.dir.contains('O'));
            for arg in outputs {
                if put_value(&mut out, arg.ty, results.get(arg.name)).is_err() {
                    tracing::warn!(arg = arg.name, "QMF v1 method result not encodable");
                }
            }
        }
        Err((code, text)) => failure(&mut out, code, &text),
    }
    Some(out.freeze())
}

fn failure(out: &mut BytesMut, code: u32, text: &str) {
    out.put_u32(code);
    str16(out, text);
}

fn str16(out: &mut BytesMut, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(usize::from(u16::MAX))];
    out.put_u16(bytes.len() as u16);
    out.put_slice(bytes);
}

/// Class key, timestamps, object id, presence masks of the optional properties, then the
/// properties and statistics in schema order (qpidd's `writeProperties` and
/// `writeStatistics`).
fn encode_object(
    out: &mut BytesMut,
    schema: &ClassSchema,
    object: &QmfObject,
) -> Result<(), EncodeError> {
    str8(out, PACKAGE);
    str8(out, object.class.name());
    out.put_slice(&object.class.hash());
    out.put_u64(object.update_ts);
    out.put_u64(object.create_ts);
    out.put_u64(0);
    let (first, second) = object_id(&object.object_name());
    out.put_u64(first);
    out.put_u64(second);
    let optional = schema.properties.iter().filter(|p| p.optional);
    let mut masks = vec![0u8; optional.clone().count().div_ceil(8)];
    for (i, p) in optional.enumerate() {
        if object.values.get(p.name).is_some() {
            masks[i / 8] |= 1 << (i % 8);
        }
    }
    out.put_slice(&masks);
    for p in schema.properties {
        let value = object.values.get(p.name);
        if p.optional && value.is_none() {
            continue;
        }
        put_value(out, p.ty, value)?;
    }
    for s in schema.statistics {
        put_value(out, s.ty, object.values.get(s.name))?;
    }
    Ok(())
}

fn integer(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::Uint64(n)) => *n,
        Some(v) => v.as_i64().map_or(0, |n| n as u64),
        None => 0,
    }
}

/// One value in v1 type `code`; a missing one as the type's zero or empty value.
fn put_value(out: &mut BytesMut, code: u8, value: Option<&Value>) -> Result<(), EncodeError> {
    let text = || value.and_then(read_text).unwrap_or_default();
    match code {
        ty::U8 | ty::S8 => out.put_u8(integer(value) as u8),
        ty::U16 | ty::S16 => out.put_u16(integer(value) as u16),
        ty::U32 | ty::S32 => out.put_u32(integer(value) as u32),
        ty::U64 | ty::S64 | ty::ABSTIME | ty::DELTATIME => out.put_u64(integer(value)),
        ty::BOOL => out.put_u8(u8::from(value.and_then(read_bool).unwrap_or(false))),
        ty::SSTR => str8(out, text()),
        ty::LSTR => str16(out, text()),
        ty::REF => {
            let name = match value {
                Some(Value::Map(m)) => m.get("_object_name").and_then(read_text),
                _ => None,
            };
            let (first, second) = name.map_or((0, 0), object_id);
            out.put_u64(first);
            out.put_u64(second);
        }
        ty::UUID => match value {
            Some(Value::Uuid(id)) => out.put_slice(id),
            _ => out.put_slice(&[0; 16]),
        },
        ty::FLOAT => out.put_f32(match value {
            Some(Value::Float(f)) => *f,
            _ => 0.0,
        }),
        ty::DOUBLE => out.put_f64(match value {
            Some(Value::Double(f)) => *f,
            _ => 0.0,
        }),
        ty::MAP => match value {
            Some(Value::Map(m)) => m.encode(out)?,
            _ => Map::new().encode(out)?,
        },
        _ => return Err(EncodeError::ReservedTypeCode(code)),
    }
    Ok(())
}

/// One argument in v1 type `code`, as the v2 agent's methods read it.
fn read_value(r: &mut Reader, code: u8) -> Option<Value> {
    Some(match code {
        ty::U8 => Value::Uint8(r.u8().ok()?),
        ty::U16 => Value::Uint16(r.u16().ok()?),
        ty::U32 => Value::Uint32(r.u32().ok()?),
        ty::U64 | ty::ABSTIME | ty::DELTATIME => Value::Uint64(r.u64().ok()?),
        ty::S8 => Value::Int8(r.i8().ok()?),
        ty::S16 => Value::Int16(r.i16().ok()?),
        ty::S32 => Value::Int32(r.i32().ok()?),
        ty::S64 => Value::Int64(r.i64().ok()?),
        ty::BOOL => Value::Bool(r.u8().ok()? != 0),
        ty::SSTR => Value::Str8(r.str8().ok()?),
        ty::LSTR => Value::Str16(r.str16().ok()?),
        ty::REF => {
            r.skip(16).ok()?;
            Value::Void
        }
        ty::UUID => Value::Uuid(r.array::<16>().ok()?),
        ty::FLOAT => Value::Float(f32::from_bits(r.u32().ok()?)),
        ty::DOUBLE => Value::Double(f64::from_bits(r.u64().ok()?)),
        ty::MAP => Value::Map(Map::decode(r).ok()?),
        _ => return None,
    })
}
