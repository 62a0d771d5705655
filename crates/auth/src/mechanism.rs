//! One SASL exchange on the server: pick a mechanism, feed it the client's responses, get a
//! challenge to send, the authenticated user, or a refusal.

use std::collections::HashMap;
use std::sync::Mutex;

use subtle::ConstantTimeEq;

use crate::credentials::{Credentials, DEFAULT_ITERATIONS};
use crate::plain::parse_plain;
use crate::record::Record;
use crate::scram::{parse_client_first, ScramError, ScramServer};
use crate::users::Users;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Identity from the TLS client certificate, vouched for by the CA.
    External,
    ScramSha256,
    Plain,
    /// RabbitMQ's field-table form of PLAIN; the 0-9-1 layer decodes it into a PLAIN response.
    AmqPlain,
    Anonymous,
}

impl Mechanism {
    pub const ALL: [Mechanism; 5] = [
        Mechanism::External,
        Mechanism::ScramSha256,
        Mechanism::Plain,
        Mechanism::AmqPlain,
        Mechanism::Anonymous,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::External => "EXTERNAL",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::Plain => "PLAIN",
            Mechanism::AmqPlain => "AMQPLAIN",
            Mechanism::Anonymous => "ANONYMOUS",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name().as_bytes().eq_ignore_ascii_case(name))
    }
}

/// `--auth yes` or `--auth no`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Passwords are checked against the users file.
    Verify,
    /// Anyone gets in: ANONYMOUS, or PLAIN with any credentials.
    Open,
}

/// A refused login. `reason` is for the server's log only: clients always get the same
/// answer, so they cannot learn whether a user exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub user: Option<String>,
    pub reason: &'static str,
}

