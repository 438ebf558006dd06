//! VSIM's `FILTER` expressions, as Redis 8.2's vector sets evaluate them: compiled once per
//! command into a postfix program, then run once per candidate element against its JSON
//! attributes.
//!
//! # The language (what Redis 8.2.3 accepts, quirks included)
//!
//! Tokens, scanned left to right after skipping ASCII whitespace (`' ' \t \n \v \f \r`). The
//! expression ends at its first NUL byte, as Redis reads it as a C string.
//! - Number: starts with a digit, or with `-` followed by a digit when the previous token is
//!   an operator other than `)` (or there is none). It runs over digits, `.`, `e`, `E` (and
//!   that leading `-`); the whole run must be a decimal number (`1`, `1.5`, `1.`, `1e3`,
//!   `1.5E10`); at most 255 characters. So `1e-3` fails (the run is `1e`), and `0x10` is `0`
//!   followed by the unknown word `x10`.
//! - String: `"..."` or `'...'`. A backslash makes the next character literal for finding the
//!   closing quote, but the string's value is the raw text between the quotes, backslashes
//!   included (`"a\"b"` is the 4 bytes `a\"b`).
//! - Tuple: `[` elements `]`, each a number (may start with `-`) or a string, separated by
//!   commas; `[]` and a trailing comma (`[1,]`) are accepted; no nesting, no selectors.
//! - Selector: `.` followed by a letter, digit, `_` or `-`, then a run of those (`.a-b`,
//!   `.year-1` is the field `year-1`). A `.` at the very end of the expression is an empty
//!   selector: it compiles, and the expression is then false for every element.
//! - Word or operator: the longest run of letters and `+-*%/!()<>=|&`. Exactly `null` is the
//!   null literal; otherwise the longest operator that prefixes the run is taken and the rest
//!   is scanned again (`andx` is `and` then the unknown `x`; `(null)` fails, as the run is
//!   `null)`). There is no `true`/`false`.
//!
//! Operators, by decreasing precedence: `!` `not` (unary); `**` (right-assoc); `* / %`;
//! `+ -`; `> >= < <= == != in`; `and &&`; `or ||`. Parentheses group. Compilation is a
//! shunting-yard that checks operand counts when it emits an operator, exactly as Redis does,
//! which is why `!!x` (the second `!` pops the first with no operand yet) is an error while
//! `1 !` is accepted (postfix not), and `1 + !!2` means `(!1) + (!2)`.
//!
//! # Evaluation
//!
//! Values are numbers (f64), strings, tuples and null. A selector reads the top-level field of
//! the element's JSON object (the first key of that name; keys are compared as raw bytes,
//! escapes not decoded). If the field is missing, the JSON is malformed before it, or its value
//! is an object or malformed, the whole expression is false, wherever the selector sits (`1 or
//! .missing` is false); what follows the value is not checked (`{"a": 1x` gives 1). JSON
//! `true`/`false` are 1/0, `null` is null, arrays (nested ones included) are tuples, strings
//! are unescaped (`\n \r \t \\ \"`, any other `\x` gives `x`, so `\u00e9` is `u00e9`). Arithmetic and ordering convert both sides to numbers: a number is itself, a string
//! shorter than 256 bytes that `strtod` reads entirely is its value (leading spaces, `inf`,
//! `nan`, hex floats included), anything else is 0. Truth: non-zero numbers (NaN too),
//! non-empty strings and tuples. `==`: two strings compare bytes, two numbers compare values,
//! null equals only null, anything else compares as numbers (`"1" == 1`, `"abc" == 0` and
//! `[1] == [2]` are true). `a in b`: membership (by `==`) if `b` is a tuple, substring if both
//! are strings, else false. Division by zero gives inf or NaN, `%` is C's `fmod`.
//!
//! # Errors
//!
//! Every rejected expression gets `ERR syntax error in FILTER expression near: <tail>`. A
//! tokenising error quotes the expression from where the scanner stopped (past a word that no
//! operator prefixes, at an unexpected character, past a malformed number), or all of it when
//! that is the end (an unterminated string); every structural error (operands missing,
//! unbalanced parentheses, two values in a row, empty expression) quotes all of it. The quote
//! stops at a NUL; as in every Redis error reply, trailing CR/LF are dropped and inner ones
//! become spaces.

use std::borrow::Cow;

/// The error prefix of every FILTER compilation failure.
const ERR_PREFIX: &[u8] = b"ERR syntax error in FILTER expression near: ";
/// Redis's number buffers hold 255 characters (plus the terminator).
const NUM_BUF: usize = 255;
/// Strings of this many bytes or more convert to the number 0.
const STR_NUM_MAX: usize = 256;
/// Field tables up to this size live on the Rust stack during `matches` (larger ones on the heap).
const FIELDS_INLINE: usize = 8;
/// Likewise for the value stack.
const STACK_INLINE: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OpCode {
    OParen,
    CParen,
    Not,
    Pow,
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
    In,
    And,
    Or,
}

