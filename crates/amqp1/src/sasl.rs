//! SASL frames (part 5 of the spec): after the `AMQP 3 1 0 0` header the
//! server offers mechanisms, the client picks one with an initial response,
//! challenges and responses go back and forth, and the server sends the
//! outcome. Then both sides start over with the AMQP header.

use bytes::Bytes;

use crate::definitions::restricted_number;
use crate::primitive::{Str, Symbol};

restricted_number! {
    /// `sasl-code` (ubyte): the result of authentication.
    SaslCode: u8, "sasl-code", default Ok {
        /// Authenticated.
        Ok = 0,
        /// Bad credentials.
        Auth = 1,
        /// A system error on the server, unspecified whether lasting.
        Sys = 2,
        /// A lasting system error.
        SysPerm = 3,
        /// A passing system error.
        SysTemp = 4,
    }
}

composites! {
    /// The server's list of mechanisms.
    SaslMechanisms 0x40 "amqp:sasl-mechanisms:list" {
        sasl_server_mechanisms: reqmulti Symbol,
    }

    /// The client's choice of mechanism, and its first response.
    SaslInit 0x41 "amqp:sasl-init:list" {
        mechanism: req Symbol,
        initial_response: opt Bytes,
        hostname: opt Str,
    }

    SaslChallenge 0x42 "amqp:sasl-challenge:list" {
        challenge: req Bytes,
    }

    SaslResponse 0x43 "amqp:sasl-response:list" {
        response: req Bytes,
    }

    SaslOutcome 0x44 "amqp:sasl-outcome:list" {
        code: req SaslCode,
        additional_data: opt Bytes,
    }
}

frame_body_enum! {
    /// The body of a SASL frame (frame type 0x01).
    SaslFrame "SASL frame" {
        SaslMechanisms, SaslInit, SaslChallenge, SaslResponse, SaslOutcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Gen;
    use bytes::BytesMut;

    #[test]
    fn every_sasl_frame_round_trips() {
        for seed in (0..50).chain([0x5555, u64::MAX]) {
            for s in SaslFrame::samples(&mut Gen::new(seed)) {
                let mut out = BytesMut::new();
                s.encode(&mut out);
                let mut buf = out.freeze();
                assert_eq!(SaslFrame::decode(&mut buf), Ok(s.clone()), "{}", s.name());
                assert!(buf.is_empty());
            }
        }
    }

    #[test]
    fn plain_init_by_hand() {
        let init = SaslFrame::SaslInit(SaslInit {
            mechanism: Symbol::from_static("PLAIN"),
            initial_response: Some(Bytes::from_static(b"\0u\0p")),
            hostname: None,
        });
        let mut out = BytesMut::new();
        init.encode(&mut out);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x53, 0x41,
            0xc0, 14, 2,
            0xa3, 5, b'P', b'L', b'A', b'I', b'N',
            0xa0, 4, 0, b'u', 0, b'p',
        ];
        assert_eq!(&out[..], expected);
    }

    #[test]
    fn mechanisms_are_mandatory_but_may_be_one_symbol() {
        let mut buf = Bytes::from_static(&[0x00, 0x53, 0x40, 0x45]);
        assert!(SaslFrame::decode(&mut buf).is_err());
        let mut buf = Bytes::from_static(&[
            0x00, 0x53, 0x40, 0xc0, 12, 1, 0xa3, 9, b'A', b'N', b'O', b'N', b'Y', b'M', b'O', b'U',
            b'S',
        ]);
        assert_eq!(
            SaslFrame::decode(&mut buf),
            Ok(SaslFrame::SaslMechanisms(SaslMechanisms {
                sasl_server_mechanisms: vec![Symbol::from_static("ANONYMOUS")]
            }))
        );
    }
}
