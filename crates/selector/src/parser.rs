//! Recursive-descent parser over the token list.
//!
//! Precedence, loosest first: OR, AND, NOT, then one predicate (comparison, BETWEEN, LIKE,
//! IN or IS NULL), binary `+ -`, `* /`, unary `+ -`. Predicates do not chain (`a = b = c` is
//! refused, as in SQL-92); parentheses make a predicate's truth value an operand.
//!
//! Recursion only happens through parentheses, NOT and unary signs, and each of those counts
//! one level against `MAX_DEPTH`, so neither the parser's stack nor the tree it builds can grow
//! past a fixed bound whatever the input.

use crate::ast::{ArithOp, CmpOp, Expr, Sign};
use crate::lexer::{tokenize, Keyword, Tok, Token, MAX_MAGNITUDE};
use crate::like::LikePattern;
use crate::{SelectorError, Value, MAX_DEPTH};

type Result<T> = std::result::Result<T, SelectorError>;

/// Parses a selector. Blank text is JMS's "no selector", which lets every message through.
pub(crate) fn parse(text: &str) -> Result<Expr> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        text,
        tokens,
        pos: 0,
        depth: 0,
    };
    if parser.peek() == &Tok::Eof {
        return Ok(Expr::Literal(Value::Bool(true)));
    }
    let expr = parser.parse_or()?;
    parser.expect_end(Tok::Eof, "AND, OR or the end of the selector")?;
    Ok(expr)
}

struct Parser<'t> {
    text: &'t str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

