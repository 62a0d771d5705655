//! What the examples share: a broker with one queue ("bench") and one acquiring consumer.

use std::sync::Arc;

use bytes::Bytes;
use ferry_core::{
    Broker, BrokerConfig, BrokerError, ConsumerId, ConsumerSpec, Outbox, Queue, QueueOptions,
};

pub struct Bench {
    pub broker: Arc<Broker>,
    pub queue: Arc<Queue>,
    pub outbox: Arc<Outbox>,
    pub consumer: ConsumerId,
}

/// The consumer starts with `credit` messages of credit (unlimited bytes).
pub fn one_queue_one_consumer(credit: u32) -> Result<Bench, BrokerError> {
    let broker = Broker::new(BrokerConfig::default());
    let (queue, _) = broker.declare_queue("bench", QueueOptions::default(), false, 1)?;
    let outbox = Outbox::new();
    let consumer = broker.next_consumer_id();
    queue.subscribe(ConsumerSpec {
        id: consumer,
        outbox: outbox.clone(),
        owner: 1,
        connection: 0,
        tag: Bytes::from_static(b"bench"),
        acquire: true,
        exclusive: false,
        window: None,
        filter: None,
        ack_timeout: None,
    })?;
    queue.add_credit(consumer, credit, u32::MAX)?;
    Ok(Bench {
        broker,
        queue,
        outbox,
        consumer,
    })
}
