//! `_query_request`: objects by class or by object id, answered as qpidd's
//! `ManagementAgent::handleGetQuery` answers (v2).

use ferry_amqp010::{List, Map, Value};

use crate::objects::{QmfObject, View};
use crate::schema::{Class, PACKAGE};
use crate::value::{header_text, read_text};
use crate::wire::{Content, Reply};

/// Objects per `_query_response` message (qpidd's `maxReplyObjs`).
pub const BATCH: usize = 100;

/// Answers a query: the matching objects in batches of [`BATCH`], every batch but the last
/// flagged `partial`; at least one (possibly empty) response; or an `_exception` for a
/// query qpidd refuses.
pub fn answer(view: &View, query: &Map) -> Vec<Reply> {
    match query.get("_what") {
        None => return vec![Reply::exception(1, "_what element missing in Query")],
        Some(what) => match read_text(what) {
            None => return vec![Reply::exception(1, "_what element is not a string")],
            Some("OBJECT") => {}
            Some(other) => {
                return vec![Reply::exception(
                    1,
                    &format!("Query for _what => '{other}' not supported"),
                )]
            }
        },
    }
    // qpidd: a query by object id that finds nothing falls through to an empty answer; one
    // whose _object_id is not a map is a class query.
    let objects = match query.get("_object_id") {
        Some(Value::Map(oid)) => match oid.get("_object_name").and_then(read_text) {
            Some(name) => view.find(name).into_iter().collect(),
            None => Vec::new(),
        },
        _ => class_query(view, query),
    };
    batches(objects)
}

fn class_query(view: &View, query: &Map) -> Vec<QmfObject> {
    let Some(Value::Map(schema)) = query.get("_schema_id") else {
        return Vec::new();
    };
    let package = schema.get("_package_name").and_then(read_text);
    if package.is_some_and(|p| !p.is_empty() && p != PACKAGE) {
        return Vec::new();
    }
    match schema
        .get("_class_name")
        .and_then(read_text)
        .and_then(Class::from_name)
    {
        Some(class) => view.objects(class),
        None => Vec::new(),
    }
}

fn batches(objects: Vec<QmfObject>) -> Vec<Reply> {
    let mut chunks: Vec<List> = objects
        .chunks(BATCH)
        .map(|chunk| List(chunk.iter().map(QmfObject::encode).collect()))
        .collect();
    if chunks.is_empty() {
        chunks.push(List::default());
    }
    let last = chunks.len() - 1;
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, list)| {
            let mut headers = vec![("qmf.content", header_text("_data"))];
            if i < last {
                headers.push(("partial", Value::Void));
            }
            Reply {
                method: "response",
                opcode: "_query_response",
                content: Content::List(list),
                headers,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(n: usize) -> QmfObject {
        QmfObject {
            class: Class::Queue,
            key: format!("q{n}"),
            values: Map::new(),
            create_ts: 0,
            update_ts: 0,
        }
    }

    fn partial(r: &Reply) -> bool {
        r.headers.iter().any(|(k, _)| *k == "partial")
    }

    fn len(r: &Reply) -> usize {
        match &r.content {
            Content::List(l) => l.0.len(),
            Content::Map(_) => panic!("a query response is a list"),
        }
    }

    #[test]
    fn responses_come_in_batches_flagged_partial_but_the_last() {
        let replies = batches((0..250).map(object).collect());
        assert_eq!(replies.len(), 3);
        assert_eq!(replies.iter().map(len).collect::<Vec<_>>(), [100, 100, 50]);
        assert_eq!(
            replies.iter().map(partial).collect::<Vec<_>>(),
            [true, true, false]
        );
        assert!(replies.iter().all(|r| r.opcode == "_query_response"));
        let exact = batches((0..100).map(object).collect());
        assert_eq!((exact.len(), partial(&exact[0])), (1, false));
    }

    #[test]
    fn nothing_found_is_one_empty_response() {
        let replies = batches(Vec::new());
        assert_eq!(replies.len(), 1);
        assert_eq!((len(&replies[0]), partial(&replies[0])), (0, false));
    }
}
