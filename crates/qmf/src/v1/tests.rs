//! qmf.console's start-up conversation, decoded as qmf.console decodes it.

use super::*;

const ID: [u8; 16] = [7; 16];

fn request(opcode: u8, seq: u32, fields: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    header(&mut out, opcode, seq);
    out.put_slice(fields);
    out.freeze()
}

/// (opcode, seq, the rest).
fn split(reply: &Bytes) -> (u8, u32, Reader) {
    let mut r = Reader::new(reply.clone());
    assert_eq!(&r.bytes(3).unwrap()[..], b"AM2");
    (r.u8().unwrap(), r.u32().unwrap(), r)
}

fn str8_field(s: &str) -> Vec<u8> {
    let mut v = vec![s.len() as u8];
    v.extend_from_slice(s.as_bytes());
    v
}

fn text_of(m: &Map, key: &str) -> String {
    match m.get(key) {
        Some(Value::Str16(s)) => s.to_string(),
        other => panic!("{key}: {other:?}"),
    }
}

fn int_of(m: &Map, key: &str) -> i64 {
    m.get(key).and_then(Value::as_i64).unwrap()
}

#[test]
fn the_broker_is_identified_and_its_package_listed() {
    let replies = answer(request(b'B', 5, &[]), &ID, &Fake);
    assert_eq!(replies.len(), 1);
    let (op, seq, mut r) = split(&replies[0]);
    assert_eq!((op, seq), (b'b', 5));
    assert_eq!(r.array::<16>().unwrap(), ID);

    let replies = answer(request(b'P', 6, &[]), &ID, &Fake);
    let (op, _, mut r) = split(&replies[0]);
    assert_eq!(op, b'p');
    assert_eq!(read_str8(&mut r).as_deref(), Some(PACKAGE));
    let (op, seq, mut r) = split(&replies[1]);
    assert_eq!((op, seq), (b'z', 6));
    assert_eq!(r.u32().unwrap(), 0);
    assert_eq!(read_str8(&mut r).as_deref(), Some("OK"));
}

#[test]
fn every_class_and_event_has_a_schema_that_decodes() {
    let replies = answer(request(b'Q', 9, &str8_field(PACKAGE)), &ID, &Fake);
    let (last, indications) = replies.split_last().unwrap();
    assert_eq!(split(last).0, b'z');
    assert_eq!(indications.len(), Class::ALL.len() + EVENTS.len());
    let mut names: Vec<&str> = EVENTS.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), EVENTS.len(), "each event is listed once");
    for q in indications {
        let (op, seq, mut r) = split(q);
        assert_eq!((op, seq), (b'q', 9));
        let kind = r.u8().unwrap();
        let package = read_str8(&mut r).unwrap();
        let name = read_str8(&mut r).unwrap();
        let hash = r.array::<16>().unwrap();
        let mut fields = str8_field(&package);
        fields.extend(str8_field(&name));
        fields.extend_from_slice(&hash);
        let schema = answer(request(b'S', 10, &fields), &ID, &Fake);
        assert_eq!(schema.len(), 1, "{name}");
        let (op, _, mut r) = split(&schema[0]);
        assert_eq!(op, b's');
        assert_eq!(r.u8().unwrap(), kind);
        assert_eq!(read_str8(&mut r).unwrap(), package);
        assert_eq!(read_str8(&mut r).unwrap(), name);
        assert_eq!(r.array::<16>().unwrap(), hash);
        if kind == KIND_TABLE {
            let (props, stats, methods) = (r.u16().unwrap(), r.u16().unwrap(), r.u16().unwrap());
            for _ in 0..props {
                let m = Map::decode(&mut r).unwrap();
                text_of(&m, "name");
                int_of(&m, "type");
                int_of(&m, "access");
                int_of(&m, "index");
                int_of(&m, "optional");
            }
            for _ in 0..stats {
                let m = Map::decode(&mut r).unwrap();
                text_of(&m, "name");
                int_of(&m, "type");
            }
            for _ in 0..methods {
                let m = Map::decode(&mut r).unwrap();
                text_of(&m, "name");
                for _ in 0..int_of(&m, "argCount") {
                    let arg = Map::decode(&mut r).unwrap();
                    assert!(["I", "O", "IO"].contains(&text_of(&arg, "dir").as_str()));
                }
            }
        } else {
            for _ in 0..r.u16().unwrap() {
                let m = Map::decode(&mut r).unwrap();
                text_of(&m, "name");
                int_of(&m, "type");
            }
        }
        assert!(r.is_empty(), "{name}: trailing bytes");
    }
}

