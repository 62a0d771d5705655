//! `_method_request`: methods on the broker, queue and connection objects, answered as
//! qpidd's `ManagementAgent::handleMethodRequest` (v2) answers: `_method_response` with the
//! output `_arguments`, or an `_exception` with qpidd's status code and text.
//!
//! Methods run with the broker's own authority, as qpidd's do when no ACL is loaded: the
//! core has no notion of a requesting user, and the message's user-id is not verified by the
//! 0-10 layer, so it cannot be trusted for an access check (see the crate doc).

use bytes::Bytes;
use ferry_amqp010::{List, Map, Str, Value};
use ferry_core::{
    Broker, BrokerError, ExchangeKind, ExchangeOptions, HeaderMatch, OwnerId, QueueLimits,
    QueueOptions,
};

use crate::objects::View;
use crate::schema::{parse_object_name, Class, BROKER_KEY};
use crate::value::{read_bool, read_text, read_u64, to_arguments};
use crate::wire::Reply;

/// qpidd's `Manageable` status codes.
pub mod status {
    pub const UNKNOWN_OBJECT: u32 = 1;
    pub const UNKNOWN_METHOD: u32 = 2;
    pub const NOT_IMPLEMENTED: u32 = 3;
    pub const PARAMETER_INVALID: u32 = 4;
    pub const EXCEPTION: u32 = 7;
}

/// A method's failure: a status code and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: u32,
    pub text: String,
}

impl Failure {
    fn new(code: u32, text: impl Into<String>) -> Failure {
        Failure {
            code,
            text: text.into(),
        }
    }

    fn not_implemented() -> Failure {
        Failure::new(status::NOT_IMPLEMENTED, "NotImplemented")
    }

    fn unknown_method() -> Failure {
        Failure::new(status::UNKNOWN_METHOD, "UnknownMethod")
    }

    /// qpidd reports an exception thrown by a method as `STATUS_EXCEPTION` with its text.
    fn exception(text: impl Into<String>) -> Failure {
        Failure::new(status::EXCEPTION, text)
    }
}

impl From<BrokerError> for Failure {
    fn from(e: BrokerError) -> Failure {
        Failure::exception(e.to_string())
    }
}

/// What a method may act with besides the view: the owner id its declares and deletes are
/// made for (never the owner of the agent's own queue, so no method can delete that).
pub struct Caller {
    pub owner: OwnerId,
}

/// Answers a method request.
pub fn call(view: &View, caller: &Caller, request: &Map) -> Reply {
    match dispatch(view, caller, request) {
        Ok(out) => {
            let mut map = Map::new();
            map.insert("_arguments", Value::Map(out));
            Reply::map("response", "_method_response", map)
        }
        Err(f) => Reply::exception(f.code, &f.text),
    }
}

fn dispatch(view: &View, caller: &Caller, request: &Map) -> Result<Map, Failure> {
    let (Some(oid), Some(method)) = (request.get("_object_id"), request.get("_method_name")) else {
        return Err(Failure::new(status::PARAMETER_INVALID, "InvalidParameter"));
    };
    let object = match oid {
        Value::Map(m) => m
            .get("_object_name")
            .and_then(read_text)
            .ok_or_else(|| Failure::exception("Required _object_name field missing."))?,
        _ => {
            return Err(Failure::exception(
                "invalid conversion: _object_id is not a map",
            ))
        }
    };
    let method =
        read_text(method).ok_or_else(|| Failure::exception("invalid conversion: _method_name"))?;
    let empty = Map::new();
    let args = match request.get("_arguments") {
        None => &empty,
        Some(Value::Map(m)) => m,
        Some(_) => {
            return Err(Failure::exception(
                "invalid conversion: _arguments is not a map",
            ))
        }
    };
    invoke(view, caller, object, method, args)
}

/// Calls `method` on the object named `object` (QMF v2's request, or v1's `M`).
pub(crate) fn invoke(
    view: &View,
    caller: &Caller,
    object: &str,
    method: &str,
    args: &Map,
) -> Result<Map, Failure> {
    let Some(class) = find(view, object) else {
        return Err(Failure::new(
            status::UNKNOWN_OBJECT,
            format!("No object found with ID={object}"),
        ));
    };
    let key = parse_object_name(object).map_or("", |(_, key)| key);
    let broker = view.broker;
    match (class, method) {
        (Class::Broker, _) => broker_method(view, caller, method, args),
        (Class::Queue, "purge") => purge(broker, key, args),
        (Class::Queue, "reroute") => reroute(broker, key, args),
        (Class::Connection, "close") => close_connection(broker, key),
        (Class::Session, "solicitAck" | "detach" | "resetLifespan" | "close") => {
            Err(Failure::not_implemented())
        }
        _ => Err(Failure::unknown_method()),
    }
}

