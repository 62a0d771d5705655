//! `Session`: commands, publishing and subscribing on one attached 0-10 session.

mod commands;
pub(crate) mod core;
mod incoming;
mod tracker;

use std::sync::Arc;

use ferry_amqp010::{Command, SessionFlush, Struct32};

use crate::error::ClientError;
use crate::message::OutgoingMessage;
pub(crate) use core::SessionShared;

/// An attached session. Cheap to clone; clones share the session. When the last clone
/// (including those held by subscriptions) is dropped without [`Session::close`], the
/// session is detached without waiting.
#[derive(Debug, Clone)]
pub struct Session {
    pub(crate) core: Arc<SessionShared>,
    _guard: Arc<DetachOnDrop>,
}

#[derive(Debug)]
struct DetachOnDrop(Arc<SessionShared>);

impl Drop for DetachOnDrop {
    fn drop(&mut self) {
        let _ = self.0.detach();
    }
}

impl Session {
    pub(crate) fn new(core: Arc<SessionShared>) -> Self {
        Session {
            _guard: Arc::new(DetachOnDrop(core.clone())),
            core,
        }
    }

    pub fn name(&self) -> &[u8] {
        &self.core.name
    }

    pub fn channel(&self) -> u16 {
        self.core.channel
    }

    /// The session's failure, if it has one (an execution exception, a detach, a lost
    /// connection).
    pub fn error(&self) -> Option<ClientError> {
        self.core.error()
    }

    /// Commands sent and not yet completed by the server.
    pub fn in_flight(&self) -> u32 {
        self.core.in_flight()
    }

    /// Sends any command with the sync flag and waits for its completion; returns its
    /// `execution.result` value if it has one.
    pub async fn execute(
        &self,
        command: impl Into<Command>,
    ) -> Result<Option<Struct32>, ClientError> {
        self.core.execute(&command.into()).await
    }

    /// Sends any command without waiting; returns its command id (see
    /// [`Session::wait_for`]). Errors it causes surface on later calls.
    pub fn send(&self, command: impl Into<Command>, sync: bool) -> Result<u32, ClientError> {
        Ok(self.core.send(&command.into(), sync, false)?.0)
    }

    /// Waits until command `id` is complete. The server only reports completion
    /// promptly for commands sent with sync (or after [`Session::flush`]).
    pub async fn wait_for(&self, id: u32) -> Result<(), ClientError> {
        self.core.wait_for(id).await.map(|_| ())
    }

    /// `execution.sync`: waits until everything sent before it is complete.
    pub async fn sync(&self) -> Result<(), ClientError> {
        self.execute(ferry_amqp010::ExecutionSync {})
            .await
            .map(|_| ())
    }

    /// `session.flush` asking the server to report completion now.
    pub fn flush(&self) -> Result<(), ClientError> {
        self.core.control(
            &SessionFlush {
                completed: true,
                ..Default::default()
            }
            .into(),
        )
    }

    /// Queues a `message.transfer` without waiting for the broker; waits only while the
    /// window of uncompleted commands is full or the outbound buffer is above its
    /// high-water mark. Returns the transfer's command id.
    pub async fn transfer(
        &self,
        destination: &str,
        message: &OutgoingMessage,
    ) -> Result<u32, ClientError> {
        Ok(self.core.transfer(destination, message, false).await?.0)
    }

    /// [`Session::transfer`] without waiting: `None`, with nothing queued, while the window
    /// is full or the outbound buffer is above its high-water mark. What it queues goes
    /// out when the connection's tasks next run (whenever this thread next awaits on the
    /// client's runtime), so a caller can queue a batch and write it at once.
    pub fn transfer_now(
        &self,
        destination: &str,
        message: &OutgoingMessage,
    ) -> Result<Option<u32>, ClientError> {
        self.core.transfer_now(destination, message)
    }

    /// A transfer sent with sync, waiting for its completion: a refusal (not-found,
    /// resource-limit-exceeded, ...) is returned here.
    pub async fn transfer_sync(
        &self,
        destination: &str,
        message: &OutgoingMessage,
    ) -> Result<u32, ClientError> {
        let (id, rx) = self.core.transfer(destination, message, true).await?;
        if let Some(rx) = rx {
            rx.await.unwrap_or(Err(ClientError::Closed))?;
        }
        Ok(id)
    }

    /// Waits for outstanding commands, then detaches and waits for the server's
    /// `session.detached`. A session the server already ended closes without error.
    pub async fn close(&self) -> Result<(), ClientError> {
        if self.core.check().is_ok() {
            let _ = self.sync().await;
        }
        if let Some(rx) = self.core.detach() {
            let _ = rx.await;
        }
        Ok(())
    }
}
