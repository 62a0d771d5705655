//! Authentication as the server runs it: the users file (re-read when it changes), the
//! built-in guest, who may log in from where, and SASL steps run off the event-loop threads
//! with a pause before every refusal.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ferry_auth::{
    Authenticator, Credentials, Denied, Exchange, Mechanism, Mode, Step, Users, DEFAULT_ITERATIONS,
};
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tracing::{debug, error, info, warn};

use crate::config::{AuthMode, ServerConfig};

mod users_file;

pub use users_file::UsersChangeError;

/// The user RabbitMQ and qpidd installs ship with; it may connect only from this machine.
pub const GUEST: &str = "guest";

/// Whether `user` may log in from `ip`: `guest` only over loopback, as RabbitMQ's
/// `loopback_users` default has it, since its password is known to everyone.
pub fn allowed_from(user: &str, ip: IpAddr) -> bool {
    user != GUEST || ip.to_canonical().is_loopback()
}

/// Where a SASL exchange stands after a step.
pub enum AuthOutcome {
    /// Send `challenge` in connection.secure; hand the secure-ok's response and `pending` to
    /// [`AuthService::resume`].
    Challenge {
        challenge: Vec<u8>,
        pending: Pending,
    },
    Success(String),
    /// Already logged and already delayed: close the connection.
    Failure,
}

/// An exchange waiting for the client's next response.
pub struct Pending {
    authenticator: Arc<Authenticator>,
    exchange: Exchange,
    mechanism: Mechanism,
    peer: SocketAddr,
}

/// A SASL step in flight; the connection's event loop awaits it instead of reading.
pub type AuthTask = Pin<Box<dyn Future<Output = AuthOutcome> + Send>>;

/// Identifies a version of the users file, to notice replacements.
type FileStamp = Option<(SystemTime, u64, u64)>;

pub struct AuthService {
    mode: Mode,
    users_file: Option<PathBuf>,
    current: RwLock<Arc<Authenticator>>,
    /// The users file as last read, and whether the users in force came from a file.
    loaded: Mutex<(FileStamp, bool)>,
    /// What applies while there is no users file.
    builtin: Users,
    failure_delay: Duration,
    /// Password checks are slow on purpose; at most this many run at once so a flood of
    /// logins cannot take every core from the brokers' own threads.
    slots: Arc<Semaphore>,
    /// Bumped whenever the users are replaced, so remembered passwords are forgotten.
    generation: AtomicU64,
    /// Passwords recently checked over HTTP (see [`AuthService::check_password`]).
    checked: PasswordCache,
    /// Management's changes to the users file, one at a time.
    writing: Mutex<()>,
    /// `--sasl-mechanisms`: what AMQP logins may use (`None`: everything that applies).
    enabled: Option<Vec<Mechanism>>,
    /// Users gone from the users file by an edit other than management's (`ferry user
    /// remove`), whose connections are yet to be closed (see [`AuthService::take_removed`]),
    /// each with when the users without them came into force (milliseconds since the epoch):
    /// only connections registered by then are theirs, not those of a user of that name
    /// added back since.
    removed: Mutex<BTreeMap<String, u64>>,
}

/// The tag RabbitMQ gives its default user, and asks of whoever changes users.
pub const ADMINISTRATOR: &str = "administrator";

impl std::fmt::Debug for AuthService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthService")
            .field("mode", &self.mode)
            .field("users_file", &self.users_file)
            .finish_non_exhaustive()
    }
}

impl AuthService {
    /// Loads the users (slow: derives keys) and logs who may log in. A damaged users file is
    /// an error: starting with nobody, or with the guest, would surprise the operator.
    pub fn new(config: &ServerConfig) -> Result<AuthService, String> {
        let (mode, builtin) = match config.auth {
            AuthMode::None => (Mode::Open, Users::default()),
            AuthMode::Required => {
                let mut users = Users::default();
                let guest = Credentials::new(GUEST, DEFAULT_ITERATIONS)
                    .map_err(|e| format!("cannot create the guest user: {e}"))?;
                users
                    .insert(GUEST, guest)
                    .and_then(|_| users.set_tags(GUEST, &[ADMINISTRATOR.to_owned()]))
                    .map_err(|e| format!("cannot create the guest user: {e}"))?;
                (Mode::Verify, users)
            }
        };
        let (users, loaded) = match (mode, &config.users_file) {
            (Mode::Verify, Some(path)) => {
                let stamp = file_stamp(path);
                match Users::load(path) {
                    Ok(Some(users)) => (users, (stamp, true)),
                    Ok(None) => (builtin.clone(), (stamp, false)),
                    Err(e) => return Err(format!("users file: {e}")),
                }
            }
            _ => (builtin.clone(), (None, false)),
        };
        let service = AuthService {
            mode,
            current: RwLock::new(Arc::new(Authenticator::new(
                mode,
                users,
                config.allow_anonymous,
            ))),
            users_file: config.users_file.clone(),
            loaded: Mutex::new(loaded),
            builtin,
            failure_delay: config.auth_failure_delay,
            slots: Arc::new(Semaphore::new(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            )),
            generation: AtomicU64::new(0),
            checked: PasswordCache::new()?,
            writing: Mutex::new(()),
            enabled: config.sasl_mechanisms.clone(),
            removed: Mutex::new(BTreeMap::new()),
        };
        service.check_mechanisms(config)?;
        service.log_users(&service.current.read());
        Ok(service)
    }

