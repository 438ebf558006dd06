//! A test client for the SBE listener, built on the generated codec (crates/sbe-codec): one
//! [`Cmd`] per request family, its SBE encoding, the RESP argv it stands for (the mapping
//! docs/SBE.md specifies, written out independently of the server's decoder), and the reply
//! decoded into [`Res`], which a RESP reply also converts to, so the two can be compared.
#![allow(dead_code)]

use goblin_sbe::message_header_codec::MessageHeaderDecoder;
use goblin_sbe::*;
use std::io::{Read, Write};

pub use goblin_sbe::{
    counter_op::CounterOp, delete_condition::DeleteCondition, error_code::ErrorCode,
    expire_condition::ExpireCondition, expiry::Expiry, key_op::KeyOp, result_kind::ResultKind,
    sorted_set_comparison::SortedSetComparison, sorted_set_condition::SortedSetCondition,
    string_condition::StringCondition,
};

pub const HDR: usize = 8;

type B = Vec<u8>;

#[derive(Clone, Debug)]
pub enum Cmd {
    Set { key: B, value: B, cond: StringCondition, comparand: B, expiry: Expiry, ev: i64, get: bool },
    Counter { key: B, op: CounterOp, delta: i64, fdelta: f64 },
    Key { key: B, op: KeyOp, cond: ExpireCondition, value: i64 },
    HSet { key: B, nx: bool, fields: Vec<(B, B)> },
    HDel { key: B, fields: Vec<B> },
    SetW { key: B, rem: bool, members: Vec<B> },
    ZAdd { key: B, cond: SortedSetCondition, cmp: SortedSetComparison, ch: bool, entries: Vec<(f64, B)> },
    ZRem { key: B, members: Vec<B> },
    Push { key: B, right: bool, x: bool, values: Vec<B> },
    Pop { key: B, right: bool, count: Option<u32> },
    ArSet { key: B, index: u64, values: Vec<B> },
    ArMSet { key: B, entries: Vec<(u64, B)> },
    DelEx { key: B, cond: DeleteCondition, comparand: B },
}

fn b(x: &str) -> B {
    x.as_bytes().to_vec()
}

fn bool_t(v: bool) -> boolean_type::BooleanType {
    if v {
        boolean_type::BooleanType::T
    } else {
        boolean_type::BooleanType::F
    }
}

/// Prepends the Simple Open Framing Header.
pub fn framed(msg: &[u8]) -> Vec<u8> {
    let mut f = ((msg.len() + 6) as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&0x5BE0u16.to_be_bytes());
    f.extend_from_slice(msg);
    f
}