/// Operator spellings; a word matches the longest one that prefixes it.
const OPERATORS: &[(&[u8], OpCode)] = &[
    (b"(", OpCode::OParen),
    (b")", OpCode::CParen),
    (b"!", OpCode::Not),
    (b"not", OpCode::Not),
    (b"**", OpCode::Pow),
    (b"*", OpCode::Mul),
    (b"/", OpCode::Div),
    (b"%", OpCode::Mod),
    (b"+", OpCode::Add),
    (b"-", OpCode::Sub),
    (b">", OpCode::Gt),
    (b">=", OpCode::Ge),
    (b"<", OpCode::Lt),
    (b"<=", OpCode::Le),
    (b"==", OpCode::Eq),
    (b"!=", OpCode::Ne),
    (b"in", OpCode::In),
    (b"and", OpCode::And),
    (b"&&", OpCode::And),
    (b"or", OpCode::Or),
    (b"||", OpCode::Or),
];

impl OpCode {
    fn precedence(self) -> u8 {
        match self {
            OpCode::OParen | OpCode::CParen => 7,
            OpCode::Not => 6,
            OpCode::Pow => 5,
            OpCode::Mul | OpCode::Div | OpCode::Mod => 4,
            OpCode::Add | OpCode::Sub => 3,
            OpCode::Gt | OpCode::Ge | OpCode::Lt | OpCode::Le | OpCode::Eq | OpCode::Ne | OpCode::In => 2,
            OpCode::And => 1,
            OpCode::Or => 0,
        }
    }

    fn arity(self) -> usize {
        match self {
            OpCode::OParen | OpCode::CParen => 0,
            OpCode::Not => 1,
            _ => 2,
        }
    }
}

/// An element of a tuple literal.
#[derive(Clone, Copy, Debug)]
enum LitElem {
    Num(f64),
    /// A range of `Filter::src`.
    Str(u32, u32),
}

/// One instruction of the compiled postfix program.
#[derive(Clone, Copy, Debug)]
enum Instr {
    Num(f64),
    /// A string literal: a range of `Filter::src`.
    Str(u32, u32),
    /// A tuple literal: a range of `Filter::elems`.
    Tuple(u32, u32),
    Null,
    /// The value of field number `n` (see `Filter::fields`).
    Field(u32),
    Op(OpCode),
}

/// A compiled FILTER expression. Cheap to share across threads (`Send + Sync`, immutable).
#[derive(Clone, Debug)]
pub struct Filter {
    /// The expression (up to its first NUL): literals and field names point into it.
    src: Box<[u8]>,
    elems: Box<[LitElem]>,
    prog: Box<[Instr]>,
    /// Distinct field names the program reads, as ranges of `src`.
    fields: Box<[(u32, u32)]>,
    /// Deepest the value stack gets.
    depth: usize,
    /// The expression holds an empty selector (a trailing `.`): false for every element.
    never: bool,
}

// ---------------------------------------------------------------------------------------------
// Character classes (C locale, as Redis's ctype calls see them).

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_op_char(c: u8) -> bool {
    c.is_ascii_alphabetic() || b"+-*%/!()<>=|&".contains(&c)
}

/// Selector characters. NUL (the end of the expression) counts, as in Redis.
fn is_selector_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == 0
}

fn is_json_num_char(c: u8) -> bool {
    c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')
}

// ---------------------------------------------------------------------------------------------
// strtod, C locale.

