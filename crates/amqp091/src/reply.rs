//! Reply codes from the spec's constants, for `connection.close` and
//! `channel.close`.

pub const REPLY_SUCCESS: u16 = 200;
pub const CONTENT_TOO_LARGE: u16 = 311;
pub const NO_CONSUMERS: u16 = 313;
pub const CONNECTION_FORCED: u16 = 320;
pub const INVALID_PATH: u16 = 402;
pub const ACCESS_REFUSED: u16 = 403;
pub const NOT_FOUND: u16 = 404;
pub const RESOURCE_LOCKED: u16 = 405;
pub const PRECONDITION_FAILED: u16 = 406;
pub const FRAME_ERROR: u16 = 501;
pub const SYNTAX_ERROR: u16 = 502;
pub const COMMAND_INVALID: u16 = 503;
pub const CHANNEL_ERROR: u16 = 504;
pub const UNEXPECTED_FRAME: u16 = 505;
pub const RESOURCE_ERROR: u16 = 506;
pub const NOT_ALLOWED: u16 = 530;
pub const NOT_IMPLEMENTED: u16 = 540;
pub const INTERNAL_ERROR: u16 = 541;

/// Hard errors close the connection; soft (3xx/4xx) ones only the channel.
pub fn is_hard_error(code: u16) -> bool {
    matches!(
        code,
        CONNECTION_FORCED | INVALID_PATH | 501..=506 | 530 | 540 | 541
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_and_soft() {
        assert!(is_hard_error(FRAME_ERROR));
        assert!(is_hard_error(INVALID_PATH));
        assert!(!is_hard_error(ACCESS_REFUSED));
        assert!(!is_hard_error(CONTENT_TOO_LARGE));
        assert!(!is_hard_error(REPLY_SUCCESS));
    }
}
