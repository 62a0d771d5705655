//! The basic class: publish (with mandatory returns and confirms), consume/cancel, deliveries,
//! get, qos, and settlement (ack, reject, nack, recover).

use std::sync::Arc;

use bytes::Bytes;
use ferry_amqp091::{
    reply, BasicAck, BasicCancel, BasicCancelOk, BasicConsume, BasicConsumeOk, BasicGet,
    BasicGetEmpty, BasicGetOk, BasicNack, BasicPublish, BasicQos, BasicQosOk, BasicReject,
    BasicReturn, ConfirmSelectOk, Content, DeliverRef, Publication, RawProperties, ShortStr,
};
use ferry_core::{now_ms, Accepts, Broker, BrokerError, ConsumerSpec, Delivery, Exchange};

use crate::access;
use crate::publish::{Encoding, Publish};
use crate::selector;
use ferry_acl::{Action, ObjectType};

use super::ack_timeout;
use super::channel::{clamp, requeue, Channel, ConsumerRec, Ctx, Pending};
use super::convert::table_to_headers;
use super::error::Fault;
use super::qos::Settings;

/// How a settled delivery leaves the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ack,
    Requeue,
    /// Dead-lettered through the queue's alternate exchange, or dropped.
    Reject,
}

/// Publishing to an internal exchange is refused (as RabbitMQ refuses it): only
/// exchange-to-exchange bindings feed one. Management's test publish asks this too.
pub(crate) fn refuse_internal(exchange: &Exchange) -> Result<(), Fault> {
    if exchange.is_internal() {
        return Err(Fault::access_refused(format!(
            "cannot publish to internal exchange '{}' in vhost '/'",
            exchange.name()
        )));
    }
    Ok(())
}

/// `properties` with the timestamp property set to the time of receipt (qpidd's
/// `--enable-timestamp`; RabbitMQ's message-timestamp plugin does the same), re-encoded.
pub(crate) fn stamped(properties: &RawProperties) -> RawProperties {
    let mut decoded = properties.decode();
    decoded.timestamp = Some(Broker::receipt_time());
    RawProperties::encode(&decoded)
}

impl Channel {
    /// Publishes the message this channel's assembler has just completed; a fault comes
    /// with the ids of the method that carried it.
    pub fn publish_assembled(&mut self, ctx: &mut Ctx) -> Result<(), (Fault, (u16, u16))> {
        match self.assembler.take_content() {
            None => Ok(()),
            Some(Content::Publish(m)) => self.publish(ctx, m).map_err(|f| (f, BasicPublish::IDS)),
            // basic.deliver, get-ok or return from a client: its content was read, but the
            // method is the server's to send (RabbitMQ: command-invalid, as for any method
            // a channel does not take).
            Some(Content::Other(method)) => Err((
                Fault::command_invalid(format!("unexpected {} on a channel", method.name())),
                (method.class_id(), method.method_id()),
            )),
        }
    }

