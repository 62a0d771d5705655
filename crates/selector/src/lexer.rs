//! Splits selector text into tokens, each with the byte range it came from.
//!
//! The whole text is tokenized before parsing: it is at most `MAX_LEN` bytes, and having every
//! token up front lets the parser look past `NOT` to tell `NOT LIKE` from a misplaced `NOT`.

use crate::SelectorError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    Null,
    True,
    False,
    Not,
    And,
    Or,
    Between,
    Like,
    In,
    Is,
    Escape,
}

const KEYWORDS: [(&str, Keyword); 11] = [
    ("NULL", Keyword::Null),
    ("TRUE", Keyword::True),
    ("FALSE", Keyword::False),
    ("NOT", Keyword::Not),
    ("AND", Keyword::And),
    ("OR", Keyword::Or),
    ("BETWEEN", Keyword::Between),
    ("LIKE", Keyword::Like),
    ("IN", Keyword::In),
    ("IS", Keyword::Is),
    ("ESCAPE", Keyword::Escape),
];

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Str(String),
    /// The magnitude of an integer literal. Kept unsigned so `-9223372036854775808` can be
    /// written: the lexer allows up to 2^63 and the parser accepts that only after a minus.
    Int(u64),
    Float(f64),
    Kw(Keyword),
    LParen,
    RParen,
    Comma,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub kind: Tok,
    pub start: usize,
    pub end: usize,
}

/// 2^63: the largest magnitude an integer literal may have (only as `-2^63`).
pub(crate) const MAX_MAGNITUDE: u64 = 1 << 63;

/// Tokenizes `text`; the last token is always `Eof` at `text.len()`.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>, SelectorError> {
    let mut lexer = Lexer { text, pos: 0 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let eof = token.kind == Tok::Eof;
        tokens.push(token);
        if eof {
            return Ok(tokens);
        }
    }
}

struct Lexer<'t> {
    text: &'t str,
    pos: usize,
}

// Java's white space (JLS 3.6), which is what JMS refers to.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

// Java identifier rules, approximated with Unicode letters and digits.
fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_' || c == '$'
}