    /// Says what `--sasl-mechanisms` leaves AMQP clients, and refuses a list under which
    /// nobody could log in.
    fn check_mechanisms(&self, config: &ServerConfig) -> Result<(), String> {
        if self.enabled.is_none() {
            return Ok(());
        }
        // Over 0-9-1, where the most apply; EXTERNAL only over TLS with a client CA.
        let with = self.offered(asks_for_certificates(config), true);
        let without = self.offered(false, true);
        if with.is_empty() {
            return Err(
                "--sasl-mechanisms leaves no mechanism any AMQP client could log in with (EXTERNAL \
                 needs TLS with --ssl-ca-file, ANONYMOUS --allow-anonymous or --auth no)"
                    .into(),
            );
        }
        info!("AMQP SASL mechanisms: {}", with.join(", "));
        if without.is_empty() {
            warn!("--sasl-mechanisms: only clients with a TLS certificate can log in over AMQP");
        }
        Ok(())
    }

    fn log_users(&self, auth: &Authenticator) {
        match self.mode {
            Mode::Open => {
                warn!("--auth no: every client is admitted, with any or no credentials")
            }
            Mode::Verify if auth.users() == &self.builtin => {
                let location = match &self.users_file {
                    Some(p) => format!("no users file at {}", p.display()),
                    None => "no users file".to_string(),
                };
                warn!(
                    "{location}: only the built-in user guest (password guest) may log in, \
                     and only from loopback; add users with `ferry user add`"
                );
            }
            Mode::Verify => {
                let file = self.users_file.as_deref().unwrap_or(Path::new("?"));
                info!("{} users from {}", auth.users().len(), file.display());
                if auth.users().get(GUEST).is_some() {
                    warn!("user guest may connect from loopback only");
                }
            }
        }
        if self.mode == Mode::Verify
            && auth.anonymous_allowed()
            && self.enabled(Mechanism::Anonymous)
        {
            warn!("ANONYMOUS logins are enabled");
        }
    }

    /// The users as of now, re-reading the users file if it was replaced since. Called on
    /// event loops (HTTP Basic checks), so it does not wait: while another caller holds the
    /// file (re-reading it, or management saving it), the users in force are the answer.
    fn current(&self) -> Arc<Authenticator> {
        if let Some(mut loaded) = self.loaded.try_lock() {
            self.reload_locked(&mut loaded, |_| false);
        }
        self.current.read().clone()
    }

    /// Whether there is a users file to watch for edits made outside ferryd.
    pub fn watches_users_file(&self) -> bool {
        self.mode == Mode::Verify && self.users_file.is_some()
    }

    /// Re-reads the users file if it was replaced (by `ferry user` or an editor) since it was
    /// last read, and returns the users it no longer has since the last call, each with when
    /// the users without them came into force (milliseconds since the epoch): their
    /// connections registered by then are to be closed, as management's delete closes them. Cheap when nothing changed (one
    /// `stat`), but it touches the file system: call it off the event loops.
    pub fn take_removed(&self) -> Vec<(String, u64)> {
        self.reload_locked(&mut self.loaded.lock(), |_| false);
        std::mem::take(&mut *self.removed.lock())
            .into_iter()
            .collect()
    }

    /// Loads the users file if its stamp changed; `loaded` is [`AuthService::loaded`], held.
    /// The users one file had and the next has not, less those the caller closes the
    /// connections of itself (`handled`), are kept for [`AuthService::take_removed`]. The
    /// built-in guest giving way to a first file, or a file's users to the guest when it
    /// goes, removes nobody: that sets users up or is a slip, not a deletion, and cutting
    /// every connection off for it would hurt more.
    fn reload_locked(&self, loaded: &mut (FileStamp, bool), handled: impl Fn(&str) -> bool) {
        let (Mode::Verify, Some(path)) = (self.mode, &self.users_file) else {
            return;
        };
        // Looked at under the lock: a caller that looked before another's reload would
        // record the older stamp, and the next call would load the file again.
        let stamp = file_stamp(path);
        if loaded.0 == stamp {
            return;
        }
        let users = match Users::load(path) {
            Ok(Some(users)) => Some((users, true)),
            Ok(None) => Some((self.builtin.clone(), false)),
            Err(e) => {
                error!(
                    "users file changed but cannot be used ({e}); keeping the users loaded before"
                );
                None
            }
        };
        if let Some((users, from_file)) = users {
            let before = self.current.read().clone();
            let gone: Vec<String> = if loaded.1 && from_file {
                before
                    .users()
                    .names()
                    .filter(|name| users.get(name).is_none() && !handled(name))
                    .map(str::to_owned)
                    .collect()
            } else {
                Vec::new()
            };
            let next = Arc::new(before.with_users(users));
            self.log_users(&next);
            *self.current.write() = next;
            self.generation.fetch_add(1, Ordering::Relaxed);
            loaded.1 = from_file;
            // Stamped once the new users are in force: a connection registered later finds
            // the user gone at its own check (`Login::user_deleted`); one registered up to
            // now is the watcher's to close.
            let now = ferry_core::now_ms();
            self.removed
                .lock()
                .extend(gone.into_iter().map(|name| (name, now)));
        }
        loaded.0 = stamp;
    }

