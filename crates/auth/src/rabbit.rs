//! RabbitMQ's password hashes, kept so that users exported from RabbitMQ (its definitions,
//! or `rabbitmqadmin declare user`, which hashes on the client) log in unchanged: a 4-octet
//! salt followed by SHA-256 (or SHA-512) of the salt and the password's UTF-8, as RabbitMQ's
//! `rabbit_password` computes it. One unkeyed hash is far cheaper to attack than a SCRAM
//! record's PBKDF2, and SCRAM cannot use it at all: such a user logs in with PLAIN (AMQPLAIN,
//! HTTP Basic) until a new password gives them a SCRAM record.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::credentials::CredentialsError;

/// RabbitMQ's salt length.
const SALT_LEN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RabbitAlgorithm {
    Sha256,
    Sha512,
}

impl RabbitAlgorithm {
    /// Every name RabbitMQ's `hashing_algorithm` takes, with ours where we have one: MD5
    /// (RabbitMQ before 3.6) is refused, not kept.
    fn from_management(name: &str) -> Result<RabbitAlgorithm, CredentialsError> {
        match name {
            "rabbit_password_hashing_sha256" => Ok(RabbitAlgorithm::Sha256),
            "rabbit_password_hashing_sha512" => Ok(RabbitAlgorithm::Sha512),
            "rabbit_password_hashing_md5" => Err(CredentialsError::Unsupported(
                "RabbitMQ's MD5 password hashes are too weak to keep",
            )),
            _ => Err(CredentialsError::Unsupported("unknown hashing_algorithm")),
        }
    }

    pub fn management_name(self) -> &'static str {
        match self {
            RabbitAlgorithm::Sha256 => "rabbit_password_hashing_sha256",
            RabbitAlgorithm::Sha512 => "rabbit_password_hashing_sha512",
        }
    }

    /// How the users file names the record's format.
    fn prefix(self) -> &'static str {
        match self {
            RabbitAlgorithm::Sha256 => "RABBIT-SHA-256$",
            RabbitAlgorithm::Sha512 => "RABBIT-SHA-512$",
        }
    }

    fn digest_len(self) -> usize {
        match self {
            RabbitAlgorithm::Sha256 => 32,
            RabbitAlgorithm::Sha512 => 64,
        }
    }

    fn hash(self, salt: &[u8], password: &str) -> Vec<u8> {
        match self {
            RabbitAlgorithm::Sha256 => Sha256::new()
                .chain_update(salt)
                .chain_update(password)
                .finalize()
                .to_vec(),
            RabbitAlgorithm::Sha512 => Sha512::new()
                .chain_update(salt)
                .chain_update(password)
                .finalize()
                .to_vec(),
        }
    }
}

/// A RabbitMQ password hash: salt and digest, as RabbitMQ stores them one after the other.
#[derive(Clone, PartialEq, Eq)]
pub struct RabbitHash {
    algorithm: RabbitAlgorithm,
    salted_digest: Vec<u8>,
}

impl std::fmt::Debug for RabbitHash {
    // The digest stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitHash")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl RabbitHash {
    /// `password_hash` as RabbitMQ's API and definitions carry it (base64), with its
    /// `hashing_algorithm`; RabbitMQ's default, SHA-256, when that is absent.
    pub fn from_management(
        password_hash: &str,
        algorithm: Option<&str>,
    ) -> Result<RabbitHash, CredentialsError> {
        let algorithm = match algorithm {
            None => RabbitAlgorithm::Sha256,
            Some(name) => RabbitAlgorithm::from_management(name)?,
        };
        Self::decode(algorithm, password_hash)
    }

    fn decode(algorithm: RabbitAlgorithm, text: &str) -> Result<RabbitHash, CredentialsError> {
        let salted_digest = B64.decode(text).map_err(|_| CredentialsError::Format)?;
        if salted_digest.len() != SALT_LEN + algorithm.digest_len() {
            return Err(CredentialsError::Format);
        }
        Ok(RabbitHash {
            algorithm,
            salted_digest,
        })
    }

    /// A hash of `password` with `salt`, as RabbitMQ would make it (for tests and tools).
    pub fn derive(algorithm: RabbitAlgorithm, salt: [u8; SALT_LEN], password: &str) -> RabbitHash {
        let mut salted_digest = salt.to_vec();
        salted_digest.extend_from_slice(&algorithm.hash(&salt, password));
        RabbitHash {
            algorithm,
            salted_digest,
        }
    }