impl Denied {
    fn new(user: Option<&str>, reason: &'static str) -> Denied {
        Denied {
            user: user.map(str::to_owned),
            reason,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge (connection.secure) and pass the client's answer to the next step.
    Challenge(Vec<u8>),
    Success(String),
    Failure(Denied),
}

/// The users and policy one exchange runs against: a snapshot, replaced as a whole when the
/// users file changes.
pub struct Authenticator {
    mode: Mode,
    anonymous: bool,
    users: Users,
    /// Checked instead of a real record for unknown users, and beside a RabbitMQ hash, at a
    /// real record's cost.
    dummy: Credentials,
    /// Keys the made-up SCRAM salts of unknown users, and the tags of `verified`.
    secret: [u8; 32],
    /// Whether `secret` is random; without it no password tag is kept.
    random: bool,
    /// PLAIN logins already verified against the (slow, salted) record: per user, a keyed
    /// tag of the password that passed. A client that reconnects, or opens thousands of
    /// connections with one account, pays the key derivation once per password instead of
    /// once per connection (100,000 iterations: milliseconds of CPU each). Only a password
    /// that matched the record is kept, so a wrong one still costs the full derivation, and
    /// the cache dies with this authenticator when the users file changes. The tag is as
    /// sensitive as the password it stands for, which passes through memory at every PLAIN
    /// login anyway.
    verified: Mutex<HashMap<String, [u8; 32]>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("mode", &self.mode)
            .field("anonymous", &self.anonymous)
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// `anonymous` enables ANONYMOUS in [`Mode::Verify`] (it is always on in [`Mode::Open`]).
    /// Slow: derives the stand-in record for unknown users.
    pub fn new(mode: Mode, users: Users, anonymous: bool) -> Authenticator {
        let mut secret = [0u8; 32];
        // Without randomness unknown users' salts become predictable (HMAC of the name under
        // a zero key): they still look like salts, so this only weakens the disguise.
        let random = getrandom::fill(&mut secret).is_ok();
        let iterations = users.usual_iterations().unwrap_or(DEFAULT_ITERATIONS);
        let dummy = match mode {
            Mode::Verify => Credentials::derive("", &secret, iterations),
            // Never checked against: open mode admits every PLAIN login unverified.
            Mode::Open => Credentials {
                iterations,
                salt: secret.to_vec(),
                stored_key: [0; 32],
                server_key: [0; 32],
            },
        };
        Authenticator {
            mode,
            anonymous,
            users,
            dummy,
            secret,
            random,
            verified: Mutex::default(),
        }
    }

    /// The same policy over another users database, keeping the stand-in record when its
    /// cost still matches.
    pub fn with_users(&self, users: Users) -> Authenticator {
        let iterations = users.usual_iterations().unwrap_or(DEFAULT_ITERATIONS);
        let dummy = if iterations == self.dummy.iterations {
            self.dummy.clone()
        } else {
            Credentials::derive("", &self.secret, iterations)
        };
        Authenticator {
            mode: self.mode,
            anonymous: self.anonymous,
            users,
            dummy,
            secret: self.secret,
            random: self.random,
            verified: Mutex::default(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn users(&self) -> &Users {
        &self.users
    }

    /// Whether ANONYMOUS may be used.
    pub fn anonymous_allowed(&self) -> bool {
        self.mode == Mode::Open || self.anonymous
    }

    /// Mechanisms to offer, strongest first. EXTERNAL only when the connection has a verified
    /// client certificate; AMQPLAIN only to 0-9-1 clients; SCRAM only when passwords are
    /// checked (it needs a record).
    pub fn mechanisms(&self, has_client_identity: bool, amqp091: bool) -> Vec<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .filter(|m| match m {
                Mechanism::External => has_client_identity,
                Mechanism::ScramSha256 => self.mode == Mode::Verify,
                Mechanism::Plain => true,
                Mechanism::AmqPlain => amqp091,
                Mechanism::Anonymous => self.anonymous_allowed(),
            })
            .collect()
    }

    /// Starts an exchange for `mechanism`. `client_identity` is the TLS client certificate's
    /// name, if the connection has one.
    pub fn start(
        &self,
        mechanism: Mechanism,
        client_identity: Option<&str>,
    ) -> Result<Exchange, Denied> {
        let state = match mechanism {
            Mechanism::Anonymous if self.anonymous_allowed() => State::Anonymous,
            Mechanism::Anonymous => return Err(Denied::new(None, "ANONYMOUS is not enabled")),
            Mechanism::External => match client_identity {
                Some(id) => State::External(id.to_owned()),
                None => return Err(Denied::new(None, "EXTERNAL without a client certificate")),
            },
            Mechanism::Plain | Mechanism::AmqPlain => State::Plain,
            Mechanism::ScramSha256 => State::ScramFirst,
        };
        Ok(Exchange { state })
    }
}

/// One client's exchange. PLAIN's step is slow by design (it derives a key with PBKDF2):
/// run it off latency-sensitive threads.
#[derive(Debug)]
pub struct Exchange {
    state: State,
}

#[derive(Debug)]
enum State {
    Anonymous,
    External(String),
    Plain,
    ScramFirst,
    /// The flag: the user exists with a RabbitMQ hash, which SCRAM cannot use (the exchange
    /// runs on as for an unknown user; the log says why it failed).
    ScramFinal(Box<ScramServer>, bool),
    /// The server-final message went out as a challenge; any answer completes the login.
    ScramAcknowledge(String),
    Done,
}

impl Exchange {
    pub fn step(&mut self, auth: &Authenticator, response: &[u8]) -> Step {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Anonymous => Step::Success("anonymous".to_owned()),
            State::External(id) => {
                // The response, if any, is an authorization identity: only our own name.
                if response.is_empty() || response == id.as_bytes() {
                    Step::Success(id)
                } else {
                    Step::Failure(Denied::new(Some(&id), "EXTERNAL authzid differs"))
                }
            }
            State::Plain => plain(auth, response),
            State::ScramFirst => match parse_client_first(response) {
                Ok(first) => {
                    let record = auth.users.get(&first.user);
                    let credentials = record.and_then(Record::scram).cloned();
                    let no_keys = record.is_some() && credentials.is_none();
                    let fake = (
                        Credentials::fake_salt(&auth.secret, &first.user),
                        auth.dummy.iterations,
                    );
                    let (server, challenge) = ScramServer::start(first, credentials, fake);
                    self.state = State::ScramFinal(Box::new(server), no_keys);
                    Step::Challenge(challenge.into_bytes())
                }
                Err(e) => Step::Failure(Denied::new(None, e.text())),
            },
            State::ScramFinal(server, no_keys) => match server.finish(response) {
                Ok(server_final) => {
                    self.state = State::ScramAcknowledge(server.user().to_owned());
                    Step::Challenge(server_final.into_bytes())
                }
                Err(ScramError::UnknownUser) if no_keys => Step::Failure(Denied::new(
                    Some(server.user()),
                    "the user has a RabbitMQ password hash, which SCRAM cannot use: log in \
                     with PLAIN, or give the user a new password",
                )),
                Err(e) => Step::Failure(Denied::new(Some(server.user()), e.text())),
            },
            State::ScramAcknowledge(user) => Step::Success(user),
            State::Done => Step::Failure(Denied::new(None, "exchange already finished")),
        }
    }
}

fn plain(auth: &Authenticator, response: &[u8]) -> Step {
    let Some((user, password)) = parse_plain(response) else {
        return Step::Failure(Denied::new(None, "malformed PLAIN response"));
    };
    if auth.mode == Mode::Open {
        let user = if user.is_empty() { "anonymous" } else { user };
        return Step::Success(user.to_owned());
    }
    let record = auth.users.get(user);
    let known = record.is_some();
    let tag = record
        .filter(|_| auth.random)
        .map(|record| password_tag(auth, user, record, password));
    let cached = tag.is_some_and(|tag| {
        let verified = auth.verified.lock().unwrap_or_else(|e| e.into_inner());
        verified
            .get(user)
            .is_some_and(|kept| bool::from(kept.ct_eq(&tag)))
    });
    if cached {
        return Step::Success(user.to_owned());
    }
    // RabbitMQ refuses a blank password whatever the record says; so does ferryd (a hash
    // imported from elsewhere could be of the empty string).
    let matches =
        !password.is_empty() && record.is_some_and(|record| record.verify_password(password));
    if record.and_then(Record::scram).is_none() {
        // Unknown users cost what known ones do, and so do users with a RabbitMQ hash
        // (microseconds to check): timing must tell neither apart.
        auth.dummy.verify_password(password);
    }
    match (known, matches) {
        (true, true) => {
            if let Some(tag) = tag {
                auth.verified
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(user.to_owned(), tag);
            }
            Step::Success(user.to_owned())
        }
        (true, false) => Step::Failure(Denied::new(Some(user), "wrong password")),
        (false, _) => Step::Failure(Denied::new(Some(user), "unknown user")),
    }
}

/// The tag [`Authenticator::verified`] keeps: HMAC-SHA-256 under the authenticator's random
/// secret of the user, the record's fingerprint (SCRAM's stored key, or RabbitMQ's salted
/// digest) and the password, so it matches only this password for this record.
fn password_tag(auth: &Authenticator, user: &str, record: &Record, password: &str) -> [u8; 32] {
    let fingerprint = record.fingerprint();
    let mut data = Vec::with_capacity(24 + user.len() + fingerprint.len() + password.len());
    data.extend_from_slice(b"ferry plain login\0");
    data.extend_from_slice(user.as_bytes());
    data.push(0);
    data.extend_from_slice(fingerprint);
    data.extend_from_slice(password.as_bytes());
    crate::scram::hmac(&auth.secret, &data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rabbit::{RabbitAlgorithm, RabbitHash};
    use crate::MIN_ITERATIONS;
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};

    fn users() -> Users {
        let mut u = Users::default();
        u.insert(
            "alice",
            Credentials::derive("wonder", b"salt-a", MIN_ITERATIONS),
        )
        .unwrap();
        let rabbit = RabbitHash::derive(RabbitAlgorithm::Sha256, [1, 2, 3, 4], "hutch");
        u.insert("peter", rabbit).unwrap();
        u
    }

    fn verify() -> Authenticator {
        Authenticator::new(Mode::Verify, users(), false)
    }

    fn run(auth: &Authenticator, m: Mechanism, id: Option<&str>, response: &[u8]) -> Step {
        auth.start(m, id).unwrap().step(auth, response)
    }

    #[test]
    fn plain_checks_the_password_and_hides_unknown_users() {
        let a = verify();
        assert_eq!(
            run(&a, Mechanism::Plain, None, b"\0alice\0wonder"),
            Step::Success("alice".into())
        );
        let Step::Failure(wrong) = run(&a, Mechanism::Plain, None, b"\0alice\0land") else {
            panic!("wrong password accepted");
        };
        let Step::Failure(unknown) = run(&a, Mechanism::Plain, None, b"\0bob\0wonder") else {
            panic!("unknown user accepted");
        };
        assert_eq!(wrong.reason, "wrong password");
        assert_eq!(unknown.reason, "unknown user");
        assert_eq!(unknown.user.as_deref(), Some("bob"));
        assert!(matches!(
            run(&a, Mechanism::Plain, None, b"garbage"),
            Step::Failure(_)
        ));
        // The stand-in record costs what real ones cost.
        assert_eq!(a.dummy.iterations, MIN_ITERATIONS);
    }

    #[test]
    fn a_verified_plain_password_is_remembered_and_a_wrong_one_never_is() {
        let a = verify();
        let tag = |pw: &str| password_tag(&a, "alice", a.users.get("alice").unwrap(), pw);
        let kept = |a: &Authenticator| a.verified.lock().unwrap().get("alice").copied();
        let ok = || run(&a, Mechanism::Plain, None, b"\0alice\0wonder");
        assert!(matches!(
            run(&a, Mechanism::Plain, None, b"\0alice\0land"),
            Step::Failure(_)
        ));
        assert_eq!(kept(&a), None, "a refused password is not kept");
        assert_eq!(ok(), Step::Success("alice".into()));
        assert_eq!(kept(&a), Some(tag("wonder")));
        // The second login is answered from the tag; a wrong password still is not.
        assert_eq!(ok(), Step::Success("alice".into()));
        let Step::Failure(wrong) = run(&a, Mechanism::Plain, None, b"\0alice\0wonde") else {
            panic!("wrong password accepted after a right one");
        };
        assert_eq!(wrong.reason, "wrong password");
        assert_ne!(tag("wonder"), tag("wonde"));
        // A new users database starts with nothing remembered.
        let b = a.with_users(users());
        assert_eq!(kept(&b), None);
        // The tag binds the record: the same password for another record is another tag.
        let other = Credentials::derive("wonder", b"salt-b", MIN_ITERATIONS).into();
        assert_ne!(password_tag(&a, "alice", &other, "wonder"), tag("wonder"));
    }

    #[test]
    fn open_mode_takes_any_plain_credentials_and_anonymous() {
        let a = Authenticator::new(Mode::Open, Users::default(), false);
        assert_eq!(
            run(&a, Mechanism::Plain, None, b"\0bob\0x"),
            Step::Success("bob".into())
        );
        assert_eq!(
            run(&a, Mechanism::Anonymous, None, b""),
            Step::Success("anonymous".into())
        );
        let names: Vec<_> = a.mechanisms(false, true).iter().map(|m| m.name()).collect();
        assert_eq!(names, ["PLAIN", "AMQPLAIN", "ANONYMOUS"]);
    }

    #[test]
    fn anonymous_needs_open_mode_or_explicit_enabling() {
        assert!(verify().start(Mechanism::Anonymous, None).is_err());
        let a = Authenticator::new(Mode::Verify, users(), true);
        assert_eq!(
            run(&a, Mechanism::Anonymous, None, b"trace"),
            Step::Success("anonymous".into())
        );
    }

    #[test]
    fn external_uses_the_certificate_identity() {
        let a = verify();
        assert!(a.start(Mechanism::External, None).is_err());
        assert_eq!(
            run(&a, Mechanism::External, Some("client1"), b""),
            Step::Success("client1".into())
        );
        assert_eq!(
            run(&a, Mechanism::External, Some("client1"), b"client1"),
            Step::Success("client1".into())
        );
        assert!(matches!(
            run(&a, Mechanism::External, Some("client1"), b"admin"),
            Step::Failure(_)
        ));
        let names: Vec<_> = a.mechanisms(true, false).iter().map(|m| m.name()).collect();
        assert_eq!(names, ["EXTERNAL", "SCRAM-SHA-256", "PLAIN"]);
    }

    /// A SCRAM client, written from RFC 5802, to drive the server end to end.
    fn scram_client(auth: &Authenticator, user: &str, password: &str) -> Step {
        let mut ex = auth.start(Mechanism::ScramSha256, None).unwrap();
        let client_first_bare = format!("n={user},r=clientnonce");
        let first = format!("n,,{client_first_bare}");
        let Step::Challenge(server_first) = ex.step(auth, first.as_bytes()) else {
            panic!("no server-first");
        };
        let server_first = String::from_utf8(server_first).unwrap();
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for attr in server_first.split(',') {
            match attr.split_at(2) {
                ("r=", v) => nonce = v,
                ("s=", v) => salt = B64.decode(v).unwrap(),
                ("i=", v) => iterations = v.parse().unwrap(),
                _ => {}
            }
        }
        assert!(nonce.starts_with("clientnonce") && nonce.len() > 11);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), &salt, iterations, &mut salted);
        let mac = |k: &[u8], d: &[u8]| {
            let mut m = Hmac::<Sha256>::new_from_slice(k).unwrap();
            m.update(d);
            m.finalize().into_bytes()
        };
        let client_key = mac(&salted, b"Client Key");
        let stored = Sha256::digest(client_key);
        let signature = mac(&stored, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let last = format!("{without_proof},p={}", B64.encode(proof));
        match ex.step(auth, last.as_bytes()) {
            Step::Challenge(server_final) => {
                let server_key = mac(&salted, b"Server Key");
                let expected = mac(&server_key, auth_message.as_bytes());
                assert_eq!(
                    server_final,
                    format!("v={}", B64.encode(expected)).into_bytes()
                );
                ex.step(auth, b"")
            }
            other => other,
        }
    }

    #[test]
    fn scram_exchange_end_to_end() {
        let a = verify();
        assert_eq!(
            scram_client(&a, "alice", "wonder"),
            Step::Success("alice".into())
        );
        let Step::Failure(d) = scram_client(&a, "alice", "nope") else {
            panic!("wrong password accepted");
        };
        assert_eq!(d.reason, "wrong password");
        let Step::Failure(d) = scram_client(&a, "mallory", "x") else {
            panic!("unknown user accepted");
        };
        assert_eq!(d.reason, "unknown user");
    }

    #[test]
    fn a_user_with_a_rabbitmq_hash_logs_in_with_plain_only() {
        let a = verify();
        let plain = |pw: &str| {
            run(
                &a,
                Mechanism::Plain,
                None,
                format!("\0peter\0{pw}").as_bytes(),
            )
        };
        let Step::Failure(wrong) = plain("hutc") else {
            panic!("wrong password accepted");
        };
        assert_eq!(wrong.reason, "wrong password");
        assert_eq!(plain("hutch"), Step::Success("peter".into()));
        // Remembered like any other verified login.
        assert!(a.verified.lock().unwrap().contains_key("peter"));
        assert_eq!(plain("hutch"), Step::Success("peter".into()));
        assert!(matches!(plain("hutc"), Step::Failure(_)));
        // A blank password never passes, even against a hash of the empty string.
        let mut blank = a.users.clone();
        let empty = RabbitHash::derive(RabbitAlgorithm::Sha256, [1, 2, 3, 4], "");
        blank.insert("peter", empty).unwrap();
        let b = a.with_users(blank);
        let Step::Failure(d) = run(&b, Mechanism::Plain, None, b"\0peter\0") else {
            panic!("blank password accepted");
        };
        assert_eq!(d.reason, "wrong password");
        // SCRAM runs on as for an unknown user (the same made-up salt and count), and the
        // log says why.
        let server_first = |user: &str| {
            let mut ex = a.start(Mechanism::ScramSha256, None).unwrap();
            let Step::Challenge(c) = ex.step(&a, format!("n,,n={user},r=abc").as_bytes()) else {
                panic!("no challenge");
            };
            String::from_utf8(c).unwrap()
        };
        let salt = B64.encode(Credentials::fake_salt(&a.secret, "peter"));
        assert!(
            server_first("peter").ends_with(&format!(",s={salt},i={}", a.dummy.iterations)),
            "{}",
            server_first("peter")
        );
        let Step::Failure(d) = scram_client(&a, "peter", "hutch") else {
            panic!("SCRAM cannot check a RabbitMQ hash");
        };
        assert!(d.reason.contains("RabbitMQ password hash"), "{}", d.reason);
        let Step::Failure(d) = scram_client(&a, "mallory", "hutch") else {
            panic!("unknown user accepted");
        };
        assert_eq!(d.reason, "unknown user");
    }

    #[test]
    fn unknown_users_get_a_stable_made_up_salt() {
        let a = verify();
        let first = |user: &str| {
            let mut ex = a.start(Mechanism::ScramSha256, None).unwrap();
            let Step::Challenge(c) = ex.step(&a, format!("n,,n={user},r=abc").as_bytes()) else {
                panic!("no challenge");
            };
            let text = String::from_utf8(c).unwrap();
            text.split(',').skip(1).collect::<Vec<_>>().join(",")
        };
        assert_eq!(first("ghost"), first("ghost"));
        assert_ne!(first("ghost"), first("phantom"));
        assert!(first("ghost").ends_with(&format!("i={MIN_ITERATIONS}")));
    }

    #[test]
    fn a_finished_exchange_accepts_nothing_more() {
        let a = verify();
        let mut ex = a.start(Mechanism::Plain, None).unwrap();
        assert!(matches!(ex.step(&a, b"\0alice\0wonder"), Step::Success(_)));
        assert!(matches!(ex.step(&a, b"\0alice\0wonder"), Step::Failure(_)));
    }

    #[test]
    fn mechanism_names() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name().as_bytes()), Some(m));
        }
        assert_eq!(Mechanism::from_name(b"plain"), Some(Mechanism::Plain));
        assert_eq!(Mechanism::from_name(b"CRAM-MD5"), None);
    }
}
