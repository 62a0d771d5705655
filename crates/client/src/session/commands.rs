//! Typed helpers for the exchange, queue and message commands.
//!
//! Management commands are sent with sync and awaited, so a refusal comes back from
//! the call that caused it. Settlement and flow commands (accept, release, reject, flow,
//! stop, flush) are pipelined: they are queued and any error shows on a later call.

use bytes::Bytes;
use ferry_amqp010::value::CodedStruct;
use ferry_amqp010::{
    Acquired, Command, CreditUnit, ExchangeBind, ExchangeBound, ExchangeBoundResult,
    ExchangeDeclare, ExchangeDelete, ExchangeQuery, ExchangeQueryResult, ExchangeUnbind, FlowMode,
    Map, MessageAccept, MessageAcquire, MessageCancel, MessageFlow, MessageFlush, MessageReject,
    MessageRelease, MessageSetFlowMode, MessageStop, MessageSubscribe, QueueDeclare, QueueDelete,
    QueuePurge, QueueQuery, QueueQueryResult, RejectCode, SequenceSet, Str, Struct32,
};
use tokio::sync::mpsc;

use super::Session;
use crate::connection::Registration;
use crate::error::ClientError;
use crate::options::{ExchangeDeclareOptions, QueueDeclareOptions, SubscribeOptions};
use crate::subscription::Subscription;

fn decode_result<T: CodedStruct>(value: Option<Struct32>) -> Result<T, ClientError> {
    let value = value.ok_or_else(|| ClientError::BadResult("no execution.result".into()))?;
    value
        .decode_as::<T>()
        .map_err(|e| ClientError::BadResult(e.to_string()))
}

fn s(v: &str) -> Option<Str> {
    Some(Str::from(v))
}

impl Session {
    pub async fn exchange_declare(
        &self,
        name: &str,
        exchange_type: &str,
        options: ExchangeDeclareOptions,
    ) -> Result<(), ClientError> {
        self.execute(ExchangeDeclare {
            exchange: s(name),
            r#type: s(exchange_type),
            alternate_exchange: options.alternate_exchange.map(Str::from),
            passive: options.passive,
            durable: options.durable,
            auto_delete: options.auto_delete,
            arguments: options.arguments,
        })
        .await
        .map(drop)
    }

    pub async fn exchange_delete(&self, name: &str, if_unused: bool) -> Result<(), ClientError> {
        self.execute(ExchangeDelete {
            exchange: s(name),
            if_unused,
        })
        .await
        .map(drop)
    }

    pub async fn exchange_query(&self, name: &str) -> Result<ExchangeQueryResult, ClientError> {
        decode_result(self.execute(ExchangeQuery { name: s(name) }).await?)
    }

    pub async fn exchange_bind(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
        arguments: Option<Map>,
    ) -> Result<(), ClientError> {
        self.execute(ExchangeBind {
            queue: s(queue),
            exchange: s(exchange),
            binding_key: s(binding_key),
            arguments,
        })
        .await
        .map(drop)
    }

    pub async fn exchange_unbind(
        &self,
        queue: &str,
        exchange: &str,
        binding_key: &str,
    ) -> Result<(), ClientError> {
        self.execute(ExchangeUnbind {
            queue: s(queue),
            exchange: s(exchange),
            binding_key: s(binding_key),
        })
        .await
        .map(drop)
    }

    /// `None` arguments leave the field out, as `exchange.bound` allows for each of
    /// queue, binding key and arguments.
    pub async fn exchange_bound(
        &self,
        exchange: &str,
        queue: Option<&str>,
        binding_key: Option<&str>,
        arguments: Option<Map>,
    ) -> Result<ExchangeBoundResult, ClientError> {
        decode_result(
            self.execute(ExchangeBound {
                exchange: s(exchange),
                queue: queue.map(Str::from),
                binding_key: binding_key.map(Str::from),
                arguments,
            })
            .await?,
        )
    }

    pub async fn queue_declare(
        &self,
        name: &str,
        options: QueueDeclareOptions,
    ) -> Result<(), ClientError> {
        self.execute(QueueDeclare {
            queue: s(name),
            alternate_exchange: options.alternate_exchange.map(Str::from),
            passive: options.passive,
            durable: options.durable,
            exclusive: options.exclusive,
            auto_delete: options.auto_delete,
            arguments: options.arguments,
        })
        .await
        .map(drop)
    }

    pub async fn queue_delete(
        &self,
        name: &str,
        if_unused: bool,
        if_empty: bool,
    ) -> Result<(), ClientError> {
        self.execute(QueueDelete {
            queue: s(name),
            if_unused,
            if_empty,
        })
        .await
        .map(drop)
    }

    pub async fn queue_purge(&self, name: &str) -> Result<(), ClientError> {
        self.execute(QueuePurge { queue: s(name) }).await.map(drop)
    }

    pub async fn queue_query(&self, name: &str) -> Result<QueueQueryResult, ClientError> {
        decode_result(self.execute(QueueQuery { queue: s(name) }).await?)
    }