/// The class of the object named `object`, if it exists (without building every object of
/// the common classes).
fn find(view: &View, object: &str) -> Option<Class> {
    let (class, key) = parse_object_name(object)?;
    let class = Class::from_name(class)?;
    let found = match class {
        Class::Broker => key == BROKER_KEY,
        Class::Queue => key != view.hidden_queue && view.broker.queue(key).is_some(),
        Class::Exchange => view.broker.exchange(key).is_some(),
        _ => view.find(object).is_some(),
    };
    found.then_some(class)
}

fn broker_method(view: &View, caller: &Caller, method: &str, args: &Map) -> Result<Map, Failure> {
    let mut out = Map::new();
    match method {
        "echo" => {
            for key in ["sequence", "body"] {
                if let Some(v) = args.get(key) {
                    out.insert(key, v.clone());
                }
            }
        }
        "create" => create(view, caller, args)?,
        "delete" => delete(view, caller, args)?,
        "getLogLevel" => {
            out.insert("level", crate::value::text(&view.identity.config.log_level));
        }
        "getTimestampConfig" => {
            out.insert("receive", Value::Bool(view.broker.stamps_receipt()));
        }
        "getLogHiresTimestamp" => {
            out.insert("logHires", Value::Bool(false));
        }
        "setTimestampConfig" => {
            let receive = match args.get("receive") {
                Some(v) => read_bool(v).ok_or_else(|| {
                    Failure::exception("invalid conversion: receive is not a bool")
                })?,
                None => false,
            };
            view.broker.set_stamps_receipt(receive);
        }
        "queueMoveMessages" => {
            let source = text_arg(args, "srcQueue");
            let filter = message_filter(view.broker, source, args)?;
            let count = limit(args, "qty");
            view.broker
                .move_messages(source, text_arg(args, "destQueue"), count, filter.as_ref())
                .map_err(invalid_parameter)?;
        }
        "query" => {
            out.insert("results", Value::Map(query(view.broker, args)?));
        }
        "setLogLevel" | "setLogHiresTimestamp" | "connect" | "queueRedirect" | "shutdown" => {
            return Err(Failure::not_implemented())
        }
        _ => return Err(Failure::unknown_method()),
    }
    Ok(out)
}

fn text_arg<'a>(args: &'a Map, key: &str) -> &'a str {
    args.get(key).and_then(read_text).unwrap_or_default()
}

fn map_arg<'a>(args: &'a Map, key: &str) -> Result<Option<&'a Map>, Failure> {
    match args.get(key) {
        None | Some(Value::Void) => Ok(None),
        Some(Value::Map(m)) => Ok(Some(m)),
        Some(_) => Err(Failure::exception(format!(
            "invalid conversion: {key} is not a map"
        ))),
    }
}

/// The parts of a binding's name, `exchange/queue/key`, split as qpidd splits it (empty
/// parts dropped); a lone part is a queue on the default exchange.
fn binding_parts(name: &str) -> Result<(&str, &str, &str), Failure> {
    let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty()).collect();
    match parts[..] {
        [queue] => Ok(("", queue, "")),
        [exchange, queue] => Ok((exchange, queue, "")),
        [exchange, queue, key] => Ok((exchange, queue, key)),
        _ => Err(Failure::exception(format!("invalid binding: {name}"))),
    }
}