    pub fn algorithm(&self) -> RabbitAlgorithm {
        self.algorithm
    }

    /// `password_hash` as RabbitMQ's API shows it.
    pub fn management_form(&self) -> String {
        B64.encode(&self.salted_digest)
    }

    /// Whether `password` is this hash's password. RabbitMQ hashes the password as given
    /// (no SASLprep), so the same bytes must come.
    pub fn verify_password(&self, password: &str) -> bool {
        let (salt, digest) = self.salted_digest.split_at(SALT_LEN);
        bool::from(self.algorithm.hash(salt, password).ct_eq(digest))
    }

    /// The bytes that tell this record from others (salt and digest).
    pub(crate) fn fingerprint(&self) -> &[u8] {
        &self.salted_digest
    }

    /// The record as stored in the users file.
    pub fn encode(&self) -> String {
        format!("{}{}", self.algorithm.prefix(), self.management_form())
    }

    /// A users file record of this kind; `None` if `text` is of another kind.
    pub fn parse(text: &str) -> Option<Result<RabbitHash, CredentialsError>> {
        [RabbitAlgorithm::Sha256, RabbitAlgorithm::Sha512]
            .into_iter()
            .find_map(|a| text.strip_prefix(a.prefix()).map(|rest| (a, rest)))
            .map(|(algorithm, rest)| Self::decode(algorithm, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rabbitmqs_documented_example_verifies() {
        // RabbitMQ's passwords guide: salt 908DC60A, password "test12", SHA-256.
        let h = RabbitHash::from_management(
            "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR",
            Some("rabbit_password_hashing_sha256"),
        )
        .unwrap();
        assert_eq!(
            h,
            RabbitHash::derive(RabbitAlgorithm::Sha256, [0x90, 0x8d, 0xc6, 0x0a], "test12")
        );
        assert!(h.verify_password("test12"));
        assert!(!h.verify_password("test1"));
        assert!(!h.verify_password("test12 "));
    }

    #[test]
    fn records_round_trip_in_both_forms() {
        for algorithm in [RabbitAlgorithm::Sha256, RabbitAlgorithm::Sha512] {
            let h = RabbitHash::derive(algorithm, [1, 2, 3, 4], "s3cret");
            assert!(h.verify_password("s3cret"));
            assert!(!h.verify_password("s3cre"));
            assert_eq!(RabbitHash::parse(&h.encode()), Some(Ok(h.clone())));
            let again = RabbitHash::from_management(
                &h.management_form(),
                Some(algorithm.management_name()),
            );
            assert_eq!(again, Ok(h));
        }
        let default = RabbitHash::derive(RabbitAlgorithm::Sha256, [9; 4], "pw");
        assert_eq!(
            RabbitHash::from_management(&default.management_form(), None),
            Ok(default)
        );
    }

    #[test]
    fn wrong_lengths_algorithms_and_md5_are_refused() {
        let sha512 = RabbitHash::derive(RabbitAlgorithm::Sha512, [1; 4], "pw").management_form();
        // A SHA-512 hash named as SHA-256 has the wrong length.
        assert!(RabbitHash::from_management(&sha512, None).is_err());
        assert!(RabbitHash::from_management("", None).is_err());
        assert!(RabbitHash::from_management("not base64!", None).is_err());
        assert!(RabbitHash::from_management(&B64.encode([0u8; 20]), None).is_err());
        for algorithm in ["rabbit_password_hashing_md5", "bcrypt", ""] {
            assert!(matches!(
                RabbitHash::from_management(&sha512, Some(algorithm)),
                Err(CredentialsError::Unsupported(_))
            ));
        }
        assert_eq!(
            RabbitHash::parse("SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA"),
            None
        );
        assert_eq!(
            RabbitHash::parse("RABBIT-SHA-256$AAAA"),
            Some(Err(CredentialsError::Format))
        );
    }

    #[test]
    fn debug_hides_the_digest() {
        let h = RabbitHash::derive(RabbitAlgorithm::Sha256, [1; 4], "pw");
        assert!(!format!("{h:?}").contains("salted_digest"));
    }
}