#[test]
fn unknown_schemas_packages_and_opcodes_get_no_answer() {
    let mut fields = str8_field(PACKAGE);
    fields.extend(str8_field("queue"));
    fields.extend_from_slice(&[0; 16]);
    assert!(
        answer(request(b'S', 1, &fields), &ID, &Fake).is_empty(),
        "wrong hash"
    );
    let replies = answer(request(b'Q', 1, &str8_field("org.example")), &ID, &Fake);
    assert_eq!(replies.len(), 1, "only the command complete");
    assert!(answer(request(b'G', 1, &[1, 2, 3]), &ID, &Fake).is_empty());
    assert!(answer(Bytes::from_static(b"AM2"), &ID, &Fake).is_empty());
    assert!(answer(Bytes::from_static(b"XX2B\0\0\0\0"), &ID, &Fake).is_empty());
    // Truncated fields stop the reading, whatever came before is answered.
    let mut two = BytesMut::from(&request(b'B', 1, &[])[..]);
    two.put_slice(&request(b'Q', 2, &[200])[..]);
    assert_eq!(answer(two.freeze(), &ID, &Fake).len(), 1);
}

/// An agent with one broker object whose `echo` answers as qpidd's does.
struct Fake;

fn broker_object() -> crate::objects::QmfObject {
    let mut values = Map::new();
    values.insert("name", crate::value::text("amqp-broker"));
    values.insert("port", Value::Uint16(5672));
    values.insert("mgmtPublish", Value::Bool(true));
    values.insert(
        "systemRef",
        crate::value::object_ref("org.apache.qpid.broker:system:s"),
    );
    values.insert("msgDepth", Value::Uint64(42));
    crate::objects::QmfObject {
        class: Class::Broker,
        key: "amqp-broker".to_owned(),
        values,
        create_ts: 1,
        update_ts: 2,
    }
}

impl content::Agent for Fake {
    fn objects(&self, class: Class) -> Vec<crate::objects::QmfObject> {
        match class {
            Class::Broker => vec![broker_object()],
            _ => Vec::new(),
        }
    }

    fn call(&self, object: &str, method: &str, args: &Map) -> Result<Map, (u32, String)> {
        assert_eq!(object, broker_object().object_name());
        match method {
            "echo" => Ok(args.clone()),
            _ => Err((3, "not implemented".to_owned())),
        }
    }
}

/// A v1 value of type `code`, read as qpid.management's `decodeValue` reads it.
fn read_typed(r: &mut Reader, code: u8) -> String {
    match code {
        schema::ty::U16 => r.u16().unwrap().to_string(),
        schema::ty::U32 => r.u32().unwrap().to_string(),
        schema::ty::U64 | schema::ty::ABSTIME | schema::ty::DELTATIME => {
            r.u64().unwrap().to_string()
        }
        schema::ty::BOOL => r.u8().unwrap().to_string(),
        schema::ty::SSTR => read_str8(r).unwrap(),
        schema::ty::LSTR => r.str16().unwrap().to_string(),
        schema::ty::REF => format!("{}-{}", r.u64().unwrap(), r.u64().unwrap()),
        schema::ty::UUID => format!("{:?}", r.array::<16>().unwrap()),
        schema::ty::MAP => format!("{:?}", Map::decode(r).unwrap()),
        other => panic!("type {other}"),
    }
}

fn get_request(seq: u32, class: &str) -> Bytes {
    let mut query = Map::new();
    query.insert("_class", Value::Str16(Str::from(class)));
    let mut fields = BytesMut::new();
    query.encode(&mut fields).unwrap();
    request(b'G', seq, &fields)
}