/// Parses the longest prefix of `s` that C's `strtod` would, returning the value and the number
/// of bytes used (0 when no conversion happens, with the value 0).
fn strtod(s: &[u8]) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while is_space(at(i)) {
        i += 1;
    }
    let sign_at = i;
    let neg = at(i) == b'-';
    if matches!(at(i), b'+' | b'-') {
        i += 1;
    }
    let rest = &s[i.min(s.len())..];
    let starts_ci = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    if starts_ci(b"inf") {
        let used = if starts_ci(b"infinity") { 8 } else { 3 };
        return (if neg { f64::NEG_INFINITY } else { f64::INFINITY }, i + used);
    }
    if starts_ci(b"nan") {
        let mut j = i + 3;
        if at(j) == b'(' {
            let mut k = j + 1;
            while at(k).is_ascii_alphanumeric() || at(k) == b'_' {
                k += 1;
            }
            if at(k) == b')' {
                j = k + 1;
            }
        }
        return (f64::NAN, j);
    }
    if at(i) == b'0' && matches!(at(i + 1), b'x' | b'X') {
        if let Some((v, end)) = strtod_hex(s, i + 2) {
            return (if neg { -v } else { v }, end);
        }
        // "0x" without hex digits: just the 0.
        return (if neg { -0.0 } else { 0.0 }, i + 1);
    }
    let mut j = i;
    let mut digits = 0;
    while at(j).is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if at(j) == b'.' {
        j += 1;
        while at(j).is_ascii_digit() {
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0);
    }
    if matches!(at(j), b'e' | b'E') {
        let mut k = j + 1;
        if matches!(at(k), b'+' | b'-') {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            while at(k).is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    // Plain integers of up to 15 digits are exact in an f64: the common case, done directly.
    if j - i == digits && digits <= 15 {
        let v = s[i..j].iter().fold(0u64, |acc, &c| acc * 10 + u64::from(c - b'0')) as f64;
        return (if neg { -v } else { v }, j);
    }
    // The text is ASCII and has the shape Rust's parser accepts ([sign] digits [. digits] [exp]).
    let text = std::str::from_utf8(&s[sign_at..j]).unwrap_or("0");
    (text.parse::<f64>().unwrap_or(0.0), j)
}

/// A hexadecimal float's magnitude, from just after its `0x`, correctly rounded to nearest-even.
/// `None` when no hex digit follows.
fn strtod_hex(s: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let hex = |c: u8| (c as char).to_digit(16).map(u64::from);
    let mut j = start;
    let mut mant: u64 = 0;
    let mut exp2: i64 = 0;
    let mut sticky = false;
    let mut digits = 0;
    while let Some(d) = hex(at(j)) {
        hex_digit(d, false, &mut mant, &mut exp2, &mut sticky);
        j += 1;
        digits += 1;
    }
    if at(j) == b'.' {
        let mut k = j + 1;
        let mut frac_digits = 0;
        while let Some(d) = hex(at(k)) {
            hex_digit(d, true, &mut mant, &mut exp2, &mut sticky);
            k += 1;
            frac_digits += 1;
        }
        if digits + frac_digits > 0 {
            j = k;
        }
        digits += frac_digits;
    }
    if digits == 0 {
        return None;
    }
    if matches!(at(j), b'p' | b'P') {
        let mut k = j + 1;
        let neg = at(k) == b'-';
        if matches!(at(k), b'+' | b'-') {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(k).is_ascii_digit() {
                e = (e * 10 + i64::from(at(k) - b'0')).min(1 << 40);
                k += 1;
            }
            exp2 += if neg { -e } else { e };
            j = k;
        }
    }
    if mant == 0 {
        return Some((0.0, j));
    }
    // value = mant * 2^exp2 (+ sticky); normalise mant to [2^63, 2^64).
    let lz = mant.leading_zeros();
    let m = mant << lz;
    let e = exp2 - i64::from(lz); // value = m * 2^e
    let top = e + 63; // value in [2^top, 2^(top+1))
    if top > 1023 {
        return Some((f64::INFINITY, j));
    }
    let bits = if top >= -1022 { 53 } else { top + 1075 }; // significant bits kept
    let shift = 64 - bits; // >= 11
    let q = if shift >= 65 {
        0
    } else if shift == 64 {
        // Only the top bit (exactly half of the smallest unit) and below remain.
        u64::from((m << 1) != 0 || sticky)
    } else {
        let shift = shift as u32;
        let q = m >> shift;
        let rem = m & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && (sticky || q & 1 == 1)) {
            q + 1
        } else {
            q
        }
    };
    Some((ldexp(q as f64, e + shift), j))
}

/// Appends one hex digit to a mantissa kept to 60-odd bits: digits past that only set the
/// sticky bit (and, before the point, scale the exponent).
fn hex_digit(d: u64, frac: bool, mant: &mut u64, exp2: &mut i64, sticky: &mut bool) {
    if *mant < (1 << 60) {
        *mant = *mant * 16 + d;
        if frac {
            *exp2 -= 4;
        }
    } else {
        *sticky |= d != 0;
        if !frac {
            *exp2 += 4;
        }
    }
}

/// `x * 2^k`, exact whenever the result is representable.
fn ldexp(mut x: f64, mut k: i64) -> f64 {
    let pow2 = |k: i64| f64::from_bits(((k + 1023) as u64) << 52);
    while k > 1000 {
        x *= pow2(1000);
        k -= 1000;
    }
    while k < -1000 {
        x *= pow2(-1000);
        k += 1000;
    }
    x * pow2(k)
}

/// `strtod` over the whole of `s` (up to a NUL): its value if it reads everything, else 0.
fn str_to_num(s: &[u8]) -> f64 {
    let s = match s.iter().position(|&b| b == 0) {
        Some(n) => &s[..n],
        None => s,
    };
    let (v, used) = strtod(s);
    if used == s.len() {
        v
    } else {
        0.0
    }
}

// ---------------------------------------------------------------------------------------------
// Compilation.

#[derive(Debug)]
enum Token {
    Num(f64),
    Str(usize, usize),
    Tuple(Vec<LitElem>),
    Selector(usize, usize),
    Null,
    Op(OpCode),
}