/// Dots too, as ActiveMQ, Broker-J and qpidd accept (`amqp.priority`, `order.total`).
fn is_ident_part(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$' || c == '.'
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.peek_at(0)
    }

    /// The character `n` characters ahead.
    fn peek_at(&self, n: usize) -> Option<char> {
        self.text.get(self.pos..)?.chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn eat(&mut self, pred: impl Fn(char) -> bool) -> bool {
        match self.peek() {
            Some(c) if pred(c) => {
                self.pos += c.len_utf8();
                true
            }
            _ => false,
        }
    }

    fn slice(&self, start: usize) -> &str {
        self.text.get(start..self.pos).unwrap_or_default()
    }

    fn next_token(&mut self) -> Result<Token, SelectorError> {
        while self.eat(is_space) {}
        let start = self.pos;
        let Some(c) = self.peek() else {
            return Ok(Token {
                kind: Tok::Eof,
                start,
                end: start,
            });
        };
        let kind = match c {
            '\'' => Tok::Str(self.quoted('\'', start)?),
            '"' => {
                let name = self.quoted('"', start)?;
                if name.is_empty() {
                    return Err(SelectorError::EmptyIdentifier { offset: start });
                }
                Tok::Ident(name)
            }
            '0'..='9' => self.number(start)?,
            '.' if self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) => self.number(start)?,
            c if is_ident_start(c) => {
                while self.eat(is_ident_part) {}
                let word = self.slice(start);
                match KEYWORDS.iter().find(|(k, _)| k.eq_ignore_ascii_case(word)) {
                    Some((_, keyword)) => Tok::Kw(*keyword),
                    None => Tok::Ident(word.to_owned()),
                }
            }
            _ => {
                self.bump();
                match c {
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    ',' => Tok::Comma,
                    '+' => Tok::Plus,
                    '-' => Tok::Minus,
                    '*' => Tok::Star,
                    '/' => Tok::Slash,
                    '=' => Tok::Eq,
                    '<' if self.eat(|c| c == '>') => Tok::Ne,
                    '<' if self.eat(|c| c == '=') => Tok::Le,
                    '<' => Tok::Lt,
                    '>' if self.eat(|c| c == '=') => Tok::Ge,
                    '>' => Tok::Gt,
                    found => {
                        return Err(SelectorError::UnexpectedChar {
                            offset: start,
                            found,
                        })
                    }
                }
            }
        };
        Ok(Token {
            kind,
            start,
            end: self.pos,
        })
    }

    /// A string literal or quoted identifier; a doubled quote stands for one quote.
    fn quoted(&mut self, quote: char, start: usize) -> Result<String, SelectorError> {
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                Some(c) if c == quote => {
                    if !self.eat(|c| c == quote) {
                        return Ok(out);
                    }
                    out.push(quote);
                }
                Some(c) => out.push(c),
                None if quote == '\'' => {
                    return Err(SelectorError::UnterminatedString { offset: start })
                }
                None => return Err(SelectorError::UnterminatedIdentifier { offset: start }),
            }
        }
    }

    /// Numeric literals as Java writes them (and ActiveMQ/Qpid Broker-J accept in selectors):
    /// decimal, `0x` hex and leading-zero octal integers with an optional `L`; approximate
    /// numbers with a point and/or exponent, or an `F`/`D` suffix.
    fn number(&mut self, start: usize) -> Result<Tok, SelectorError> {
        let bad = |lexer: &mut Self, reason| {
            // Take the rest of the malformed word so the message shows all of it.
            while lexer.eat(|c| is_ident_part(c) || c == '.') {}
            Err(SelectorError::BadNumber {
                offset: start,
                text: lexer.slice(start).to_owned(),
                reason,
            })
        };
        if self.peek() == Some('0') && matches!(self.peek_at(1), Some('x' | 'X')) {
            self.pos += 2;
            let digits_start = self.pos;
            while self.eat(|c| c.is_ascii_hexdigit()) {}
            let digits = self.slice(digits_start).to_owned();
            self.eat(|c| c == 'l' || c == 'L');
            if digits.is_empty() {
                return bad(self, "0x must be followed by hexadecimal digits");
            }
            if self.peek().is_some_and(|c| is_ident_part(c) || c == '.') {
                return bad(self, "unexpected character after a hexadecimal literal");
            }
            return self.integer(start, &digits, 16);
        }

        let int_start = self.pos;
        while self.eat(|c| c.is_ascii_digit()) {}
        let int_part = self.slice(int_start).to_owned();
        let mut float = false;
        let mut frac_part = String::new();
        if self.eat(|c| c == '.') {
            float = true;
            let frac_start = self.pos;
            while self.eat(|c| c.is_ascii_digit()) {}
            frac_part = self.slice(frac_start).to_owned();
        }
        let mut exponent = String::new();
        if matches!(self.peek(), Some('e' | 'E')) {
            let signed = matches!(self.peek_at(1), Some('+' | '-'));
            let digit_at = if signed { 2 } else { 1 };
            if !self.peek_at(digit_at).is_some_and(|c| c.is_ascii_digit()) {
                return bad(self, "an exponent needs digits (e.g. 7E3 or 7E-3)");
            }
            float = true;
            self.bump();
            let exp_start = self.pos;
            self.eat(|c| c == '+' || c == '-');
            while self.eat(|c| c.is_ascii_digit()) {}
            exponent = self.slice(exp_start).to_owned();
        }
        let mut long = false;
        if self.eat(|c| matches!(c, 'f' | 'F' | 'd' | 'D')) {
            float = true;
        } else if !float && self.eat(|c| c == 'l' || c == 'L') {
            long = true;
        }
        if self.peek().is_some_and(|c| is_ident_part(c) || c == '.') {
            return bad(
                self,
                if long || float {
                    "unexpected character after a numeric literal"
                } else {
                    "numbers must be separated from names by a space or operator"
                },
            );
        }

        if float {
            // Normalized so the parse never depends on which partial forms (`7.`, `.5`)
            // the float parser happens to accept.
            let int_part = if int_part.is_empty() { "0" } else { &int_part };
            let frac_part = if frac_part.is_empty() {
                "0"
            } else {
                &frac_part
            };
            let normal = format!("{int_part}.{frac_part}e{}", exponent_or_zero(&exponent));
            return match normal.parse::<f64>() {
                Ok(f) => Ok(Tok::Float(f)),
                Err(_) => bad(self, "not a valid approximate number"),
            };
        }
        if int_part.len() > 1 && int_part.starts_with('0') {
            if int_part.bytes().any(|b| b > b'7') {
                return bad(
                    self,
                    "a leading 0 makes an octal literal, which cannot contain 8 or 9",
                );
            }
            return self.integer(start, &int_part, 8);
        }
        self.integer(start, &int_part, 10)
    }

    fn integer(&self, start: usize, digits: &str, radix: u32) -> Result<Tok, SelectorError> {
        let out_of_range = || SelectorError::IntegerOutOfRange {
            offset: start,
            text: self.slice(start).to_owned(),
        };
        let mut value: u64 = 0;
        for c in digits.chars() {
            let digit = c.to_digit(radix).ok_or_else(out_of_range)?;
            value = value
                .checked_mul(u64::from(radix))
                .and_then(|v| v.checked_add(u64::from(digit)))
                .filter(|v| *v <= MAX_MAGNITUDE)
                .ok_or_else(out_of_range)?;
        }
        Ok(Tok::Int(value))
    }
}

