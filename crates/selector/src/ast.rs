//! The parsed form of a selector.
//!
//! AND, OR and arithmetic chains are stored flat (one node with a list) rather than as
//! left-leaning binary trees: a 64 KiB selector can chain tens of thousands of terms, and a
//! tree that deep would overflow the stack when evaluated, cloned or dropped. Everything else
//! that nests is counted against `MAX_DEPTH` by the parser, so the tree's height is bounded.

use crate::like::LikePattern;
use crate::Value;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    /// Never `Value::Str(Cow::Borrowed)`: literals own their text.
    Literal(Value<'static>),
    Ident(String),
    Unary(Sign, Box<Expr>),
    /// `first op1 e1 op2 e2 …`, evaluated left to right; all ops have the same precedence.
    Arith(Box<Expr>, Vec<(ArithOp, Expr)>),
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    Between {
        negated: bool,
        operand: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
    },
    Like {
        negated: bool,
        operand: Box<Expr>,
        pattern: LikePattern,
    },
    In {
        negated: bool,
        operand: Box<Expr>,
        /// Sorted and without duplicates, for binary search.
        list: Vec<String>,
    },
    IsNull {
        negated: bool,
        operand: Box<Expr>,
    },
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sign {
    Plus,
    Minus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}
