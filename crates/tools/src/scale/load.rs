//! The load itself: idle AMQP 0-10 connections (each with a session) and queues, created,
//! checked and removed with a bounded number of operations in flight, every step bounded
//! in time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_amqp010::{ExchangeBind, ExecutionSync, QueueDeclare, QueueDelete, Str};
use ferry_client::{ConnectOptions, Connection, Session};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::driver::DriverError;

/// One idle connection and its session.
pub struct Idle {
    connection: Connection,
    pub session: Session,
}

/// Opens `n` connections to `addr`, at most `parallel` handshakes at a time. Fails on the
/// first connection that cannot be opened: a partial load would measure something else.
pub async fn open(
    addr: &str,
    options: &ConnectOptions,
    n: usize,
    parallel: usize,
    step: Duration,
) -> Result<Vec<Idle>, DriverError> {
    let slots = Arc::new(Semaphore::new(parallel.max(1)));
    let mut tasks = JoinSet::new();
    let mut opened: Vec<(usize, Idle)> = Vec::with_capacity(n);
    let reap = |done: Result<Result<(usize, Idle), DriverError>, tokio::task::JoinError>| {
        done.map_err(|e| DriverError::Connection(format!("open task: {e}")))?
    };
    for i in 0..n {
        let permit = slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| DriverError::Connection("open: semaphore closed".into()))?;
        let (addr, options) = (addr.to_string(), options.clone());
        tasks.spawn(async move {
            let _permit = permit;
            let opened = tokio::time::timeout(step, async {
                let connection = Connection::connect(addr.as_str(), options).await?;
                let session = connection.session().await?;
                Ok::<_, DriverError>(Idle {
                    connection,
                    session,
                })
            })
            .await
            .map_err(|_| DriverError::Timeout(format!("opening connection {i}")))?;
            opened.map(|idle| (i, idle))
        });
        // Reap finished handshakes as we go, so an early failure stops the run early.
        while let Some(done) = tasks.try_join_next() {
            opened.push(reap(done)?);
        }
    }
    while let Some(done) = tasks.join_next().await {
        opened.push(reap(done)?);
    }
    opened.sort_by_key(|(i, _)| *i);
    Ok(opened.into_iter().map(|(_, idle)| idle).collect())
}

/// Queue `i`'s name.
pub fn queue_name(base: &str, i: usize) -> String {
    format!("{base}-{i}")
}

/// What to do to each queue, pipelined on one session.
#[derive(Clone, Copy)]
pub enum QueueOp {
    /// queue.declare, then exchange.bind to `exchange` (when not empty) with the queue's
    /// name as the key.
    Declare,
    Delete,
}

/// Runs `op` for the queues `names` on `session`, `window` commands at a time: each window
/// ends with execution.sync, and the next window is sent before the previous one's sync
/// is awaited, so the connection never waits a round trip with nothing in flight.
pub async fn pipeline(
    session: Session,
    names: Vec<String>,
    exchange: Arc<str>,
    op: QueueOp,
    window: usize,
) -> Result<(), DriverError> {
    let mut pending: Option<u32> = None;
    for chunk in names.chunks(window.max(1)) {
        for name in chunk {
            match op {
                QueueOp::Declare => {
                    session.send(
                        QueueDeclare {
                            queue: Some(Str::from(name.as_str())),
                            ..Default::default()
                        },
                        false,
                    )?;
                    if !exchange.is_empty() {
                        session.send(
                            ExchangeBind {
                                queue: Some(Str::from(name.as_str())),
                                exchange: Some(Str::from(&*exchange)),
                                binding_key: Some(Str::from(name.as_str())),
                                arguments: None,
                            },
                            false,
                        )?;
                    }
                }
                QueueOp::Delete => {
                    session.send(
                        QueueDelete {
                            queue: Some(Str::from(name.as_str())),
                            if_unused: false,
                            if_empty: false,
                        },
                        false,
                    )?;
                }
            }
        }
        let sync = session.send(ExecutionSync {}, true)?;
        if let Some(previous) = pending.replace(sync) {
            session.wait_for(previous).await?;
        }
    }
    if let Some(last) = pending {
        session.wait_for(last).await?;
    }
    // A refused command ends the session; its error would otherwise show only later.
    session.sync().await?;
    Ok(())
}

/// Runs `op` for `names` spread round-robin over the first `k` sessions of `load`, the
/// sessions concurrently; returns how long it took.
pub async fn spread(
    load: &[Idle],
    k: usize,
    names: &[String],
    exchange: &str,
    op: QueueOp,
    window: usize,
    step: Duration,
) -> Result<Duration, DriverError> {
    let k = k.clamp(1, load.len().max(1));
    let mut per: Vec<Vec<String>> = vec![Vec::new(); k];
    for (i, name) in names.iter().enumerate() {
        per[i % k].push(name.clone());
    }
    let exchange: Arc<str> = Arc::from(exchange);
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for (idle, names) in load.iter().zip(per) {
        tasks.spawn(pipeline(
            idle.session.clone(),
            names,
            exchange.clone(),
            op,
            window,
        ));
    }
    let what = match op {
        QueueOp::Declare => "declaring queues",
        QueueOp::Delete => "deleting queues",
    };
    tokio::time::timeout(step, async {
        while let Some(done) = tasks.join_next().await {
            done.map_err(|e| DriverError::Connection(format!("{what}: {e}")))??;
        }
        Ok::<_, DriverError>(())
    })
    .await
    .map_err(|_| DriverError::Timeout(what.into()))??;
    Ok(started.elapsed())
}

/// Declares (and binds) `names` one at a time on `session`, each awaited before the next:
/// the round trip a simple client sees. Returns the mean time per queue.
pub async fn declare_one_by_one(
    session: &Session,
    names: &[String],
    exchange: &str,
    step: Duration,
) -> Result<Duration, DriverError> {
    let started = Instant::now();
    tokio::time::timeout(step, async {
        for name in names {
            session
                .queue_declare(name, ferry_client::QueueDeclareOptions::default())
                .await?;
            if !exchange.is_empty() {
                session.exchange_bind(name, exchange, name, None).await?;
            }
        }
        Ok::<_, DriverError>(())
    })
    .await
    .map_err(|_| DriverError::Timeout("declaring queues one by one".into()))??;
    Ok(started.elapsed() / u32::try_from(names.len().max(1)).unwrap_or(u32::MAX))
}

/// Sends execution.sync on every session (at most `parallel` in flight) and counts the
/// sessions that answered within `step`.
pub async fn answering(load: &[Idle], parallel: usize, step: Duration) -> usize {
    let slots = Arc::new(Semaphore::new(parallel.max(1)));
    let mut tasks = JoinSet::new();
    for idle in load {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let session = idle.session.clone();
        tasks.spawn(async move {
            let _permit = permit;
            matches!(tokio::time::timeout(step, session.sync()).await, Ok(Ok(())))
        });
    }
    let mut answered = 0;
    while let Some(done) = tasks.join_next().await {
        if matches!(done, Ok(true)) {
            answered += 1;
        }
    }
    answered
}

/// Closes every connection (connection.close, awaiting close-ok), `parallel` at a time;
/// one that does not answer within `step` is dropped, which closes its socket.
pub async fn close(load: Vec<Idle>, parallel: usize, step: Duration) {
    let slots = Arc::new(Semaphore::new(parallel.max(1)));
    let mut tasks = JoinSet::new();
    for idle in load {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        tasks.spawn(async move {
            let _permit = permit;
            let _ = tokio::time::timeout(step, idle.connection.close()).await;
        });
    }
    while tasks.join_next().await.is_some() {}
}
