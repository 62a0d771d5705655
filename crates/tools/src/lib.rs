//! Harnesses behind the `ferry` command.
//!
//! `netbench` measures what loopback TCP on this machine can do, the ceiling any broker here
//! is held against. `perftest` and `latency_test` carry qpid-perftest's and
//! qpid-latency-test's options, arithmetic and reports; their protocol-driving parts are
//! traits, implemented over AMQP 0-10 with `ferry-client` in `amqp010` and over AMQP 0-9-1
//! with `ferry-client091` in `amqp091` (`--protocol`). `ctl` manages a running ferryd over its
//! management HTTP API.

pub mod amqp010;
pub mod amqp091;
pub mod amqp1;
pub mod chaos;
pub mod cli;
pub mod cluster;
pub mod conn;
pub mod ctl;
pub mod driver;
pub mod error;
pub mod latency_test;
pub mod netbench;
pub mod perftest;
pub mod scale;
pub mod stats;
pub mod user;

pub use error::ToolError;
