//! The state one session shares between its handles, its subscriptions and the
//! connection's reader task. Two locks, each per session: `state` for the commands we
//! send and `incoming` for completing the server's; neither is held across an await.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use ferry_amqp010::{
    write_command, write_control_framed, write_transfer, AcceptMode, AcquireMode, Command, Control,
    DetachCode, ErrorCode, ExecutionException, MessageTransfer, SequenceSet, SessionCompleted,
    SessionDetach, SessionExpected, SessionFlush, SessionKnownCompleted, Str, Struct32,
};
use tokio::sync::{oneshot, Notify};

use super::incoming::IncomingCompletion;
use super::tracker::{Reply, Tracker};
use crate::connection::{ConnShared, FlushRequest};
use crate::error::ClientError;
use crate::message::OutgoingMessage;
use crate::options::SessionOptions;

#[derive(Debug, Default)]
struct State {
    tracker: Tracker,
    attach: Option<oneshot::Sender<Result<(), ClientError>>>,
    detach: Option<oneshot::Sender<()>>,
    /// A detach has been sent; nothing else may follow it.
    detaching: bool,
    /// A `session.flush` is out and no completion has arrived since.
    flush_requested: bool,
    /// Id of the last command sent with the sync flag.
    last_sync: u32,
}

enum Attempt {
    Sent(u32, Option<oneshot::Receiver<Reply>>),
    WindowFull,
    BufferFull,
}