struct Lexer<'s> {
    s: &'s [u8],
    p: usize,
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn skip_spaces(&mut self) {
        while is_space(self.at(self.p)) {
            self.p += 1;
        }
    }

    /// A number: digits, '.', 'e', 'E' and a leading '-', read entirely by strtod.
    fn number(&mut self) -> Result<f64, usize> {
        let start = self.p;
        loop {
            let c = self.at(self.p);
            let ok = c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E') || (c == b'-' && self.p == start);
            if !ok {
                break;
            }
            if self.p - start >= NUM_BUF {
                return Err(self.p);
            }
            self.p += 1;
        }
        let text = &self.s[start..self.p];
        let (v, used) = strtod(text);
        if used == text.len() && !text.is_empty() {
            Ok(v)
        } else {
            Err(self.p)
        }
    }

    /// A quoted string; returns the raw range between the quotes.
    fn string(&mut self) -> Result<(usize, usize), usize> {
        let quote = self.at(self.p);
        self.p += 1;
        let start = self.p;
        loop {
            let c = self.at(self.p);
            if c == 0 {
                return Err(self.p);
            }
            if c == b'\\' && self.at(self.p + 1) != 0 {
                self.p += 2;
                continue;
            }
            if c == quote {
                let r = (start, self.p);
                self.p += 1;
                return Ok(r);
            }
            self.p += 1;
        }
    }

    fn tuple(&mut self) -> Result<Vec<LitElem>, usize> {
        self.p += 1; // '['
        let mut out = Vec::new();
        loop {
            self.skip_spaces();
            if self.at(self.p) == b']' {
                self.p += 1;
                return Ok(out);
            }
            let c = self.at(self.p);
            if c.is_ascii_digit() || c == b'-' {
                out.push(LitElem::Num(self.number()?));
            } else if c == b'"' || c == b'\'' {
                let (a, b) = self.string()?;
                out.push(LitElem::Str(a as u32, b as u32));
            } else {
                return Err(self.p);
            }
            self.skip_spaces();
            match self.at(self.p) {
                b']' => {
                    self.p += 1;
                    return Ok(out);
                }
                b',' => self.p += 1,
                _ => return Err(self.p),
            }
        }
    }

    /// The word (run of letters and operator characters) at `p`: exactly `null`, or else its
    /// longest operator prefix, after which scanning resumes. Only the word's first 5 bytes
    /// decide, so only those are read (a run like `((((...` stays linear); the whole word is
    /// walked only to report an error past its end.
    fn operator_or_null(&mut self) -> Result<Token, usize> {
        let start = self.p;
        let run = |from: usize, limit: usize| {
            let mut q = from;
            while q < limit && self.at(q) != 0 && is_op_char(self.at(q)) {
                q += 1;
            }
            q
        };
        let head_end = run(start, start + 5);
        let head = &self.s[start..head_end];
        if head == b"null" {
            self.p = head_end;
            return Ok(Token::Null);
        }
        let best =
            OPERATORS.iter().filter(|(name, _)| head.starts_with(name)).max_by_key(|(name, _)| name.len());
        match best {
            Some((name, op)) => {
                self.p = start + name.len();
                Ok(Token::Op(*op))
            }
            None => Err(run(head_end, usize::MAX)),
        }
    }

    /// Splits the expression into tokens; Err is the offset Redis reports.
    fn tokens(&mut self) -> Result<Vec<Token>, usize> {
        let mut out: Vec<Token> = Vec::new();
        loop {
            self.skip_spaces();
            if self.p >= self.s.len() {
                return Ok(out);
            }
            let minus_is_number = match out.last() {
                None => true,
                Some(Token::Op(op)) => *op != OpCode::CParen,
                Some(_) => false,
            };
            let c = self.at(self.p);
            let tok = if c.is_ascii_digit()
                || (minus_is_number && c == b'-' && self.at(self.p + 1).is_ascii_digit())
            {
                Token::Num(self.number()?)
            } else if c == b'"' || c == b'\'' {
                let (a, b) = self.string()?;
                Token::Str(a, b)
            } else if c == b'.' && is_selector_char(self.at(self.p + 1)) {
                self.p += 1;
                let start = self.p;
                while self.at(self.p) != 0 && is_selector_char(self.at(self.p)) {
                    self.p += 1;
                }
                Token::Selector(start, self.p)
            } else if c == b'[' {
                Token::Tuple(self.tuple()?)
            } else if is_op_char(c) {
                self.operator_or_null()?
            } else {
                return Err(self.p);
            };
            out.push(tok);
        }
    }
}