    fn publish(&mut self, ctx: &mut Ctx, m: Publication) -> Result<(), Fault> {
        let p = m.method;
        if p.immediate {
            return Err(Fault::not_implemented("immediate=true"));
        }
        let exchange = self.exchange_for(ctx.broker, p.exchange.bytes())?;
        refuse_internal(&exchange)?;
        ctx.access.check_publish(
            &mut self.publish_acl,
            p.exchange.bytes(),
            p.routing_key.bytes(),
        )?;
        let props = if ctx.broker.stamps_receipt() {
            stamped(&m.properties)
        } else {
            m.properties
        };
        let summary = props.summary();
        let expires_at = match &summary.expiration {
            None => None,
            Some(e) => {
                let ms: u64 = std::str::from_utf8(e.as_bytes())
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| Fault::precondition("invalid expiration"))?;
                Some(now_ms().saturating_add(ms))
            }
        };
        let headers = if exchange.needs_headers() {
            props.headers().map(|h| Arc::new(table_to_headers(&h)))
        } else {
            None
        };
        let persistent = summary.delivery_mode == Some(2);
        let priority = summary.priority.unwrap_or(0);
        // The names and properties move into the message (each clone and its drop were an
        // atomic count up and down per publish); a mandatory publish keeps the names for its
        // return.
        let names = p
            .mandatory
            .then(|| (p.exchange.clone(), p.routing_key.clone()));
        let publish = Publish {
            exchange: p.exchange.into_bytes(),
            routing_key: p.routing_key.into_bytes(),
            persistent,
            priority,
            header: props.into_bytes(),
            encoding: Encoding::Amqp091,
            body: m.body,
            expires_at,
            headers,
        };
        let message = publish.into_message();
        if let Some(tx) = self.tx.as_mut() {
            tx.stage_publish(exchange, message, names);
            return Ok(());
        }
        // Kept only for a return; a copy per publish would count the message up and down.
        let returnable = p.mandatory.then(|| message.clone());
        let (stored, sync) = match ctx.broker.publish(&exchange, message) {
            Ok(outcome) => {
                if let (Some(message), Some((exchange, routing_key))) =
                    (returnable.filter(|_| outcome.queues == 0), names)
                {
                    let ret = BasicReturn {
                        reply_code: 312,
                        reply_text: ShortStr::from_static("NO_ROUTE"),
                        exchange,
                        routing_key,
                    };
                    self.write_content(ctx, ret.into(), &message);
                }
                if outcome.backlogged.is_some() {
                    *ctx.backlogged = outcome.backlogged;
                }
                (true, outcome.sync)
            }
            // A full queue with reject-publish, or a full store: the publisher learns through
            // a nack (RabbitMQ drops silently without confirms).
            Err(BrokerError::ResourceLimitExceeded(_)) => (false, None),
            Err(e) => return Err(e.into()),
        };
        self.confirms.record(stored, sync);
        Ok(())
    }

    fn check_consume(&self, ctx: &Ctx, queue: &ShortStr) -> Result<(), Fault> {
        let name = self.queue_name(queue)?;
        ctx.access
            .check(Action::Consume, ObjectType::Queue, || access::named(name))?;
        Ok(())
    }

    pub fn confirm_select(&mut self, ctx: &mut Ctx, nowait: bool) -> Result<(), Fault> {
        if self.tx.is_some() {
            return Err(Fault::precondition("cannot switch from tx to confirm mode"));
        }
        self.confirms.enable();
        if !nowait {
            self.reply(ctx, ConfirmSelectOk {});
        }
        Ok(())
    }

    /// Writes the publisher confirms the journal allows (once per read batch, on each journal
    /// wake-up, and before the channel ends). They wait behind held replies.
    pub fn flush_confirms(&mut self, ctx: &mut Ctx) {
        if !self.confirms.has_pending() || !self.held.is_empty() {
            return;
        }
        let durable = match ctx.broker.journal() {
            Some(j) if j.is_failed() => {
                self.confirms.fail_unsynced();
                j.durable()
            }
            Some(j) => j.durable(),
            None => ferry_core::SyncPoint::default(),
        };
        for m in self.confirms.flush(durable) {
            self.write(ctx.out, m);
        }
    }

    pub fn qos(&mut self, ctx: &mut Ctx, m: BasicQos) {
        let s = &mut self.qos.settings;
        if m.global {
            s.global_count = m.prefetch_count;
        } else {
            *s = Settings {
                prefetch_count: m.prefetch_count,
                prefetch_size: m.prefetch_size,
                global_count: s.global_count,
            };
        }
        self.reply(ctx, BasicQosOk {});
        // A global limit applies to the channel's consumers from now on.
        self.grant(ctx);
    }

    pub fn consume(&mut self, ctx: &mut Ctx, m: BasicConsume) -> Result<(), Fault> {
        let max = ctx.config.max_consumers_per_session;
        if max > 0 && self.consumers.len() >= max as usize {
            // RabbitMQ's consumer_max_per_channel is a not_allowed connection error too.
            return Err(Fault::new(
                reply::NOT_ALLOWED,
                format!("a channel may have at most {max} consumers"),
            ));
        }
        self.check_consume(ctx, &m.queue)?;
        let queue = self.usable_queue(ctx, &m.queue)?;
        let tag = if m.consumer_tag.is_empty() {
            let tag = format!("amq.ctag-{}-{}", ctx.owner, self.next_ctag);
            self.next_ctag += 1;
            ShortStr::new(Bytes::from(tag)).unwrap_or_default()
        } else {
            m.consumer_tag.clone()
        };
        if self.consumers.iter().any(|c| c.tag == tag) {
            return Err(Fault::new(
                reply::NOT_ALLOWED,
                format!(
                    "attempt to reuse consumer tag '{}'",
                    String::from_utf8_lossy(tag.as_bytes())
                ),
            ));
        }
        let arguments = table_to_headers(&m.arguments);
        let filter = selector::consumer_filter(&arguments)
            .map_err(|e| Fault::precondition(selector::refusal(&e)))?;
        // Checked even for no-ack consumers, whose deliveries are never waited for.
        let own_timeout = ack_timeout::argument(&arguments)?;
        let ack_timeout = match own_timeout {
            _ if m.no_ack => None,
            Some(own) => own,
            None => ack_timeout::for_queue(&queue, ctx.config.consumer_timeout),
        };
        let id = ctx.broker.next_consumer_id();
        let spec = ConsumerSpec {
            id,
            outbox: ctx.outbox.clone(),
            owner: ctx.owner,
            // qpidd's no-local queues are a 0-10 matter: RabbitMQ has nothing like them, so
            // 0-9-1 consumers (and messages) never count as any queue owner's own.
            connection: 0,
            tag: tag.bytes().clone(),
            acquire: true,
            exclusive: m.exclusive,
            window: self.settle_window.clone(),
            filter,
            ack_timeout,
        };
        queue.subscribe(spec).map_err(|e| match e {
            // RabbitMQ: a queue in exclusive use by another consumer is access-refused.
            BrokerError::ResourceLocked(t) => Fault::access_refused(t),
            other => other.into(),
        })?;
        ctx.consumers.insert(id, self.id);
        ctx.ack_checks.in_use(ack_timeout, ctx.now);
        self.qos.add_consumer(id, m.no_ack);
        self.consumers.push(ConsumerRec {
            id,
            tag: tag.clone(),
            queue,
            no_ack: m.no_ack,
            ack_timeout,
        });
        if !m.nowait {
            self.reply_consume_ok(ctx, BasicConsumeOk { consumer_tag: tag }.into(), id);
        }
        if self.flow_active {
            self.grant(ctx);
        }
        Ok(())
    }

    pub fn cancel(&mut self, ctx: &mut Ctx, m: BasicCancel) {
        if let Some(i) = self.consumers.iter().position(|c| c.tag == m.consumer_tag) {
            let c = self.consumers.remove(i);
            ctx.broker.cancel_consumer(&c.queue, c.id);
            ctx.consumers.remove(&c.id);
            self.qos.remove_consumer(c.id);
        }
        if !m.nowait {
            self.reply(
                ctx,
                BasicCancelOk {
                    consumer_tag: m.consumer_tag,
                },
            );
        }
    }

    /// The queue under a consumer was deleted: forget the consumer and, if the client asked
    /// for it, tell it with a server-sent basic.cancel.
    pub fn consumer_gone(&mut self, ctx: &mut Ctx, consumer: u64, notify: bool) {
        let Some(i) = self.consumers.iter().position(|c| c.id == consumer) else {
            return;
        };
        let c = self.consumers.remove(i);
        self.qos.remove_consumer(c.id);
        if notify && self.state == super::channel::State::Open {
            // Behind a consume-ok still held for this consumer.
            self.reply(
                ctx,
                BasicCancel {
                    consumer_tag: c.tag,
                    nowait: true,
                },
            );
        }
    }

    /// Writes one delivery from the outbox. Deliveries for a consumer this channel no longer
    /// has go back to their queue.
    pub fn deliver(&mut self, ctx: &mut Ctx, d: Delivery) {
        let Some(c) = self.consumers.iter().find(|c| c.id == d.consumer) else {
            self.free_window_slots(u32::from(d.windowed));
            if d.acquired {
                d.queue.release([(d.position, d.message)], false);
            }
            return;
        };
        // Written before the delivery is tracked, so that the consumer's tag and the message
        // are borrowed for the write rather than each counted up and down once more.
        let (no_ack, ack_timeout) = (c.no_ack, c.ack_timeout);
        let delivery_tag = self.unacked.peek_tag();
        let method = DeliverRef {
            consumer_tag: &c.tag,
            delivery_tag,
            redelivered: d.redelivered,
            exchange: d.message.exchange(),
            routing_key: d.message.routing_key(),
        };
        self.write_delivery(ctx, &method, &d);
        let tag = if no_ack {
            ctx.presettled.push(d.queue, d.position, d.message);
            self.free_window_slots(u32::from(d.windowed));
            self.unacked.next_tag()
        } else {
            self.qos.delivered(d.consumer, d.message.size());
            self.unacked.push(Pending {
                consumer: Some(d.consumer),
                windowed: d.windowed,
                queue: d.queue,
                position: d.position,
                message: d.message,
                ack_timeout,
            })
        };
        debug_assert_eq!(tag, delivery_tag);
    }

    pub fn get(&mut self, ctx: &mut Ctx, m: BasicGet) -> Result<(), Fault> {
        self.check_consume(ctx, &m.queue)?;
        let queue = self.usable_queue(ctx, &m.queue)?;
        let Some(got) = queue.get() else {
            self.reply(
                ctx,
                BasicGetEmpty {
                    cluster_id: ShortStr::default(),
                },
            );
            return Ok(());
        };
        let returns = if queue.reports_returns() {
            got.returns
        } else {
            0
        };
        let tag = if m.no_ack {
            queue.accept(got.position);
            self.unacked.next_tag()
        } else {
            let ack_timeout = ack_timeout::for_queue(&queue, ctx.config.consumer_timeout);
            ctx.ack_checks.in_use(ack_timeout, ctx.now);
            self.unacked.push(Pending {
                consumer: None,
                windowed: false,
                queue,
                position: got.position,
                message: got.message.clone(),
                ack_timeout,
            })
        };
        let method = BasicGetOk {
            delivery_tag: tag,
            redelivered: got.redelivered,
            exchange: short_copy(got.message.exchange()),
            routing_key: short_copy(got.message.routing_key()),
            message_count: clamp(got.remaining),
        };
        self.reply_content(ctx, method.into(), got.message, returns);
        Ok(())
    }

    pub fn ack(&mut self, ctx: &mut Ctx, m: BasicAck) -> Result<(), Fault> {
        self.settle(ctx, m.delivery_tag, m.multiple, Outcome::Ack)
    }

    pub fn reject(&mut self, ctx: &mut Ctx, m: BasicReject) -> Result<(), Fault> {
        let how = if m.requeue {
            Outcome::Requeue
        } else {
            Outcome::Reject
        };
        self.settle(ctx, m.delivery_tag, false, how)
    }

    pub fn nack(&mut self, ctx: &mut Ctx, m: BasicNack) -> Result<(), Fault> {
        let how = if m.requeue {
            Outcome::Requeue
        } else {
            Outcome::Reject
        };
        self.settle(ctx, m.delivery_tag, m.multiple, how)
    }

    /// basic.recover and recover-async: everything unacknowledged goes back to its queue,
    /// marked redelivered. As in RabbitMQ, `requeue = false` (redeliver to the same
    /// consumers without requeueing) is not implemented: a connection error.
    pub fn recover(&mut self, ctx: &mut Ctx, requeue: bool) -> Result<(), Fault> {
        if !requeue {
            return Err(Fault::not_implemented("requeue=false"));
        }
        let all = self.unacked.take_all();
        let mut windowed = 0;
        for p in &all {
            if let Some(c) = p.consumer {
                self.qos.settled(c, p.message.size());
            }
            windowed += u32::from(p.windowed);
        }
        super::channel::requeue(all);
        self.free_window_slots(windowed);
        self.grant(ctx);
        Ok(())
    }

    fn settle(
        &mut self,
        ctx: &mut Ctx,
        tag: u64,
        multiple: bool,
        how: Outcome,
    ) -> Result<(), Fault> {
        if let Some(tx) = self.tx.as_mut() {
            let settled = self
                .unacked
                .take_tagged(tag, multiple)
                .map_err(|e| Fault::precondition(e.to_string()))?;
            tx.stage_settlement(settled, how);
            return Ok(());
        }
        let settled = self
            .unacked
            .take(tag, multiple)
            .map_err(|e| Fault::precondition(e.to_string()))?;
        let mut back = Vec::new();
        let mut windowed = 0;
        let mut accepts = Accepts::default();
        for p in settled {
            if let Some(c) = p.consumer {
                self.qos.settled(c, p.message.size());
            }
            windowed += u32::from(p.windowed);
            match how {
                Outcome::Ack => accepts.push(&p.queue, p.position, p.message),
                Outcome::Reject => {
                    p.queue.reject(p.position, p.message);
                }
                Outcome::Requeue => back.push(p),
            }
        }
        accepts.finish();
        requeue(back);
        self.free_window_slots(windowed);
        self.grant(ctx);
        Ok(())
    }

    /// channel.flow: stop or restart deliveries to this channel's consumers.
    pub fn flow(&mut self, ctx: &mut Ctx, active: bool) {
        if active == self.flow_active {
            return;
        }
        self.flow_active = active;
        if active {
            self.qos.resume();
            self.grant(ctx);
        } else {
            self.qos.pause();
            for c in &self.consumers {
                let _ = c.queue.stop(c.id);
            }
        }
    }

    /// Tops consumers' core credit up to what qos allows.
    pub fn grant(&mut self, _ctx: &mut Ctx) {
        for (id, messages, bytes) in self.qos.grants() {
            if let Some(c) = self.consumers.iter().find(|c| c.id == id) {
                // Fails only if the queue went away meanwhile; its cancel item is on its way.
                let _ = c.queue.add_credit(id, messages, bytes);
            }
        }
    }
}

/// A message's exchange or routing key as a `ShortStr` of its own (empty if too long for
/// one, which only a message from another protocol can be).
pub(super) fn short_copy(s: &[u8]) -> ShortStr {
    ShortStr::new(Bytes::copy_from_slice(s)).unwrap_or_default()
}
