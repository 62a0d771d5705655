#![no_main]
// A client's side of a SASL exchange, made of arbitrary bytes: the first byte picks the
// mechanism (and whether a TLS identity is present), the rest is split into responses at
// 0xFF bytes. Every step must end in a challenge, a success or a refusal, never a panic;
// PLAIN may succeed only with the real password (alice's SCRAM record, or peter's RabbitMQ
// hash). The same bytes also go through the users file's and management's record parsers.
use std::sync::OnceLock;

use ferry_auth::{
    Authenticator, Credentials, Mechanism, Mode, RabbitAlgorithm, RabbitHash, Record, Step, Users,
    MIN_ITERATIONS,
};

fn authenticator() -> &'static Authenticator {
    static AUTH: OnceLock<Authenticator> = OnceLock::new();
    AUTH.get_or_init(|| {
        let mut users = Users::default();
        let alice = Credentials::derive("wonderland", b"fuzz-salt", MIN_ITERATIONS);
        users.insert("alice", alice).expect("valid name");
        let peter = RabbitHash::derive(RabbitAlgorithm::Sha256, *b"fuzz", "hutch");
        users.insert("peter", peter).expect("valid name");
        Authenticator::new(Mode::Verify, users, true)
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Users::parse(text);
        let _ = Record::parse(text);
        let (hash, algorithm) = text.split_once('\n').unwrap_or((text, ""));
        let _ = Record::from_management(hash, Some(algorithm).filter(|a| !a.is_empty()));
    }
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let auth = authenticator();
    let mechanism = Mechanism::ALL[usize::from(selector) % Mechanism::ALL.len()];
    let identity = (selector & 0x80 != 0).then_some("client-cn");
    let Ok(mut exchange) = auth.start(mechanism, identity) else {
        return;
    };
    for response in rest.split(|b| *b == 0xFF).take(4) {
        match exchange.step(auth, response) {
            Step::Challenge(c) => assert!(!c.is_empty()),
            Step::Success(user) => {
                if matches!(mechanism, Mechanism::Plain | Mechanism::AmqPlain) {
                    let expected: &[u8] = match user.as_str() {
                        "alice" => b"\0alice\0wonderland",
                        "peter" => b"\0peter\0hutch",
                        other => panic!("PLAIN admitted {other:?}"),
                    };
                    assert!(response.ends_with(expected));
                } else if mechanism == Mechanism::ScramSha256 {
                    assert_eq!(user, "alice", "SCRAM admitted a user without keys");
                }
                break;
            }
            Step::Failure(_) => break,
        }
    }
});
