//! Server and connection commands. Most need connection or server state and are marked
//! `Handler::Server`: the server crate dispatches them by name. The rest run here.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use resp::reply;

const STALE_FAST: u32 = Flags::STALE | Flags::FAST;

pub static COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, STALE_FAST, (0, 0, 0), "connection", "Returns the server's liveliness response.", Handler::Data(ping)),
    spec("echo", 2, STALE_FAST, (0, 0, 0), "connection", "Returns the given string.", Handler::Data(echo)),
];

/// PING [message]
fn ping(_c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match args.len() {
        1 => reply::simple(out, b"PONG"),
        2 => reply::bulk(out, args[1]),
        _ => crate::errors::wrong_arity(out, args[0]),
    }
}

/// ECHO message
fn echo(_c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    reply::bulk(out, args[1]);
}
