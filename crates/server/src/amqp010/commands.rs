//! Execution of 0-10 commands against the broker core.

use std::sync::Arc;

use bytes::Bytes;
use ferry_amqp010::{
    with_timestamp, write_with_exchange, AcceptMode, AcquireMode, Acquired, Command, CreditUnit,
    DeliveryMode, DeliveryProperties, ErrorCode, ExchangeBoundResult, ExchangeQueryResult,
    ExchangeWritten, ExecutionResult, FlowMode, Map, MessageProperties, QueueQueryResult,
    SequenceSet, Str, Struct32,
};
use ferry_core::{
    now_ms, Accepts, Arguments, BoundResult, Broker, ConsumerSpec, Dialect, ExchangeKind,
    ExchangeOptions, QueueLimits, QueueOptions,
};

use crate::access;
use crate::publish::{Encoding, Publish};
use crate::selector;
use ferry_acl::{Action, ObjectType};

use super::convert::{headers_to_map, map_to_headers, optional_name, required_name, Exception};
use super::outgoing::Pending;
use super::session::{release_to_queues, Env, Session, Subscription};
use super::{dtx, tx};

type Outcome = Result<(), Exception>;

/// Runs one command. Results (execution.result) are written here; completion is the
/// caller's job. `header` and `body` are a transfer's segments, if it sent them.
pub fn execute(
    session: &mut Session,
    env: &mut Env,
    id: u32,
    command: Command,
    header: Option<Bytes>,
    body: Option<Bytes>,
) -> Outcome {
    match command {
        Command::MessageTransfer(t) => transfer(session, env, t.destination, header, body),
        Command::ExecutionSync(_) => Ok(()),
        // A client reporting our error or answering us: nothing to do but log it.
        Command::ExecutionResult(_) => Ok(()),
        Command::ExecutionException(e) => {
            tracing::debug!(?e, "peer reported an execution exception");
            Ok(())
        }
        Command::MessageAccept(c) => {
            let work = session.dtx.as_ref().and_then(|d| d.work()).cloned();
            match (work, &c.transfers) {
                (Some(work), Some(transfers)) => {
                    dtx::stage_accepts(session, &work, transfers);
                    return Ok(());
                }
                (Some(_), None) => return Ok(()),
                (None, _) => {}
            }
            match (session.tx.as_mut(), c.transfers) {
                (Some(tx), Some(transfers)) => tx.stage_accepts(&session.outgoing, &transfers),
                (_, transfers) => settle(session, transfers, Settle::Accept),
            }
            Ok(())
        }
        Command::MessageReject(c) => {
            settle(session, c.transfers, Settle::Reject);
            Ok(())
        }
        Command::MessageRelease(c) => {
            settle(session, c.transfers, Settle::Release(c.set_redelivered));
            Ok(())
        }
        Command::MessageAcquire(c) => acquire(session, env, id, c.transfers),
        Command::MessageSubscribe(s) => subscribe(session, env, s),
        Command::MessageCancel(c) => {
            let destination = c
                .destination
                .ok_or_else(|| Exception::missing("destination"))?;
            let sub = session.remove_subscription(&destination).ok_or_else(|| {
                Exception::new(
                    ErrorCode::NotFound,
                    format!("no subscription {destination}"),
                )
            })?;
            env.consumers.remove(&sub.consumer);
            env.broker.cancel_consumer(&sub.queue, sub.consumer);
            Ok(())
        }
        Command::MessageSetFlowMode(c) => {
            let destination = c
                .destination
                .ok_or_else(|| Exception::missing("destination"))?;
            let mode = c.flow_mode.ok_or_else(|| Exception::missing("flow-mode"))?;
            let sub = find_subscription(session, &destination)?;
            if sub.queue.is_deleted() {
                return Ok(());
            }
            sub.queue
                .set_flow_mode(sub.consumer, mode == FlowMode::Window)
                .map_err(Exception::from)
        }
        Command::MessageFlow(c) => {
            let destination = c
                .destination
                .ok_or_else(|| Exception::missing("destination"))?;
            let unit = c.unit.ok_or_else(|| Exception::missing("unit"))?;
            let value = c.value.unwrap_or(0);
            let sub = find_subscription(session, &destination)?;
            let (messages, bytes) = match unit {
                CreditUnit::Message => (value, 0),
                CreditUnit::Byte => (0, value),
            };
            live_queue(sub)?
                .add_credit(sub.consumer, messages, bytes)
                .map_err(Exception::from)
        }
        Command::MessageFlush(c) => {
            let destination = c
                .destination
                .ok_or_else(|| Exception::missing("destination"))?;
            let sub = find_subscription(session, &destination)?;
            live_queue(sub)?
                .flush(sub.consumer)
                .map_err(Exception::from)
        }
        Command::MessageStop(c) => {
            let destination = c
                .destination
                .ok_or_else(|| Exception::missing("destination"))?;
            let sub = find_subscription(session, &destination)?;
            if sub.queue.is_deleted() {
                return Ok(());
            }
            sub.queue.stop(sub.consumer).map_err(Exception::from)
        }
        Command::MessageResume(_) => Err(Exception::not_implemented("message.resume")),
        Command::ExchangeDeclare(c) => {
            let name = required_name(&c.exchange, "exchange")?;
            let kind_name = optional_name(&c.r#type, "type")?;
            let options = ExchangeOptions {
                durable: c.durable,
                auto_delete: c.auto_delete,
                alternate_exchange: alternate(&c.alternate_exchange)?,
                arguments: arguments(&c.arguments),
                // 0-10 (and qpidd) have no internal exchanges.
                internal: false,
            };
            let action = if c.passive || env.broker.exchange(name).is_some() {
                Action::Access
            } else {
                Action::Create
            };
            env.access.check(action, ObjectType::Exchange, || {
                access::exchange_props(name, kind_name, &options)
            })?;
            // qpidd's order: a named alternate must exist, then reserved names, then the
            // type and the alternate against an existing exchange (a declare may leave the
            // type out: it then means "whatever it is"), passive or not.
            if let Some(alt) = options.alternate_exchange.as_deref() {
                if env.broker.exchange(alt).is_none() {
                    return Err(Exception::new(
                        ErrorCode::NotFound,
                        format!("Exchange not found: {alt}"),
                    ));
                }
            }
            if !c.passive && is_reserved_exchange(name) {
                return Err(Exception::new(
                    ErrorCode::NotAllowed,
                    format!(
                        "Exchange names beginning with \"amq.\" or \"qpid.\" are reserved. (exchange=\"{name}\")"
                    ),
                ));
            }
            let existing = env.broker.exchange(name).map(|e| e.kind());
            let kind = match (existing, kind_name) {
                (None, _) if c.passive => return Err(not_found("exchange", name)),
                (Some(kind), "") => kind,
                (_, requested) => ExchangeKind::from_name(requested).ok_or_else(|| {
                    Exception::new(
                        ErrorCode::NotFound,
                        format!("Exchange type not implemented: {requested}"),
                    )
                })?,
            };
            if let Some(current) = existing.filter(|k| *k != kind) {
                return Err(Exception::new(
                    ErrorCode::NotAllowed,
                    format!(
                        "Exchange declared to be of type {}, requested {}",
                        current.name(),
                        kind.name()
                    ),
                ));
            }
            if let (Some(info), Some(alt)) = (
                env.broker.exchange_info(name),
                options.alternate_exchange.as_deref(),
            ) {
                if info.alternate_exchange.as_deref() != Some(alt) {
                    let current = info.alternate_exchange.as_deref().unwrap_or("<none>");
                    return Err(Exception::new(
                        ErrorCode::NotAllowed,
                        format!(
                            "Exchange declared with alternate-exchange {current}, requested {alt}"
                        ),
                    ));
                }
            }
            env.broker
                .declare_exchange(name, kind, options, c.passive)
                .map(|_| ())
                .map_err(Exception::from)
        }
        Command::ExchangeDelete(c) => {
            let name = optional_name(&c.exchange, "exchange")?;
            refuse_default_exchange(name, "Delete")?;
            let info = env.broker.exchange_info(name);
            env.access
                .check(Action::Delete, ObjectType::Exchange, || match &info {
                    Some(info) => access::existing_exchange_props(info),
                    None => access::exchange_named(name),
                })?;
            env.broker
                .delete_exchange(name, c.if_unused)
                .map_err(Exception::from)
        }
        Command::ExchangeQuery(c) => {
            let name = optional_name(&c.name, "name")?;
            env.access.check(Action::Access, ObjectType::Exchange, || {
                access::exchange_named(name)
            })?;
            let result = match env.broker.exchange_info(name) {
                Some(info) => ExchangeQueryResult {
                    r#type: Some(Str::from(info.kind.name())),
                    durable: info.durable,
                    not_found: false,
                    arguments: Some(headers_to_map(&info.arguments)),
                },
                None => ExchangeQueryResult {
                    not_found: true,
                    ..Default::default()
                },
            };
            session.write_result(env, result_of(id, &result))
        }
        Command::ExchangeBind(c) => {
            let queue = required_name(&c.queue, "queue")?;
            let exchange = optional_name(&c.exchange, "exchange")?;
            refuse_default_exchange(exchange, "Bind")?;
            let key = optional_name(&c.binding_key, "binding-key")?;
            env.access.check(Action::Bind, ObjectType::Exchange, || {
                access::binding_props(exchange, Some(queue), Some(key))
            })?;
            check_queue_access(session, env, queue)?;
            let args = arguments(&c.arguments);
            if env.broker.exchange(exchange).map(|e| e.kind()) == Some(ExchangeKind::Headers) {
                check_headers_binding(env.broker, exchange, queue, key, &args)?;
            }
            env.broker
                .bind(queue, exchange, key, &args)
                .map_err(Exception::from)
        }
        Command::ExchangeUnbind(c) => {
            let queue = required_name(&c.queue, "queue")?;
            let exchange = optional_name(&c.exchange, "exchange")?;
            refuse_default_exchange(exchange, "Unbind")?;
            let key = optional_name(&c.binding_key, "binding-key")?;
            env.access.check(Action::Unbind, ObjectType::Exchange, || {
                access::binding_props(exchange, Some(queue), Some(key))
            })?;
            check_queue_access(session, env, queue)?;
            env.broker
                .unbind(queue, exchange, key)
                .map_err(Exception::from)
        }
        Command::ExchangeBound(c) => {
            let exchange = optional_name(&c.exchange, "exchange")?;
            // qpidd takes an empty queue or key as not given: clients that fill in every
            // field (the Java client) send "" for what they do not ask about.
            let queue = Some(optional_name(&c.queue, "queue")?).filter(|q| !q.is_empty());
            let key = Some(optional_name(&c.binding_key, "binding-key")?).filter(|k| !k.is_empty());
            env.access.check(Action::Access, ObjectType::Exchange, || {
                access::binding_props(exchange, queue, key)
            })?;
            let args = c.arguments.as_ref().map(map_to_headers);
            let bound = env.broker.bound(exchange, queue, key, args.as_ref());
            let result = ExchangeBoundResult {
                exchange_not_found: bound.exchange_not_found,
                queue_not_found: bound.queue_not_found,
                queue_not_matched: bound.queue_not_matched,
                key_not_matched: bound.key_not_matched,
                args_not_matched: bound.args_not_matched,
            };
            session.write_result(env, result_of(id, &result))
        }
        Command::QueueDeclare(c) => {
            let name = required_name(&c.queue, "queue")?;
            let args = arguments(&c.arguments);
            let limits = QueueLimits::from_arguments(&args)?;
            let mut options = QueueOptions {
                durable: c.durable,
                exclusive_owner: c.exclusive.then_some(session.owner),
                connection: env.connection,
                auto_delete: c.auto_delete,
                alternate_exchange: alternate(&c.alternate_exchange)?,
                limits,
                arguments: args,
                ..QueueOptions::default()
            };
            let exists = env.broker.queue(name).is_some();
            let action = if c.passive || exists {
                Action::Access
            } else {
                Action::Create
            };
            env.access.check(action, ObjectType::Queue, || {
                access::queue_props(name, &options)
            })?;
            if action == Action::Create {
                options.quota = env.access.charge_queue()?;
            }
            env.broker
                .declare_queue_as(Dialect::Qpidd, name, options, c.passive, session.owner)
                .map(|_| ())
                .map_err(Exception::from)
        }
        Command::QueueDelete(c) => {
            let name = optional_name(&c.queue, "queue")?;
            if name.is_empty() {
                return Err(Exception::new(
                    ErrorCode::NotFound,
                    "Delete failed. No such queue: ",
                ));
            }
            let existing = env.broker.queue(name);
            env.access
                .check(Action::Delete, ObjectType::Queue, || match &existing {
                    Some(q) => access::existing_queue_props(name, q),
                    None => access::named(name),
                })?;
            env.broker
                .delete_queue(name, c.if_unused, c.if_empty, session.owner)
                .map(|_| ())
                .map_err(Exception::from)
        }
        Command::QueuePurge(c) => {
            let name = named_queue(&c.queue)?;
            env.access
                .check(Action::Purge, ObjectType::Queue, || access::named(name))?;
            // qpidd lets any session purge an exclusive queue (no ownership check).
            env.broker
                .purge_queue(name)
                .map(|_| ())
                .map_err(Exception::from)
        }
        Command::QueueQuery(c) => {
            let name = optional_name(&c.queue, "queue")?;
            env.access
                .check(Action::Access, ObjectType::Queue, || access::named(name))?;
            // qpidd answers a query for a missing queue with an empty result, not an error.
            let result = match env.broker.queue_info(name) {
                Some(info) => QueueQueryResult {
                    queue: Some(Str::from(info.name.as_str())),
                    alternate_exchange: info.alternate_exchange.as_deref().map(Str::from),
                    durable: info.durable,
                    exclusive: info.exclusive,
                    auto_delete: info.auto_delete,
                    arguments: Some(headers_to_map(&info.arguments)),
                    message_count: Some(saturate(info.message_count)),
                    subscriber_count: Some(saturate(info.consumer_count)),
                },
                None => QueueQueryResult::default(),
            };
            session.write_result(env, result_of(id, &result))
        }
        Command::TxSelect(_) => tx::select(session, env),
        Command::TxCommit(_) => tx::commit(session, env),
        Command::TxRollback(_) => tx::rollback(session),
        Command::DtxSelect(_) => dtx::select(session),
        Command::DtxStart(c) => dtx::start(session, env, id, c),
        Command::DtxEnd(c) => dtx::end(session, env, id, c),
        Command::DtxCommit(c) => dtx::commit(session, env, id, c),
        Command::DtxForget(c) => dtx::forget(env, c.xid),
        Command::DtxGetTimeout(c) => dtx::get_timeout(session, env, id, c.xid),
        Command::DtxPrepare(c) => dtx::prepare(session, env, id, c.xid),
        Command::DtxRecover(_) => dtx::recover(session, env, id),
        Command::DtxRollback(c) => dtx::rollback(session, env, id, c.xid),
        Command::DtxSetTimeout(c) => dtx::set_timeout(env, c.xid, c.timeout),
        other => Err(Exception::not_implemented(other.name())),
    }
}

fn transfer(
    session: &mut Session,
    env: &mut Env,
    destination: Option<Str>,
    header: Option<Bytes>,
    body: Option<Bytes>,
) -> Outcome {
    let body_segment = body.is_some();
    let body = body.unwrap_or_default();
    let destination = destination.unwrap_or_default();
    let exchange = session
        .exchange_for(env.broker, &destination)
        .ok_or_else(|| not_found("exchange", &destination.to_str_lossy()))?;
    if exchange.is_internal() {
        // Declared internal over 0-9-1: reached only through exchange bindings, whatever
        // the protocol a publisher speaks.
        return Err(Exception::new(
            ErrorCode::UnauthorizedAccess,
            format!("cannot publish to internal exchange {}", exchange.name()),
        ));
    }
    let header = header.unwrap_or_default();
    // Only a broker told to stamp pays for the copy.
    let header = if env.broker.stamps_receipt() {
        with_timestamp(&header, Broker::receipt_time()).map_err(malformed_header)?
    } else {
        header
    };
    let mut publish = Publish {
        exchange: destination.into_bytes(),
        routing_key: Bytes::new(),
        header: Bytes::new(),
        encoding: Encoding::Amqp010,
        body,
        persistent: false,
        priority: 0,
        expires_at: None,
        headers: None,
    };
    let named = read_properties(&header, exchange.needs_headers(), &mut publish)?;
    // Moved in once read rather than cloned in before: each clone and drop is an atomic
    // count on the read buffer.
    publish.header = header;
    env.access.check_publish(
        &mut session.publish_acl,
        &publish.exchange,
        &publish.routing_key,
    )?;
    // The default exchange's empty name is not added to a header that names no exchange:
    // an absent name reads as the same, and the octet it takes can cross a malloc size
    // class (a 256-byte message then costs 16 bytes more, see tests/memory.rs). Its size
    // still counts the octet, as qpidd's does.
    // What the header names was read above: most transfers need no second look.
    let rewritten = match named {
        None | Some(None) if publish.exchange.is_empty() => ExchangeWritten::LeftOut,
        Some(Some(name)) if name.as_bytes() == &publish.exchange[..] => ExchangeWritten::AsIs,
        _ => write_with_exchange(
            &publish.header,
            &publish.exchange,
            true,
            &mut session.header_scratch,
        )
        .map_err(malformed_header)?,
    };
    let routing_key_at = offset_in(&publish.routing_key, &publish.header);
    let counted = (publish.header.len() + publish.body.len()) as u64;
    let mut message = publish.into_parts();
    message.body_segment = body_segment;
    message.publisher = env.connection;
    let message = match rewritten {
        ExchangeWritten::AsIs => message.build(),
        ExchangeWritten::LeftOut => {
            message.size = Some(counted + 1);
            message.build()
        }
        ExchangeWritten::Written(set) => {
            let header = &session.header_scratch[..];
            let exchange = &header[set.exchange_at..][..message.exchange.len()];
            // Moved out: build_with_header takes the parts by value.
            let key = std::mem::take(&mut message.routing_key);
            let routing_key = match routing_key_at {
                Some(at) => &header[set.new_offset(at)..][..key.len()],
                None => &key[..],
            };
            let built = message.build_with_header(header, routing_key, exchange);
            if session.header_scratch.capacity() > SCRATCH_KEPT {
                session.header_scratch = Vec::new();
            }
            built
        }
    };
    if let Some(tx) = session.tx.as_mut() {
        tx.stage_publish(exchange, message);
        return Ok(());
    }
    if let Some(work) = session.dtx.as_ref().and_then(|d| d.work()) {
        work.lock().publish(exchange, message);
        return Ok(());
    }
    let outcome = env
        .broker
        .publish(&exchange, message)
        .map_err(Exception::from)?;
    if let Some(point) = outcome.sync {
        session.needs_sync(point);
    }
    if outcome.backlogged.is_some() {
        *env.backlogged = outcome.backlogged;
    }
    Ok(())
}

/// A session's header scratch buffer larger than this (a transfer with a large header) is
/// let go after use rather than kept.
const SCRATCH_KEPT: usize = 64 * 1024;

/// Where `part` starts inside `whole`, if it is a slice of it.
fn offset_in(part: &[u8], whole: &[u8]) -> Option<usize> {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    (!part.is_empty() && p >= w && p + part.len() <= w + whole.len()).then(|| p - w)
}

fn malformed_header(e: ferry_amqp010::DecodeError) -> Exception {
    Exception::new(
        ErrorCode::InvalidArgument,
        format!("malformed message header: {e}"),
    )
}

/// Fills the routing fields from delivery-properties, and the application headers only
/// when the exchange matches on them (decoding them costs an allocation per entry).
/// Returns the exchange the first delivery-properties names: `None` without
/// delivery-properties, `Some(None)` when they name none.
fn read_properties(
    header: &Bytes,
    want_headers: bool,
    message: &mut Publish,
) -> Result<Option<Option<Str>>, Exception> {
    let mut reader = ferry_amqp010::codec::Reader::new(header.clone());
    let malformed = malformed_header;
    let mut first_exchange = None;
    while !reader.is_empty() {
        let entry = Struct32::decode(&mut reader).map_err(malformed)?;
        if entry.is::<DeliveryProperties>() {
            let dp: DeliveryProperties = entry.into_decoded().map_err(malformed)?;
            if first_exchange.is_none() {
                first_exchange = Some(dp.exchange);
            }
            if let Some(key) = dp.routing_key {
                message.routing_key = key.into_bytes();
            }
            message.priority = dp.priority.map(|p| p as u8).unwrap_or(4);
            message.persistent = dp.delivery_mode == Some(DeliveryMode::Persistent);
            message.expires_at = match (dp.ttl, dp.expiration) {
                (Some(ttl), _) if ttl > 0 => Some(now_ms().saturating_add(ttl)),
                // 0-10 datetime: seconds since the epoch.
                (_, Some(at)) if at > 0 => Some(at.saturating_mul(1000)),
                _ => None,
            };
        } else if want_headers && entry.is::<MessageProperties>() {
            let mp: MessageProperties = entry.into_decoded().map_err(malformed)?;
            if let Some(map) = mp.application_headers {
                message.headers = Some(Arc::new(map_to_headers(&map)));
            }
        }
    }
    Ok(first_exchange)
}

enum Settle {
    Accept,
    Reject,
    Release(bool),
}

fn settle(session: &mut Session, transfers: Option<SequenceSet>, how: Settle) {
    let Some(transfers) = transfers else { return };
    let mut released = Vec::new();
    let mut accepts = Accepts::default();
    for &(lo, hi) in transfers.ranges() {
        for id in session.outgoing.pending(Pending::Settlement, lo, hi) {
            let Some((queue, position, message, acquired)) = session.outgoing.settle(id) else {
                continue;
            };
            match how {
                Settle::Accept => {
                    if acquired {
                        accepts.push(&queue, position, message);
                    }
                }
                Settle::Reject => {
                    if acquired {
                        queue.reject(position, message);
                    }
                }
                Settle::Release(_) => {
                    if acquired {
                        released.push((queue, position, message));
                    }
                }
            }
        }
    }
    // Journaled before the accept's completion takes its sync point.
    accepts.finish();
    if let Settle::Release(set_redelivered) = how {
        release_to_queues(released, set_redelivered);
    }
    session.outgoing.trim();
    session.return_window_slots();
}

fn acquire(
    session: &mut Session,
    env: &mut Env,
    id: u32,
    transfers: Option<SequenceSet>,
) -> Outcome {
    let mut acquired = SequenceSet::new();
    let ranges = transfers.as_ref().map_or(&[][..], |t| t.ranges());
    for &(lo, hi) in ranges {
        for transfer in session.outgoing.pending(Pending::Acquisition, lo, hi) {
            // The result must encode: a transfer that would open a range past what a
            // sequence-set can hold is left unacquired (the result says which were taken).
            let opens_range = acquired.last().map(|last| last.wrapping_add(1)) != Some(transfer);
            if opens_range && acquired.ranges().len() >= SequenceSet::MAX_RANGES {
                break;
            }
            let Some(record) = session.outgoing.get(transfer) else {
                continue;
            };
            let Some(held) = record.unsettled.as_ref() else {
                continue;
            };
            // One the queue refuses (another consumer has it) stays pending: it may be
            // released and acquired later, as qpidd lets a browser retry.
            if !held.queue.acquire([record.position]).is_empty() {
                session.outgoing.acquired(transfer);
                acquired.add(transfer);
            }
        }
    }
    let result = Acquired {
        transfers: Some(acquired),
    };
    session.write_result(env, result_of(id, &result))
}

fn subscribe(session: &mut Session, env: &mut Env, s: ferry_amqp010::MessageSubscribe) -> Outcome {
    let queue_name = named_queue(&s.queue)?;
    env.access.check(Action::Consume, ObjectType::Queue, || {
        access::named(queue_name)
    })?;
    let destination = s.destination.unwrap_or_default();
    let max = env.config.max_consumers_per_session;
    if max > 0 && session.subscription_count() >= max as usize {
        return Err(Exception::new(
            ErrorCode::ResourceLimitExceeded,
            format!("a session may have at most {max} subscriptions"),
        ));
    }
    if session.subscription(&destination).is_some() {
        return Err(Exception::new(
            ErrorCode::NotAllowed,
            format!("destination {destination} is already subscribed"),
        ));
    }
    let queue = env
        .broker
        .queue(queue_name)
        .ok_or_else(|| not_found("queue", queue_name))?;
    let accept_mode = s.accept_mode.unwrap_or(AcceptMode::Explicit);
    let acquire_mode = s.acquire_mode.unwrap_or(AcquireMode::PreAcquired);
    let filter = selector::consumer_filter(&arguments(&s.arguments))
        .map_err(|e| Exception::new(ErrorCode::InvalidArgument, selector::refusal(&e)))?;
    let consumer = env.broker.next_consumer_id();
    queue.subscribe(ConsumerSpec {
        id: consumer,
        outbox: env.outbox.clone(),
        owner: session.owner,
        connection: env.connection,
        tag: destination.clone().into_bytes(),
        acquire: acquire_mode == AcquireMode::PreAcquired,
        exclusive: s.exclusive,
        window: session.settle_window.clone(),
        filter,
        ack_timeout: None,
    })?;
    // The spec's (and qpidd's) default flow mode for a new subscription is window.
    queue.set_flow_mode(consumer, true)?;
    env.consumers.insert(consumer, session.channel);
    session.add_subscription(Subscription::new(
        consumer,
        queue,
        destination,
        accept_mode,
        acquire_mode,
    ));
    Ok(())
}

fn find_subscription<'a>(
    session: &'a mut Session,
    destination: &Str,
) -> Result<&'a mut Subscription, Exception> {
    session.subscription_mut(destination).ok_or_else(|| {
        Exception::new(
            ErrorCode::NotFound,
            format!("no subscription {destination}"),
        )
    })
}

