//! The SBE listener (`--sbe-port`, `--sbe-unixsocket`): write commands as FIX Simple Binary
//! Encoding messages (schemas/goblin-sbe.xml, codec generated into crates/sbe-codec by
//! sbe-tool; docs/SBE.md describes the wire).
//!
//! An SBE connection is an ordinary [`Conn`] with `sbe` set: only its input decoder and its
//! reply encoder differ. Each message becomes the RESP argv of the equivalent command and goes
//! through [`Server::call`], the single entry point RESP clients use, so batches, canonical
//! mutations, the journal, the firehose, broker ack mode (held replies), maxmemory, CLIENT
//! PAUSE and READONLY on a replica apply unchanged. The command's RESP2 reply, written to the
//! output buffer as usual, is then replaced by an Ack (with the logical offset) or an Error.
//!
//! Framing: the Simple Open Framing Header (4-byte big-endian frame length including the
//! header, 2-byte big-endian encoding type 0x5BE0 for SBE 1.0 little-endian), then the
//! standard message header and the body.
//!
//! Invariants. (1) Nothing reaches the generated decoders unvalidated: they index slices
//! without checks, so [`validate`] walks the whole message (fixed block, every group entry,
//! every var-data length) against the template's shape first, and a message that fails gets an
//! Error and changes nothing. (2) Every request gets exactly one reply, in order: an Ack or an
//! Error carrying its correlationId. (3) A refused message runs no command at all, so it can
//! never change state. (4) Only a frame whose length cannot be trusted (shorter than its own
//! header, or over the bound) closes the connection, after its Error: past it the stream
//! cannot be resynchronised.

use crate::conn::Conn;
use crate::server::Server;
use goblin_sbe::message_header_codec::{MessageHeaderDecoder, MessageHeaderEncoder};
use goblin_sbe::*;
use std::borrow::Cow;

/// SOFH encoding type of SBE 1.0 little-endian messages.
pub const ENCODING_SBE_LE: u16 = 0x5BE0;
/// Simple Open Framing Header: u32 length + u16 encoding type, big-endian.
pub const SOFH_LEN: usize = 6;
const HDR_LEN: usize = message_header_codec::ENCODED_LENGTH;
/// varDataEncoding's declared maxValue: a longer length field is malformed.
const VAR_MAX: u32 = 1 << 30;
/// Argument lists up to this long are built on the stack.
const STACK_ARGS: usize = 16;
/// An Ack carries at most this many array items (groupSizeEncoding's u16 count).
const MAX_ITEMS: u32 = u16::MAX as u32;

/// How to present the command's reply in the Ack beyond its RESP type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hint {
    Plain,
    /// INCRBYFLOAT answers a bulk string holding a number: DOUBLE, with the text as bytes.
    Double,
}

/// Per-connection SBE state.
#[derive(Default)]
pub struct SbeConn {
    /// The request CLIENT PAUSE holds (`Conn::paused` has its argv): its correlationId and
    /// hint, for the Ack written when the pause ends.
    pub(crate) held: Option<(u64, Hint)>,
}

/// One argument of the argv a message becomes: a literal, bytes of the message, or a number
/// formatted into the scratch buffer.
#[derive(Clone, Copy)]
enum Arg {
    Lit(&'static [u8]),
    Msg(usize, usize),
    Num(usize, usize),
}

/// Buffers reused across messages (the server's; taken out while a batch is processed).
#[derive(Default)]
pub(crate) struct Scratch {
    args: Vec<Arg>,
    nums: Vec<u8>,
    reply: Vec<u8>,
}

/// Why a message was refused (an Error reply; nothing ran).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub code: error_code::ErrorCode,
    pub msg: Cow<'static, str>,
}

fn refuse(code: error_code::ErrorCode, msg: impl Into<Cow<'static, str>>) -> Refusal {
    Refusal { code, msg: msg.into() }
}
fn malformed(msg: impl Into<Cow<'static, str>>) -> Refusal {
    refuse(error_code::ErrorCode::MALFORMED, msg)
}
fn truncated(msg: &'static str) -> Refusal {
    refuse(error_code::ErrorCode::TRUNCATED, msg)
}
fn bad_enum(field: &'static str) -> Refusal {
    malformed(format!("invalid value for field '{field}'"))
}

/// What the front of the input holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Frame {
    /// Not a whole frame yet.
    Partial,
    /// A whole SBE frame of this many bytes (header included).
    Message(usize),
    /// A whole frame to skip with an Error (its encoding type is not SBE 1.0 LE).
    Skip(usize, u16),
    /// A frame length that cannot be trusted: Error, then close.
    Fatal(error_code::ErrorCode, String),
}