    /// Mechanism names for connection.start.
    pub fn offered(&self, has_client_identity: bool, amqp091: bool) -> Vec<&'static str> {
        self.current
            .read()
            .mechanisms(has_client_identity, amqp091)
            .into_iter()
            .filter(|m| self.enabled(*m))
            .map(Mechanism::name)
            .collect()
    }

    /// Every mechanism ferryd knows, each with whether some AMQP client may log in with it
    /// (management's `auth_mechanisms`). `certificates`: a TLS listener asks for client
    /// certificates, which EXTERNAL needs.
    pub fn mechanism_availability(&self, certificates: bool) -> Vec<(&'static str, bool)> {
        let usable = self.offered(certificates, true);
        Mechanism::ALL
            .into_iter()
            .map(|m| (m.name(), usable.contains(&m.name())))
            .collect()
    }

    /// Whether `--sasl-mechanisms` lets AMQP logins use `mechanism`.
    fn enabled(&self, mechanism: Mechanism) -> bool {
        match &self.enabled {
            None => true,
            Some(list) => list.contains(&mechanism),
        }
    }

    /// Runs the first step for the client's chosen mechanism and `response`.
    pub fn start(
        self: &Arc<Self>,
        mechanism: &[u8],
        response: Vec<u8>,
        peer: SocketAddr,
        client_identity: Option<String>,
        amqp091: bool,
    ) -> AuthTask {
        self.begin(mechanism, response, peer, client_identity, amqp091, true)
    }

    /// [`AuthService::start`]; `restricted`: only what `--sasl-mechanisms` enables (AMQP),
    /// else anything that applies (management's HTTP Basic, which is PLAIN's check).
    fn begin(
        self: &Arc<Self>,
        mechanism: &[u8],
        response: Vec<u8>,
        peer: SocketAddr,
        client_identity: Option<String>,
        amqp091: bool,
        restricted: bool,
    ) -> AuthTask {
        let service = self.clone();
        let name = String::from_utf8_lossy(mechanism).into_owned();
        self.run(move || {
            let authenticator = service.current();
            let offered = Mechanism::from_name(name.as_bytes()).filter(|m| {
                (!restricted || service.enabled(*m))
                    && authenticator
                        .mechanisms(client_identity.is_some(), amqp091)
                        .contains(m)
            });
            let Some(mechanism) = offered else {
                refused(peer, &name, None, "mechanism not offered");
                return AuthOutcome::Failure;
            };
            match authenticator.start(mechanism, client_identity.as_deref()) {
                Ok(exchange) => {
                    let pending = Pending {
                        authenticator,
                        exchange,
                        mechanism,
                        peer,
                    };
                    step(pending, &response)
                }
                Err(d) => {
                    refused(peer, mechanism.name(), d.user.as_deref(), d.reason);
                    AuthOutcome::Failure
                }
            }
        })
    }

    /// Runs the next step of a multi-step mechanism with the client's secure-ok response.
    pub fn resume(self: &Arc<Self>, pending: Pending, response: Vec<u8>) -> AuthTask {
        self.run(move || step(pending, &response))
    }

    fn run(self: &Arc<Self>, work: impl FnOnce() -> AuthOutcome + Send + 'static) -> AuthTask {
        let slots = self.slots.clone();
        let delay = self.failure_delay;
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let outcome = match slots.acquire_owned().await {
                // The permit travels with the work: a connection that goes away mid-hash
                // must not free its slot while the hash still runs on the blocking pool.
                Ok(permit) => tokio::task::spawn_blocking(move || {
                    let outcome = work();
                    drop(permit);
                    outcome
                })
                .await
                .unwrap_or(AuthOutcome::Failure),
                Err(_) => AuthOutcome::Failure,
            };
            if matches!(outcome, AuthOutcome::Failure) {
                // Guessing passwords over one connection costs at least this per try; the
                // wait does not hold a thread.
                tokio::time::sleep_until(started + delay).await;
            }
            outcome
        })
    }

    /// Checks a user name and password as a PLAIN login from `peer` would be checked (the
    /// same users, the same loopback rule for guest, the same pause before a refusal), for
    /// HTTP Basic authentication. A management console asks on every request, so a
    /// successful check is remembered for [`PASSWORD_CACHE_TTL`] under a salted hash of user
    /// and password (never the password itself) until the users file changes.
    pub async fn check_password(
        self: &Arc<Self>,
        user: &str,
        password: &str,
        peer: SocketAddr,
    ) -> Option<String> {
        if self.mode == Mode::Verify && allowed_from(user, peer.ip()) {
            // Re-reads a replaced users file, which bumps the generation.
            drop(self.current());
            let generation = self.generation.load(Ordering::Relaxed);
            if self.checked.contains(user, password, generation) {
                return Some(user.to_owned());
            }
        }
        let mut response = Vec::with_capacity(user.len() + password.len() + 2);
        response.push(0);
        response.extend_from_slice(user.as_bytes());
        response.push(0);
        response.extend_from_slice(password.as_bytes());
        let generation = self.generation.load(Ordering::Relaxed);
        match self
            .begin(b"PLAIN", response, peer, None, false, false)
            .await
        {
            AuthOutcome::Success(name) => {
                if self.mode == Mode::Verify {
                    self.checked.insert(user, password, generation);
                }
                Some(name)
            }
            _ => None,
        }
    }

    /// The users who may log in (the built-in guest while there is no users file), with
    /// their records and tags; none with `--auth no`, where anyone may.
    pub fn users(&self) -> Users {
        match self.mode {
            Mode::Open => Users::default(),
            Mode::Verify => self.current().users().clone(),
        }
    }

    /// Whether passwords are checked at all (`--auth yes`).
    pub fn required(&self) -> bool {
        self.mode == Mode::Verify
    }
}

