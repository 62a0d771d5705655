//! AMQP 0-10 codec (placeholder until the codec lands).
