//! Receiving on one destination.

use bytes::Bytes;
use ferry_amqp010::{SequenceSet, Str};
use tokio::sync::mpsc;

use crate::error::ClientError;
use crate::message::{Delivery, Transfer};
use crate::session::Session;

/// A transfer as the reader hands it over; the consumer's task makes it a [`Transfer`]
/// (and decodes that into a [`Delivery`] if asked), so the reader only cuts frames.
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
/// (by any of the `next` methods); in credit mode it is completed on arrival, since
/// completion returns no credit there and the broker must not wait for a slow reader.
/// The flow mode given to [`Session::subscribe`] decides which, for the subscription's
/// life.
#[derive(Debug)]
pub struct Subscription {
    session: Session,
    destination: Str,
    rx: mpsc::UnboundedReceiver<Vec<RawDelivery>>,
    /// The rest of the last batch the reader handed over.
    ready: std::vec::IntoIter<RawDelivery>,
    /// Completions batched before `session.completed` is sent without waiting.
    threshold: u32,
}

impl Subscription {
    pub(crate) fn new(
        session: Session,
        destination: Str,
        rx: mpsc::UnboundedReceiver<Vec<RawDelivery>>,
        threshold: u32,
    ) -> Self {
        Subscription {
            session,
            destination,
            rx,
            ready: Vec::new().into_iter(),
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
        self.next_transfer().await.map(Transfer::decode)
    }

    /// A delivery already received, without waiting.
    pub fn try_next(&mut self) -> Option<Delivery> {
        self.try_next_transfer().map(Transfer::decode)
    }

    /// [`Subscription::next`] with the header left encoded.
    pub async fn next_transfer(&mut self) -> Option<Transfer> {
        loop {
            if let Some(raw) = self.ready.next() {
                return Some(self.take(raw));
            }
            // Cancel-safe: a batch is either still in the channel or already in `ready`.
            self.ready = self.rx.recv().await?.into_iter();
        }
    }

    /// [`Subscription::try_next`] with the header left encoded.
    pub fn try_next_transfer(&mut self) -> Option<Transfer> {
        loop {
            if let Some(raw) = self.ready.next() {
                return Some(self.take(raw));
            }
            self.ready = self.rx.try_recv().ok()?.into_iter();
        }
    }

    fn take(&self, raw: RawDelivery) -> Transfer {
        if !raw.completed {
            let threshold = if raw.sync { 1 } else { self.threshold };
            self.session.core.complete_incoming(raw.id, threshold);
        }
        Transfer {
            id: raw.id,
            destination: raw.destination,
            raw_header: raw.header.unwrap_or_default(),
            body: raw.body,
        }
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