const EOF: Tok = Tok::Eof;

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        self.tokens.get(self.pos + n).map_or(&EOF, |t| &t.kind)
    }

    /// The offset of the next token (the end of the text once tokens run out).
    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map_or(self.text.len(), |t| t.start)
    }

    /// Takes the next token, leaving `Eof` in its place (it is never looked at again).
    fn advance(&mut self) -> Token {
        let end = self.text.len();
        match self.tokens.get_mut(self.pos) {
            Some(slot) => {
                self.pos += 1;
                std::mem::replace(
                    slot,
                    Token {
                        kind: Tok::Eof,
                        start: end,
                        end,
                    },
                )
            }
            None => Token {
                kind: Tok::Eof,
                start: end,
                end,
            },
        }
    }

    fn eat(&mut self, kind: &Tok) -> bool {
        if self.peek() == kind {
            self.advance();
            true
        } else {
            false
        }
    }

    fn unexpected(&self, expected: &'static str) -> SelectorError {
        let found = match self.tokens.get(self.pos) {
            None | Some(Token { kind: Tok::Eof, .. }) => "the end of the selector".to_owned(),
            Some(token) => {
                let text = self.text.get(token.start..token.end).unwrap_or_default();
                // Long string literals would swamp the message.
                let mut shown: String = text.chars().take(40).collect();
                if shown.len() < text.len() {
                    shown.push('…');
                }
                format!("{shown:?}")
            }
        };
        SelectorError::UnexpectedToken {
            offset: self.offset(),
            expected,
            found,
        }
    }

    fn expect(&mut self, kind: &Tok, expected: &'static str) -> Result<()> {
        if self.eat(kind) {
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn expect_end(&mut self, end: Tok, expected: &'static str) -> Result<()> {
        if self.eat(&end) {
            return Ok(());
        }
        let chained = matches!(
            self.peek(),
            Tok::Eq | Tok::Ne | Tok::Lt | Tok::Le | Tok::Gt | Tok::Ge
        ) || matches!(
            self.peek(),
            Tok::Kw(Keyword::Between | Keyword::Like | Keyword::In | Keyword::Is | Keyword::Not)
        );
        Err(self.unexpected(if chained {
            "AND or OR (comparisons do not chain: put one in parentheses)"
        } else {
            expected
        }))
    }

    fn enter(&mut self, offset: usize) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SelectorError::TooDeep { offset });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn parse_or(&mut self) -> Result<Expr> {
        let first = self.parse_and()?;
        if self.peek() != &Tok::Kw(Keyword::Or) {
            return Ok(first);
        }
        let mut terms = vec![first];
        while self.eat(&Tok::Kw(Keyword::Or)) {
            terms.push(self.parse_and()?);
        }
        Ok(Expr::Or(terms))
    }

    fn parse_and(&mut self) -> Result<Expr> {
        let first = self.parse_not()?;
        if self.peek() != &Tok::Kw(Keyword::And) {
            return Ok(first);
        }
        let mut terms = vec![first];
        while self.eat(&Tok::Kw(Keyword::And)) {
            terms.push(self.parse_not()?);
        }
        Ok(Expr::And(terms))
    }

    fn parse_not(&mut self) -> Result<Expr> {
        if self.peek() != &Tok::Kw(Keyword::Not) {
            return self.parse_predicate();
        }
        let at = self.advance().start;
        self.enter(at)?;
        let operand = self.parse_not()?;
        self.leave();
        Ok(Expr::Not(Box::new(operand)))
    }

    fn parse_predicate(&mut self) -> Result<Expr> {
        let operand = Box::new(self.parse_additive()?);
        let op = match self.peek() {
            Tok::Eq => CmpOp::Eq,
            Tok::Ne => CmpOp::Ne,
            Tok::Lt => CmpOp::Lt,
            Tok::Le => CmpOp::Le,
            Tok::Gt => CmpOp::Gt,
            Tok::Ge => CmpOp::Ge,
            Tok::Kw(Keyword::Is) => {
                self.advance();
                let negated = self.eat(&Tok::Kw(Keyword::Not));
                self.expect(&Tok::Kw(Keyword::Null), "NULL or NOT NULL after IS")?;
                return Ok(Expr::IsNull { negated, operand });
            }
            Tok::Kw(Keyword::Not) => {
                if !matches!(
                    self.peek_at(1),
                    Tok::Kw(Keyword::Between | Keyword::Like | Keyword::In)
                ) {
                    self.advance();
                    return Err(self.unexpected("BETWEEN, LIKE or IN after NOT"));
                }
                self.advance();
                return self.parse_negatable(true, operand);
            }
            Tok::Kw(Keyword::Between | Keyword::Like | Keyword::In) => {
                return self.parse_negatable(false, operand);
            }
            _ => return Ok(*operand),
        };
        self.advance();
        let right = self.parse_additive()?;
        Ok(Expr::Compare(op, operand, Box::new(right)))
    }

    /// BETWEEN, LIKE or IN, after any NOT.
    fn parse_negatable(&mut self, negated: bool, operand: Box<Expr>) -> Result<Expr> {
        match self.advance().kind {
            Tok::Kw(Keyword::Between) => {
                let low = Box::new(self.parse_additive()?);
                self.expect(&Tok::Kw(Keyword::And), "AND (BETWEEN low AND high)")?;
                let high = Box::new(self.parse_additive()?);
                Ok(Expr::Between {
                    negated,
                    operand,
                    low,
                    high,
                })
            }
            Tok::Kw(Keyword::Like) => {
                let pattern_at = self.offset();
                let pattern = self.string("a quoted pattern after LIKE")?;
                let escape = if self.eat(&Tok::Kw(Keyword::Escape)) {
                    let at = self.offset();
                    let text = self.string("a quoted character after ESCAPE")?;
                    let mut chars = text.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => Some(c),
                        _ => {
                            return Err(SelectorError::BadEscape {
                                offset: at,
                                found: text,
                            })
                        }
                    }
                } else {
                    None
                };
                let pattern = LikePattern::compile(&pattern, escape).map_err(|_| {
                    SelectorError::DanglingEscape {
                        offset: pattern_at,
                        escape: escape.unwrap_or_default(),
                    }
                })?;
                Ok(Expr::Like {
                    negated,
                    operand,
                    pattern,
                })
            }
            _ => {
                self.expect(&Tok::LParen, "'(' after IN")?;
                let mut list = vec![self.string("a quoted string in the IN list")?];
                while self.eat(&Tok::Comma) {
                    list.push(self.string("a quoted string in the IN list")?);
                }
                self.expect(&Tok::RParen, "',' or ')' in the IN list")?;
                list.sort_unstable();
                list.dedup();
                Ok(Expr::In {
                    negated,
                    operand,
                    list,
                })
            }
        }
    }

    fn string(&mut self, expected: &'static str) -> Result<String> {
        if !matches!(self.peek(), Tok::Str(_)) {
            return Err(self.unexpected(expected));
        }
        match self.advance().kind {
            Tok::Str(s) => Ok(s),
            _ => Err(self.unexpected(expected)),
        }
    }

    fn parse_additive(&mut self) -> Result<Expr> {
        self.parse_chain(Self::parse_multiplicative, |t| match t {
            Tok::Plus => Some(ArithOp::Add),
            Tok::Minus => Some(ArithOp::Sub),
            _ => None,
        })
    }

    fn parse_multiplicative(&mut self) -> Result<Expr> {
        self.parse_chain(Self::parse_unary, |t| match t {
            Tok::Star => Some(ArithOp::Mul),
            Tok::Slash => Some(ArithOp::Div),
            _ => None,
        })
    }

    fn parse_chain(
        &mut self,
        operand: fn(&mut Self) -> Result<Expr>,
        op: fn(&Tok) -> Option<ArithOp>,
    ) -> Result<Expr> {
        let first = operand(self)?;
        let mut rest = Vec::new();
        while let Some(op) = op(self.peek()) {
            self.advance();
            rest.push((op, operand(self)?));
        }
        if rest.is_empty() {
            Ok(first)
        } else {
            Ok(Expr::Arith(Box::new(first), rest))
        }
    }

    fn parse_unary(&mut self) -> Result<Expr> {
        let sign = match self.peek() {
            Tok::Plus => Sign::Plus,
            Tok::Minus => Sign::Minus,
            _ => return self.parse_primary(),
        };
        let at = self.advance().start;
        // A signed number is a literal, which is also the only way to write i64::MIN.
        match (sign, self.peek()) {
            (Sign::Minus, Tok::Int(magnitude)) => {
                let value = (*magnitude as i64).wrapping_neg();
                self.advance();
                return Ok(Expr::Literal(Value::Int(value)));
            }
            (Sign::Minus, Tok::Float(f)) => {
                let value = -*f;
                self.advance();
                return Ok(Expr::Literal(Value::Float(value)));
            }
            (Sign::Plus, Tok::Int(_) | Tok::Float(_)) => return self.parse_primary(),
            _ => {}
        }
        self.enter(at)?;
        let operand = self.parse_unary()?;
        self.leave();
        Ok(Expr::Unary(sign, Box::new(operand)))
    }

    fn parse_primary(&mut self) -> Result<Expr> {
        let value = match self.peek() {
            Tok::LParen => {
                let at = self.advance().start;
                self.enter(at)?;
                let inner = self.parse_or()?;
                self.expect_end(Tok::RParen, "AND, OR or ')'")?;
                self.leave();
                return Ok(inner);
            }
            Tok::Int(magnitude) => match i64::try_from(*magnitude) {
                Ok(v) => Value::Int(v),
                Err(_) => {
                    let token = self.advance();
                    return Err(SelectorError::IntegerOutOfRange {
                        offset: token.start,
                        text: self
                            .text
                            .get(token.start..token.end)
                            .unwrap_or_default()
                            .to_owned(),
                    });
                }
            },
            Tok::Float(f) => Value::Float(*f),
            Tok::Kw(Keyword::True) => Value::Bool(true),
            Tok::Kw(Keyword::False) => Value::Bool(false),
            // JMS only names NULL in IS NULL; like ActiveMQ and SQL we also take it as a value,
            // so `a = NULL` parses (and, as in SQL, is never true).
            Tok::Kw(Keyword::Null) => Value::Null,
            Tok::Str(_) | Tok::Ident(_) => {
                return Ok(match self.advance().kind {
                    Tok::Str(s) => Expr::Literal(Value::Str(s.into())),
                    Tok::Ident(name) => Expr::Ident(name),
                    _ => Expr::Literal(Value::Null),
                });
            }
            _ => return Err(self.unexpected("a name, a literal or '('")),
        };
        self.advance();
        Ok(Expr::Literal(value))
    }
}