#[test]
fn an_object_query_answers_each_object_in_its_schemas_types() {
    let replies = answer(get_request(3, "broker"), &ID, &Fake);
    let [g, z] = &replies[..] else {
        panic!("{replies:?}")
    };
    assert_eq!(split(z).0, b'z');
    let (op, seq, mut r) = split(g);
    assert_eq!((op, seq), (b'g', 3));
    assert_eq!(read_str8(&mut r).as_deref(), Some(PACKAGE));
    assert_eq!(read_str8(&mut r).as_deref(), Some("broker"));
    assert_eq!(r.array::<16>().unwrap(), hash_of("broker"));
    let times = [r.u64().unwrap(), r.u64().unwrap(), r.u64().unwrap()];
    assert_eq!(times, [2, 1, 0], "update, create, delete");
    let id = (r.u64().unwrap(), r.u64().unwrap());
    assert_eq!(id, content::object_id(&broker_object().object_name()));
    let schema = class_schema(Class::Broker);
    let optional = schema.properties.iter().filter(|p| p.optional).count();
    let masks = r.bytes(optional.div_ceil(8)).unwrap();
    assert!(masks.iter().all(|m| *m == 0), "dataDir is absent");
    let mut got = Vec::new();
    for p in schema.properties.iter().filter(|p| !p.optional) {
        got.push((p.name, read_typed(&mut r, p.ty)));
    }
    for s in schema.statistics {
        got.push((s.name, read_typed(&mut r, s.ty)));
    }
    assert!(r.is_empty(), "nothing after the statistics");
    let value = |name| got.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    assert_eq!(value("name"), "amqp-broker");
    assert_eq!(value("port"), "5672");
    assert_eq!(value("mgmtPublish"), "1");
    assert_eq!(value("msgDepth"), "42");
    let (first, second) = content::object_id("org.apache.qpid.broker:system:s");
    assert_eq!(value("systemRef"), format!("{first}-{second}"));
    assert_eq!(value("workerThreads"), "0", "missing: zero");
    // A class with no objects: only the completion.
    let replies = answer(get_request(4, "queue"), &ID, &Fake);
    assert_eq!(replies.len(), 1);
}

fn method_request(seq: u32, id: (u64, u64), method: &str, args: &[u8]) -> Bytes {
    let mut fields = BytesMut::new();
    fields.put_u64(id.0);
    fields.put_u64(id.1);
    str8(&mut fields, PACKAGE);
    str8(&mut fields, "broker");
    fields.put_slice(&hash_of("broker"));
    str8(&mut fields, method);
    fields.put_slice(args);
    request(b'M', seq, &fields)
}

#[test]
fn a_method_call_answers_with_its_outputs_or_a_status() {
    let id = content::object_id(&broker_object().object_name());
    let mut args = BytesMut::new();
    args.put_u32(9);
    args.put_u16(5);
    args.put_slice(b"hello");
    let replies = answer(method_request(7, id, "echo", &args), &ID, &Fake);
    let (op, seq, mut r) = split(&replies[0]);
    assert_eq!((op, seq), (b'm', 7));
    assert_eq!(r.u32().unwrap(), 0);
    assert_eq!(r.str16().unwrap().to_string(), "OK");
    assert_eq!(r.u32().unwrap(), 9, "sequence");
    assert_eq!(r.str16().unwrap().to_string(), "hello", "body");
    assert!(r.is_empty());
    let status = |reply: &Bytes| split(reply).2.u32().unwrap();
    let unknown = answer(method_request(8, (1 << 28, 1), "echo", &args), &ID, &Fake);
    assert_eq!(status(&unknown[0]), 1, "no such object");
    let no_method = answer(method_request(9, id, "nothing", &[]), &ID, &Fake);
    assert_eq!(status(&no_method[0]), 2, "no such method");
    let failing = answer(method_request(10, id, "shutdown", &[]), &ID, &Fake);
    assert_eq!(status(&failing[0]), 3, "the method's own status");
    // Arguments cut short: no answer, and the request stops there.
    assert!(answer(method_request(11, id, "echo", &[0, 0]), &ID, &Fake).is_empty());
}
