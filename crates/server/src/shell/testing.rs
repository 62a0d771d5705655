//! Driving a [`Connection`] in unit tests without sockets: the test owns the clock, feeds
//! the bytes a client would send and reads what the connection wrote.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry_core::{
    Arguments, BindingIdentity, Broker, BrokerConfig, BrokerError, DurableWaiter,
    ExchangeDefinition, Journal, JournalTx, QueueDefinition, SyncPoint,
};

use super::{Connection, Peer, Protocol, Services};
use crate::auth::AuthService;
use crate::config::ServerConfig;
use crate::state::ServerState;

/// A broker and the services a connection to it needs. Connections made from clones of
/// the result share the broker.
pub fn services(config: ServerConfig) -> Services {
    let broker = BrokerConfig {
        binding_filters: Some(crate::selector::binding_filters()),
        ..BrokerConfig::default()
    };
    services_with(config, broker)
}

/// [`services`] with a broker configured as given (e.g. memory watermarks).
pub fn services_with(config: ServerConfig, broker: BrokerConfig) -> Services {
    let auth = AuthService::new(&config).expect("auth service");
    Services {
        broker: Broker::new(broker),
        config: Arc::new(config),
        auth: Arc::new(auth),
        state: Arc::new(ServerState::default()),
    }
}

/// [`services`] whose ACL holds `rules` (qpidd's format).
pub fn services_with_acl(rules: &str, config: ServerConfig) -> Services {
    let (acl, _warnings) = ferry_acl::parse(rules).expect("rules parse");
    Services {
        state: Arc::new(ServerState::new(Some(Arc::new(
            ferry_acl::SharedAcl::with_rules("test.acl", acl),
        )))),
        ..services(config)
    }
}

pub fn peer() -> Peer {
    Peer {
        addr: SocketAddr::from(([127, 0, 0, 1], 40000)),
        tls: false,
        client_identity: None,
    }
}

/// One connection under test, as its event loop would see it.
pub struct Wire<P> {
    pub conn: Connection<P>,
    pub now: Instant,
    input: BytesMut,
}

impl<P: Protocol> Wire<P> {
    pub fn new(make: impl FnOnce(Instant) -> Connection<P>) -> Wire<P> {
        let now = Instant::now();
        Wire {
            conn: make(now),
            now,
            input: BytesMut::new(),
        }
    }

    /// The client sends `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
        self.conn.handle_input(&mut self.input, self.now);
    }

    /// Runs the SASL step the connection started, as the event loop would.
    pub async fn finish_auth(&mut self) {
        if let Some(task) = self.conn.take_auth_task() {
            let outcome = task.await;
            self.conn.handle_auth(outcome, &mut self.input, self.now);
        }
    }

    /// Takes deliveries from the outbox, then everything written so far (all of it "goes
    /// out" now).
    pub fn take_output(&mut self) -> BytesMut {
        let mut items = Vec::new();
        let mut out = BytesMut::new();
        loop {
            self.conn.handle_outbox(&mut items, self.now);
            while self.conn.has_output() {
                let next = self.conn.output();
                out.extend_from_slice(next);
                let n = next.len();
                self.conn.on_transmitted(n, self.now);
            }
            // As the event loop does after a write: input held back while the output was
            // full is processed now.
            if !self.conn.resume_held_input(&mut self.input, self.now) {
                return out;
            }
        }
    }

    /// What the client sent that waits unprocessed.
    pub fn unprocessed(&self) -> usize {
        self.input.len()
    }

    /// Moves the clock on by `d`, handling every deadline passed on the way in order, and
    /// returns what the connection wrote meanwhile (taken as sent when written).
    pub fn advance(&mut self, d: Duration) -> BytesMut {
        let end = self.now + d;
        let mut written = self.take_output();
        while let Some(at) = self.conn.poll_timeout().filter(|at| *at <= end) {
            self.now = self.now.max(at);
            self.conn.handle_timeout(self.now);
            if self.conn.is_done() {
                break;
            }
            // The event loop looks at flow control on every turn, a held publisher's
            // deadline included.
            self.conn.poll_flow(&mut self.input, self.now);
            written.extend_from_slice(&self.take_output());
        }
        self.now = end;
        written
    }

    /// Looks at the broker's resource alarms, as the event loop does after each read and
    /// on its alarm timer: a publisher is paused or resumed (processing what waited).
    pub fn poll_flow(&mut self) {
        self.conn.poll_flow(&mut self.input, self.now);
    }

    /// Unprocessed input (e.g. held while a SASL step runs).
    pub fn pending_input(&self) -> usize {
        self.input.len()
    }
}