// `parse_unary` negates a magnitude with `as i64` and `wrapping_neg`, which is exact only
// because the lexer lets no magnitude past 2^63.
const _: () = assert!(MAX_MAGNITUDE as i64 == i64::MIN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_LEN;

    fn ok(text: &str) -> Expr {
        parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn err(text: &str) -> SelectorError {
        parse(text).expect_err(text)
    }

    fn ident(name: &str) -> Box<Expr> {
        Box::new(Expr::Ident(name.into()))
    }

    fn int(v: i64) -> Box<Expr> {
        Box::new(Expr::Literal(Value::Int(v)))
    }

    fn unexpected(text: &str) -> (usize, &'static str, String) {
        match err(text) {
            SelectorError::UnexpectedToken {
                offset,
                expected,
                found,
            } => (offset, expected, found),
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let eq = |name, v| Expr::Compare(CmpOp::Eq, ident(name), int(v));
        assert_eq!(
            ok("a = 1 OR b = 2 AND c = 3"),
            Expr::Or(vec![eq("a", 1), Expr::And(vec![eq("b", 2), eq("c", 3)])])
        );
        assert_eq!(
            ok("(a = 1 OR b = 2) AND c = 3"),
            Expr::And(vec![Expr::Or(vec![eq("a", 1), eq("b", 2)]), eq("c", 3)])
        );
        assert_eq!(
            ok("NOT a = 1 AND b = 2"),
            Expr::And(vec![Expr::Not(Box::new(eq("a", 1))), eq("b", 2)])
        );
    }

    #[test]
    fn arithmetic_precedence() {
        assert_eq!(
            ok("a + b * -c - 2 > 0"),
            Expr::Compare(
                CmpOp::Gt,
                Box::new(Expr::Arith(
                    ident("a"),
                    vec![
                        (
                            ArithOp::Add,
                            Expr::Arith(
                                ident("b"),
                                vec![(ArithOp::Mul, Expr::Unary(Sign::Minus, ident("c")))]
                            )
                        ),
                        (ArithOp::Sub, Expr::Literal(Value::Int(2))),
                    ]
                )),
                int(0)
            )
        );
    }

    #[test]
    fn signed_literals_fold() {
        assert_eq!(ok("-5"), Expr::Literal(Value::Int(-5)));
        assert_eq!(ok("+5"), Expr::Literal(Value::Int(5)));
        assert_eq!(ok("-57.9E2"), Expr::Literal(Value::Float(-5790.0)));
        assert_eq!(
            ok("-9223372036854775808"),
            Expr::Literal(Value::Int(i64::MIN))
        );
        assert_eq!(
            ok("- -5"),
            Expr::Unary(Sign::Minus, Box::new(Expr::Literal(Value::Int(-5))))
        );
        assert_eq!(
            err("9223372036854775808"),
            SelectorError::IntegerOutOfRange {
                offset: 0,
                text: "9223372036854775808".into()
            }
        );
        assert_eq!(
            err("x = 0x8000000000000000"),
            SelectorError::IntegerOutOfRange {
                offset: 4,
                text: "0x8000000000000000".into()
            }
        );
        // The minus must apply to the literal itself.
        assert!(matches!(
            err("-(9223372036854775808)"),
            SelectorError::IntegerOutOfRange { offset: 2, .. }
        ));
    }

    #[test]
    fn predicates() {
        assert!(matches!(
            ok("a NOT BETWEEN 1 AND 2 + 3"),
            Expr::Between { negated: true, high, .. } if matches!(*high, Expr::Arith(..))
        ));
        assert!(matches!(
            ok("a like 'x%' escape '!'"),
            Expr::Like { negated: false, .. }
        ));
        assert_eq!(
            ok("a NOT IN ('b', 'a', 'b')"),
            Expr::In {
                negated: true,
                operand: ident("a"),
                list: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            ok("a IS NOT NULL"),
            Expr::IsNull {
                negated: true,
                operand: ident("a")
            }
        );
        // BETWEEN's AND is not the logical AND.
        assert!(matches!(
            ok("a BETWEEN 1 AND 2 AND b"),
            Expr::And(terms) if terms.len() == 2
        ));
    }

    #[test]
    fn keywords_cannot_be_names() {
        for word in [
            "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE", "And", "between",
        ] {
            assert!(parse(&format!("{word} = 1")).is_err(), "{word}");
        }
        // These are literals, never property names.
        for (word, literal) in [
            ("NULL", Value::Null),
            ("null", Value::Null),
            ("TRUE", Value::Bool(true)),
            ("False", Value::Bool(false)),
        ] {
            assert_eq!(
                ok(&format!("{word} = 1")),
                Expr::Compare(CmpOp::Eq, Box::new(Expr::Literal(literal)), int(1))
            );
        }
        assert_eq!(
            unexpected("ESCAPE = 'x'"),
            (0, "a name, a literal or '('", "\"ESCAPE\"".into())
        );
        // Quoted, they are names.
        assert_eq!(
            ok("\"AND\" = 1"),
            Expr::Compare(CmpOp::Eq, ident("AND"), int(1))
        );
    }

    #[test]
    fn errors_point_at_the_problem() {
        assert_eq!(
            unexpected("a = 1 b"),
            (6, "AND, OR or the end of the selector", "\"b\"".into())
        );
        assert_eq!(
            unexpected("a ="),
            (
                3,
                "a name, a literal or '('",
                "the end of the selector".into()
            )
        );
        assert_eq!(
            unexpected("(a = 1"),
            (6, "AND, OR or ')'", "the end of the selector".into())
        );
        assert_eq!(unexpected("a = 1 = 2").0, 6, "comparisons do not chain");
        assert!(unexpected("a = 1 = 2").1.contains("do not chain"));
        assert!(unexpected("(a < 1 IS NULL)").1.contains("do not chain"));
        assert_eq!(unexpected("a NOT = 1").0, 6);
        assert_eq!(unexpected("a BETWEEN 1 OR 2").0, 12);
        assert_eq!(unexpected("a LIKE b").0, 7);
        assert_eq!(unexpected("a LIKE 'x' ESCAPE 1").0, 18);
        assert_eq!(unexpected("a IN 'x'").0, 5);
        assert_eq!(unexpected("a IN ()").0, 6);
        assert_eq!(unexpected("a IN ('x',)").0, 10);
        assert_eq!(unexpected("a IN ('x', 1)").0, 11);
        assert_eq!(unexpected("a IN ('x' 'y')").0, 10);
        assert_eq!(unexpected("a IS 1").0, 5);
        assert_eq!(unexpected("a IS NOT TRUE").0, 9);
        assert_eq!(unexpected(")").0, 0);
        assert_eq!(unexpected("a AND").0, 5);
        assert_eq!(unexpected("a = 1 AND OR b").0, 10);
        // Long tokens are cut short in the message.
        let (_, _, found) = unexpected(&format!("a = 1 '{}'", "x".repeat(1000)));
        assert!(found.len() < 60, "{found}");
    }

    #[test]
    fn like_escape_must_be_one_character() {
        assert_eq!(
            err("a LIKE 'x' ESCAPE ''"),
            SelectorError::BadEscape {
                offset: 18,
                found: String::new()
            }
        );
        assert_eq!(
            err("a LIKE 'x' ESCAPE 'ab'"),
            SelectorError::BadEscape {
                offset: 18,
                found: "ab".into()
            }
        );
        assert!(parse("a LIKE 'x' ESCAPE 'é'").is_ok());
        assert_eq!(
            err("a LIKE 'x!' ESCAPE '!'"),
            SelectorError::DanglingEscape {
                offset: 7,
                escape: '!'
            }
        );
    }

    #[test]
    fn depth_limit() {
        let nested = |n: usize, open: &str, inner: &str, close: &str| {
            format!("{}{inner}{}", open.repeat(n), close.repeat(n))
        };
        assert!(parse(&nested(MAX_DEPTH, "(", "a", ")")).is_ok());
        assert_eq!(
            err(&nested(MAX_DEPTH + 1, "(", "a", ")")),
            SelectorError::TooDeep { offset: MAX_DEPTH }
        );
        assert!(parse(&nested(MAX_DEPTH, "NOT ", "a", "")).is_ok());
        assert_eq!(
            err(&nested(MAX_DEPTH + 1, "NOT ", "a", "")),
            SelectorError::TooDeep {
                offset: MAX_DEPTH * 4
            }
        );
        assert!(parse(&nested(MAX_DEPTH, "-", "a", "")).is_ok());
        assert!(matches!(
            err(&nested(MAX_DEPTH + 1, "-", "a", "")),
            SelectorError::TooDeep { .. }
        ));
        // The last minus folds into the literal and costs nothing.
        assert!(parse(&nested(MAX_DEPTH + 1, "-", "1", "")).is_ok());
        // Mixed kinds add up: four levels per repetition here.
        assert!(parse(&nested(MAX_DEPTH / 4, "NOT (-(", "a", "))")).is_ok());
        assert!(matches!(
            err(&nested(MAX_DEPTH / 4 + 1, "NOT (-(", "a", "))")),
            SelectorError::TooDeep { .. }
        ));
        // Far past the limit, within MAX_LEN: an error, not a stack overflow.
        for (open, inner, close) in [("(", "a", ")"), ("NOT ", "a", ""), ("-", "a", "")] {
            let n = (MAX_LEN - 1) / (open.len() + close.len());
            let text = nested(n, open, inner, close);
            assert!(text.len() <= MAX_LEN);
            assert!(matches!(err(&text), SelectorError::TooDeep { .. }));
        }
        assert!(matches!(
            err(&"(".repeat(MAX_LEN)),
            SelectorError::TooDeep { .. }
        ));
    }

    #[test]
    fn long_chains_are_flat() {
        let ors = vec!["a = 1"; 5000].join(" OR ");
        assert!(matches!(ok(&ors), Expr::Or(terms) if terms.len() == 5000));
        let sums = vec!["1"; 20_000].join("+");
        assert!(
            matches!(ok(&format!("{sums} > 0")), Expr::Compare(_, l, _) if matches!(&*l, Expr::Arith(_, rest) if rest.len() == 19_999))
        );
    }
}
