//! Why a selector was refused. Every variant that points into the text carries a byte offset so
//! a client library can show the user where the problem is.

use crate::{MAX_DEPTH, MAX_LEN};

/// A selector the broker refuses to use.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SelectorError {
    #[error("selector is {len} bytes long; at most {MAX_LEN} are accepted")]
    TooLong { len: usize },
    #[error(
        "selector nests deeper than {MAX_DEPTH} levels at byte {offset} (each parenthesis, NOT \
         and unary sign adds a level); simplify the expression"
    )]
    TooDeep { offset: usize },
    #[error("unexpected character {found:?} at byte {offset}")]
    UnexpectedChar { offset: usize, found: char },
    #[error(
        "string literal starting at byte {offset} is not closed; end it with ' (write '' for a \
         quote inside it)"
    )]
    UnterminatedString { offset: usize },
    #[error(
        "quoted identifier starting at byte {offset} is not closed; end it with \" (write \"\" \
         for a quote inside it)"
    )]
    UnterminatedIdentifier { offset: usize },
    #[error("empty quoted identifier at byte {offset}")]
    EmptyIdentifier { offset: usize },
    #[error("bad number {text:?} at byte {offset}: {reason}")]
    BadNumber {
        offset: usize,
        text: String,
        reason: &'static str,
    },
    #[error(
        "integer {text:?} at byte {offset} does not fit in a 64-bit signed integer; write it \
         as a decimal with a fraction or exponent (e.g. 1.0E19) to compare approximately"
    )]
    IntegerOutOfRange { offset: usize, text: String },
    #[error("expected {expected} at byte {offset}, found {found}")]
    UnexpectedToken {
        offset: usize,
        expected: &'static str,
        found: String,
    },
    #[error("LIKE escape at byte {offset} must be exactly one character, not {found:?}")]
    BadEscape { offset: usize, found: String },
    #[error(
        "LIKE pattern at byte {offset} ends with its escape character {escape:?}; an escape \
         must be followed by the character it makes literal (_, % or the escape itself)"
    )]
    DanglingEscape { offset: usize, escape: char },
}