/// Reads the framing header at the front of `buf`. `max` bounds a frame's length.
pub(crate) fn frame(buf: &[u8], max: u64) -> Frame {
    if buf.len() < SOFH_LEN {
        return Frame::Partial;
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as u64;
    let enc = u16::from_be_bytes([buf[4], buf[5]]);
    if len < SOFH_LEN as u64 {
        return Frame::Fatal(
            error_code::ErrorCode::MALFORMED,
            format!("frame length {len} is shorter than the 6-byte framing header"),
        );
    }
    if len > max {
        return Frame::Fatal(
            error_code::ErrorCode::FRAME_TOO_LARGE,
            format!("frame length {len} is over the limit of {max} bytes"),
        );
    }
    if (buf.len() as u64) < len {
        return Frame::Partial;
    }
    if enc != ENCODING_SBE_LE {
        return Frame::Skip(len as usize, enc);
    }
    Frame::Message(len as usize)
}

/// The correlationId of a message that could not be decoded: every request's body starts with
/// it, so the first 8 bytes after the message header when present, else 0.
pub(crate) fn correlation_of(msg: &[u8]) -> u64 {
    match msg.get(HDR_LEN..HDR_LEN + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        None => 0,
    }
}

/// A request template's layout: fixed block length, groups (entry block length, var-data
/// fields per entry), then the top-level var-data fields. Checked against the generated
/// encoders by the unit tests.
struct Shape {
    block: u16,
    groups: &'static [(u16, u8)],
    vars: u8,
}

fn shape(template: u16) -> Option<Shape> {
    let s = |block, groups, vars| Some(Shape { block, groups, vars });
    match template {
        string_set_codec::SBE_TEMPLATE_ID => s(string_set_codec::SBE_BLOCK_LENGTH, &[], 3),
        counter_codec::SBE_TEMPLATE_ID => s(counter_codec::SBE_BLOCK_LENGTH, &[], 1),
        key_write_codec::SBE_TEMPLATE_ID => s(key_write_codec::SBE_BLOCK_LENGTH, &[], 1),
        hash_set_codec::SBE_TEMPLATE_ID => s(hash_set_codec::SBE_BLOCK_LENGTH, &[(0, 2)], 1),
        hash_del_codec::SBE_TEMPLATE_ID => s(hash_del_codec::SBE_BLOCK_LENGTH, &[(0, 1)], 1),
        set_write_codec::SBE_TEMPLATE_ID => s(set_write_codec::SBE_BLOCK_LENGTH, &[(0, 1)], 1),
        sorted_set_add_codec::SBE_TEMPLATE_ID => s(sorted_set_add_codec::SBE_BLOCK_LENGTH, &[(8, 1)], 1),
        sorted_set_remove_codec::SBE_TEMPLATE_ID => {
            s(sorted_set_remove_codec::SBE_BLOCK_LENGTH, &[(0, 1)], 1)
        }
        list_push_codec::SBE_TEMPLATE_ID => s(list_push_codec::SBE_BLOCK_LENGTH, &[(0, 1)], 1),
        list_pop_codec::SBE_TEMPLATE_ID => s(list_pop_codec::SBE_BLOCK_LENGTH, &[], 1),
        array_set_codec::SBE_TEMPLATE_ID => s(array_set_codec::SBE_BLOCK_LENGTH, &[(0, 1)], 1),
        array_multi_set_codec::SBE_TEMPLATE_ID => s(array_multi_set_codec::SBE_BLOCK_LENGTH, &[(8, 1)], 1),
        conditional_delete_codec::SBE_TEMPLATE_ID => s(conditional_delete_codec::SBE_BLOCK_LENGTH, &[], 2),
        _ => None,
    }
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Checks the message header and walks the whole body against the template's shape, so that
/// the generated decoder (which does not check bounds) only ever reads inside `msg`.
/// Returns the template id.
pub(crate) fn validate(msg: &[u8]) -> Result<u16, Refusal> {
    if msg.len() < HDR_LEN {
        return Err(truncated("the frame ends inside the message header"));
    }
    let (block, template) = (le16(msg, 0).unwrap_or(0), le16(msg, 2).unwrap_or(0));
    let (schema, version) = (le16(msg, 4).unwrap_or(0), le16(msg, 6).unwrap_or(0));
    if schema != SBE_SCHEMA_ID {
        return Err(refuse(
            error_code::ErrorCode::SCHEMA_MISMATCH,
            format!("schema id {schema}, expected {SBE_SCHEMA_ID}"),
        ));
    }
    if version != SBE_SCHEMA_VERSION {
        return Err(refuse(
            error_code::ErrorCode::SCHEMA_MISMATCH,
            format!("schema version {version}, expected {SBE_SCHEMA_VERSION}"),
        ));
    }
    let Some(sh) = shape(template) else {
        return Err(refuse(
            error_code::ErrorCode::UNKNOWN_TEMPLATE,
            format!("unknown template id {template}"),
        ));
    };
    if block != sh.block {
        return Err(malformed(format!(
            "block length {block}, expected {} for template {template}",
            sh.block
        )));
    }
    let body = &msg[HDR_LEN..];
    let need = |pos: usize, n: usize| -> Result<usize, Refusal> {
        match pos.checked_add(n) {
            Some(end) if end <= body.len() => Ok(end),
            _ => Err(truncated("the frame ends before the message's declared contents")),
        }
    };
    let var = |pos: usize| -> Result<usize, Refusal> {
        let at = need(pos, 4)?;
        let len = u32::from_le_bytes(body[pos..at].try_into().unwrap_or([0; 4]));
        if len > VAR_MAX {
            return Err(malformed(format!(
                "var data length {len} is over the schema's maximum of {VAR_MAX}"
            )));
        }
        need(at, len as usize)
    };
    let mut pos = need(0, sh.block as usize)?;
    for &(gblock, gvars) in sh.groups {
        let at = need(pos, 4)?;
        let (gb, n) = (le16(body, pos).unwrap_or(0), le16(body, pos + 2).unwrap_or(0));
        if gb != gblock {
            return Err(malformed(format!("group block length {gb}, expected {gblock}")));
        }
        pos = at;
        for _ in 0..n {
            pos = need(pos, gblock as usize)?;
            for _ in 0..gvars {
                pos = var(pos)?;
            }
        }
    }
    for _ in 0..sh.vars {
        pos = var(pos)?;
    }
    if pos != body.len() {
        return Err(malformed(format!("{} bytes after the end of the message", body.len() - pos)));
    }
    Ok(template)
}

impl Scratch {
    fn lit(&mut self, a: &'static [u8]) {
        self.args.push(Arg::Lit(a));
    }
    /// Var data at decoder coordinates (offset in the message, length).
    fn msg(&mut self, (at, len): (usize, usize)) {
        self.args.push(Arg::Msg(at, len));
    }
    fn int(&mut self, v: i64) {
        let start = self.nums.len();
        self.nums.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self.args.push(Arg::Num(start, self.nums.len() - start));
    }
    fn uint(&mut self, v: u64) {
        let start = self.nums.len();
        self.nums.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self.args.push(Arg::Num(start, self.nums.len() - start));
    }
    /// A double as the shortest text that reads back to the same bits (`inf`, `-inf` and
    /// `NaN` pass through; the command then refuses what it refuses over RESP).
    fn float(&mut self, v: f64) {
        let start = self.nums.len();
        // Integral values (most scores) as integers: cheaper than ryu and the same number
        // (below 2^53 every integer is exact; -0.0 keeps its sign through ryu).
        if v == v.trunc() && v.abs() < 9.0e15 && !(v == 0.0 && v.is_sign_negative()) {
            self.nums.extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
        } else {
            self.nums.extend_from_slice(ryu::Buffer::new().format(v).as_bytes());
        }
        self.args.push(Arg::Num(start, self.nums.len() - start));
    }
    /// A slot for the key, which comes last on the wire (after the groups) but first in argv.
    fn placeholder(&mut self) -> usize {
        self.args.push(Arg::Lit(b""));
        self.args.len() - 1
    }

    /// Turns a validated message into argv (in `self.args`): returns the correlationId and
    /// the reply hint. Enum fields outside the schema's values and inconsistent fields are
    /// refused here, before anything runs.
    pub(crate) fn decode(&mut self, msg: &[u8]) -> Result<(u64, Hint), Refusal> {
        use boolean_type::BooleanType as B;
        self.args.clear();
        self.nums.clear();
        let template = validate(msg)?;
        let hdr = MessageHeaderDecoder::default().wrap(ReadBuf::new(msg), 0);
        let bool_of = |b: B, field| match b {
            B::T => Ok(true),
            B::F => Ok(false),
            B::NullVal => Err(bad_enum(field)),
        };
        let mut hint = Hint::Plain;
        let corr = match template {
            string_set_codec::SBE_TEMPLATE_ID => {
                use expiry::Expiry as E;
                use string_condition::StringCondition as C;
                let mut d = string_set_codec::StringSetDecoder::default().header(hdr, 0);
                let (cond, exp, get, ev) = (d.condition(), d.expiry(), d.return_old(), d.expiry_value());
                let (key, value, comp) = (d.key_decoder(), d.value_decoder(), d.comparand_decoder());
                self.lit(b"SET");
                self.msg(key);
                self.msg(value);
                let word: Option<&'static [u8]> = match cond {
                    C::NONE => None,
                    C::NX => Some(b"NX"),
                    C::XX => Some(b"XX"),
                    C::IFEQ => Some(b"IFEQ"),
                    C::IFNE => Some(b"IFNE"),
                    C::IFDEQ => Some(b"IFDEQ"),
                    C::IFDNE => Some(b"IFDNE"),
                    C::NullVal => return Err(bad_enum("condition")),
                };
                let compares = matches!(cond, C::IFEQ | C::IFNE | C::IFDEQ | C::IFDNE);
                if !compares && comp.1 != 0 {
                    return Err(malformed("a comparand without an IF* condition"));
                }
                if let Some(w) = word {
                    self.lit(w);
                    if compares {
                        self.msg(comp);
                    }
                }
                if bool_of(get, "returnOld")? {
                    self.lit(b"GET");
                }
                match exp {
                    E::NONE => {}
                    E::KEEPTTL => self.lit(b"KEEPTTL"),
                    E::EX | E::PX | E::EXAT | E::PXAT => {
                        self.lit(match exp {
                            E::EX => b"EX",
                            E::PX => b"PX",
                            E::EXAT => b"EXAT",
                            _ => b"PXAT",
                        });
                        self.int(ev);
                    }
                    E::NullVal => return Err(bad_enum("expiry")),
                }
                d.correlation_id()
            }
            counter_codec::SBE_TEMPLATE_ID => {
                use counter_op::CounterOp as O;
                let mut d = counter_codec::CounterDecoder::default().header(hdr, 0);
                let key = d.key_decoder();
                match d.op() {
                    O::INCRBY | O::DECRBY => {
                        self.lit(if d.op() == O::INCRBY { b"INCRBY" } else { b"DECRBY" });
                        self.msg(key);
                        self.int(d.delta());
                    }
                    O::INCRBYFLOAT => {
                        self.lit(b"INCRBYFLOAT");
                        self.msg(key);
                        self.float(d.delta_float());
                        hint = Hint::Double;
                    }
                    O::NullVal => return Err(bad_enum("op")),
                }
                d.correlation_id()
            }
            key_write_codec::SBE_TEMPLATE_ID => {
                use expire_condition::ExpireCondition as C;
                use key_op::KeyOp as O;
                let mut d = key_write_codec::KeyWriteDecoder::default().header(hdr, 0);
                let key = d.key_decoder();
                let (op, cond) = (d.op(), d.condition());
                let name: &'static [u8] = match op {
                    O::DEL => b"DEL",
                    O::UNLINK => b"UNLINK",
                    O::EXPIRE => b"EXPIRE",
                    O::PEXPIRE => b"PEXPIRE",
                    O::EXPIREAT => b"EXPIREAT",
                    O::PEXPIREAT => b"PEXPIREAT",
                    O::PERSIST => b"PERSIST",
                    O::NullVal => return Err(bad_enum("op")),
                };
                let timed = matches!(op, O::EXPIRE | O::PEXPIRE | O::EXPIREAT | O::PEXPIREAT);
                let word: Option<&'static [u8]> = match cond {
                    C::NONE => None,
                    C::NX => Some(b"NX"),
                    C::XX => Some(b"XX"),
                    C::GT => Some(b"GT"),
                    C::LT => Some(b"LT"),
                    C::NullVal => return Err(bad_enum("condition")),
                };
                if word.is_some() && !timed {
                    return Err(malformed("a condition applies to the EXPIRE family only"));
                }
                self.lit(name);
                self.msg(key);
                if timed {
                    self.int(d.value());
                }
                if let Some(w) = word {
                    self.lit(w);
                }
                d.correlation_id()
            }
            hash_set_codec::SBE_TEMPLATE_ID => {
                use hash_set_op::HashSetOp as O;
                let d = hash_set_codec::HashSetDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(match d.op() {
                    O::HSET => b"HSET",
                    O::HSETNX => b"HSETNX",
                    O::NullVal => return Err(bad_enum("op")),
                });
                let key_at = self.placeholder();
                let mut g = d.fields_decoder();
                while let Ok(Some(_)) = g.advance() {
                    let f = g.field_decoder();
                    let v = g.value_decoder();
                    self.msg(f);
                    self.msg(v);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            hash_del_codec::SBE_TEMPLATE_ID => {
                let d = hash_del_codec::HashDelDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(b"HDEL");
                let key_at = self.placeholder();
                let mut g = d.fields_decoder();
                while let Ok(Some(_)) = g.advance() {
                    let f = g.field_decoder();
                    self.msg(f);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            set_write_codec::SBE_TEMPLATE_ID => {
                use set_op::SetOp as O;
                let d = set_write_codec::SetWriteDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(match d.op() {
                    O::SADD => b"SADD",
                    O::SREM => b"SREM",
                    O::NullVal => return Err(bad_enum("op")),
                });
                let key_at = self.placeholder();
                let mut g = d.members_decoder();
                while let Ok(Some(_)) = g.advance() {
                    let m = g.member_decoder();
                    self.msg(m);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            sorted_set_add_codec::SBE_TEMPLATE_ID => {
                use sorted_set_comparison::SortedSetComparison as Cmp;
                use sorted_set_condition::SortedSetCondition as C;
                let d = sorted_set_add_codec::SortedSetAddDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(b"ZADD");
                let key_at = self.placeholder();
                match d.condition() {
                    C::NONE => {}
                    C::NX => self.lit(b"NX"),
                    C::XX => self.lit(b"XX"),
                    C::NullVal => return Err(bad_enum("condition")),
                }
                match d.comparison() {
                    Cmp::NONE => {}
                    Cmp::GT => self.lit(b"GT"),
                    Cmp::LT => self.lit(b"LT"),
                    Cmp::NullVal => return Err(bad_enum("comparison")),
                }
                if bool_of(d.changed(), "changed")? {
                    self.lit(b"CH");
                }
                let mut g = d.entries_decoder();
                while let Ok(Some(_)) = g.advance() {
                    self.float(g.score());
                    let m = g.member_decoder();
                    self.msg(m);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            sorted_set_remove_codec::SBE_TEMPLATE_ID => {
                let d = sorted_set_remove_codec::SortedSetRemoveDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(b"ZREM");
                let key_at = self.placeholder();
                let mut g = d.members_decoder();
                while let Ok(Some(_)) = g.advance() {
                    let m = g.member_decoder();
                    self.msg(m);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            list_push_codec::SBE_TEMPLATE_ID => {
                use list_side::ListSide as S;
                let d = list_push_codec::ListPushDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                let x = bool_of(d.only_if_exists(), "onlyIfExists")?;
                self.lit(match (d.side(), x) {
                    (S::LEFT, false) => b"LPUSH",
                    (S::LEFT, true) => b"LPUSHX",
                    (S::RIGHT, false) => b"RPUSH",
                    (S::RIGHT, true) => b"RPUSHX",
                    (S::NullVal, _) => return Err(bad_enum("side")),
                });
                let key_at = self.placeholder();
                let mut g = d.values_decoder();
                while let Ok(Some(_)) = g.advance() {
                    let v = g.value_decoder();
                    self.msg(v);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            list_pop_codec::SBE_TEMPLATE_ID => {
                use list_side::ListSide as S;
                let mut d = list_pop_codec::ListPopDecoder::default().header(hdr, 0);
                let key = d.key_decoder();
                self.lit(match d.side() {
                    S::LEFT => b"LPOP",
                    S::RIGHT => b"RPOP",
                    S::NullVal => return Err(bad_enum("side")),
                });
                self.msg(key);
                if let Some(n) = d.count() {
                    if n > MAX_ITEMS {
                        return Err(malformed(format!(
                            "count {n} is over {MAX_ITEMS}, the most elements an Ack carries"
                        )));
                    }
                    self.uint(n as u64);
                }
                d.correlation_id()
            }
            array_set_codec::SBE_TEMPLATE_ID => {
                let d = array_set_codec::ArraySetDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(b"ARSET");
                let key_at = self.placeholder();
                self.uint(d.index());
                let mut g = d.values_decoder();
                while let Ok(Some(_)) = g.advance() {
                    let v = g.value_decoder();
                    self.msg(v);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            array_multi_set_codec::SBE_TEMPLATE_ID => {
                let d = array_multi_set_codec::ArrayMultiSetDecoder::default().header(hdr, 0);
                let corr = d.correlation_id();
                self.lit(b"ARMSET");
                let key_at = self.placeholder();
                let mut g = d.entries_decoder();
                while let Ok(Some(_)) = g.advance() {
                    self.uint(g.index());
                    let v = g.value_decoder();
                    self.msg(v);
                }
                let mut d = g.parent().map_err(|_| malformed("group"))?;
                self.args[key_at] = msg_arg(d.key_decoder());
                corr
            }
            conditional_delete_codec::SBE_TEMPLATE_ID => {
                use delete_condition::DeleteCondition as C;
                let mut d = conditional_delete_codec::ConditionalDeleteDecoder::default().header(hdr, 0);
                let (key, comp) = (d.key_decoder(), d.comparand_decoder());
                self.lit(b"DELEX");
                self.msg(key);
                let word: Option<&'static [u8]> = match d.condition() {
                    C::NONE => None,
                    C::IFEQ => Some(b"IFEQ"),
                    C::IFNE => Some(b"IFNE"),
                    C::IFDEQ => Some(b"IFDEQ"),
                    C::IFDNE => Some(b"IFDNE"),
                    C::NullVal => return Err(bad_enum("condition")),
                };
                match word {
                    Some(w) => {
                        self.lit(w);
                        self.msg(comp);
                    }
                    None if comp.1 != 0 => return Err(malformed("a comparand without an IF* condition")),
                    None => {}
                }
                d.correlation_id()
            }
            // `validate` accepted only the templates above.
            other => {
                return Err(refuse(
                    error_code::ErrorCode::UNKNOWN_TEMPLATE,
                    format!("unknown template id {other}"),
                ))
            }
        };
        Ok((corr, hint))
    }

    /// The argument list `decode` built, as slices of `msg` and of the number buffer.
    fn argv<'a>(&'a self, msg: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.args.iter().map(move |a| match *a {
            Arg::Lit(l) => l,
            Arg::Msg(at, len) => &msg[at..at + len],
            Arg::Num(at, len) => &self.nums[at..at + len],
        })
    }
}

fn msg_arg((at, len): (usize, usize)) -> Arg {
    Arg::Msg(at, len)
}

/// Appends a framed message of `body_len` bytes (message header included) and returns the
/// slice to encode it into.
fn frame_into(out: &mut Vec<u8>, msg_len: usize) -> &mut [u8] {
    let start = out.len();
    out.resize(start + SOFH_LEN + msg_len, 0);
    let frame = &mut out[start..];
    frame[..4].copy_from_slice(&((SOFH_LEN + msg_len) as u32).to_be_bytes());
    frame[4..6].copy_from_slice(&ENCODING_SBE_LE.to_be_bytes());
    &mut frame[SOFH_LEN..]
}

/// Appends an Error message.
pub(crate) fn write_error(out: &mut Vec<u8>, corr: u64, code: error_code::ErrorCode, text: &[u8]) {
    // Var data is bounded by the schema; error texts are far below it.
    let text = &text[..text.len().min(VAR_MAX as usize)];
    let len = HDR_LEN + error_codec::SBE_BLOCK_LENGTH as usize + 4 + text.len();
    let buf = frame_into(out, len);
    let enc = error_codec::ErrorEncoder::default().wrap(WriteBuf::new(buf), HDR_LEN);
    let mut hdr: MessageHeaderEncoder<_> = enc.header(0);
    let Ok(mut enc) = hdr.parent() else { return };
    enc.correlation_id(corr);
    enc.code(code);
    enc.message(text);
}

/// The result an Ack carries, read from a RESP2 reply.
enum Reply<'a> {
    Ok,
    Int(i64),
    Bytes(&'a [u8]),
    Nil,
    /// Element count, and the reply bytes from the first element's header on.
    Array(usize, &'a [u8]),
    Error(&'a [u8]),
}

/// One RESP line at the front of `r`: its text (type byte excluded) and what follows.
fn line(r: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = r.windows(2).position(|w| w == b"\r\n")?;
    Some((r.get(1..end)?, &r[end + 2..]))
}

/// A bulk string at the front of `r` (None for the null bulk) and what follows.
fn bulk(r: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    if r.first() != Some(&b'$') {
        return None;
    }
    let (len, rest) = line(r)?;
    if len == b"-1" {
        return Some((None, rest));
    }
    let n: usize = std::str::from_utf8(len).ok()?.parse().ok()?;
    let body = rest.get(..n)?;
    Some((Some(body), rest.get(n + 2..)?))
}

fn classify(reply: &[u8]) -> Reply<'_> {
    let Some(&t) = reply.first() else { return Reply::Nil };
    let text = line(reply).map(|(l, _)| l);
    match (t, text) {
        (b'+', Some(b"OK")) => Reply::Ok,
        (b'+', Some(l)) => Reply::Bytes(l),
        (b'-', Some(l)) => Reply::Error(l),
        (b':', Some(l)) => match std::str::from_utf8(l).ok().and_then(|s| s.parse().ok()) {
            Some(n) => Reply::Int(n),
            None => Reply::Bytes(reply),
        },
        (b'$', _) => match bulk(reply) {
            Some((Some(b), _)) => Reply::Bytes(b),
            Some((None, _)) => Reply::Nil,
            None => Reply::Bytes(reply),
        },
        (b'*', Some(b"-1")) | (b'_', _) => Reply::Nil,
        (b'*', Some(l)) => match std::str::from_utf8(l).ok().and_then(|s| s.parse::<usize>().ok()) {
            Some(n) if n <= MAX_ITEMS as usize => Reply::Array(n, line(reply).map_or(&[][..], |(_, r)| r)),
            _ => Reply::Bytes(reply),
        },
        _ => Reply::Bytes(reply),
    }
}

/// Appends the Ack (or, for an error reply, the Error) for a command's RESP2 reply.
pub(crate) fn write_reply(out: &mut Vec<u8>, corr: u64, offset: u64, hint: Hint, reply: &[u8]) {
    use result_kind::ResultKind as K;
    let (kind, int, dbl, bytes, items) = match classify(reply) {
        Reply::Error(e) => return write_error(out, corr, error_code::ErrorCode::COMMAND_ERROR, e),
        Reply::Ok => (K::OK, 0, 0.0, &[][..], None),
        Reply::Int(n) => (K::INT, n, 0.0, &[][..], None),
        Reply::Nil => (K::NIL, 0, 0.0, &[][..], None),
        Reply::Bytes(b) if hint == Hint::Double => {
            let d = std::str::from_utf8(b).ok().and_then(|s| s.parse::<f64>().ok());
            match d {
                Some(d) => (K::DOUBLE, 0, d, b, None),
                None => (K::BYTES, 0, 0.0, b, None),
            }
        }
        Reply::Bytes(b) => (K::BYTES, 0, 0.0, b, None),
        Reply::Array(n, elems) => (K::ARRAY, 0, 0.0, &[][..], Some((n, elems))),
    };
    let bytes = &bytes[..bytes.len().min(VAR_MAX as usize)];
    // Exact size first: the generated encoder writes into a slice of the right length.
    let mut items_len = 0;
    let mut n_items = 0;
    if let Some((n, mut rest)) = items {
        for _ in 0..n {
            let Some((b, r)) = bulk(rest) else { break };
            items_len += 4 + b.map_or(0, <[u8]>::len);
            n_items += 1;
            rest = r;
        }
    }
    let len = HDR_LEN + ack_codec::SBE_BLOCK_LENGTH as usize + 4 + items_len + 4 + bytes.len();
    let buf = frame_into(out, len);
    let enc = ack_codec::AckEncoder::default().wrap(WriteBuf::new(buf), HDR_LEN);
    let mut hdr = enc.header(0);
    let Ok(mut enc) = hdr.parent() else { return };
    enc.correlation_id(corr);
    enc.logical_offset(offset);
    enc.result_kind(kind);
    enc.int_value(int);
    enc.double_value(dbl);
    let mut g = enc.items_encoder(n_items as u16, ack_codec::encoder::ItemsEncoder::default());
    if let Some((_, mut rest)) = items {
        while let Ok(Some(_)) = g.advance() {
            let Some((b, r)) = bulk(rest) else { break };
            g.item(b.unwrap_or_default());
            rest = r;
        }
    }
    let Ok(mut enc) = g.parent() else { return };
    enc.bytes(bytes);
}

impl Server {
    /// Executes every complete SBE frame at the front of `buf` for `conn` (the SBE
    /// counterpart of `process_input`, which calls it): returns the bytes consumed.
    pub(crate) fn process_sbe(&mut self, conn: &mut Conn, slot: usize, buf: &[u8]) -> usize {
        let mut scratch = std::mem::take(&mut self.sbe_scratch);
        let max = self.limits.max_bulk_len;
        let mut pos = 0;
        let mut since_clock = 0u32;
        while pos < buf.len() {
            if conn.input_waits() {
                break;
            }
            match frame(&buf[pos..], max) {
                Frame::Partial => break,
                Frame::Fatal(code, text) => {
                    write_error(&mut conn.out, 0, code, text.as_bytes());
                    conn.close_after_reply = true;
                    pos = buf.len();
                    break;
                }
                Frame::Skip(n, enc) => {
                    let text = format!("encoding type 0x{enc:04X}, expected 0x{ENCODING_SBE_LE:04X}");
                    let corr = correlation_of(&buf[pos + SOFH_LEN..pos + n]);
                    write_error(
                        &mut conn.out,
                        corr,
                        error_code::ErrorCode::BAD_ENCODING_TYPE,
                        text.as_bytes(),
                    );
                    pos += n;
                }
                Frame::Message(n) => {
                    let msg = &buf[pos + SOFH_LEN..pos + n];
                    conn.qbuf_running = buf.len() - pos;
                    pos += n;
                    since_clock += 1;
                    if since_clock == crate::dispatch::CLOCK_EVERY {
                        since_clock = 0;
                        self.clock_ms = crate::server::now_ms();
                    }
                    match scratch.decode(msg) {
                        Err(r) => write_error(&mut conn.out, correlation_of(msg), r.code, r.msg.as_bytes()),
                        Ok((corr, hint)) => {
                            let mut reply = std::mem::take(&mut scratch.reply);
                            let argc = scratch.args.len();
                            // As in `process_input`: short argument lists stay on the stack.
                            if argc <= STACK_ARGS {
                                let mut argv: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
                                for (a, s) in argv.iter_mut().zip(scratch.argv(msg)) {
                                    *a = s;
                                }
                                self.sbe_call(conn, slot, corr, hint, &argv[..argc], &mut reply);
                            } else {
                                let argv: Vec<&[u8]> = scratch.argv(msg).collect();
                                self.sbe_call(conn, slot, corr, hint, &argv, &mut reply);
                            }
                            scratch.reply = reply;
                        }
                    }
                }
            }
        }
        conn.qbuf_running = 0;
        self.sbe_scratch = scratch;
        pos
    }

    /// Runs one decoded request through [`Server::call`] and turns its reply into an Ack or
    /// an Error. A request CLIENT PAUSE holds is answered when the pause ends
    /// ([`Server::sbe_resume_paused`]).
    pub(crate) fn sbe_call(
        &mut self,
        conn: &mut Conn,
        slot: usize,
        corr: u64,
        hint: Hint,
        argv: &[&[u8]],
        reply: &mut Vec<u8>,
    ) {
        let mark = conn.out.len();
        let before = conn.last_write_offset;
        self.call(conn, slot, argv);
        if conn.paused.is_some() {
            if let Some(s) = conn.sbe.as_mut() {
                s.held = Some((corr, hint));
            }
            return;
        }
        // The output limit may have dropped the buffer (the client is closing): nothing to do.
        if conn.close_now || conn.out.len() < mark {
            return;
        }
        // The command's own batch, if it committed one (offsets only grow, so a change means
        // this command wrote); otherwise the current offset.
        let offset =
            if conn.last_write_offset != before { conn.last_write_offset } else { self.engine.repl.offset };
        reply.clear();
        reply.extend_from_slice(&conn.out[mark..]);
        // Held replies (broker ack mode) start at or before `mark`: the Ack stays held.
        conn.out.truncate(mark);
        write_reply(&mut conn.out, corr, offset, hint, reply);
    }

    /// The end of a CLIENT PAUSE: runs the held SBE request and answers it.
    pub(crate) fn sbe_resume_paused(&mut self, conn: &mut Conn, slot: usize, argv: &[&[u8]]) {
        let (corr, hint) = conn.sbe.as_mut().and_then(|s| s.held.take()).unwrap_or((0, Hint::Plain));
        let mut reply = Vec::new();
        self.sbe_call(conn, slot, corr, hint, argv, &mut reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_hash_set(fields: &[(&[u8], &[u8])], key: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 4096];
        let enc = hash_set_codec::HashSetEncoder::default().wrap(WriteBuf::new(&mut buf), HDR_LEN);
        let mut enc = enc.header(0).parent().unwrap();
        enc.correlation_id(7);
        enc.op(hash_set_op::HashSetOp::HSET);
        let mut g = enc.fields_encoder(fields.len() as u16, Default::default());
        for (f, v) in fields {
            g.advance().unwrap();
            g.field(f);
            g.value(v);
        }
        let mut enc = g.parent().unwrap();
        enc.key(key);
        let len = HDR_LEN + enc.encoded_length();
        buf.truncate(len);
        buf
    }

    #[test]
    fn group_shapes_match_the_generated_codec() {
        use array_multi_set_codec::encoder::EntriesEncoder as A;
        use sorted_set_add_codec::encoder::EntriesEncoder as Z;
        assert_eq!(Z::<sorted_set_add_codec::SortedSetAddEncoder>::block_length(), 8);
        assert_eq!(A::<array_multi_set_codec::ArrayMultiSetEncoder>::block_length(), 8);
        assert_eq!(
            hash_set_codec::encoder::FieldsEncoder::<hash_set_codec::HashSetEncoder>::block_length(),
            0
        );
    }

    #[test]
    fn decodes_a_hash_set_into_argv() {
        let msg = encode_hash_set(&[(b"f1", b"v1"), (b"f2", b"")], b"key");
        let mut s = Scratch::default();
        let (corr, hint) = s.decode(&msg).unwrap();
        assert_eq!((corr, hint), (7, Hint::Plain));
        let argv: Vec<&[u8]> = s.argv(&msg).collect();
        assert_eq!(argv, vec![&b"HSET"[..], b"key", b"f1", b"v1", b"f2", b""]);
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_refused() {
        let msg = encode_hash_set(&[(b"f1", b"v1")], b"key");
        let mut s = Scratch::default();
        for cut in 0..msg.len() {
            let r = s.decode(&msg[..cut]).unwrap_err();
            assert_eq!(r.code, error_code::ErrorCode::TRUNCATED, "cut at {cut}");
        }
        let mut long = msg.clone();
        long.push(0);
        assert_eq!(s.decode(&long).unwrap_err().code, error_code::ErrorCode::MALFORMED);
    }

    #[test]
    fn frames() {
        assert_eq!(frame(&[0, 0, 0], 100), Frame::Partial);
        assert!(matches!(frame(&[0, 0, 0, 5, 0x5B, 0xE0], 100), Frame::Fatal(..)));
        assert!(matches!(frame(&[0, 0, 1, 0, 0x5B, 0xE0], 100), Frame::Fatal(..)));
        assert_eq!(frame(&[0, 0, 0, 7, 0x5B, 0xE0], 100), Frame::Partial);
        assert_eq!(frame(&[0, 0, 0, 7, 0x5B, 0xE0, 1], 100), Frame::Message(7));
        assert_eq!(frame(&[0, 0, 0, 6, 0x12, 0x34], 100), Frame::Skip(6, 0x1234));
    }

    #[test]
    fn replies() {
        let ack = |reply: &[u8], hint| {
            let mut out = Vec::new();
            write_reply(&mut out, 9, 42, hint, reply);
            out
        };
        for r in [
            &b"+OK\r\n"[..],
            b":5\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"$3\r\nabc\r\n",
            b"*2\r\n$1\r\na\r\n$0\r\n\r\n",
        ] {
            let out = ack(r, Hint::Plain);
            let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
            assert_eq!(len, out.len());
            let msg = &out[SOFH_LEN..];
            let hdr = MessageHeaderDecoder::default().wrap(ReadBuf::new(msg), 0);
            assert_eq!(hdr.template_id(), ack_codec::SBE_TEMPLATE_ID);
            let d = ack_codec::AckDecoder::default().header(hdr, 0);
            assert_eq!((d.correlation_id(), d.logical_offset()), (9, 42));
        }
        let out = ack(b"-WRONGTYPE x\r\n", Hint::Plain);
        let hdr = MessageHeaderDecoder::default().wrap(ReadBuf::new(&out[SOFH_LEN..]), 0);
        assert_eq!(hdr.template_id(), error_codec::SBE_TEMPLATE_ID);
    }

    fn encode_zadd(corr: u64, entries: &[(f64, Vec<u8>)], key: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 1 << 16];
        let enc = sorted_set_add_codec::SortedSetAddEncoder::default().wrap(WriteBuf::new(&mut buf), HDR_LEN);
        let mut enc = enc.header(0).parent().unwrap();
        enc.correlation_id(corr);
        enc.condition(sorted_set_condition::SortedSetCondition::XX);
        enc.comparison(sorted_set_comparison::SortedSetComparison::NONE);
        enc.changed(boolean_type::BooleanType::T);
        let mut g = enc.entries_encoder(entries.len() as u16, Default::default());
        for (score, m) in entries {
            g.advance().unwrap();
            g.score(*score);
            g.member(m);
        }
        let mut enc = g.parent().unwrap();
        enc.key(key);
        let len = HDR_LEN + enc.encoded_length();
        buf.truncate(len);
        buf
    }

    /// Decodes a framed reply with the generated decoders: (template, correlationId, offset,
    /// kind, int, items, bytes) for an Ack; an Error's message in `bytes`.
    #[allow(clippy::type_complexity)]
    fn read_back(out: &[u8]) -> (u16, u64, u64, u8, i64, Vec<Vec<u8>>, Vec<u8>) {
        let msg = &out[SOFH_LEN..];
        let hdr = MessageHeaderDecoder::default().wrap(ReadBuf::new(msg), 0);
        if hdr.template_id() == error_codec::SBE_TEMPLATE_ID {
            let mut d = error_codec::ErrorDecoder::default().header(hdr, 0);
            let (at, len) = d.message_decoder();
            assert_eq!(at + len, msg.len());
            return (101, d.correlation_id(), 0, d.code() as u8, 0, vec![], msg[at..at + len].to_vec());
        }
        let d = ack_codec::AckDecoder::default().header(hdr, 0);
        let head = (d.correlation_id(), d.logical_offset(), d.result_kind() as u8, d.int_value());
        let mut g = d.items_decoder();
        let mut items = Vec::new();
        while let Ok(Some(_)) = g.advance() {
            let (at, len) = g.item_decoder();
            items.push(msg[at..at + len].to_vec());
        }
        let mut d = g.parent().unwrap();
        let (at, len) = d.bytes_decoder();
        assert_eq!(at + len, msg.len(), "the Ack fills its frame");
        (100, head.0, head.1, head.2, head.3, items, msg[at..at + len].to_vec())
    }

    proptest::proptest! {
        /// Request direction: what the generated encoder writes decodes into the argv it
        /// stands for, scores reading back to the same bits.
        #[test]
        fn requests_round_trip(
            corr: u64,
            entries in proptest::collection::vec((proptest::num::f64::ANY, proptest::collection::vec(proptest::num::u8::ANY, 0..20)), 0..8),
            key in proptest::collection::vec(proptest::num::u8::ANY, 0..20),
        ) {
            let msg = encode_zadd(corr, &entries, &key);
            let mut s = Scratch::default();
            let (c, _) = s.decode(&msg).unwrap();
            proptest::prop_assert_eq!(c, corr);
            let argv: Vec<&[u8]> = s.argv(&msg).collect();
            proptest::prop_assert_eq!(&argv[..4], &[&b"ZADD"[..], &key[..], b"XX", b"CH"][..]);
            for (i, (score, m)) in entries.iter().enumerate() {
                let text = std::str::from_utf8(argv[4 + 2 * i]).unwrap();
                let back: f64 = text.parse().unwrap();
                proptest::prop_assert!(back.to_bits() == score.to_bits() || (back.is_nan() && score.is_nan()));
                proptest::prop_assert_eq!(argv[5 + 2 * i], &m[..]);
            }
            proptest::prop_assert_eq!(argv.len(), 4 + 2 * entries.len());
        }

        /// Any bytes, and any corruption of a valid message, decode or are refused: never a
        /// panic, and a refused message runs nothing.
        #[test]
        fn garbage_never_panics(
            noise in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            flips in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY), 0..4),
            cut: usize,
        ) {
            let mut s = Scratch::default();
            let _ = s.decode(&noise);
            let mut msg = encode_hash_set(&[(b"f", b"v"), (b"g", b"")], b"key");
            for (at, b) in flips {
                let n = msg.len();
                msg[at % n] = b;
            }
            let n = msg.len();
            let _ = s.decode(&msg[..cut % (n + 1)]);
            let _ = frame(&noise, 1 << 20);
        }

        /// Reply direction: a RESP2 reply becomes an Ack (or Error) that the generated decoder
        /// reads back to the same content.
        #[test]
        fn replies_round_trip(
            corr: u64,
            offset: u64,
            n: i64,
            items in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..16), 0..6),
            kind in 0u8..5,
        ) {
            let mut reply = Vec::new();
            match kind {
                0 => resp::reply::integer(&mut reply, n),
                1 => resp::reply::bulk(&mut reply, &items.concat()),
                2 => resp::reply::bulk_array(&mut reply, &items),
                3 => reply.extend_from_slice(b"$-1\r\n"),
                _ => reply.extend_from_slice(b"-ERR bad thing\r\n"),
            }
            let mut out = Vec::new();
            write_reply(&mut out, corr, offset, Hint::Plain, &reply);
            proptest::prop_assert_eq!(u32::from_be_bytes(out[..4].try_into().unwrap()) as usize, out.len());
            let (t, c, o, k, i, got_items, bytes) = read_back(&out);
            proptest::prop_assert_eq!(c, corr);
            match kind {
                0 => proptest::prop_assert_eq!((t, o, k, i), (100, offset, result_kind::ResultKind::INT as u8, n)),
                1 => proptest::prop_assert_eq!((t, k, bytes), (100, result_kind::ResultKind::BYTES as u8, items.concat())),
                2 => proptest::prop_assert_eq!((t, k, got_items), (100, result_kind::ResultKind::ARRAY as u8, items)),
                3 => proptest::prop_assert_eq!((t, k), (100, result_kind::ResultKind::NIL as u8)),
                _ => proptest::prop_assert_eq!((t, k, bytes), (101, error_code::ErrorCode::COMMAND_ERROR as u8, b"ERR bad thing".to_vec())),
            }
        }
    }
}