fn create(view: &View, caller: &Caller, args: &Map) -> Result<(), Failure> {
    let kind = text_arg(args, "type");
    let name = text_arg(args, "name");
    let empty = Map::new();
    let properties = map_arg(args, "properties")?.unwrap_or(&empty);
    // qpidd does not implement `strict` (unrecognised properties are queue or exchange
    // arguments), and neither does this.
    let broker = view.broker;
    let flag = |key: &str| properties.get(key).and_then(read_bool).unwrap_or(false);
    let alternate = properties
        .get("alternate-exchange")
        .and_then(read_text)
        .filter(|a| !a.is_empty())
        .map(str::to_owned);
    let exists = || Failure::exception(format!("object already exists: {name}"));
    match kind {
        "queue" => {
            let arguments = to_arguments(properties.iter().filter(|(k, _)| {
                !matches!(
                    k.as_bytes(),
                    b"durable" | b"auto-delete" | b"alternate-exchange"
                )
            }));
            if name == view.hidden_queue || broker.queue(name).is_some() {
                return Err(exists());
            }
            let options = QueueOptions {
                durable: flag("durable"),
                auto_delete: flag("auto-delete"),
                alternate_exchange: alternate,
                limits: QueueLimits::from_arguments(&arguments)?,
                arguments,
                ..QueueOptions::default()
            };
            let (_, created) = broker.declare_queue(name, options, false, caller.owner)?;
            if !created {
                return Err(exists());
            }
        }
        "exchange" | "topic" => {
            let type_name = properties
                .get("exchange-type")
                .and_then(read_text)
                .unwrap_or("topic");
            let kind = ExchangeKind::from_name(type_name)
                .ok_or_else(|| Failure::exception(format!("Invalid exchange type: {type_name}")))?;
            if broker.exchange(name).is_some() {
                return Err(exists());
            }
            let options = ExchangeOptions {
                durable: flag("durable"),
                auto_delete: flag("auto-delete"),
                internal: false,
                alternate_exchange: alternate,
                arguments: to_arguments(properties.iter().filter(|(k, _)| {
                    !matches!(
                        k.as_bytes(),
                        b"durable" | b"auto-delete" | b"alternate-exchange" | b"exchange-type"
                    )
                })),
            };
            broker.declare_exchange(name, kind, options, false)?;
        }
        "binding" => {
            let (exchange, queue, key) = binding_parts(name)?;
            if queue == view.hidden_queue {
                return Err(Failure::exception(format!("Queue not found: {queue}")));
            }
            let arguments = to_arguments(
                properties
                    .iter()
                    .filter(|(k, _)| k.as_bytes() != b"exchange-type"),
            );
            broker.bind(queue, exchange, key, &arguments)?;
        }
        "link" | "bridge" => {
            return Err(Failure::exception(format!(
                "not implemented: federation ({kind}) is not supported"
            )))
        }
        other => return Err(Failure::exception(format!("unknown object type: {other}"))),
    }
    Ok(())
}

fn delete(view: &View, caller: &Caller, args: &Map) -> Result<(), Failure> {
    let kind = text_arg(args, "type");
    let name = text_arg(args, "name");
    let broker = view.broker;
    match kind {
        "queue" => {
            let options = map_arg(args, "options")?;
            let option = |key: &str| {
                options
                    .and_then(|o| o.get(key))
                    .and_then(read_bool)
                    .unwrap_or(false)
            };
            if name == view.hidden_queue {
                return Err(Failure::exception(format!(
                    "Delete failed. No such queue: {name}"
                )));
            }
            broker.delete_queue(name, option("if_unused"), option("if_empty"), caller.owner)?;
        }
        "exchange" | "topic" => broker.delete_exchange(name, false)?,
        "binding" => {
            let (exchange, queue, key) = binding_parts(name)?;
            broker.unbind(queue, exchange, key)?;
        }
        "link" | "bridge" => {
            return Err(Failure::exception(format!(
                "not implemented: federation ({kind}) is not supported"
            )))
        }
        other => return Err(Failure::exception(format!("unknown object type: {other}"))),
    }
    Ok(())
}

/// A count argument: 0 (or none) means all.
fn limit(args: &Map, key: &str) -> Option<u64> {
    args.get(key).and_then(read_u64).filter(|n| *n > 0)
}

/// The message filter of qpidd's purge, reroute and queueMoveMessages: none (absent or
/// empty), or `header_match_str` (`filter_params`: `header_key`, `header_value`). Only
/// queues that read their messages' headers on arrival (message groups, last-value queues)
/// can be filtered: on any other the filter could match nothing, so it is refused.
fn message_filter(
    broker: &Broker,
    queue: &str,
    args: &Map,
) -> Result<Option<HeaderMatch>, Failure> {
    let filter = match args.get("filter") {
        None | Some(Value::Void) => return Ok(None),
        Some(Value::Map(m)) if m.is_empty() => return Ok(None),
        Some(Value::Map(m)) => m,
        Some(_) => {
            return Err(Failure::exception(
                "invalid conversion: filter is not a map",
            ))
        }
    };
    let kind = text_arg(filter, "filter_type");
    if kind != "header_match_str" {
        return Err(Failure::new(
            status::NOT_IMPLEMENTED,
            format!("unsupported message filter type: {kind}"),
        ));
    }
    let params = map_arg(filter, "filter_params")?
        .cloned()
        .unwrap_or_default();
    if broker.queue(queue).is_some_and(|q| !q.needs_headers()) {
        return Err(Failure::new(
            status::NOT_IMPLEMENTED,
            "message filters need a queue that reads headers (message groups, last-value queues)",
        ));
    }
    Ok(Some(HeaderMatch {
        key: text_arg(&params, "header_key").to_owned(),
        value: text_arg(&params, "header_value").to_owned(),
    }))
}