/// How long a password checked over HTTP is taken as good without hashing it again.
pub const PASSWORD_CACHE_TTL: Duration = Duration::from_secs(30);

/// Most passwords remembered at once; past this, expired ones are dropped, then all.
const PASSWORD_CACHE_SIZE: usize = 256;

/// Successful password checks, keyed by SHA-256 over a per-process random salt, the user
/// and the password: what is kept in memory cannot be turned back into a password any more
/// easily than the users file can.
struct PasswordCache {
    salt: [u8; 32],
    entries: Mutex<HashMap<[u8; 32], (Instant, u64)>>,
}

impl PasswordCache {
    fn new() -> Result<PasswordCache, String> {
        let mut salt = [0u8; 32];
        getrandom::fill(&mut salt).map_err(|e| format!("cannot get random bytes: {e}"))?;
        Ok(PasswordCache {
            salt,
            entries: Mutex::new(HashMap::new()),
        })
    }

    fn key(&self, user: &str, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.salt);
        // Lengths first, so ("ab", "c") and ("a", "bc") differ.
        h.update((user.len() as u64).to_be_bytes());
        h.update(user.as_bytes());
        h.update(password.as_bytes());
        h.finalize().into()
    }

    fn contains(&self, user: &str, password: &str, generation: u64) -> bool {
        let key = self.key(user, password);
        let mut entries = self.entries.lock();
        match entries.get(&key) {
            Some((until, g)) if *g == generation && *until > Instant::now() => true,
            Some(_) => {
                entries.remove(&key);
                false
            }
            None => false,
        }
    }

    fn insert(&self, user: &str, password: &str, generation: u64) {
        let key = self.key(user, password);
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= PASSWORD_CACHE_SIZE {
            entries.retain(|_, (until, _)| *until > now);
            if entries.len() >= PASSWORD_CACHE_SIZE {
                entries.clear();
            }
        }
        entries.insert(key, (now + PASSWORD_CACHE_TTL, generation));
    }
}

/// One connection's login, for either protocol layer: the SASL step in flight (the event
/// loop awaits it), the exchange waiting for the client's next response, and who logged in.
pub struct Login {
    service: Arc<AuthService>,
    peer: SocketAddr,
    client_identity: Option<String>,
    amqp091: bool,
    task: Option<AuthTask>,
    pending: Option<Pending>,
    mechanism: String,
    user: Option<String>,
}

/// What a finished SASL step asks the protocol layer to do.
pub enum LoginStep {
    /// Send this in connection.secure.
    Challenge(Vec<u8>),
    /// Logged in as [`Login::user`]: go on with tune.
    Success,
    /// Refused (already logged and delayed): close.
    Failure,
}

impl Login {
    pub fn new(
        service: Arc<AuthService>,
        peer: SocketAddr,
        client_identity: Option<String>,
        amqp091: bool,
    ) -> Login {
        Login {
            service,
            peer,
            client_identity,
            amqp091,
            task: None,
            pending: None,
            mechanism: String::new(),
            user: None,
        }
    }

