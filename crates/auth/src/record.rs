//! What the users file keeps for one user: ferryd's own SCRAM-SHA-256 keys, or a password
//! hash brought over from RabbitMQ.

use crate::credentials::{Credentials, CredentialsError};
use crate::rabbit::RabbitHash;

/// `hashing_algorithm` for ferryd's own records in RabbitMQ's management API.
pub const FERRY_HASHING_ALGORITHM: &str = "ferry_scram_sha_256";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Scram(Credentials),
    Rabbit(RabbitHash),
}

impl From<Credentials> for Record {
    fn from(c: Credentials) -> Record {
        Record::Scram(c)
    }
}

impl From<RabbitHash> for Record {
    fn from(h: RabbitHash) -> Record {
        Record::Rabbit(h)
    }
}

impl Record {
    /// A record as the users file stores it.
    pub fn parse(text: &str) -> Result<Record, CredentialsError> {
        match RabbitHash::parse(text) {
            Some(rabbit) => rabbit.map(Record::Rabbit),
            None => Credentials::parse(text).map(Record::Scram),
        }
    }

    pub fn encode(&self) -> String {
        match self {
            Record::Scram(c) => c.encode(),
            Record::Rabbit(h) => h.encode(),
        }
    }

    /// `password_hash` as management gives it, with its `hashing_algorithm`: a record of
    /// ferryd's own whatever algorithm comes with it (the record names its format, and
    /// tools send their default beside any hash), else a RabbitMQ hash.
    pub fn from_management(
        password_hash: &str,
        algorithm: Option<&str>,
    ) -> Result<Record, CredentialsError> {
        if password_hash.is_empty() {
            return Err(CredentialsError::Unsupported(
                "empty: a user without a password (RabbitMQ's certificate-only users) has no \
                 record to keep"
                    .into(),
            ));
        }
        match Credentials::parse(password_hash) {
            Ok(c) => Ok(Record::Scram(c)),
            Err(CredentialsError::Format) if algorithm != Some(FERRY_HASHING_ALGORITHM) => {
                RabbitHash::from_management(password_hash, algorithm).map(Record::Rabbit)
            }
            Err(e) => Err(e),
        }
    }

    /// `password_hash` and `hashing_algorithm` as management shows them.
    pub fn management_form(&self) -> (String, &'static str) {
        match self {
            Record::Scram(c) => (c.encode(), FERRY_HASHING_ALGORITHM),
            Record::Rabbit(h) => (h.management_form(), h.algorithm().management_name()),
        }
    }

    /// The SCRAM keys, which only ferryd's own records have.
    pub fn scram(&self) -> Option<&Credentials> {
        match self {
            Record::Scram(c) => Some(c),
            Record::Rabbit(_) => None,
        }
    }

    /// Whether `password` is this record's password (slow for a SCRAM record, by design).
    pub fn verify_password(&self, password: &str) -> bool {
        match self {
            Record::Scram(c) => c.verify_password(password),
            Record::Rabbit(h) => h.verify_password(password),
        }
    }

    /// Bytes that differ between records: a remembered login is tied to them.
    pub(crate) fn fingerprint(&self) -> &[u8] {
        match self {
            Record::Scram(c) => &c.stored_key,
            Record::Rabbit(h) => h.fingerprint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rabbit::RabbitAlgorithm;
    use crate::MIN_ITERATIONS;

    #[test]
    fn both_kinds_round_trip_through_the_file_form() {
        let scram: Record = Credentials::derive("pw", b"salt", MIN_ITERATIONS).into();
        let rabbit: Record = RabbitHash::derive(RabbitAlgorithm::Sha512, [7; 4], "pw").into();
        for r in [&scram, &rabbit] {
            assert_eq!(Record::parse(&r.encode()).as_ref(), Ok(r));
            assert!(r.verify_password("pw"));
            assert!(!r.verify_password("pw2"));
        }
        assert!(scram.scram().is_some());
        assert!(rabbit.scram().is_none());
        assert!(Record::parse("RABBIT-SHA-512$AAAA").is_err());
        assert!(Record::parse("plain:pw").is_err());
    }

    #[test]
    fn management_takes_our_records_under_any_algorithm_and_rabbitmqs_by_theirs() {
        let scram = Credentials::derive("pw", b"salt", MIN_ITERATIONS);
        let (hash, algorithm) = Record::Scram(scram.clone()).management_form();
        assert_eq!(algorithm, FERRY_HASHING_ALGORITHM);
        for given in [
            None,
            Some(algorithm),
            Some("rabbit_password_hashing_sha256"),
        ] {
            assert_eq!(
                Record::from_management(&hash, given),
                Ok(Record::Scram(scram.clone()))
            );
        }
        let rabbit = RabbitHash::derive(RabbitAlgorithm::Sha256, [1, 2, 3, 4], "pw");
        let (hash, algorithm) = Record::Rabbit(rabbit.clone()).management_form();
        assert_eq!(algorithm, "rabbit_password_hashing_sha256");
        assert_eq!(
            Record::from_management(&hash, None),
            Ok(Record::Rabbit(rabbit.clone()))
        );
        assert!(Record::from_management(&hash, Some("rabbit_password_hashing_md5")).is_err());
        // A damaged record of ours is reported as one, not as an unknown hash.
        assert_eq!(
            Record::from_management("SCRAM-SHA-256$x", Some(FERRY_HASHING_ALGORITHM)),
            Err(CredentialsError::Format)
        );
        assert!(matches!(
            Record::from_management("", None),
            Err(CredentialsError::Unsupported(text)) if text.contains("without a password")
        ));
        // A SCRAM record below the iteration floor stays refused, not read as a hash.
        let weak = Credentials::derive("pw", b"salt", 1).encode();
        assert_eq!(
            Record::from_management(&weak, None),
            Err(CredentialsError::TooFewIterations(1))
        );
    }
}