impl Cmd {
    /// The RESP argv this request stands for.
    pub fn resp(&self) -> Vec<B> {
        let mut a: Vec<B> = Vec::new();
        match self {
            Cmd::Set { key, value, cond, comparand, expiry, ev, get } => {
                a.extend([b("SET"), key.clone(), value.clone()]);
                let w = match cond {
                    StringCondition::NX => Some("NX"),
                    StringCondition::XX => Some("XX"),
                    StringCondition::IFEQ => Some("IFEQ"),
                    StringCondition::IFNE => Some("IFNE"),
                    StringCondition::IFDEQ => Some("IFDEQ"),
                    StringCondition::IFDNE => Some("IFDNE"),
                    _ => None,
                };
                if let Some(w) = w {
                    a.push(b(w));
                    if w.starts_with("IF") {
                        a.push(comparand.clone());
                    }
                }
                if *get {
                    a.push(b("GET"));
                }
                match expiry {
                    Expiry::EX => a.extend([b("EX"), b(&ev.to_string())]),
                    Expiry::PX => a.extend([b("PX"), b(&ev.to_string())]),
                    Expiry::EXAT => a.extend([b("EXAT"), b(&ev.to_string())]),
                    Expiry::PXAT => a.extend([b("PXAT"), b(&ev.to_string())]),
                    Expiry::KEEPTTL => a.push(b("KEEPTTL")),
                    _ => {}
                }
            }
            Cmd::Counter { key, op, delta, fdelta } => match op {
                CounterOp::INCRBY => a.extend([b("INCRBY"), key.clone(), b(&delta.to_string())]),
                CounterOp::DECRBY => a.extend([b("DECRBY"), key.clone(), b(&delta.to_string())]),
                _ => a.extend([b("INCRBYFLOAT"), key.clone(), b(&fdelta.to_string())]),
            },
            Cmd::Key { key, op, cond, value } => {
                let name = format!("{op}");
                a.extend([b(&name), key.clone()]);
                if matches!(op, KeyOp::EXPIRE | KeyOp::PEXPIRE | KeyOp::EXPIREAT | KeyOp::PEXPIREAT) {
                    a.push(b(&value.to_string()));
                }
                if *cond != ExpireCondition::NONE {
                    a.push(b(&format!("{cond}")));
                }
            }
            Cmd::HSet { key, nx, fields } => {
                a.extend([b(if *nx { "HSETNX" } else { "HSET" }), key.clone()]);
                for (f, v) in fields {
                    a.extend([f.clone(), v.clone()]);
                }
            }
            Cmd::HDel { key, fields } => {
                a.extend([b("HDEL"), key.clone()]);
                a.extend(fields.iter().cloned());
            }
            Cmd::SetW { key, rem, members } => {
                a.extend([b(if *rem { "SREM" } else { "SADD" }), key.clone()]);
                a.extend(members.iter().cloned());
            }
            Cmd::ZAdd { key, cond, cmp, ch, entries } => {
                a.extend([b("ZADD"), key.clone()]);
                if *cond != SortedSetCondition::NONE {
                    a.push(b(&format!("{cond}")));
                }
                if *cmp != SortedSetComparison::NONE {
                    a.push(b(&format!("{cmp}")));
                }
                if *ch {
                    a.push(b("CH"));
                }
                for (s, m) in entries {
                    a.extend([b(&s.to_string()), m.clone()]);
                }
            }
            Cmd::ZRem { key, members } => {
                a.extend([b("ZREM"), key.clone()]);
                a.extend(members.iter().cloned());
            }
            Cmd::Push { key, right, x, values } => {
                let name = format!("{}PUSH{}", if *right { "R" } else { "L" }, if *x { "X" } else { "" });
                a.extend([b(&name), key.clone()]);
                a.extend(values.iter().cloned());
            }
            Cmd::Pop { key, right, count } => {
                a.extend([b(if *right { "RPOP" } else { "LPOP" }), key.clone()]);
                if let Some(n) = count {
                    a.push(b(&n.to_string()));
                }
            }
            Cmd::ArSet { key, index, values } => {
                a.extend([b("ARSET"), key.clone(), b(&index.to_string())]);
                a.extend(values.iter().cloned());
            }
            Cmd::ArMSet { key, entries } => {
                a.extend([b("ARMSET"), key.clone()]);
                for (i, v) in entries {
                    a.extend([b(&i.to_string()), v.clone()]);
                }
            }
            Cmd::DelEx { key, cond, comparand } => {
                a.extend([b("DELEX"), key.clone()]);
                if *cond != DeleteCondition::NONE {
                    a.extend([b(&format!("{cond}")), comparand.clone()]);
                }
            }
        }
        a
    }

