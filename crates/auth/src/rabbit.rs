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

/// RabbitMQ's MD5 hashes (before 3.6): 4 octets of salt and 16 of digest.
const MD5_LEN: usize = SALT_LEN + 16;
const MD5_NAME: &str = "rabbit_password_hashing_md5";

fn md5_refused() -> CredentialsError {
    CredentialsError::Unsupported("RabbitMQ's MD5 password hashes are too weak to keep".into())
}

impl RabbitAlgorithm {
    /// The algorithm `hashing_algorithm` names; MD5 is refused, not kept.
    fn from_management(name: &str) -> Result<RabbitAlgorithm, CredentialsError> {
        [RabbitAlgorithm::Sha256, RabbitAlgorithm::Sha512]
            .into_iter()
            .find(|a| a.management_name() == name)
            .ok_or_else(|| match name {
                MD5_NAME => md5_refused(),
                _ => CredentialsError::Unsupported(format!("unknown hashing_algorithm {name:?}")),
            })
    }

    /// The algorithm a hash of `len` octets (salt included) was made with: rabbitmqadmin
    /// sends no `hashing_algorithm`, whichever it hashed with, and the lengths differ.
    fn of_length(len: usize) -> Result<RabbitAlgorithm, CredentialsError> {
        [RabbitAlgorithm::Sha256, RabbitAlgorithm::Sha512]
            .into_iter()
            .find(|a| SALT_LEN + a.digest_len() == len)
            .ok_or_else(|| match len {
                MD5_LEN => md5_refused(),
                _ => CredentialsError::Format,
            })
    }

    /// The digest's name, for people ("SHA-256").
    pub fn label(self) -> &'static str {
        match self {
            RabbitAlgorithm::Sha256 => "SHA-256",
            RabbitAlgorithm::Sha512 => "SHA-512",
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
        fn salted<D: Digest>(salt: &[u8], password: &str) -> Vec<u8> {
            D::new()
                .chain_update(salt)
                .chain_update(password)
                .finalize()
                .to_vec()
        }
        match self {
            RabbitAlgorithm::Sha256 => salted::<Sha256>(salt, password),
            RabbitAlgorithm::Sha512 => salted::<Sha512>(salt, password),
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
    /// `hashing_algorithm` when one came (its length tells otherwise).
    pub fn from_management(
        password_hash: &str,
        algorithm: Option<&str>,
    ) -> Result<RabbitHash, CredentialsError> {
        let salted_digest = B64
            .decode(password_hash)
            .map_err(|_| CredentialsError::Format)?;
        let algorithm = match algorithm {
            Some(name) => RabbitAlgorithm::from_management(name)?,
            None => RabbitAlgorithm::of_length(salted_digest.len())?,
        };
        Self::checked(algorithm, salted_digest)
    }

    fn checked(
        algorithm: RabbitAlgorithm,
        salted_digest: Vec<u8>,
    ) -> Result<RabbitHash, CredentialsError> {
        let wanted = SALT_LEN + algorithm.digest_len();
        if salted_digest.len() != wanted {
            return Err(CredentialsError::Unsupported(format!(
                "a {} hash has {wanted} octets (salt included), not {}",
                algorithm.management_name(),
                salted_digest.len()
            )));
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
            .map(|(algorithm, rest)| {
                let salted_digest = B64.decode(rest).map_err(|_| CredentialsError::Format)?;
                Self::checked(algorithm, salted_digest)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RabbitMQ's passwords guide: salt 908DC60A, password "test12", SHA-256.
    const GUIDE_SHA256: &str = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR";
    /// The same salt and password with SHA-512, computed with Python's hashlib.
    const GUIDE_SHA512: &str = "kI3GChuNuIYf8lRbCCxZjgjKwsY19ns6+uFO0zcXRBGA/XGJPYD8OWMy7EB8TaOmAzjP2azv84GbINYwX2cDWb4DHnc=";
    const GUIDE_SALT: [u8; 4] = [0x90, 0x8d, 0xc6, 0x0a];

    #[test]
    fn known_hashes_verify_with_or_without_their_algorithm_named() {
        for (hash, algorithm) in [
            (GUIDE_SHA256, RabbitAlgorithm::Sha256),
            (GUIDE_SHA512, RabbitAlgorithm::Sha512),
        ] {
            let named = RabbitHash::from_management(hash, Some(algorithm.management_name()));
            // rabbitmqadmin names none: the length tells.
            let unnamed = RabbitHash::from_management(hash, None);
            assert_eq!(named, unnamed);
            let h = named.unwrap();
            assert_eq!(h, RabbitHash::derive(algorithm, GUIDE_SALT, "test12"));
            assert!(h.verify_password("test12"));
            assert!(!h.verify_password("test1"));
            assert!(!h.verify_password("test12 "));
            assert_eq!(h.management_form(), hash);
        }
    }

    #[test]
    fn records_round_trip_in_both_forms() {
        for algorithm in [RabbitAlgorithm::Sha256, RabbitAlgorithm::Sha512] {
            let h = RabbitHash::derive(algorithm, [1, 2, 3, 4], "s3cret");
            assert!(h.verify_password("s3cret"));
            assert!(!h.verify_password("s3cre"));
            assert_eq!(RabbitHash::parse(&h.encode()), Some(Ok(h.clone())));
        }
    }

    #[test]
    fn wrong_lengths_algorithms_and_md5_are_refused() {
        let unsupported = |r: Result<RabbitHash, CredentialsError>, what: &str| match r {
            Err(CredentialsError::Unsupported(text)) => assert!(text.contains(what), "{text}"),
            other => panic!("{other:?}"),
        };
        // A SHA-512 hash named as SHA-256.
        unsupported(
            RabbitHash::from_management(GUIDE_SHA512, Some("rabbit_password_hashing_sha256")),
            "68",
        );
        // RabbitMQ's MD5 example from its mailing list (salt CAD5089B, "simon"): refused
        // by name and by length.
        let md5 = "ytUIm8s3AnKsXQjptplKFytfVxI=";
        unsupported(
            RabbitHash::from_management(md5, Some("rabbit_password_hashing_md5")),
            "MD5",
        );
        unsupported(RabbitHash::from_management(md5, None), "MD5");
        unsupported(
            RabbitHash::from_management(GUIDE_SHA256, Some("bcrypt")),
            "\"bcrypt\"",
        );
        for bad in ["", "not base64!", "AAAA"] {
            assert_eq!(
                RabbitHash::from_management(bad, None),
                Err(CredentialsError::Format),
                "{bad:?}"
            );
        }
        assert_eq!(
            RabbitHash::parse("SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA"),
            None
        );
        assert!(matches!(
            RabbitHash::parse("RABBIT-SHA-256$AAAA"),
            Some(Err(_))
        ));
        assert!(matches!(
            RabbitHash::parse("RABBIT-SHA-512$!"),
            Some(Err(_))
        ));
    }

    #[test]
    fn debug_hides_the_digest() {
        let h = RabbitHash::derive(RabbitAlgorithm::Sha256, [1; 4], "pw");
        let shown = format!("{h:?}");
        assert!(!shown.contains(&h.management_form()[..8]), "{shown}");
        assert!(shown.contains("Sha256"), "{shown}");
    }
}