    /// Mechanism names for connection.start.
    pub fn offered(&self) -> Vec<&'static str> {
        self.service
            .offered(self.client_identity.is_some(), self.amqp091)
    }

    /// Starts the exchange with the client's start-ok.
    pub fn start(&mut self, mechanism: &[u8], response: Vec<u8>) {
        self.mechanism = String::from_utf8_lossy(mechanism).into_owned();
        self.task = Some(self.service.start(
            mechanism,
            response,
            self.peer,
            self.client_identity.clone(),
            self.amqp091,
        ));
    }

    /// Goes on with the client's secure-ok; false if no exchange waits for one.
    pub fn resume(&mut self, response: Vec<u8>) -> bool {
        let Some(pending) = self.pending.take() else {
            return false;
        };
        self.task = Some(self.service.resume(pending, response));
        true
    }

    pub fn take_task(&mut self) -> Option<AuthTask> {
        self.task.take()
    }

    pub fn finish(&mut self, outcome: AuthOutcome) -> LoginStep {
        match outcome {
            AuthOutcome::Challenge { challenge, pending } => {
                self.pending = Some(pending);
                LoginStep::Challenge(challenge)
            }
            AuthOutcome::Success(user) => {
                self.user = Some(user);
                LoginStep::Success
            }
            AuthOutcome::Failure => LoginStep::Failure,
        }
    }

    /// The mechanism the client chose, as it named it.
    pub fn mechanism(&self) -> &str {
        &self.mechanism
    }

    /// Who logged in; empty before that.
    pub fn user(&self) -> &str {
        self.user.as_deref().unwrap_or_default()
    }

    /// Whether the users loaded now no longer have the user this connection logged in as
    /// with a password. Management closes a deleted user's open connections; one between its
    /// password check and its open is not registered yet, so the connection looks again
    /// (RabbitMQ, too, asks its user database again at connection.open). The users in
    /// memory, not the file: management replaces them before it looks for connections, and
    /// this runs on an event loop, where reading the file has no place.
    pub fn user_deleted(&self) -> bool {
        let Some(user) = &self.user else {
            return false;
        };
        let by_password = matches!(
            Mechanism::from_name(self.mechanism.as_bytes()),
            Some(Mechanism::Plain | Mechanism::AmqPlain | Mechanism::ScramSha256)
        );
        by_password
            && self.service.mode == Mode::Verify
            && self.service.current.read().users().get(user).is_none()
    }
}

fn step(mut pending: Pending, response: &[u8]) -> AuthOutcome {
    let mechanism = pending.mechanism.name();
    let peer = pending.peer;
    match pending.exchange.step(&pending.authenticator, response) {
        Step::Challenge(challenge) => AuthOutcome::Challenge { challenge, pending },
        Step::Success(user) if !allowed_from(&user, peer.ip()) => {
            let why = "user may connect from loopback only";
            refused(peer, mechanism, Some(&user), why);
            AuthOutcome::Failure
        }
        Step::Success(user) => {
            debug!(%peer, %user, mechanism, "authenticated");
            AuthOutcome::Success(user)
        }
        Step::Failure(Denied { user, reason }) => {
            refused(peer, mechanism, user.as_deref(), reason);
            AuthOutcome::Failure
        }
    }
}

fn refused(peer: SocketAddr, mechanism: &str, user: Option<&str>, reason: &str) {
    let user = user.unwrap_or("-");
    info!(%peer, %user, mechanism, "login refused: {reason}");
}

fn file_stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.modified().ok()?, meta.len(), inode))
}