    /// The SBE message (message header and body, no framing header).
    pub fn sbe(&self, corr: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 1 << 16];
        let len = self.encode(corr, &mut buf);
        buf.truncate(len);
        buf
    }

    fn encode(&self, corr: u64, buf: &mut [u8]) -> usize {
        let w = WriteBuf::new(buf);
        macro_rules! start {
            ($enc:ty) => {{
                let e = <$enc>::default().wrap(w, HDR);
                let mut e = e.header(0).parent().unwrap();
                e.correlation_id(corr);
                e
            }};
        }
        match self {
            Cmd::Set { key, value, cond, comparand, expiry, ev, get } => {
                let mut e = start!(string_set_codec::StringSetEncoder);
                e.condition(*cond).expiry(*expiry).return_old(bool_t(*get)).expiry_value(*ev);
                e.key(key).value(value).comparand(comparand);
                HDR + e.encoded_length()
            }
            Cmd::Counter { key, op, delta, fdelta } => {
                let mut e = start!(counter_codec::CounterEncoder);
                e.op(*op).delta(*delta).delta_float(*fdelta).key(key);
                HDR + e.encoded_length()
            }
            Cmd::Key { key, op, cond, value } => {
                let mut e = start!(key_write_codec::KeyWriteEncoder);
                e.op(*op).condition(*cond).value(*value).key(key);
                HDR + e.encoded_length()
            }
            Cmd::HSet { key, nx, fields } => {
                let mut e = start!(hash_set_codec::HashSetEncoder);
                e.op(if *nx { hash_set_op::HashSetOp::HSETNX } else { hash_set_op::HashSetOp::HSET });
                let mut g = e.fields_encoder(fields.len() as u16, Default::default());
                for (f, v) in fields {
                    g.advance().unwrap();
                    g.field(f).value(v);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::HDel { key, fields } => {
                let e = start!(hash_del_codec::HashDelEncoder);
                let mut g = e.fields_encoder(fields.len() as u16, Default::default());
                for f in fields {
                    g.advance().unwrap();
                    g.field(f);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::SetW { key, rem, members } => {
                let mut e = start!(set_write_codec::SetWriteEncoder);
                e.op(if *rem { set_op::SetOp::SREM } else { set_op::SetOp::SADD });
                let mut g = e.members_encoder(members.len() as u16, Default::default());
                for m in members {
                    g.advance().unwrap();
                    g.member(m);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::ZAdd { key, cond, cmp, ch, entries } => {
                let mut e = start!(sorted_set_add_codec::SortedSetAddEncoder);
                e.condition(*cond).comparison(*cmp).changed(bool_t(*ch));
                let mut g = e.entries_encoder(entries.len() as u16, Default::default());
                for (s, m) in entries {
                    g.advance().unwrap();
                    g.score(*s);
                    g.member(m);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::ZRem { key, members } => {
                let e = start!(sorted_set_remove_codec::SortedSetRemoveEncoder);
                let mut g = e.members_encoder(members.len() as u16, Default::default());
                for m in members {
                    g.advance().unwrap();
                    g.member(m);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::Push { key, right, x, values } => {
                let mut e = start!(list_push_codec::ListPushEncoder);
                e.side(if *right { list_side::ListSide::RIGHT } else { list_side::ListSide::LEFT });
                e.only_if_exists(bool_t(*x));
                let mut g = e.values_encoder(values.len() as u16, Default::default());
                for v in values {
                    g.advance().unwrap();
                    g.value(v);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::Pop { key, right, count } => {
                let mut e = start!(list_pop_codec::ListPopEncoder);
                e.side(if *right { list_side::ListSide::RIGHT } else { list_side::ListSide::LEFT });
                e.count_opt(*count);
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::ArSet { key, index, values } => {
                let mut e = start!(array_set_codec::ArraySetEncoder);
                e.index(*index);
                let mut g = e.values_encoder(values.len() as u16, Default::default());
                for v in values {
                    g.advance().unwrap();
                    g.value(v);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::ArMSet { key, entries } => {
                let e = start!(array_multi_set_codec::ArrayMultiSetEncoder);
                let mut g = e.entries_encoder(entries.len() as u16, Default::default());
                for (i, v) in entries {
                    g.advance().unwrap();
                    g.index(*i);
                    g.value(v);
                }
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            Cmd::DelEx { key, cond, comparand } => {
                let mut e = start!(conditional_delete_codec::ConditionalDeleteEncoder);
                e.condition(*cond).key(key).comparand(comparand);
                HDR + e.encoded_length()
            }
        }
    }
}

/// A reply, from either protocol.
#[derive(Clone, Debug, PartialEq)]
pub enum Res {
    Ok,
    Int(i64),
    /// Bulk or status text (for INCRBYFLOAT's DOUBLE: its text).
    Bytes(B),
    Nil,
    Array(Vec<B>),
    Err(B),
}

/// A decoded SBE reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Ack { corr: u64, offset: u64, kind: ResultKind, int: i64, dbl: f64, items: Vec<B>, bytes: B },
    Error { corr: u64, code: ErrorCode, msg: String },
}

impl Reply {
    pub fn corr(&self) -> u64 {
        match self {
            Reply::Ack { corr, .. } | Reply::Error { corr, .. } => *corr,
        }
    }

    pub fn offset(&self) -> Option<u64> {
        match self {
            Reply::Ack { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// As a [`Res`] (Errors of kind COMMAND_ERROR only; other codes panic with the reply).
    pub fn res(&self) -> Res {
        match self {
            Reply::Ack { kind, int, items, bytes, .. } => match kind {
                ResultKind::OK => Res::Ok,
                ResultKind::INT => Res::Int(*int),
                ResultKind::NIL => Res::Nil,
                ResultKind::ARRAY => Res::Array(items.clone()),
                _ => Res::Bytes(bytes.clone()),
            },
            Reply::Error { code: ErrorCode::COMMAND_ERROR, msg, .. } => Res::Err(msg.as_bytes().to_vec()),
            other => panic!("not a command's reply: {other:?}"),
        }
    }
}

/// A RESP2 reply as a [`Res`].
pub fn res_of(f: &resp::Frame) -> Res {
    match f {
        resp::Frame::Simple(s) if s == b"OK" => Res::Ok,
        resp::Frame::Simple(s) => Res::Bytes(s.clone()),
        resp::Frame::Error(e) => Res::Err(e.clone()),
        resp::Frame::Integer(n) => Res::Int(*n),
        resp::Frame::Bulk(None) | resp::Frame::Array(None) | resp::Frame::Null => Res::Nil,
        resp::Frame::Bulk(Some(b)) => Res::Bytes(b.clone()),
        resp::Frame::Array(Some(items)) => Res::Array(
            items
                .iter()
                .map(|i| match i {
                    resp::Frame::Bulk(Some(b)) => b.clone(),
                    other => panic!("array item {other:?}"),
                })
                .collect(),
        ),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Decodes one SBE message (message header and body).
pub fn decode(msg: &[u8]) -> Reply {
    let hdr = MessageHeaderDecoder::default().wrap(ReadBuf::new(msg), 0);
    assert_eq!((hdr.schema_id(), hdr.version()), (SBE_SCHEMA_ID, SBE_SCHEMA_VERSION));
    match hdr.template_id() {
        ack_codec::SBE_TEMPLATE_ID => {
            let d = ack_codec::AckDecoder::default().header(hdr, 0);
            let (corr, offset, kind, int, dbl) =
                (d.correlation_id(), d.logical_offset(), d.result_kind(), d.int_value(), d.double_value());
            let mut g = d.items_decoder();
            let mut items = Vec::new();
            while g.advance().unwrap().is_some() {
                let (at, len) = g.item_decoder();
                items.push(msg[at..at + len].to_vec());
            }
            let mut d = g.parent().unwrap();
            let (at, len) = d.bytes_decoder();
            assert_eq!(at + len, msg.len(), "the Ack fills its frame exactly");
            Reply::Ack { corr, offset, kind, int, dbl, items, bytes: msg[at..at + len].to_vec() }
        }
        error_codec::SBE_TEMPLATE_ID => {
            let mut d = error_codec::ErrorDecoder::default().header(hdr, 0);
            let (at, len) = d.message_decoder();
            assert_eq!(at + len, msg.len(), "the Error fills its frame exactly");
            let msg = String::from_utf8(msg[at..at + len].to_vec()).unwrap();
            Reply::Error { corr: d.correlation_id(), code: d.code(), msg }
        }
        t => panic!("unexpected template {t}"),
    }
}

/// Reads one framed reply. Panics on EOF or timeout.
pub fn read_reply(s: &mut impl Read) -> Reply {
    let mut h = [0u8; 6];
    s.read_exact(&mut h).expect("an SBE reply");
    let len = u32::from_be_bytes(h[..4].try_into().unwrap()) as usize;
    assert_eq!(u16::from_be_bytes([h[4], h[5]]), 0x5BE0);
    let mut msg = vec![0u8; len - 6];
    s.read_exact(&mut msg).expect("the rest of the SBE reply");
    decode(&msg)
}

/// Sends `cmd` and returns its reply.
pub fn call(s: &mut (impl Read + Write), corr: u64, cmd: &Cmd) -> Reply {
    s.write_all(&framed(&cmd.sbe(corr))).unwrap();
    let r = read_reply(s);
    assert_eq!(r.corr(), corr, "{r:?}");
    r
}