/// Builds the error reply text for a failure at `errpos` of `expr`, the way Redis formats it:
/// the expression from that offset (from the start when the offset is at or past the end) up
/// to a NUL, trailing CR/LF trimmed and inner ones turned into spaces.
fn error_text(expr: &[u8], errpos: usize) -> Vec<u8> {
    let pos = if errpos >= expr.len() { 0 } else { errpos };
    let tail = &expr[pos..];
    let tail = match tail.iter().position(|&b| b == 0) {
        Some(n) => &tail[..n],
        None => tail,
    };
    let mut out = Vec::with_capacity(ERR_PREFIX.len() + tail.len());
    out.extend_from_slice(ERR_PREFIX);
    out.extend_from_slice(tail);
    while matches!(out.last(), Some(b'\r' | b'\n')) {
        out.pop();
    }
    for b in &mut out {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    out
}

struct Emitter {
    prog: Vec<Instr>,
    /// Values on the stack when the program so far has run.
    items: usize,
    depth: usize,
}

impl Emitter {
    fn value(&mut self, i: Instr) {
        self.prog.push(i);
        self.items += 1;
        self.depth = self.depth.max(self.items);
    }

    /// Emits an operator if enough operands would be on the stack.
    fn op(&mut self, op: OpCode) -> Result<(), ()> {
        let n = op.arity();
        if self.items < n {
            return Err(());
        }
        self.items = self.items - n + 1;
        self.prog.push(Instr::Op(op));
        Ok(())
    }
}

impl Filter {
    /// Compiles a FILTER expression. `Err` is the exact error reply text Redis 8.2 sends for it
    /// (no leading '-', no CRLF), e.g. `ERR syntax error in FILTER expression near: 1 +`.
    pub fn compile(expr: &[u8]) -> Result<Filter, Vec<u8>> {
        let src = match expr.iter().position(|&b| b == 0) {
            Some(n) => &expr[..n],
            None => expr,
        };
        let tokens = Lexer { s: src, p: 0 }.tokens().map_err(|pos| error_text(expr, pos))?;
        // Every error after tokenising is reported at offset 0 (Redis's tokens carry no offset).
        Self::build(src, tokens).map_err(|()| error_text(expr, 0))
    }

    fn build(src: &[u8], tokens: Vec<Token>) -> Result<Filter, ()> {
        let mut em = Emitter { prog: Vec::with_capacity(tokens.len()), items: 0, depth: 0 };
        let mut ops: Vec<OpCode> = Vec::new();
        let mut elems: Vec<LitElem> = Vec::new();
        let mut fields: Vec<(u32, u32)> = Vec::new();
        let mut never = false;
        for tok in tokens {
            match tok {
                Token::Num(n) => em.value(Instr::Num(n)),
                Token::Str(a, b) => em.value(Instr::Str(a as u32, b as u32)),
                Token::Null => em.value(Instr::Null),
                Token::Tuple(t) => {
                    let a = elems.len() as u32;
                    elems.extend(t);
                    em.value(Instr::Tuple(a, elems.len() as u32));
                }
                Token::Selector(a, b) => {
                    if a == b {
                        never = true;
                    }
                    let name = &src[a..b];
                    let slot = match fields.iter().position(|&(x, y)| &src[x as usize..y as usize] == name) {
                        Some(i) => i,
                        None => {
                            fields.push((a as u32, b as u32));
                            fields.len() - 1
                        }
                    };
                    em.value(Instr::Field(slot as u32));
                }
                Token::Op(OpCode::OParen) => ops.push(OpCode::OParen),
                Token::Op(OpCode::CParen) => loop {
                    match ops.pop() {
                        None => return Err(()),
                        Some(OpCode::OParen) => break,
                        Some(top) => em.op(top)?,
                    }
                },
                Token::Op(op) => {
                    let prec = op.precedence();
                    while let Some(&top) = ops.last() {
                        if top == OpCode::OParen {
                            break;
                        }
                        let top_prec = top.precedence();
                        // Pop what binds at least as tight; `**` is right-associative.
                        if top_prec < prec || (op == OpCode::Pow && top_prec <= prec) {
                            break;
                        }
                        ops.pop();
                        em.op(top)?;
                    }
                    ops.push(op);
                }
            }
        }
        while let Some(op) = ops.pop() {
            if op == OpCode::OParen {
                return Err(());
            }
            em.op(op)?;
        }
        if em.items != 1 {
            return Err(());
        }
        Ok(Filter {
            src: src.into(),
            elems: elems.into(),
            prog: em.prog.into(),
            fields: fields.into(),
            depth: em.depth,
            never,
        })
    }

    /// Evaluates the expression against an element's attributes (`None`: the element has none,
    /// and never matches). Malformed JSON, a missing field or an unusable value make the
    /// expression false, never an error.
    pub fn matches(&self, attrs: Option<&[u8]>) -> bool {
        let Some(json) = attrs else { return false };
        if self.never {
            return false;
        }
        let nf = self.fields.len();
        if nf == 0 {
            self.run_with(&[])
        } else if nf <= FIELDS_INLINE {
            let mut fields = [Val::Null; FIELDS_INLINE];
            self.resolve(json, &mut fields[..nf]) && self.run_with(&fields[..nf])
        } else {
            let mut fields = vec![Val::Null; nf];
            self.resolve(json, &mut fields) && self.run_with(&fields)
        }
    }

    /// Finds and converts every field the program reads; false if any cannot be.
    fn resolve<'a>(&'a self, json: &'a [u8], out: &mut [Val<'a>]) -> bool {
        if out.is_empty() {
            return true;
        }
        let n = out.len();
        let mut pos_inline = [usize::MAX; FIELDS_INLINE];
        let mut pos_heap;
        let pos: &mut [usize] = if n <= FIELDS_INLINE {
            &mut pos_inline[..n]
        } else {
            pos_heap = vec![usize::MAX; n];
            &mut pos_heap
        };
        if !self.locate(json, pos) {
            return false;
        }
        for (slot, &p) in out.iter_mut().zip(pos.iter()) {
            match parse_value(json, p) {
                Some(v) => *slot = v,
                None => return false,
            }
        }
        true
    }

    /// One pass over the top-level object, recording where each wanted field's value starts
    /// (first occurrence). Stops where Redis's own seek would fail: a field past that point is
    /// not found.
    fn locate(&self, j: &[u8], pos: &mut [usize]) -> bool {
        let mut remaining = pos.len();
        let mut p = skip_ws(j, 0);
        if p >= j.len() || j[p] != b'{' {
            return false;
        }
        p += 1;
        loop {
            p = skip_ws(j, p);
            if p >= j.len() || j[p] != b'"' {
                return false; // end, '}' (not found) or a key that is not a string
            }
            let Some(after_key) = skip_string(j, p) else { return false };
            let key = &j[p + 1..after_key - 1];
            p = skip_ws(j, after_key);
            if p >= j.len() || j[p] != b':' {
                return false;
            }
            p = skip_ws(j, p + 1);
            if p >= j.len() {
                return false;
            }
            for (i, &(a, b)) in self.fields.iter().enumerate() {
                if pos[i] == usize::MAX && &self.src[a as usize..b as usize] == key {
                    pos[i] = p;
                    remaining -= 1;
                }
            }
            if remaining == 0 {
                return true;
            }
            let Some(after) = skip_value(j, p) else { return false };
            p = skip_ws(j, after);
            if p >= j.len() || j[p] != b',' {
                return false;
            }
            p += 1;
        }
    }

    fn run_with(&self, fields: &[Val<'_>]) -> bool {
        if self.depth <= STACK_INLINE {
            let mut stack = [Val::Null; STACK_INLINE];
            self.run(fields, &mut stack)
        } else {
            let mut stack = vec![Val::Null; self.depth];
            self.run(fields, &mut stack)
        }
    }

    fn run<'a>(&'a self, fields: &[Val<'a>], stack: &mut [Val<'a>]) -> bool {
        let mut sp = 0;
        for ins in self.prog.iter() {
            let v = match *ins {
                Instr::Num(n) => Val::Num(n),
                Instr::Str(a, b) => Val::Str(Txt { raw: &self.src[a as usize..b as usize], esc: false }),
                Instr::Tuple(a, b) => Val::Tuple(Tup::Lit(&self.elems[a as usize..b as usize])),
                Instr::Null => Val::Null,
                Instr::Field(i) => fields[i as usize],
                Instr::Op(OpCode::Not) => {
                    let top = &mut stack[sp - 1];
                    *top = Val::Num(if top.truthy() { 0.0 } else { 1.0 });
                    continue;
                }
                Instr::Op(op) => {
                    sp -= 1;
                    let b = stack[sp];
                    let a = stack[sp - 1];
                    stack[sp - 1] = Val::Num(self.binary(op, a, b));
                    continue;
                }
            };
            stack[sp] = v;
            sp += 1;
        }
        sp == 1 && stack[0].truthy()
    }

    fn binary(&self, op: OpCode, a: Val<'_>, b: Val<'_>) -> f64 {
        let bit = |c: bool| if c { 1.0 } else { 0.0 };
        match op {
            OpCode::Pow => a.num().powf(b.num()),
            OpCode::Mul => a.num() * b.num(),
            OpCode::Div => a.num() / b.num(),
            OpCode::Mod => a.num() % b.num(),
            OpCode::Add => a.num() + b.num(),
            OpCode::Sub => a.num() - b.num(),
            OpCode::Gt => bit(a.num() > b.num()),
            OpCode::Ge => bit(a.num() >= b.num()),
            OpCode::Lt => bit(a.num() < b.num()),
            OpCode::Le => bit(a.num() <= b.num()),
            OpCode::Eq => bit(self.equal(a, b)),
            OpCode::Ne => bit(!self.equal(a, b)),
            OpCode::In => bit(match (a, b) {
                (_, Val::Tuple(t)) => self.tuple_any(t, |e| self.equal(a, e)),
                (Val::Str(x), Val::Str(y)) => x.is_in(y),
                _ => false,
            }),
            OpCode::And => bit(a.truthy() && b.truthy()),
            OpCode::Or => bit(a.truthy() || b.truthy()),
            OpCode::OParen | OpCode::CParen | OpCode::Not => 0.0,
        }
    }

    fn equal(&self, a: Val<'_>, b: Val<'_>) -> bool {
        match (a, b) {
            (Val::Str(x), Val::Str(y)) => x.eq(y),
            (Val::Num(x), Val::Num(y)) => x == y,
            (Val::Null, Val::Null) => true,
            (Val::Null, _) | (_, Val::Null) => false,
            _ => a.num() == b.num(),
        }
    }

    /// Whether `f` holds for some element of the tuple.
    fn tuple_any<'a>(&'a self, t: Tup<'a>, mut f: impl FnMut(Val<'a>) -> bool) -> bool {
        match t {
            Tup::Lit(elems) => elems.iter().any(|e| {
                f(match *e {
                    LitElem::Num(n) => Val::Num(n),
                    LitElem::Str(a, b) => {
                        Val::Str(Txt { raw: &self.src[a as usize..b as usize], esc: false })
                    }
                })
            }),
            Tup::Json(raw) => {
                // `raw` is a validated JSON array: walk its top-level elements.
                let mut p = skip_ws(raw, 1);
                if raw.get(p) == Some(&b']') {
                    return false;
                }
                loop {
                    p = skip_ws(raw, p);
                    let (v, end) = match raw.get(p) {
                        Some(b'[') => match skip_bracketed(raw, p, b'[', b']') {
                            Some(end) => (Val::Tuple(Tup::Json(&raw[p..end])), end),
                            None => return false,
                        },
                        _ => match parse_scalar(raw, p) {
                            Some(x) => x,
                            None => return false,
                        },
                    };
                    if f(v) {
                        return true;
                    }
                    p = skip_ws(raw, end);
                    if raw.get(p) != Some(&b',') {
                        return false;
                    }
                    p += 1;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime values.

/// A string: either plain bytes, or the raw content of a JSON string with backslash escapes
/// (`esc`), decoded on the fly.
#[derive(Clone, Copy, Debug)]
struct Txt<'a> {
    raw: &'a [u8],
    esc: bool,
}

/// A tuple: a literal from the expression, or a validated JSON array (its text from `[`).
#[derive(Clone, Copy, Debug)]
enum Tup<'a> {
    Lit(&'a [LitElem]),
    Json(&'a [u8]),
}

#[derive(Clone, Copy, Debug)]
enum Val<'a> {
    Num(f64),
    Str(Txt<'a>),
    Null,
    Tuple(Tup<'a>),
}

fn unescape_byte(c: u8) -> u8 {
    match c {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        other => other,
    }
}

impl<'a> Txt<'a> {
    /// The decoded bytes.
    fn bytes(self) -> impl Iterator<Item = u8> + 'a {
        let mut it = self.raw.iter();
        let esc = self.esc;
        std::iter::from_fn(move || {
            let c = *it.next()?;
            if esc && c == b'\\' {
                it.next().map(|&n| unescape_byte(n))
            } else {
                Some(c)
            }
        })
    }

    fn decoded(self) -> Cow<'a, [u8]> {
        if self.esc {
            Cow::Owned(self.bytes().collect())
        } else {
            Cow::Borrowed(self.raw)
        }
    }

    fn eq(self, other: Txt<'_>) -> bool {
        if !self.esc && !other.esc {
            self.raw == other.raw
        } else {
            self.bytes().eq(other.bytes())
        }
    }

    /// Whether `self` occurs in `hay`.
    fn is_in(self, hay: Txt<'_>) -> bool {
        let (needle, hay) = (self.decoded(), hay.decoded());
        needle.is_empty() || hay.windows(needle.len()).any(|w| w == &needle[..])
    }

    fn num(self) -> f64 {
        if !self.esc {
            return if self.raw.len() < STR_NUM_MAX { str_to_num(self.raw) } else { 0.0 };
        }
        let mut buf = [0u8; STR_NUM_MAX];
        let mut n = 0;
        for b in self.bytes() {
            if n == STR_NUM_MAX - 1 {
                return 0.0; // 256 bytes or more
            }
            buf[n] = b;
            n += 1;
        }
        str_to_num(&buf[..n])
    }
}

impl Val<'_> {
    fn num(self) -> f64 {
        match self {
            Val::Num(n) => n,
            Val::Str(s) => s.num(),
            Val::Null | Val::Tuple(_) => 0.0,
        }
    }

    fn truthy(self) -> bool {
        match self {
            Val::Num(n) => n != 0.0,
            Val::Str(s) => !s.raw.is_empty(),
            Val::Null => false,
            Val::Tuple(_) => true,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JSON: skipping (no checks beyond what finding the next key needs) and parsing one value.

fn skip_ws(j: &[u8], mut p: usize) -> usize {
    while p < j.len() && is_space(j[p]) {
        p += 1;
    }
    p
}

/// Past a string starting at `p` (a quote); a backslash skips the next byte.
fn skip_string(j: &[u8], p: usize) -> Option<usize> {
    string_end(j, p + 1).map(|(q, _)| q + 1)
}

/// From `p` (inside a string), the offset of the closing quote, and whether a backslash came
/// before it. A backslash makes the next byte literal. Runs of plain bytes are skipped eight at
/// a time.
fn string_end(j: &[u8], mut p: usize) -> Option<(usize, bool)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Non-zero iff some byte of `w` is `b`; the lowest flagged byte is the first such byte.
    let has = |w: u64, b: u8| {
        let x = w ^ (ONES * u64::from(b));
        x.wrapping_sub(ONES) & !x & HIGHS
    };
    let mut esc = false;
    loop {
        while let Some(block) = j.get(p..p + 8) {
            let w = u64::from_le_bytes([
                block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7],
            ]);
            let m = has(w, b'"') | has(w, b'\\');
            if m != 0 {
                p += (m.trailing_zeros() / 8) as usize;
                break;
            }
            p += 8;
        }
        match *j.get(p)? {
            b'"' => return Some((p, esc)),
            b'\\' => {
                esc = true;
                p += 2;
            }
            _ => p += 1,
        }
    }
}

/// Past an array or object starting at `p`, counting only its own kind of bracket.
fn skip_bracketed(j: &[u8], mut p: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 1usize;
    p += 1;
    while p < j.len() && depth > 0 {
        let c = j[p];
        if c == b'"' {
            p = skip_string(j, p)?;
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        }
        p += 1;
    }
    (depth == 0).then_some(p)
}

fn skip_value(j: &[u8], p: usize) -> Option<usize> {
    let p = skip_ws(j, p);
    let lit = |w: &[u8]| j[p..].starts_with(w).then_some(p + w.len());
    match *j.get(p)? {
        b'"' => skip_string(j, p),
        b'{' => skip_bracketed(j, p, b'{', b'}'),
        b'[' => skip_bracketed(j, p, b'[', b']'),
        b't' => lit(b"true"),
        b'f' => lit(b"false"),
        b'n' => lit(b"null"),
        _ => {
            let mut q = p;
            while q < j.len() && is_json_num_char(j[q]) {
                q += 1;
            }
            (q > p).then_some(q)
        }
    }
}

/// A string value at `p` (a quote): its raw content and whether it has escapes, and the
/// offset past the closing quote.
fn parse_string(j: &[u8], p: usize) -> Option<(Txt<'_>, usize)> {
    let (q, esc) = string_end(j, p + 1)?;
    Some((Txt { raw: &j[p + 1..q], esc }, q + 1))
}

/// A number at `p`: up to 255 number characters, which strtod must read entirely.
fn parse_number(j: &[u8], p: usize) -> Option<(f64, usize)> {
    let mut q = p;
    while q < j.len() && q - p < NUM_BUF && is_json_num_char(j[q]) {
        q += 1;
    }
    if q == p {
        return None;
    }
    let (v, used) = strtod(&j[p..q]);
    (used == q - p).then_some((v, q))
}

/// `true`, `false` or `null` at `p`, followed by whitespace, `,`, `]`, `}` or the end.
fn parse_literal(j: &[u8], p: usize, word: &[u8]) -> Option<usize> {
    if !j[p..].starts_with(word) {
        return None;
    }
    let end = p + word.len();
    match j.get(end) {
        None => Some(end),
        Some(&c) if is_space(c) || matches!(c, b',' | b']' | b'}') => Some(end),
        Some(_) => None,
    }
}

/// A string, number or literal value at `p` (after whitespace).
fn parse_scalar(j: &[u8], p: usize) -> Option<(Val<'_>, usize)> {
    match *j.get(p)? {
        b'"' => parse_string(j, p).map(|(t, e)| (Val::Str(t), e)),
        b't' => parse_literal(j, p, b"true").map(|e| (Val::Num(1.0), e)),
        b'f' => parse_literal(j, p, b"false").map(|e| (Val::Num(0.0), e)),
        b'n' => parse_literal(j, p, b"null").map(|e| (Val::Null, e)),
        c if c.is_ascii_digit() || c == b'-' || c == b'+' => {
            parse_number(j, p).map(|(v, e)| (Val::Num(v), e))
        }
        _ => None,
    }
}

/// Checks the array starting at `p` (a `[`) the way Redis converts one: elements are strings,
/// numbers, literals or arrays, separated by commas, with no trailing comma and no objects.
/// Returns the offset past its `]`. Iterative, so nesting depth costs no native stack.
fn scan_array(j: &[u8], p: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut p = p;
    // Invariant at the top of the loop: a value is expected at `p` (after whitespace).
    loop {
        p = skip_ws(j, p);
        let c = *j.get(p)?;
        if c == b'[' {
            depth += 1;
            p = skip_ws(j, p + 1);
            if j.get(p) != Some(&b']') {
                continue;
            }
            p += 1;
            depth -= 1;
            if depth == 0 {
                return Some(p);
            }
        } else {
            let (_, end) = parse_scalar(j, p)?;
            p = end;
        }
        // After a value: commas continue the array, brackets close it.
        loop {
            p = skip_ws(j, p);
            match *j.get(p)? {
                b',' => {
                    p += 1;
                    break;
                }
                b']' => {
                    p += 1;
                    depth -= 1;
                    if depth == 0 {
                        return Some(p);
                    }
                }
                _ => return None,
            }
        }
    }
}

/// The value starting at `p` (a field's value), as Redis converts it; `None` for objects and
/// anything malformed.
fn parse_value(j: &[u8], p: usize) -> Option<Val<'_>> {
    let p = skip_ws(j, p);
    match *j.get(p)? {
        b'[' => scan_array(j, p).map(|end| Val::Tuple(Tup::Json(&j[p..end]))),
        _ => parse_scalar(j, p).map(|(v, _)| v),
    }
}
