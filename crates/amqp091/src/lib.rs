//! AMQP 0-9-1 codec (placeholder).