fn exponent_or_zero(exponent: &str) -> &str {
    if exponent.is_empty() {
        "0"
    } else {
        exponent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Tok> {
        tokenize(text)
            .expect("tokenizes")
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    fn one(text: &str) -> Tok {
        let mut toks = kinds(text);
        assert_eq!(toks.len(), 2, "{text:?} gave {toks:?}");
        toks.swap_remove(0)
    }

    fn err(text: &str) -> SelectorError {
        tokenize(text).expect_err(text)
    }

    #[test]
    fn operators_and_spans() {
        let toks = tokenize("a<>b <= >= < > = ( ) , + - * /").expect("tokenizes");
        let kinds: Vec<_> = toks.iter().map(|t| t.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::Ident("a".into()),
                Tok::Ne,
                Tok::Ident("b".into()),
                Tok::Le,
                Tok::Ge,
                Tok::Lt,
                Tok::Gt,
                Tok::Eq,
                Tok::LParen,
                Tok::RParen,
                Tok::Comma,
                Tok::Plus,
                Tok::Minus,
                Tok::Star,
                Tok::Slash,
                Tok::Eof,
            ]
        );
        assert_eq!((toks[1].start, toks[1].end), (1, 3));
        assert_eq!((toks[3].start, toks[3].end), (5, 7));
        let eof = toks.last().expect("eof");
        assert_eq!((eof.start, eof.end), (30, 30));
    }

    #[test]
    fn whitespace_is_javas() {
        assert_eq!(
            kinds(" \t\r\n\x0ca"),
            vec![Tok::Ident("a".into()), Tok::Eof]
        );
        assert_eq!(
            err("a\u{a0}b"),
            SelectorError::UnexpectedChar {
                offset: 1,
                found: '\u{a0}'
            }
        );
    }

    #[test]
    fn keywords_any_case() {
        for word in ["and", "AND", "And", "aNd"] {
            assert_eq!(one(word), Tok::Kw(Keyword::And));
        }
        assert_eq!(one("escape"), Tok::Kw(Keyword::Escape));
        assert_eq!(one("Null"), Tok::Kw(Keyword::Null));
        // Only whole words: these are identifiers.
        assert_eq!(one("ANDY"), Tok::Ident("ANDY".into()));
        assert_eq!(one("is_"), Tok::Ident("is_".into()));
    }

    #[test]
    fn identifiers() {
        assert_eq!(one("_a$1"), Tok::Ident("_a$1".into()));
        assert_eq!(one("$x"), Tok::Ident("$x".into()));
        assert_eq!(one("JMSType"), Tok::Ident("JMSType".into()));
        assert_eq!(one("größe"), Tok::Ident("größe".into()));
        // Dots after the first character, as ActiveMQ, Broker-J and qpidd accept.
        assert_eq!(one("amqp.priority"), Tok::Ident("amqp.priority".into()));
        assert_eq!(one("order.total.2"), Tok::Ident("order.total.2".into()));
        assert_eq!(one("\"my-prop\""), Tok::Ident("my-prop".into()));
        assert_eq!(one("\"a\"\"b\""), Tok::Ident("a\"b".into()));
        // A quoted name is never a keyword.
        assert_eq!(one("\"AND\""), Tok::Ident("AND".into()));
        assert_eq!(err("\"\""), SelectorError::EmptyIdentifier { offset: 0 });
        assert_eq!(
            err("x = \"abc"),
            SelectorError::UnterminatedIdentifier { offset: 4 }
        );
        assert_eq!(
            err("a # b"),
            SelectorError::UnexpectedChar {
                offset: 2,
                found: '#'
            }
        );
    }

    #[test]
    fn strings() {
        assert_eq!(one("'abc'"), Tok::Str("abc".into()));
        assert_eq!(one("''"), Tok::Str(String::new()));
        assert_eq!(one("'it''s'"), Tok::Str("it's".into()));
        assert_eq!(one("''''"), Tok::Str("'".into()));
        assert_eq!(one("'a\"b'"), Tok::Str("a\"b".into()));
        assert_eq!(one("'é\n'"), Tok::Str("é\n".into()));
        assert_eq!(
            err("a = 'abc"),
            SelectorError::UnterminatedString { offset: 4 }
        );
        assert_eq!(
            err("'it''"),
            SelectorError::UnterminatedString { offset: 0 }
        );
    }

    #[test]
    fn integers() {
        assert_eq!(one("0"), Tok::Int(0));
        assert_eq!(one("42"), Tok::Int(42));
        assert_eq!(one("42L"), Tok::Int(42));
        assert_eq!(one("42l"), Tok::Int(42));
        assert_eq!(one("0x1F"), Tok::Int(31));
        assert_eq!(one("0XffL"), Tok::Int(255));
        assert_eq!(one("017"), Tok::Int(15));
        assert_eq!(one("00"), Tok::Int(0));
        assert_eq!(one("9223372036854775807"), Tok::Int(i64::MAX as u64));
        assert_eq!(one("9223372036854775808"), Tok::Int(MAX_MAGNITUDE));
        assert_eq!(one("0x7FFFFFFFFFFFFFFF"), Tok::Int(i64::MAX as u64));
        assert_eq!(one("01000000000000000000000"), Tok::Int(MAX_MAGNITUDE));
    }

    #[test]
    fn integers_out_of_range() {
        for text in [
            "9223372036854775809",
            "99999999999999999999999",
            "0x8000000000000001",
            "0xFFFFFFFFFFFFFFFFFF",
            "01000000000000000000001",
        ] {
            assert_eq!(
                err(text),
                SelectorError::IntegerOutOfRange {
                    offset: 0,
                    text: text.into()
                }
            );
        }
        assert!(matches!(
            err("x > 18446744073709551616"),
            SelectorError::IntegerOutOfRange { offset: 4, .. }
        ));
    }

    #[test]
    fn floats() {
        assert_eq!(one("7E3"), Tok::Float(7000.0));
        assert_eq!(one("7e3"), Tok::Float(7000.0));
        assert_eq!(one("57.9E2"), Tok::Float(5790.0));
        assert_eq!(one("7."), Tok::Float(7.0));
        assert_eq!(one(".5"), Tok::Float(0.5));
        assert_eq!(one("1.5"), Tok::Float(1.5));
        assert_eq!(one("1.5F"), Tok::Float(1.5));
        assert_eq!(one("1.5d"), Tok::Float(1.5));
        assert_eq!(one("7F"), Tok::Float(7.0));
        assert_eq!(one("5.E2"), Tok::Float(500.0));
        assert_eq!(one("1E-2"), Tok::Float(0.01));
        assert_eq!(one("1e+2"), Tok::Float(100.0));
        // Leading zeros in approximate numbers are decimal, as in Java.
        assert_eq!(one("09.5"), Tok::Float(9.5));
        assert_eq!(one("010e1"), Tok::Float(100.0));
        assert_eq!(one("1E999"), Tok::Float(f64::INFINITY));
        assert_eq!(one("99999999999999999999.0"), Tok::Float(1e20));
    }

    #[test]
    fn bad_numbers() {
        for (text, at, bad) in [
            ("12abc", 0, "12abc"),
            ("x = 1.5L", 4, "1.5L"),
            ("1.2.3", 0, "1.2.3"),
            ("0x", 0, "0x"),
            ("0xG1", 0, "0xG1"),
            ("1e", 0, "1e"),
            ("a > 1E+ 2", 4, "1E"),
            ("1ex", 0, "1ex"),
            ("089", 0, "089"),
            ("1LL", 0, "1LL"),
            ("0x1F.5", 0, "0x1F.5"),
        ] {
            match err(text) {
                SelectorError::BadNumber {
                    offset, text: t, ..
                } => {
                    assert_eq!(t, bad, "{text}");
                    assert_eq!(offset, at, "{text}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        // A lone point is not a number.
        assert_eq!(
            err("a . b"),
            SelectorError::UnexpectedChar {
                offset: 2,
                found: '.'
            }
        );
    }

    #[test]
    fn numbers_next_to_operators() {
        assert_eq!(
            kinds("1+2-3*.5/4"),
            vec![
                Tok::Int(1),
                Tok::Plus,
                Tok::Int(2),
                Tok::Minus,
                Tok::Int(3),
                Tok::Star,
                Tok::Float(0.5),
                Tok::Slash,
                Tok::Int(4),
                Tok::Eof,
            ]
        );
        assert_eq!(
            kinds("(1)"),
            vec![Tok::LParen, Tok::Int(1), Tok::RParen, Tok::Eof]
        );
    }
}
