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
    let replies = answer(request(b'B', 5, &[]), &ID);
    assert_eq!(replies.len(), 1);
    let (op, seq, mut r) = split(&replies[0]);
    assert_eq!((op, seq), (b'b', 5));
    assert_eq!(r.array::<16>().unwrap(), ID);

    let replies = answer(request(b'P', 6, &[]), &ID);
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
    let replies = answer(request(b'Q', 9, &str8_field(PACKAGE)), &ID);
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
        let schema = answer(request(b'S', 10, &fields), &ID);
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
        answer(request(b'S', 1, &fields), &ID).is_empty(),
        "wrong hash"
    );
    let replies = answer(request(b'Q', 1, &str8_field("org.example")), &ID);
    assert_eq!(replies.len(), 1, "only the command complete");
    assert!(answer(request(b'G', 1, &[1, 2, 3]), &ID).is_empty());
    assert!(answer(Bytes::from_static(b"AM2"), &ID).is_empty());
    assert!(answer(Bytes::from_static(b"XX2B\0\0\0\0"), &ID).is_empty());
    // Truncated fields stop the reading, whatever came before is answered.
    let mut two = BytesMut::from(&request(b'B', 1, &[])[..]);
    two.put_slice(&request(b'Q', 2, &[200])[..]);
    assert_eq!(answer(two.freeze(), &ID).len(), 1);
}
