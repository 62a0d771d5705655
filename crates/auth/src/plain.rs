//! SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`.

/// The user and password of a PLAIN response, or `None` if it is malformed, not UTF-8, or
/// asks to act as another identity (not supported).
pub fn parse_plain(response: &[u8]) -> Option<(&str, &str)> {
    let mut parts = response.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let user = std::str::from_utf8(user).ok()?;
    let password = std::str::from_utf8(password).ok()?;
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return None;
    }
    Some((user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse_plain(b"\0bob\0pw"), Some(("bob", "pw")));
        assert_eq!(parse_plain(b"bob\0bob\0pw"), Some(("bob", "pw")));
        assert_eq!(parse_plain(b"\0bob\0"), Some(("bob", "")));
        assert_eq!(parse_plain(b"eve\0bob\0pw"), None);
        assert_eq!(parse_plain(b"bob\0pw"), None);
        assert_eq!(parse_plain(b"\0a\0b\0c"), None);
        assert_eq!(parse_plain(b"\0b\xffb\0pw"), None);
        assert_eq!(parse_plain(b""), None);
    }
}