/// The broker's `query(type, name)`: what a queue's special state is (qpidd reports
/// message groups' as `qpid.message_group_queue`); other types are not implemented.
fn query(broker: &Broker, args: &Map) -> Result<Map, Failure> {
    if text_arg(args, "type") != "queue" {
        return Err(Failure::not_implemented());
    }
    let queue = broker
        .queue(text_arg(args, "name"))
        .ok_or_else(|| Failure::new(status::PARAMETER_INVALID, "InvalidParameter"))?;
    let mut results = Map::new();
    if let Some(groups) = queue.message_groups() {
        let state = groups
            .groups
            .iter()
            .map(|g| {
                let mut m = Map::new();
                m.insert(
                    "group_id",
                    Value::Str16(Str::from_bytes(Bytes::from(g.id.clone()))),
                );
                m.insert(
                    "msg_count",
                    Value::Uint32(g.messages.min(u64::from(u32::MAX)) as u32),
                );
                m.insert("timestamp", Value::Uint32(0));
                m.insert(
                    "consumer",
                    Value::Str16(Str::from_bytes(g.consumer.clone())),
                );
                Value::Map(m)
            })
            .collect();
        let mut info = Map::new();
        info.insert("group_header_key", crate::value::text(&groups.key));
        info.insert("group_state", Value::List(List(state)));
        results.insert("qpid.message_group_queue", Value::Map(info));
    }
    Ok(results)
}

/// What qpidd answers when a queue or exchange a method names does not exist.
fn invalid_parameter(e: BrokerError) -> Failure {
    match e {
        BrokerError::NotFound(_) => Failure::new(status::PARAMETER_INVALID, "InvalidParameter"),
        other => other.into(),
    }
}

/// `purge(request, filter)`: the first `request` messages, or all of them for 0.
fn purge(broker: &Broker, queue: &str, args: &Map) -> Result<Map, Failure> {
    let filter = message_filter(broker, queue, args)?;
    match (limit(args, "request"), &filter) {
        (None, None) => broker.purge_queue(queue)?,
        (n, filter) => broker
            .queue(queue)
            .map(|q| q.purge_front(n.unwrap_or(u64::MAX), filter.as_ref()))
            .ok_or_else(|| Failure::new(status::UNKNOWN_OBJECT, "UnknownObject"))?,
    };
    Ok(Map::new())
}

/// `reroute(request, useAltExchange, exchange, filter)`: the first `request` messages (all
/// for 0) through `exchange` or the queue's alternate exchange; a missing exchange is an
/// invalid parameter, as in qpidd.
fn reroute(broker: &Broker, queue: &str, args: &Map) -> Result<Map, Failure> {
    let filter = message_filter(broker, queue, args)?;
    let use_alternate = args
        .get("useAltExchange")
        .and_then(read_bool)
        .unwrap_or(false);
    let exchange = (!use_alternate).then(|| text_arg(args, "exchange"));
    broker
        .reroute(queue, limit(args, "request"), exchange, filter.as_ref())
        .map_err(invalid_parameter)?;
    Ok(Map::new())
}

fn close_connection(broker: &Broker, address: &str) -> Result<Map, Failure> {
    let id = broker
        .connections()
        .list()
        .into_iter()
        .find(|c| crate::objects::connection_address(c) == address)
        .map(|c| c.id);
    match id {
        Some(id) if broker.connections().close(id, "closed by management") => Ok(Map::new()),
        _ => Err(Failure::new(
            status::UNKNOWN_OBJECT,
            format!("No object found with ID=org.apache.qpid.broker:connection:{address}"),
        )),
    }
}

#[cfg(test)]
mod tests;