pub const SECOND: Duration = Duration::from_secs(1);

/// A journal whose writer the test drives: every record is appended at once, and becomes
/// durable only at [`Disk::sync`].
#[derive(Default)]
pub struct Disk {
    appended: AtomicU64,
    durable: AtomicU64,
    failed: AtomicBool,
    full: AtomicBool,
    waiters: Mutex<Vec<(SyncPoint, Arc<dyn DurableWaiter>)>>,
}

impl Disk {
    fn append(&self) -> SyncPoint {
        SyncPoint(self.appended.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// The writer syncs everything appended so far and wakes whoever waits for it.
    pub fn sync(&self) {
        let to = self.appended.load(Ordering::SeqCst);
        self.durable.store(to, Ordering::SeqCst);
        self.wake(|p| p.0 <= to);
    }

    /// The device fails: nothing more becomes durable, and every waiter wakes.
    pub fn fail(&self) {
        self.failed.store(true, Ordering::SeqCst);
        self.wake(|_| true);
    }

    fn wake(&self, due: impl Fn(SyncPoint) -> bool) {
        let mut waiters = self.waiters.lock().unwrap();
        let (now, later): (Vec<_>, Vec<_>) = waiters.drain(..).partition(|(p, _)| due(*p));
        *waiters = later;
        drop(waiters);
        for (_, w) in now {
            w.wake();
        }
    }

    /// The device is full (or no longer): persistent records and durable declarations are
    /// refused while it is.
    pub fn set_full(&self, full: bool) {
        self.full.store(full, Ordering::SeqCst);
    }

    fn refuse_when_full(&self) -> Result<(), BrokerError> {
        if self.full.load(Ordering::SeqCst) {
            return Err(BrokerError::ResourceLimitExceeded("disk full".into()));
        }
        Ok(())
    }
}

impl Journal for Disk {
    fn declare_exchange(&self, _: &ExchangeDefinition) -> Result<(), BrokerError> {
        self.refuse_when_full()?;
        self.append();
        Ok(())
    }
    fn delete_exchange(&self, _: &str) {
        self.append();
    }
    fn declare_queue(&self, _: &QueueDefinition) -> Result<u64, BrokerError> {
        self.refuse_when_full()?;
        Ok(self.append().0)
    }
    fn delete_queue(&self, _: u64) {
        self.append();
    }
    fn bind(
        &self,
        _: &str,
        _: u64,
        _: &str,
        _: &Arguments,
        _: BindingIdentity,
    ) -> Result<(), BrokerError> {
        self.append();
        Ok(())
    }
    fn unbind(&self, _: &str, _: u64, _: &str, _: Option<&Arguments>) {
        self.append();
    }
    fn bind_exchange(&self, _: &str, _: &str, _: &str, _: &Arguments) -> Result<(), BrokerError> {
        self.append();
        Ok(())
    }
    fn unbind_exchange(&self, _: &str, _: &str, _: &str, _: Option<&Arguments>) {
        self.append();
    }
    fn enqueue(
        &self,
        _: &ferry_core::Message,
        _: &[u64],
        tx: Option<&JournalTx>,
    ) -> Result<(u64, SyncPoint), BrokerError> {
        self.refuse_when_full()?;
        let point = self.append();
        if let Some(tx) = tx {
            tx.get_or_set(point.0);
        }
        Ok((point.0, point))
    }
    fn dequeue(&self, _: u64, _: &[u64], tx: Option<&JournalTx>) {
        let point = self.append();
        if let Some(tx) = tx {
            tx.get_or_set(point.0);
        }
    }
    fn commit_tx(&self, tx: &JournalTx) -> Option<SyncPoint> {
        tx.id()?;
        Some(self.append())
    }
    fn load(&self, messages: &[u64]) -> Vec<Option<ferry_core::MessageParts>> {
        vec![None; messages.len()]
    }
    fn appended(&self) -> SyncPoint {
        SyncPoint(self.appended.load(Ordering::SeqCst))
    }
    fn durable(&self) -> SyncPoint {
        SyncPoint(self.durable.load(Ordering::SeqCst))
    }
    fn is_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }
    fn notify_when_durable(&self, point: SyncPoint, waiter: Arc<dyn DurableWaiter>) {
        if self.is_failed() || point <= self.durable() {
            waiter.wake();
        } else {
            self.waiters.lock().unwrap().push((point, waiter));
        }
    }
}
