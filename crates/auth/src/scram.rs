//! SCRAM-SHA-256 (RFC 5802, RFC 7677), server side, without channel binding: the client's
//! gs2 flag must be `n` (or `y`: it could bind but we offer no `-PLUS` mechanism).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::credentials::Credentials;

type HmacSha256 = Hmac<Sha256>;

/// Longest client message we look at; real ones are well under 200 bytes.
const MAX_MESSAGE: usize = 1024;
const NONCE_LEN: usize = 24;

pub(crate) fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length; new_from_slice cannot fail for it.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `Hi(Normalize(password), salt, i)`: PBKDF2-HMAC-SHA256. Passwords are SASLprep'd when
/// they can be (as SCRAM clients do), taken as they are otherwise.
pub(crate) fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let normalized = stringprep::saslprep(password)
        .map(|p| p.into_owned())
        .unwrap_or_else(|_| password.to_owned());
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(normalized.as_bytes(), salt, iterations, &mut out);
    out
}

pub(crate) fn client_key(salted: &[u8; 32]) -> [u8; 32] {
    hmac(salted, b"Client Key")
}

pub(crate) fn server_key_of(salted: &[u8; 32]) -> [u8; 32] {
    hmac(salted, b"Server Key")
}

/// Why an exchange failed; for the server's log, never for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramError {
    Malformed,
    ChannelBindingRequired,
    Extension,
    NonceMismatch,
    BindingMismatch,
    BadProof,
    UnknownUser,
}

impl ScramError {
    pub fn text(self) -> &'static str {
        match self {
            ScramError::Malformed => "malformed SCRAM message",
            ScramError::ChannelBindingRequired => "client requires channel binding",
            ScramError::Extension => "unsupported SCRAM extension",
            ScramError::NonceMismatch => "SCRAM nonce mismatch",
            ScramError::BindingMismatch => "SCRAM channel-binding data mismatch",
            ScramError::BadProof => "wrong password",
            ScramError::UnknownUser => "unknown user",
        }
    }
}

/// The state between the server-first and client-final messages.
#[derive(Debug)]
pub struct ScramServer {
    user: String,
    /// `None` for an unknown user: the exchange runs on with made-up values and fails at the
    /// end, so the first round trip does not tell whether the user exists.
    credentials: Option<Credentials>,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

/// What the first client message names.
pub struct ClientFirst {
    pub user: String,
    gs2_header: String,
    bare: String,
    client_nonce: String,
}

pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, ScramError> {
    if message.len() > MAX_MESSAGE {
        return Err(ScramError::Malformed);
    }
    let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed)?;
    let mut parts = text.splitn(3, ',');
    let flag = parts.next().ok_or(ScramError::Malformed)?;
    let authzid_field = parts.next().ok_or(ScramError::Malformed)?;
    let bare = parts.next().ok_or(ScramError::Malformed)?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => return Err(ScramError::ChannelBindingRequired),
        _ => return Err(ScramError::Malformed),
    }
    let authzid = match authzid_field {
        "" => None,
        a => Some(decode_saslname(
            a.strip_prefix("a=").ok_or(ScramError::Malformed)?,
        )?),
    };
    let mut attrs = bare.split(',');
    let user = match attrs.next() {
        Some(a) if a.starts_with("m=") => return Err(ScramError::Extension),
        Some(a) => decode_saslname(a.strip_prefix("n=").ok_or(ScramError::Malformed)?)?,
        None => return Err(ScramError::Malformed),
    };
    let client_nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| is_printable(n) && !n.is_empty())
        .ok_or(ScramError::Malformed)?;
    if user.is_empty() || authzid.is_some_and(|a| a != user) {
        // Acting for another identity is not supported.
        return Err(ScramError::Malformed);
    }
    Ok(ClientFirst {
        gs2_header: format!("{flag},{authzid_field},"),
        bare: bare.to_owned(),
        client_nonce: client_nonce.to_owned(),
        user,
    })
}

impl ScramServer {
    /// Answers a client-first message with the server-first message. `credentials` is `None`
    /// for an unknown user; `fake` then supplies a stable salt and the usual count.
    pub fn start(
        first: ClientFirst,
        credentials: Option<Credentials>,
        fake: (Vec<u8>, u32),
    ) -> (ScramServer, String) {
        let mut random = [0u8; NONCE_LEN];
        // Without randomness there is no safe nonce; a failed read leaves zeros, and the
        // server nonce then still differs from every other by the client's part only, so
        // refuse instead.
        let nonce_ok = getrandom::fill(&mut random).is_ok();
        let server_nonce = if nonce_ok {
            B64.encode(random)
        } else {
            String::new()
        };
        Self::start_with_nonce(first, credentials, fake, &server_nonce)
    }

