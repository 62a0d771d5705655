//! A user's stored secret: SCRAM-SHA-256 keys derived from the password with
//! PBKDF2-HMAC-SHA256, in PostgreSQL's text form
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::scram::{client_key, hmac, salted_password, server_key_of};

/// PBKDF2 rounds for new records: slow enough that a stolen users file costs an attacker
/// real work per guess, fast enough (tens of milliseconds) for a login.
pub const DEFAULT_ITERATIONS: u32 = 100_000;
/// RFC 7677's floor for SCRAM-SHA-256.
pub const MIN_ITERATIONS: u32 = 4096;
const SALT_LEN: usize = 16;
const PREFIX: &str = "SCRAM-SHA-256$";

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: [u8; 32],
    pub server_key: [u8; 32],
}

impl std::fmt::Debug for Credentials {
    // Keys stay out of logs and panic messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("not a SCRAM-SHA-256 record or a RabbitMQ password hash")]
    Format,
    #[error("iteration count {0} is below {MIN_ITERATIONS}")]
    TooFewIterations(u32),
    #[error("cannot get random bytes for a salt: {0}")]
    Random(String),
    #[error("{0}")]
    Unsupported(String),
}

impl Credentials {
    /// New credentials for `password` with a fresh random salt.
    pub fn new(password: &str, iterations: u32) -> Result<Credentials, CredentialsError> {
        if iterations < MIN_ITERATIONS {
            return Err(CredentialsError::TooFewIterations(iterations));
        }
        let mut salt = vec![0u8; SALT_LEN];
        getrandom::fill(&mut salt).map_err(|e| CredentialsError::Random(e.to_string()))?;
        Ok(Credentials::derive(password, &salt, iterations))
    }

    /// The keys RFC 5802 derives from `password`, `salt` and `iterations`.
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> Credentials {
        let salted = salted_password(password, salt, iterations);
        let stored_key: [u8; 32] = Sha256::digest(client_key(&salted)).into();
        Credentials {
            iterations,
            salt: salt.to_vec(),
            stored_key,
            server_key: server_key_of(&salted),
        }
    }

    /// Whether `password` is this record's password (the slow part of a PLAIN login).
    pub fn verify_password(&self, password: &str) -> bool {
        let salted = salted_password(password, &self.salt, self.iterations);
        let stored: [u8; 32] = Sha256::digest(client_key(&salted)).into();
        bool::from(stored.ct_eq(&self.stored_key))
    }

    /// The record as stored in the users file.
    pub fn encode(&self) -> String {
        format!(
            "{PREFIX}{}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(self.stored_key),
            B64.encode(self.server_key)
        )
    }

    pub fn parse(text: &str) -> Result<Credentials, CredentialsError> {
        let rest = text.strip_prefix(PREFIX).ok_or(CredentialsError::Format)?;
        let (params, keys) = rest.split_once('$').ok_or(CredentialsError::Format)?;
        let (iterations, salt) = params.split_once(':').ok_or(CredentialsError::Format)?;
        let (stored, server) = keys.split_once(':').ok_or(CredentialsError::Format)?;
        let iterations: u32 = iterations.parse().map_err(|_| CredentialsError::Format)?;
        if iterations < MIN_ITERATIONS {
            return Err(CredentialsError::TooFewIterations(iterations));
        }
        let salt = B64.decode(salt).map_err(|_| CredentialsError::Format)?;
        if salt.is_empty() {
            return Err(CredentialsError::Format);
        }
        let key = |s: &str| -> Result<[u8; 32], CredentialsError> {
            B64.decode(s)
                .ok()
                .and_then(|k| <[u8; 32]>::try_from(k).ok())
                .ok_or(CredentialsError::Format)
        };
        Ok(Credentials {
            iterations,
            salt,
            stored_key: key(stored)?,
            server_key: key(server)?,
        })
    }

    /// A salt that looks like a real one for a user who does not exist, the same on every
    /// attempt for that name (so probing cannot tell), unpredictable without `secret`.
    pub(crate) fn fake_salt(secret: &[u8], user: &str) -> Vec<u8> {
        hmac(secret, user.as_bytes())[..SALT_LEN].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_verifies_only_its_password() {
        let c = Credentials::new("s3cret", MIN_ITERATIONS).unwrap();
        let parsed = Credentials::parse(&c.encode()).unwrap();
        assert_eq!(parsed, c);
        assert!(parsed.verify_password("s3cret"));
        assert!(!parsed.verify_password("s3cret "));
        assert!(!parsed.verify_password(""));
    }

    #[test]
    fn salts_are_random() {
        let a = Credentials::new("pw", MIN_ITERATIONS).unwrap();
        let b = Credentials::new("pw", MIN_ITERATIONS).unwrap();
        assert_ne!(a.salt, b.salt);
        assert_ne!(a.stored_key, b.stored_key);
    }

    #[test]
    fn rfc7677_keys() {
        // RFC 7677 section 3: user "user", password "pencil".
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let c = Credentials::derive("pencil", &salt, 4096);
        assert!(c.verify_password("pencil"));
        assert!(!c.verify_password("pencil2"));
    }

    #[test]
    fn malformed_records_are_refused() {
        for bad in [
            "",
            "plain:password",
            "SCRAM-SHA-256$",
            "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
            "SCRAM-SHA-256$x:c2FsdA==$AAAA:AAAA",
            "SCRAM-SHA-256$4096:$AAAA:AAAA",
        ] {
            assert!(Credentials::parse(bad).is_err(), "{bad:?}");
        }
        let low = Credentials::derive("pw", b"salt", 1).encode();
        assert_eq!(
            Credentials::parse(&low),
            Err(CredentialsError::TooFewIterations(1))
        );
        assert!(Credentials::new("pw", 10).is_err());
    }

    #[test]
    fn debug_hides_keys() {
        let c = Credentials::derive("pw", b"salt", 4096);
        assert!(!format!("{c:?}").contains("stored_key"));
    }
}
