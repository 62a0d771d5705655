//! The tx class (RabbitMQ semantics): after tx.select, publishes and acknowledgements
//! (ack, reject, nack) on the channel are staged and take effect at tx.commit, through one
//! core commit. tx.rollback discards the publishes and makes the acknowledged deliveries
//! unacknowledged again under their old tags; they are not redelivered until the client
//! recovers or closes the channel, as in RabbitMQ. Transactions and publisher confirms
//! exclude each other on a channel (406).

use std::sync::Arc;

use ferry_amqp091::{BasicReturn, ShortStr, TxCommitOk, TxRollbackOk, TxSelectOk};
use ferry_core::{Message, Settlement, Transaction};

use super::basic::Outcome;
use super::channel::{requeue, Channel, Ctx, Pending};
use super::error::Fault;

/// What a transactional channel has staged since its last commit or rollback.
pub struct ChannelTx {
    core: Transaction,
    /// One entry per staged publish: the basic.return to send if a mandatory publish turns
    /// out unroutable at commit.
    returns: Vec<Option<Return>>,
    /// Acknowledged deliveries with their tags, settled at commit.
    acks: Vec<(u64, Pending, Outcome)>,
}

pub struct Return {
    exchange: ShortStr,
    routing_key: ShortStr,
    message: Message,
}

impl ChannelTx {
    fn new(broker: &ferry_core::Broker) -> ChannelTx {
        ChannelTx {
            core: broker.transaction(),
            returns: Vec::new(),
            acks: Vec::new(),
        }
    }

    /// `returnable`: a mandatory publish's exchange name and routing key, for its return.
    pub fn stage_publish(
        &mut self,
        exchange: Arc<ferry_core::Exchange>,
        message: Message,
        returnable: Option<(ShortStr, ShortStr)>,
    ) {
        self.returns
            .push(returnable.map(|(exchange, routing_key)| Return {
                exchange,
                routing_key,
                message: message.clone(),
            }));
        self.core.publish(exchange, message);
    }

    pub fn stage_settlement(&mut self, settled: Vec<(u64, Pending)>, how: Outcome) {
        self.acks
            .extend(settled.into_iter().map(|(tag, p)| (tag, p, how)));
    }

    /// The acknowledged deliveries, for a channel that ends with the transaction open: they
    /// go back to their queues with the unacknowledged ones.
    pub fn take_held(&mut self) -> Vec<Pending> {
        self.core.clear();
        self.returns.clear();
        self.acks.drain(..).map(|(_, p, _)| p).collect()
    }
}

fn not_transactional() -> Fault {
    Fault::precondition("channel is not transactional")
}

impl Channel {
    pub fn tx_select(&mut self, ctx: &mut Ctx) -> Result<(), Fault> {
        if self.confirms.is_enabled() {
            return Err(Fault::precondition("cannot switch from confirm to tx mode"));
        }
        if self.tx.is_none() {
            self.tx = Some(Box::new(ChannelTx::new(ctx.broker)));
        }
        self.reply(ctx, TxSelectOk {});
        Ok(())
    }

    pub fn tx_commit(&mut self, ctx: &mut Ctx) -> Result<(), Fault> {
        let tx = self.tx.as_mut().ok_or_else(not_transactional)?;
        let acks = std::mem::take(&mut tx.acks);
        for (_, p, how) in &acks {
            let how = match how {
                Outcome::Ack => Settlement::Accept,
                Outcome::Reject => Settlement::Reject,
                Outcome::Requeue => Settlement::Release { redelivered: true },
            };
            tx.core
                .settle(p.queue.clone(), p.position, p.message.clone(), how);
        }
        let outcome = ctx.broker.commit(&mut tx.core);
        let returns = std::mem::take(&mut tx.returns);
        for (ret, routed) in returns.into_iter().zip(outcome.routed) {
            if let (Some(r), 0) = (ret, routed) {
                let method = BasicReturn {
                    reply_code: 312,
                    reply_text: ShortStr::from_static("NO_ROUTE"),
                    exchange: r.exchange,
                    routing_key: r.routing_key,
                };
                self.write_content(ctx, method.into(), &r.message);
            }
        }
        let mut windowed = 0;
        for (_, p, _) in &acks {
            if let Some(c) = p.consumer {
                self.qos.settled(c, p.message.size());
            }
            windowed += u32::from(p.windowed);
        }
        self.free_window_slots(windowed);
        self.grant(ctx);
        if outcome.refused.is_some() {
            // A queue at its limit (reject-publish) or a full store refused a message: the
            // rest took effect, so the commit did not, as a whole. RabbitMQ's answer.
            return Err(Fault::precondition("partial tx completion"));
        }
        // Everything the commit journaled is on stable storage before the client hears of it.
        self.reply_at(ctx, outcome.sync, TxCommitOk {});
        Ok(())
    }

    pub fn tx_rollback(&mut self, ctx: &mut Ctx) -> Result<(), Fault> {
        let tx = self.tx.as_mut().ok_or_else(not_transactional)?;
        tx.core.clear();
        tx.returns.clear();
        let acks = std::mem::take(&mut tx.acks);
        self.unacked
            .restore(acks.into_iter().map(|(tag, p, _)| (tag, p)));
        self.reply(ctx, TxRollbackOk {});
        Ok(())
    }

    /// The channel ends inside a transaction: staged publishes vanish, acknowledged
    /// deliveries are requeued like unacknowledged ones.
    pub fn tx_teardown(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            requeue(tx.take_held());
        }
    }
}
