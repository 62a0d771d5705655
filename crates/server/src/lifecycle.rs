//! What every layer needs to know about the broker's life: that it is stopping
//! ([`Shutdown`]), and whether memory use has crossed the watermarks.

use ferry_core::Broker;
use tokio::sync::watch;
use tracing::{info, warn};

/// Tells every connection task that the broker is stopping.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    pub fn new() -> (watch::Sender<bool>, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (tx, Shutdown(rx))
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    pub async fn wait(&mut self) {
        while !*self.0.borrow_and_update() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }
}

/// Raises or clears the memory alarm as the watermarks say, and logs a change.
pub fn check_memory_alarm(broker: &Broker) {
    let Some(marks) = broker.config().memory_watermarks else {
        return;
    };
    match broker.check_memory() {
        Some(true) => warn!(
            used = broker.memory_used(),
            high = marks.high,
            "memory alarm: queues hold more than the high-water mark; publishers are paused"
        ),
        Some(false) => info!(
            used = broker.memory_used(),
            low = marks.low,
            "memory alarm cleared; publishers resume"
        ),
        None => {}
    }
}