/// A transfer the broker takes without the client accepting anything back.
fn unconfirmed_transfer(destination: &str) -> MessageTransfer {
    MessageTransfer {
        destination: Some(Str::from(destination)),
        accept_mode: Some(AcceptMode::None),
        acquire_mode: Some(AcquireMode::PreAcquired),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the state consistent before anything can panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
pub(crate) struct SessionShared {
    pub channel: u16,
    pub name: Bytes,
    pub conn: Arc<ConnShared>,
    pub options: SessionOptions,
    state: Mutex<State>,
    incoming: Mutex<IncomingCompletion>,
    /// Wakes publishers waiting for window space, on completion or failure.
    space: Notify,
    /// Set when the session fails or is detached: its channel may already belong to a
    /// new session, so nothing more may be written on it.
    ended: AtomicBool,
}

impl SessionShared {
    pub fn new(
        channel: u16,
        name: Bytes,
        conn: Arc<ConnShared>,
        options: SessionOptions,
    ) -> (Arc<Self>, oneshot::Receiver<Result<(), ClientError>>) {
        let (tx, rx) = oneshot::channel();
        let shared = SessionShared {
            channel,
            name,
            conn,
            options,
            state: Mutex::new(State {
                attach: Some(tx),
                ..Default::default()
            }),
            incoming: Mutex::new(IncomingCompletion::default()),
            space: Notify::new(),
            ended: AtomicBool::new(false),
        };
        (Arc::new(shared), rx)
    }

    fn frame_size(&self) -> usize {
        self.conn.max_frame_size
    }

    pub fn error(&self) -> Option<ClientError> {
        lock(&self.state).tracker.error().cloned()
    }

    pub fn check(&self) -> Result<(), ClientError> {
        lock(&self.state).tracker.check()
    }

    pub fn in_flight(&self) -> u32 {
        lock(&self.state).tracker.in_flight()
    }

    pub fn control(&self, control: &Control) -> Result<(), ClientError> {
        if self.ended.load(Ordering::Acquire) {
            return Err(self.error().unwrap_or(ClientError::Closed));
        }
        self.control_on_channel(control)
    }

    /// Writes even after the session ended: only for answering the server's detach,
    /// before the channel is given up.
    pub fn control_on_channel(&self, control: &Control) -> Result<(), ClientError> {
        let (channel, frame) = (self.channel, self.frame_size());
        self.conn
            .out
            .append(|buf| Ok(write_control_framed(buf, channel, control, frame)?))
    }

    /// Writes a command and numbers it; with `wait`, also registers for its completion.
    pub fn send(
        &self,
        command: &Command,
        sync: bool,
        wait: bool,
    ) -> Result<(u32, Option<oneshot::Receiver<Reply>>), ClientError> {
        let mut st = lock(&self.state);
        st.tracker.check()?;
        if st.detaching {
            return Err(ClientError::Closed);
        }
        let (channel, frame) = (self.channel, self.frame_size());
        self.conn
            .out
            .append(|buf| Ok(write_command(buf, channel, command, sync, frame)?))?;
        let id = st.tracker.sent();
        if sync {
            st.last_sync = id;
        }
        let rx = wait.then(|| st.tracker.wait(id));
        Ok((id, rx))
    }

    pub async fn execute(&self, command: &Command) -> Result<Option<Struct32>, ClientError> {
        let (_, rx) = self.send(command, true, true)?;
        await_reply(rx).await
    }

    pub async fn wait_for(&self, id: u32) -> Result<Option<Struct32>, ClientError> {
        let rx = lock(&self.state).tracker.wait(id);
        await_reply(Some(rx)).await
    }

    /// Queues a transfer once the window has room and the outbound buffer is below its
    /// high-water mark.
    pub async fn transfer(
        &self,
        destination: &str,
        message: &OutgoingMessage,
        sync: bool,
    ) -> Result<(u32, Option<oneshot::Receiver<Reply>>), ClientError> {
        let transfer = unconfirmed_transfer(destination);
        let (window, sync_every) = self.window_and_sync_every();
        loop {
            let space = self.space.notified();
            tokio::pin!(space);
            space.as_mut().enable();
            match self.try_transfer(&transfer, message, sync, window, sync_every)? {
                Attempt::Sent(id, rx) => return Ok((id, rx)),
                Attempt::BufferFull => self.conn.out.writable().await?,
                Attempt::WindowFull => space.await,
            }
        }
    }

    /// Queues a transfer if the window and the outbound buffer have room now; `None` (and
    /// nothing queued) otherwise.
    pub fn transfer_now(
        &self,
        destination: &str,
        message: &OutgoingMessage,
    ) -> Result<Option<u32>, ClientError> {
        let transfer = unconfirmed_transfer(destination);
        let (window, sync_every) = self.window_and_sync_every();
        match self.try_transfer(&transfer, message, false, window, sync_every)? {
            Attempt::Sent(id, _) => Ok(Some(id)),
            Attempt::WindowFull | Attempt::BufferFull => Ok(None),
        }
    }

    fn window_and_sync_every(&self) -> (u32, u32) {
        let window = self.options.window.max(1);
        // Ask for completion a few times per window so it comes back before we run dry.
        (window, (window / 4).max(1))
    }

    fn try_transfer(
        &self,
        transfer: &MessageTransfer,
        message: &OutgoingMessage,
        sync: bool,
        window: u32,
        sync_every: u32,
    ) -> Result<Attempt, ClientError> {
        let mut st = lock(&self.state);
        st.tracker.check()?;
        if st.detaching {
            return Err(ClientError::Closed);
        }
        if st.tracker.in_flight() >= window {
            if !st.flush_requested {
                st.flush_requested = true;
                self.control(
                    &SessionFlush {
                        completed: true,
                        ..Default::default()
                    }
                    .into(),
                )?;
            }
            return Ok(Attempt::WindowFull);
        }
        let id = st.tracker.next_id();
        let wanted = sync;
        let sync = sync || id.wrapping_sub(st.last_sync) >= sync_every;
        let (channel, frame) = (self.channel, self.frame_size());
        let written = self.conn.out.try_append_bulk(|buf| {
            Ok(write_transfer(
                buf,
                channel,
                transfer,
                sync,
                message.header_segment(),
                message.body(),
                frame,
            )?)
        })?;
        if written.is_none() {
            return Ok(Attempt::BufferFull);
        }
        let id = st.tracker.sent();
        if sync {
            st.last_sync = id;
        }
        let rx = wanted.then(|| st.tracker.wait(id));
        Ok(Attempt::Sent(id, rx))
    }

    // ---- called by the reader task ----

    pub fn on_attached(&self) {
        if let Some(tx) = lock(&self.state).attach.take() {
            let _ = tx.send(Ok(()));
        }
    }

    /// The server ended the session: either answering our detach or on its own.
    pub fn on_detached(&self, code: Option<DetachCode>) {
        let mut st = lock(&self.state);
        let requested = st.detach.take();
        let error = if requested.is_some() || st.detaching {
            ClientError::Closed
        } else {
            ClientError::SessionDetached { code }
        };
        self.fail_locked(&mut st, error);
        drop(st);
        if let Some(tx) = requested {
            let _ = tx.send(());
        }
    }

    pub fn on_completed(&self, commands: &SequenceSet) {
        let advanced = {
            let mut st = lock(&self.state);
            let advanced = st.tracker.completed(commands);
            if advanced {
                st.flush_requested = false;
            }
            advanced
        };
        if advanced {
            self.space.notify_waiters();
        }
    }

    pub fn on_result(&self, command_id: u32, value: Option<Struct32>) {
        lock(&self.state).tracker.result(command_id, value);
    }

    pub fn on_exception(&self, e: &ExecutionException) {
        let error = ClientError::Exception {
            code: e.error_code.unwrap_or(ErrorCode::InternalError),
            command_id: e.command_id.unwrap_or_default(),
            description: e
                .description
                .as_ref()
                .map(|d| d.to_str_lossy().into_owned())
                .unwrap_or_default(),
        };
        self.fail(error);
    }

    /// Ends the session with `error` (the first failure wins) and wakes every waiter.
    pub fn fail(&self, error: ClientError) {
        let mut st = lock(&self.state);
        self.fail_locked(&mut st, error);
    }

    fn fail_locked(&self, st: &mut State, error: ClientError) {
        self.ended.store(true, Ordering::Release);
        st.tracker.fail(error);
        let e = st.tracker.error().cloned().unwrap_or(ClientError::Closed);
        if let Some(tx) = st.attach.take() {
            let _ = tx.send(Err(e));
        }
        if let Some(tx) = st.detach.take() {
            let _ = tx.send(());
        }
        self.space.notify_waiters();
    }

    // ---- completing the server's commands ----

    /// Marks an incoming command complete; sends `session.completed` now once
    /// `threshold` completions are pending, otherwise within `completion_delay`.
    pub fn complete_incoming(self: &Arc<Self>, id: u32, threshold: u32) {
        let mut inc = lock(&self.incoming);
        let pending = inc.complete(id);
        if pending >= threshold.max(1) {
            self.send_completed(&mut inc);
        } else if !inc.flush_scheduled {
            inc.flush_scheduled = true;
            let request = FlushRequest {
                at: Instant::now() + self.options.completion_delay,
                session: Arc::downgrade(self),
            };
            if self.conn.flushes.send(request).is_err() {
                self.send_completed(&mut inc);
            }
        }
    }

    pub fn complete_incoming_set(&self, ids: &SequenceSet) {
        let mut inc = lock(&self.incoming);
        inc.complete_set(ids);
        self.send_completed(&mut inc);
    }

    /// Sends pending completions now (also the deferred flush's entry point).
    pub fn flush_completions(&self) {
        let mut inc = lock(&self.incoming);
        self.send_completed(&mut inc);
    }

    fn send_completed(&self, inc: &mut IncomingCompletion) {
        inc.flush_scheduled = false;
        if let Some((commands, timely_reply)) = inc.take() {
            let _ = self.control(
                &SessionCompleted {
                    commands: Some(commands),
                    timely_reply,
                }
                .into(),
            );
        }
    }

    pub fn on_known_completed(&self, commands: &SequenceSet) {
        lock(&self.incoming).known_completed(commands);
    }

    /// Answers `session.flush`: what we expect next, and what we have completed.
    pub fn on_flush(&self, flush: &SessionFlush, next_incoming: u32) {
        if flush.expected {
            let _ = self.control(
                &SessionExpected {
                    commands: Some(SequenceSet::from_range(next_incoming, next_incoming)),
                    fragments: None,
                }
                .into(),
            );
        }
        if flush.completed || flush.confirmed {
            let (commands, timely_reply) = lock(&self.incoming).snapshot();
            let _ = self.control(
                &SessionCompleted {
                    commands: Some(commands),
                    timely_reply,
                }
                .into(),
            );
        }
    }

    pub fn known_completed_reply(&self, commands: SequenceSet) {
        let _ = self.control(
            &SessionKnownCompleted {
                commands: Some(commands),
            }
            .into(),
        );
    }

    // ---- ending ----

    /// Sends `session.detach` unless the session is already ending; returns a receiver
    /// that fires when the server's `session.detached` (or a failure) arrives.
    pub fn detach(&self) -> Option<oneshot::Receiver<()>> {
        let mut st = lock(&self.state);
        if st.detaching || st.tracker.error().is_some() {
            return None;
        }
        st.detaching = true;
        let (tx, rx) = oneshot::channel();
        st.detach = Some(tx);
        drop(st);
        self.flush_completions();
        let sent = self.control(
            &SessionDetach {
                name: Some(self.name.clone()),
            }
            .into(),
        );
        match sent {
            Ok(()) => Some(rx),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }
}

async fn await_reply(
    rx: Option<oneshot::Receiver<Reply>>,
) -> Result<Option<Struct32>, ClientError> {
    match rx {
        Some(rx) => rx.await.unwrap_or(Err(ClientError::Closed)),
        None => Ok(None),
    }
}