/// Whether the TLS listener asks clients for certificates (`--ssl-ca-file`), so that
/// EXTERNAL can apply.
pub(crate) fn asks_for_certificates(config: &ServerConfig) -> bool {
    config.tls.as_ref().is_some_and(|t| t.ca_file.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(ip: [u8; 4]) -> SocketAddr {
        SocketAddr::from((ip, 40000))
    }

    #[test]
    fn guest_only_from_loopback() {
        assert!(allowed_from("guest", IpAddr::from([127, 0, 0, 1])));
        assert!(allowed_from("guest", IpAddr::from([127, 1, 2, 3])));
        assert!(allowed_from("guest", "::1".parse().unwrap()));
        assert!(allowed_from("guest", "::ffff:127.0.0.1".parse().unwrap()));
        assert!(!allowed_from("guest", IpAddr::from([192, 0, 2, 1])));
        assert!(!allowed_from("guest", "2001:db8::1".parse().unwrap()));
        assert!(!allowed_from("guest", "::ffff:192.0.2.1".parse().unwrap()));
        assert!(allowed_from("alice", IpAddr::from([192, 0, 2, 1])));
    }

    fn service(config: ServerConfig) -> Arc<AuthService> {
        Arc::new(AuthService::new(&config).unwrap())
    }

    /// A service reading `<tmp>/ferry-<tag>-<pid>/users` (not there yet): (service, the
    /// directory, the file).
    fn with_users_file(tag: &str) -> (Arc<AuthService>, PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferry-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("users");
        let s = service(ServerConfig {
            users_file: Some(path.clone()),
            ..quick()
        });
        (s, dir, path)
    }

    fn quick() -> ServerConfig {
        ServerConfig {
            auth: AuthMode::Required,
            auth_failure_delay: Duration::from_millis(50),
            ..ServerConfig::default()
        }
    }

    #[tokio::test]
    async fn a_dropped_login_keeps_its_hashing_slot_until_the_hash_is_done() {
        let s = service(quick());
        let slots = s.slots.available_permits();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let mut task = s.run(move || {
            let _ = started_tx.send(());
            let _ = hold.recv();
            AuthOutcome::Failure
        });
        // Poll the login until its work runs on the blocking pool, then drop it.
        tokio::select! {
            _ = &mut task => panic!("the work cannot finish before it is released"),
            _ = started => {}
        }
        drop(task);
        assert_eq!(s.slots.available_permits(), slots - 1);
        release.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), async {
            while s.slots.available_permits() != slots {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the slot comes back once the work is done");
    }

    #[tokio::test]
    async fn builtin_guest_logs_in_from_loopback_only() {
        let s = service(quick());
        let ok = s
            .start(
                b"PLAIN",
                b"\0guest\0guest".to_vec(),
                peer([127, 0, 0, 1]),
                None,
                false,
            )
            .await;
        assert!(matches!(ok, AuthOutcome::Success(u) if u == "guest"));
        let remote = s
            .start(
                b"PLAIN",
                b"\0guest\0guest".to_vec(),
                peer([192, 0, 2, 7]),
                None,
                false,
            )
            .await;
        assert!(matches!(remote, AuthOutcome::Failure));
    }

    #[tokio::test]
    async fn refusals_wait_out_the_delay() {
        let s = service(quick());
        let started = std::time::Instant::now();
        let wrong = s
            .start(
                b"PLAIN",
                b"\0guest\0nope".to_vec(),
                peer([127, 0, 0, 1]),
                None,
                false,
            )
            .await;
        assert!(matches!(wrong, AuthOutcome::Failure));
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn only_offered_mechanisms_are_accepted() {
        let s = service(quick());
        assert_eq!(s.offered(false, false), ["SCRAM-SHA-256", "PLAIN"]);
        assert_eq!(
            s.offered(false, true),
            ["SCRAM-SHA-256", "PLAIN", "AMQPLAIN"]
        );
        let local = peer([127, 0, 0, 1]);
        for (mechanism, amqp091) in [
            (&b"ANONYMOUS"[..], false),
            (b"AMQPLAIN", false),
            (b"EXTERNAL", false),
            (b"CRAM-MD5", true),
        ] {
            let outcome = s.start(mechanism, vec![], local, None, amqp091).await;
            assert!(matches!(outcome, AuthOutcome::Failure));
        }
        let open = service(ServerConfig {
            auth: AuthMode::None,
            ..quick()
        });
        assert_eq!(
            open.offered(false, true),
            ["PLAIN", "AMQPLAIN", "ANONYMOUS"]
        );
        let anon = open.start(b"ANONYMOUS", vec![], local, None, false).await;
        assert!(matches!(anon, AuthOutcome::Success(u) if u == "anonymous"));
    }

    #[tokio::test]
    async fn sasl_mechanisms_limit_amqp_logins_but_not_http_basic() {
        let s = service(ServerConfig {
            sasl_mechanisms: Some(vec![Mechanism::Plain, Mechanism::Anonymous]),
            ..quick()
        });
        // ANONYMOUS stays off without --allow-anonymous; AMQPLAIN and SCRAM are left out.
        assert_eq!(s.offered(false, true), ["PLAIN"]);
        assert_eq!(s.offered(true, false), ["PLAIN"]);
        assert_eq!(
            s.mechanism_availability(true),
            [
                ("EXTERNAL", false),
                ("SCRAM-SHA-256", false),
                ("PLAIN", true),
                ("AMQPLAIN", false),
                ("ANONYMOUS", false)
            ]
        );
        // Without a list, EXTERNAL is there when certificates are asked for.
        let all = service(quick());
        let enabled = |certificates| {
            all.mechanism_availability(certificates)
                .into_iter()
                .filter(|(_, on)| *on)
                .map(|(name, _)| name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            enabled(true),
            ["EXTERNAL", "SCRAM-SHA-256", "PLAIN", "AMQPLAIN"]
        );
        assert_eq!(enabled(false), ["SCRAM-SHA-256", "PLAIN", "AMQPLAIN"]);
        let local = peer([127, 0, 0, 1]);
        let scram = s
            .start(
                b"SCRAM-SHA-256",
                b"n,,n=guest,r=abc".to_vec(),
                local,
                None,
                false,
            )
            .await;
        assert!(matches!(scram, AuthOutcome::Failure));
        let amqplain = s
            .start(b"AMQPLAIN", b"\0guest\0guest".to_vec(), local, None, true)
            .await;
        assert!(matches!(amqplain, AuthOutcome::Failure));
        let plain = s
            .start(b"PLAIN", b"\0guest\0guest".to_vec(), local, None, true)
            .await;
        assert!(matches!(plain, AuthOutcome::Success(u) if u == "guest"));
        // A list nobody could log in with stops ferryd at start.
        for useless in [vec![Mechanism::External], vec![Mechanism::Anonymous]] {
            let e = AuthService::new(&ServerConfig {
                sasl_mechanisms: Some(useless),
                ..quick()
            })
            .unwrap_err();
            assert!(e.contains("no mechanism"), "{e}");
        }
        // Management's check is PLAIN's whatever AMQP may use.
        let only_scram = service(ServerConfig {
            sasl_mechanisms: Some(vec![Mechanism::ScramSha256]),
            ..quick()
        });
        assert_eq!(only_scram.offered(false, true), ["SCRAM-SHA-256"]);
        assert_eq!(
            only_scram
                .check_password("guest", "guest", local)
                .await
                .as_deref(),
            Some("guest")
        );
    }

    #[tokio::test]
    async fn http_password_checks_are_remembered_until_the_users_change() {
        let (s, dir, path) = with_users_file("authhttp");
        let local = peer([127, 0, 0, 1]);
        assert_eq!(
            s.check_password("guest", "guest", local).await.as_deref(),
            Some("guest")
        );
        assert_eq!(s.checked.entries.lock().len(), 1);
        // Remembered: the second check hashes nothing.
        assert!(s.checked.contains("guest", "guest", 0));
        assert_eq!(s.check_password("guest", "nope", local).await, None);
        assert_eq!(
            s.check_password("guest", "guest", peer([192, 0, 2, 1]))
                .await,
            None,
            "guest stays loopback-only, remembered or not"
        );
        let mut users = Users::default();
        users
            .insert("alice", Credentials::new("pw", 4096).unwrap())
            .unwrap();
        users.save(&path).unwrap();
        assert_eq!(s.check_password("guest", "guest", local).await, None);
        assert_eq!(
            s.check_password("alice", "pw", local).await.as_deref(),
            Some("alice")
        );
        assert_eq!(s.users().names().collect::<Vec<_>>(), ["alice"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Logs in over 0-9-1 with `mechanism` and `response`; the finished login.
    async fn logged_in(
        s: &Arc<AuthService>,
        mechanism: &[u8],
        response: &str,
        identity: Option<&str>,
    ) -> Login {
        let mut login = Login::new(
            s.clone(),
            peer([127, 0, 0, 1]),
            identity.map(str::to_owned),
            true,
        );
        login.start(mechanism, response.as_bytes().to_vec());
        let outcome = login.take_task().unwrap().await;
        assert!(matches!(login.finish(outcome), LoginStep::Success));
        login
    }

    #[tokio::test]
    async fn a_password_login_notices_its_user_deleted_and_others_do_not() {
        let (s, dir, path) = with_users_file("authgone");
        let mut users = Users::default();
        users
            .insert("alice", Credentials::new("pw", 4096).unwrap())
            .unwrap();
        users
            .insert("bob", Credentials::new("pw", 4096).unwrap())
            .unwrap();
        users.save(&path).unwrap();
        let plain = logged_in(&s, b"PLAIN", "\0alice\0pw", None).await;
        let amqplain = logged_in(&s, b"AMQPLAIN", "\0alice\0pw", None).await;
        let other = logged_in(&s, b"PLAIN", "\0bob\0pw", None).await;
        // A certificate's name needs no entry in the users file.
        let external = logged_in(&s, b"EXTERNAL", "", Some("alice")).await;
        // A SCRAM login's outcome, as its last step leaves it (the exchange is tested apart).
        let mut scram = Login::new(s.clone(), peer([127, 0, 0, 1]), None, false);
        scram.mechanism = "SCRAM-SHA-256".into();
        scram.user = Some("alice".into());
        assert!(!plain.user_deleted() && !amqplain.user_deleted() && !scram.user_deleted());
        // As management deletes: the users in memory are replaced at once.
        assert!(s.change_users(|users| Ok(users.remove("alice"))).unwrap());
        assert!(plain.user_deleted() && amqplain.user_deleted() && scram.user_deleted());
        assert!(!other.user_deleted() && !external.user_deleted());
        std::fs::remove_dir_all(&dir).unwrap();
        // With --auth no, PLAIN admits names no file has.
        let open = service(ServerConfig {
            auth: AuthMode::None,
            ..quick()
        });
        let anyone = logged_in(&open, b"PLAIN", "\0nobody\0x", None).await;
        assert_eq!(anyone.user(), "nobody");
        assert!(!anyone.user_deleted());
    }

    #[tokio::test]
    async fn the_users_file_replaces_the_guest_and_is_reread() {
        let (s, dir, path) = with_users_file("authsvc");
        let local = peer([127, 0, 0, 1]);
        let login = |user: &str, pw: &str| {
            s.start(
                b"PLAIN",
                format!("\0{user}\0{pw}").into_bytes(),
                local,
                None,
                false,
            )
        };
        assert!(matches!(
            login("guest", "guest").await,
            AuthOutcome::Success(_)
        ));
        let mut users = Users::default();
        users
            .insert("alice", Credentials::new("pw", 4096).unwrap())
            .unwrap();
        users.save(&path).unwrap();
        assert!(matches!(
            login("alice", "pw").await,
            AuthOutcome::Success(_)
        ));
        assert!(matches!(
            login("guest", "guest").await,
            AuthOutcome::Failure
        ));
        std::fs::write(&path, "broken").unwrap();
        // A damaged replacement keeps the previous users.
        assert!(matches!(
            login("alice", "pw").await,
            AuthOutcome::Success(_)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
        let bad = std::env::temp_dir().join(format!("ferry-authsvc-bad-{}", std::process::id()));
        std::fs::write(&bad, "broken").unwrap();
        assert!(AuthService::new(&ServerConfig {
            users_file: Some(bad.clone()),
            ..quick()
        })
        .is_err());
        std::fs::remove_file(&bad).unwrap();
    }

    #[tokio::test]
    async fn management_changes_the_users_file_and_keeps_guest_in_a_new_one() {
        let (s, dir, path) = with_users_file("authchange");
        let local = peer([127, 0, 0, 1]);
        assert_eq!(s.users().tags(GUEST), [ADMINISTRATOR]);
        // A change that changes nothing writes nothing (no file appears).
        s.change_users(|users| Ok(users.remove("nobody"))).unwrap();
        assert!(!path.exists());
        let added = s.change_users(|users| {
            let alice = Credentials::new("pw", 4096)
                .map_err(|e| UsersChangeError::Invalid(e.to_string()))?;
            users
                .insert("alice", alice)
                .map_err(|e| UsersChangeError::Invalid(e.to_string()))
        });
        assert!(matches!(added, Ok(false)));
        // In force at once, and guest came along into the new file.
        let file = Users::load(&path).unwrap().expect("written");
        assert_eq!(file.names().collect::<Vec<_>>(), ["alice", GUEST]);
        assert_eq!(file.tags(GUEST), [ADMINISTRATOR]);
        assert_eq!(s.users(), file);
        assert_eq!(
            s.check_password("alice", "pw", local).await.as_deref(),
            Some("alice")
        );
        assert_eq!(
            s.check_password("guest", "guest", local).await.as_deref(),
            Some("guest")
        );
        // A refused change writes nothing.
        let refused: Result<(), _> = s.change_users(|users| {
            users.remove(GUEST);
            Err(UsersChangeError::NotFound("no".into()))
        });
        assert!(matches!(refused, Err(UsersChangeError::NotFound(_))));
        assert_eq!(Users::load(&path).unwrap(), Some(file));
        // Removing guest works like any other user, and a damaged file is left alone.
        s.change_users(|users| Ok(users.remove(GUEST))).unwrap();
        assert_eq!(s.check_password("guest", "guest", local).await, None);
        std::fs::write(&path, "alice:garbage\n").unwrap();
        assert!(matches!(
            s.change_users(|_| Ok(())),
            Err(UsersChangeError::File(_))
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "alice:garbage\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn users_gone_from_the_file_are_taken_once_and_managements_own_are_not() {
        let (s, dir, path) = with_users_file("authremoved");
        let names = |removed: Vec<(String, u64)>| -> Vec<String> {
            removed.into_iter().map(|(name, _)| name).collect()
        };
        assert!(s.watches_users_file());
        let save = |names: &[&str]| {
            let mut users = Users::default();
            for name in names {
                users
                    .insert(name, Credentials::new("pw", 4096).unwrap())
                    .unwrap();
            }
            users.save(&path).unwrap();
        };
        // A first file takes over from the built-in guest: a setup, not a deletion.
        save(&["alice", "bob", "carol", "dave"]);
        assert!(s.take_removed().is_empty());
        // As `ferry user remove alice` leaves it.
        save(&["bob", "carol", "dave"]);
        assert_eq!(names(s.take_removed()), ["alice"]);
        assert!(s.take_removed().is_empty());
        // A login's re-read may see the edit first; the removal is kept all the same.
        save(&["carol", "dave"]);
        assert_eq!(s.users().len(), 2);
        assert_eq!(names(s.take_removed()), ["bob"]);
        // Management deletes carol and closes her connections itself. dave's removal, made
        // by an edit not read yet, comes along in the same re-read and is kept.
        save(&["carol"]);
        s.change_users(|users| {
            users
                .insert("erin", Credentials::new("pw", 4096).unwrap())
                .unwrap();
            Ok(users.remove("carol"))
        })
        .unwrap();
        assert_eq!(names(s.take_removed()), ["dave"]);
        // The file gone: the built-in guest again, and nobody is cut off for a slip.
        std::fs::remove_file(&path).unwrap();
        assert!(s.take_removed().is_empty());
        assert!(s.users().get(GUEST).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
        // Nothing to watch without a file, or with --auth no.
        let no_file = service(quick());
        assert!(!no_file.watches_users_file());
        let open = service(ServerConfig {
            auth: AuthMode::None,
            users_file: Some(path),
            ..quick()
        });
        assert!(!open.watches_users_file());
    }

    /// Management's change waits while `ferry user` holds the file's change lock, and then
    /// changes the file as that left it.
    #[test]
    fn management_waits_for_the_change_lock() {
        let (s, dir, path) = with_users_file("authlock");
        let held = Users::lock_file(&path).unwrap();
        let changing = {
            let s = s.clone();
            std::thread::spawn(move || {
                s.change_users(|users| {
                    users
                        .insert("mgmt", Credentials::new("pw", 4096).unwrap())
                        .map_err(|e| UsersChangeError::Invalid(e.to_string()))
                })
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!path.exists(), "saved while the lock was held");
        let mut users = Users::default();
        users
            .insert("cli", Credentials::new("pw", 4096).unwrap())
            .unwrap();
        users.save(&path).unwrap();
        drop(held);
        changing.join().unwrap().unwrap();
        let file = Users::load(&path).unwrap().unwrap();
        assert_eq!(file.names().collect::<Vec<_>>(), ["cli", "mgmt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn users_cannot_be_changed_without_logins_or_a_file() {
        let open = service(ServerConfig {
            auth: AuthMode::None,
            users_file: Some(std::env::temp_dir().join("ferry-never-written")),
            ..quick()
        });
        assert!(matches!(
            open.change_users(|_| Ok(())),
            Err(UsersChangeError::NotChecked)
        ));
        let no_file = service(ServerConfig {
            users_file: None,
            ..quick()
        });
        assert!(matches!(
            no_file.change_users(|_| Ok(())),
            Err(UsersChangeError::NoFile)
        ));
    }
}
