//! Broker core (placeholder).