    pub(crate) fn start_with_nonce(
        first: ClientFirst,
        credentials: Option<Credentials>,
        fake: (Vec<u8>, u32),
        server_nonce: &str,
    ) -> (ScramServer, String) {
        let nonce = format!("{}{}", first.client_nonce, server_nonce);
        let (salt, iterations) = match &credentials {
            Some(c) => (c.salt.clone(), c.iterations),
            None => fake,
        };
        let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(salt));
        let server = ScramServer {
            user: first.user,
            credentials: credentials.filter(|_| !server_nonce.is_empty()),
            gs2_header: first.gs2_header,
            client_first_bare: first.bare,
            server_first: server_first.clone(),
            nonce,
        };
        (server, server_first)
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    /// Checks the client-final message; on success returns the server-final message.
    pub fn finish(&self, message: &[u8]) -> Result<String, ScramError> {
        if message.len() > MAX_MESSAGE {
            return Err(ScramError::Malformed);
        }
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed)?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(ScramError::Malformed)?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or(ScramError::Malformed)?;
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(ScramError::Malformed)?;
        let proof = B64.decode(proof).map_err(|_| ScramError::Malformed)?;
        if B64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(ScramError::BindingMismatch);
        }
        if nonce != self.nonce {
            return Err(ScramError::NonceMismatch);
        }
        let Some(credentials) = &self.credentials else {
            return Err(ScramError::UnknownUser);
        };
        let proof: [u8; 32] = proof.try_into().map_err(|_| ScramError::BadProof)?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let signature = hmac(&credentials.stored_key, auth_message.as_bytes());
        let mut client_key = [0u8; 32];
        for (k, (p, s)) in client_key.iter_mut().zip(proof.iter().zip(signature)) {
            *k = p ^ s;
        }
        let stored: [u8; 32] = Sha256::digest(client_key).into();
        if !bool::from(stored.ct_eq(&credentials.stored_key)) {
            return Err(ScramError::BadProof);
        }
        let server_signature = hmac(&credentials.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)))
    }
}

/// RFC 5802 saslname: `=2C` is `,` and `=3D` is `=`; any other `=` is an error.
fn decode_saslname(s: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i..i + 3).ok_or(ScramError::Malformed)?;
        out.push(match escape {
            "=2C" => ',',
            "=3D" => '=',
            _ => return Err(ScramError::Malformed),
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_printable(s: &str) -> bool {
    s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677 section 3.
    const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_credentials() -> Credentials {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        Credentials::derive("pencil", &salt, 4096)
    }

    fn rfc_server(credentials: Option<Credentials>) -> (ScramServer, String) {
        let first = parse_client_first(CLIENT_FIRST.as_bytes()).unwrap();
        assert_eq!(first.user, "user");
        ScramServer::start_with_nonce(first, credentials, (b"fake".to_vec(), 4096), SERVER_NONCE)
    }

    #[test]
    fn rfc7677_exchange() {
        let (server, server_first) = rfc_server(Some(rfc_credentials()));
        assert_eq!(server_first, SERVER_FIRST);
        assert_eq!(
            server.finish(CLIENT_FINAL.as_bytes()).unwrap(),
            SERVER_FINAL
        );
    }

    #[test]
    fn wrong_password_fails_the_proof() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let (server, _) = rfc_server(Some(Credentials::derive("pencil!", &salt, 4096)));
        assert_eq!(
            server.finish(CLIENT_FINAL.as_bytes()),
            Err(ScramError::BadProof)
        );
    }

    #[test]
    fn unknown_user_fails_only_at_the_end() {
        let (server, server_first) = rfc_server(None);
        assert!(server_first.starts_with("r=rOprNGfwEbeRWgbNEkqO%hvY"));
        assert!(server_first.ends_with(",i=4096"));
        assert_eq!(
            server.finish(CLIENT_FINAL.as_bytes()),
            Err(ScramError::UnknownUser)
        );
    }

    #[test]
    fn tampered_final_messages_fail() {
        let (server, _) = rfc_server(Some(rfc_credentials()));
        let other_nonce = CLIENT_FINAL.replace("$k0,", "$k1,");
        assert_eq!(
            server.finish(other_nonce.as_bytes()),
            Err(ScramError::NonceMismatch)
        );
        let other_binding = CLIENT_FINAL.replace("c=biws", "c=eSws");
        assert_eq!(
            server.finish(other_binding.as_bytes()),
            Err(ScramError::BindingMismatch)
        );
        for bad in ["", "c=biws", "p=", "c=biws,r=x,p=!!", "\u{0}"] {
            assert!(server.finish(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let short_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA";
        assert_eq!(
            server.finish(short_proof.as_bytes()),
            Err(ScramError::BadProof)
        );
    }

    #[test]
    fn client_first_forms() {
        let f = parse_client_first(b"y,,n=a=2Cb=3Dc,r=abc").unwrap();
        assert_eq!(f.user, "a,b=c");
        let f = parse_client_first(b"n,a=bob,n=bob,r=abc").unwrap();
        assert_eq!(f.gs2_header, "n,a=bob,");
        assert_eq!(
            parse_client_first(b"p=tls-unique,,n=u,r=abc").err(),
            Some(ScramError::ChannelBindingRequired)
        );
        assert_eq!(
            parse_client_first(b"n,,m=ext,n=u,r=abc").err(),
            Some(ScramError::Extension)
        );
        for bad in [
            &b""[..],
            b"n",
            b"n,,",
            b"x,,n=u,r=abc",
            b"n,,n=u",
            b"n,,n=u,r=",
            b"n,,n=,r=abc",
            b"n,,n=a=2,r=abc",
            b"n,a=eve,n=bob,r=abc",
            b"n,,r=abc,n=u",
            b"n,,n=u,r=a\xffc",
        ] {
            assert!(parse_client_first(bad).is_err(), "{bad:?}");
        }
        assert!(parse_client_first(&vec![b'a'; 2000]).is_err());
    }
}