/// The subscription's queue, unless it was deleted under it (qpidd: resource-deleted when
/// the subscription would be dispatched to).
fn live_queue(sub: &Subscription) -> Result<&Arc<ferry_core::Queue>, Exception> {
    if sub.queue.is_deleted() {
        return Err(Exception::queue_deleted(sub.queue.name()));
    }
    Ok(&sub.queue)
}

fn check_queue_access(session: &Session, env: &Env, queue: &str) -> Outcome {
    match env.broker.queue(queue) {
        Some(q) => q.check_access(session.owner).map_err(Exception::from),
        // Let the core report the missing queue in its own words.
        None => Ok(()),
    }
}

/// qpidd reserves these prefixes: no client may create (or redeclare without passive) an
/// exchange named so.
fn is_reserved_exchange(name: &str) -> bool {
    name.starts_with("amq.") || name.starts_with("qpid.")
}

/// The default exchange binds every queue by its name and cannot be changed (qpidd's
/// invalid-argument and texts).
fn refuse_default_exchange(name: &str, what: &str) -> Outcome {
    if name.is_empty() {
        return Err(Exception::new(
            ErrorCode::InvalidArgument,
            format!("{what} not allowed for default exchange"),
        ));
    }
    Ok(())
}

/// qpidd's rules for a headers-exchange binding (both internal-error): `x-match` must be
/// given as "all" or "any" (RabbitMQ's default of "all" is a 0-9-1 habit), and a queue may
/// not be bound twice with one key and different arguments.
fn check_headers_binding(
    broker: &Broker,
    exchange: &str,
    queue: &str,
    key: &str,
    args: &Arguments,
) -> Outcome {
    if !matches!(
        args.get("x-match").and_then(|v| v.as_str()),
        Some("all" | "any")
    ) {
        return Err(Exception::new(
            ErrorCode::InternalError,
            "Invalid or missing x-match value binding to headers exchange. Must be a string [\"all\" or \"any\"]",
        ));
    }
    let bound =
        |args| broker.bound(exchange, Some(queue), Some(key), args) == BoundResult::default();
    if bound(None) && !bound(Some(args)) {
        return Err(Exception::new(
            ErrorCode::InternalError,
            format!("Exchange: {exchange}, binding key: {key} Duplicate binding key not allowed."),
        ));
    }
    Ok(())
}

/// The queue a purge or subscribe names: qpidd refuses an empty name as an illegal
/// argument.
fn named_queue(field: &Option<Str>) -> Result<&str, Exception> {
    match optional_name(field, "queue")? {
        "" => Err(Exception::new(
            ErrorCode::IllegalArgument,
            "No queue name specified.",
        )),
        name => Ok(name),
    }
}

fn alternate(field: &Option<Str>) -> Result<Option<String>, Exception> {
    let name = optional_name(field, "alternate-exchange")?;
    Ok((!name.is_empty()).then(|| name.to_owned()))
}

fn arguments(map: &Option<Map>) -> Arguments {
    map.as_ref().map(map_to_headers).unwrap_or_default()
}

fn not_found(what: &str, name: &str) -> Exception {
    Exception::new(ErrorCode::NotFound, format!("{what} {name} not found"))
}

fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(super) fn result_of<T: ferry_amqp010::CodedStruct>(
    command_id: u32,
    value: &T,
) -> Result<ExecutionResult, String> {
    ExecutionResult::with_value(command_id, value).map_err(|e| e.to_string())
}