    /// Subscribes `destination` to `queue` and grants the initial credit (message and
    /// byte units); waits until the broker has taken all of it, so a refusal (unknown
    /// queue, exclusive use) is returned here.
    pub async fn subscribe(
        &self,
        queue: &str,
        destination: &str,
        options: SubscribeOptions,
    ) -> Result<Subscription, ClientError> {
        self.core.check()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let batch = self.core.options.completion_batch.max(1);
        // Registered before the subscribe goes out, so the reader knows the destination
        // by the time the first transfer can arrive.
        self.core.conn.register(Registration::Destination {
            channel: self.core.channel,
            destination: Bytes::copy_from_slice(destination.as_bytes()),
            tx,
            complete_on_receipt: match options.flow_mode {
                FlowMode::Credit => Some(batch),
                FlowMode::Window => None,
            },
        })?;
        self.send(
            MessageSubscribe {
                queue: s(queue),
                destination: s(destination),
                accept_mode: Some(options.accept_mode),
                acquire_mode: Some(options.acquire_mode),
                exclusive: options.exclusive,
                resume_id: None,
                resume_ttl: None,
                arguments: options.arguments.clone(),
            },
            false,
        )?;
        self.send(set_flow_mode(destination, options.flow_mode), false)?;
        self.send(
            flow(destination, CreditUnit::Message, options.message_credit),
            false,
        )?;
        self.execute(flow(destination, CreditUnit::Byte, options.byte_credit))
            .await?;
        // In window mode credit only returns on completion: report it by half-windows
        // so the broker never stalls waiting for the timer.
        let threshold = match options.flow_mode {
            FlowMode::Window => batch.min((options.message_credit / 2).max(1)),
            FlowMode::Credit => batch,
        };
        Ok(Subscription::new(
            self.clone(),
            Str::from(destination),
            rx,
            threshold,
        ))
    }

    /// `message.accept`, preceded by any `session.completed` still waiting to be batched,
    /// so both go out in one write (the qpid C++ client completes with its accepts too)
    /// and a window-mode subscription gets its credit back with the accept.
    pub async fn accept(&self, transfers: &SequenceSet) -> Result<(), ClientError> {
        self.core.flush_completions();
        self.send(
            MessageAccept {
                transfers: Some(transfers.clone()),
            },
            false,
        )
        .map(drop)
    }

    pub async fn release(
        &self,
        transfers: &SequenceSet,
        set_redelivered: bool,
    ) -> Result<(), ClientError> {
        self.send(
            MessageRelease {
                transfers: Some(transfers.clone()),
                set_redelivered,
            },
            false,
        )
        .map(drop)
    }

    pub async fn reject(
        &self,
        transfers: &SequenceSet,
        code: RejectCode,
        text: &str,
    ) -> Result<(), ClientError> {
        self.send(
            MessageReject {
                transfers: Some(transfers.clone()),
                code: Some(code),
                text: s(text),
            },
            false,
        )
        .map(drop)
    }

    /// Acquires not-acquired transfers; returns the ids actually acquired.
    pub async fn acquire(&self, transfers: &SequenceSet) -> Result<SequenceSet, ClientError> {
        let acquired: Acquired = decode_result(
            self.execute(MessageAcquire {
                transfers: Some(transfers.clone()),
            })
            .await?,
        )?;
        Ok(acquired.transfers.unwrap_or_default())
    }

    pub async fn message_flow(
        &self,
        destination: &str,
        unit: CreditUnit,
        value: u32,
    ) -> Result<(), ClientError> {
        self.send(flow(destination, unit, value), false).map(drop)
    }

    /// Changes the flow mode. When transfers are completed (on arrival or when taken)
    /// still follows the mode the subscription was made with.
    pub async fn set_flow_mode(
        &self,
        destination: &str,
        mode: FlowMode,
    ) -> Result<(), ClientError> {
        self.send(set_flow_mode(destination, mode), false).map(drop)
    }

    /// `message.flush`, awaited: once it completes the broker has sent everything the
    /// credit allowed and the credit is gone.
    pub async fn message_flush(&self, destination: &str) -> Result<(), ClientError> {
        self.execute(MessageFlush {
            destination: s(destination),
        })
        .await
        .map(drop)
    }

    pub async fn message_stop(&self, destination: &str) -> Result<(), ClientError> {
        self.execute(MessageStop {
            destination: s(destination),
        })
        .await
        .map(drop)
    }

    pub async fn message_cancel(&self, destination: &str) -> Result<(), ClientError> {
        self.execute(MessageCancel {
            destination: s(destination),
        })
        .await
        .map(drop)
    }
}

fn flow(destination: &str, unit: CreditUnit, value: u32) -> Command {
    MessageFlow {
        destination: s(destination),
        unit: Some(unit),
        value: Some(value),
    }
    .into()
}

fn set_flow_mode(destination: &str, mode: FlowMode) -> Command {
    MessageSetFlowMode {
        destination: s(destination),
        flow_mode: Some(mode),
    }
    .into()
}
