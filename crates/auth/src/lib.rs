//! Authentication for ferryd: SASL server mechanisms and the users file.
//!
//! Everything here is synchronous and free of sockets; the server runs the (deliberately
//! slow) password checks off its event-loop threads and decides policy (which mechanisms a
//! listener offers, who may log in from where, how long a failure waits).
//!
//! A user's record holds SCRAM-SHA-256 keys (RFC 5802/7677: salt, iteration count, StoredKey,
//! ServerKey), never the password. PLAIN logins are checked by deriving the same keys from the
//! offered password (PBKDF2-HMAC-SHA256 with the record's salt and count), so one record
//! serves both mechanisms. A user brought over from RabbitMQ may keep RabbitMQ's password hash
//! instead, which serves PLAIN only.

mod credentials;
mod mechanism;
mod plain;
mod rabbit;
mod record;
mod scram;
mod users;

pub use credentials::{Credentials, CredentialsError, DEFAULT_ITERATIONS, MIN_ITERATIONS};
pub use mechanism::{Authenticator, Denied, Exchange, Mechanism, Mode, Step};
pub use plain::parse_plain;
pub use rabbit::{RabbitAlgorithm, RabbitHash};
pub use record::{Record, FERRY_HASHING_ALGORITHM};
pub use users::{
    default_users_file, validate_tag, validate_user_name, Users, UsersError, UsersFileLock,
};
