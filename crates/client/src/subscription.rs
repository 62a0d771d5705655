//! Receiving on one destination.

use bytes::Bytes;
use ferry_amqp010::{SequenceSet, Str};
use tokio::sync::mpsc;

use crate::error::ClientError;
use crate::message::Delivery;
use crate::session::Session;

/// A transfer as the reader hands it over; decoded into a [`Delivery`] on the
/// consumer's task so the reader only cuts frames.
#[derive(Debug)]
pub(crate) struct RawDelivery {
    pub id: u32,
    pub destination: Str,
    pub header: Option<Bytes>,
    pub body: Bytes,
    /// The server asked for prompt completion.
    pub sync: bool,
    /// The reader already completed it (credit-mode subscriptions).
    pub completed: bool,
}

/// Deliveries for one destination, in arrival order. Memory is bounded by the credit
/// granted: in window mode a delivery is completed (returning its credit) when taken
/// with [`Subscription::next`]; in credit mode it is completed on arrival, since
/// completion returns no credit there and the broker must not wait for a slow reader.
/// The flow mode given to [`Session::subscribe`] decides which, for the subscription's
/// life.
#[derive(Debug)]
pub struct Subscription {
    session: Session,
    destination: Str,
    rx: mpsc::UnboundedReceiver<RawDelivery>,
    /// Completions batched before `session.completed` is sent without waiting.
    threshold: u32,
}

impl Subscription {
    pub(crate) fn new(
        session: Session,
        destination: Str,
        rx: mpsc::UnboundedReceiver<RawDelivery>,
        threshold: u32,
    ) -> Self {
        Subscription {
            session,
            destination,
            rx,
            threshold,
        }
    }

    pub fn destination(&self) -> &Str {
        &self.destination
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The next delivery; `None` once the session or connection has ended. Cancel-safe,
    /// so `tokio::time::timeout(d, sub.next())` is fine.
    pub async fn next(&mut self) -> Option<Delivery> {
        let raw = self.rx.recv().await?;
        Some(self.take(raw))
    }

    /// A delivery already received, without waiting.
    pub fn try_next(&mut self) -> Option<Delivery> {
        let raw = self.rx.try_recv().ok()?;
        Some(self.take(raw))
    }

    fn take(&self, raw: RawDelivery) -> Delivery {
        if !raw.completed {
            let threshold = if raw.sync { 1 } else { self.threshold };
            self.session.core.complete_incoming(raw.id, threshold);
        }
        Delivery::new(raw.id, raw.destination, raw.header, raw.body)
    }

    pub async fn accept(&self, transfers: &SequenceSet) -> Result<(), ClientError> {
        self.session.accept(transfers).await
    }

    /// `message.cancel` for this destination, awaited.
    pub async fn cancel(self) -> Result<(), ClientError> {
        self.session
            .message_cancel(&self.destination.to_str_lossy())
            .await
    }
}
