//! String commands: GET, SET and the rest of the string and counter family.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use crate::errors;
use resp::reply;
use store::ValueRef;

const R: u32 = Flags::READONLY | Flags::FAST;

pub static COMMANDS: &[CommandSpec] = &[spec("get", 2, R, (1, 1, 1), "string", "Returns the string value of a key.", Handler::Data(get))];

/// GET key
fn get(c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match c.read(args[1]) {
        None => reply::null_bulk(out),
        Some(ValueRef::Str(s)) => s.with_bytes(|b| reply::bulk(out, b)),
        Some(_) => reply::error(out, errors::WRONGTYPE),
    }
}
