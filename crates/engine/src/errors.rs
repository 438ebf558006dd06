//! Redis's error replies, word for word: client libraries match on these strings.

use resp::reply;

pub const WRONGTYPE: &[u8] = b"WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
/// An integer argument that is negated inside (a count from the tail): Redis 7.2+ refuses
/// i64::MIN, whose negation overflows.
pub const NOT_NEGATABLE: &[u8] =
    b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// A count out of a command's own range: ZRANDMEMBER/HRANDFIELD WITHSCORES/WITHVALUES past
/// i64::MAX/2, a repeated-picks count past [`MAX_REPEATED_PICKS`].
pub const VALUE_OUT_OF_RANGE: &[u8] = b"ERR value is out of range";
/// The most picks a negative count may ask SRANDMEMBER, ZRANDMEMBER or HRANDFIELD for. Redis
/// builds any such reply, whatever its size, and a count of -2^31 exhausts the machine's memory
/// before the client could read a byte; we refuse past 2^24 picks (about 100 MiB of reply at
/// the least) with Redis's range error instead (a deliberate difference).
pub const MAX_REPEATED_PICKS: u64 = 1 << 24;
pub const NOT_FLOAT: &[u8] = b"ERR value is not a valid float";
pub const SYNTAX: &[u8] = b"ERR syntax error";
pub const OVERFLOW: &[u8] = b"ERR increment or decrement would overflow";
pub const NO_SUCH_KEY: &[u8] = b"ERR no such key";
pub const INCR_NAN_INF: &[u8] = b"ERR increment would produce NaN or Infinity";
pub const INVALID_EXPIRE: &[u8] = b"ERR invalid expire time in 'set' command";
pub const NOT_FLOAT_OR_RANGE: &[u8] = b"ERR value is out of range, must be positive";
pub const STRING_TOO_LONG: &[u8] = b"ERR string exceeds maximum allowed size (proto-max-bulk-len)";
pub const OFFSET_OUT_OF_RANGE: &[u8] = b"ERR offset is out of range";
pub const INDEX_OUT_OF_RANGE: &[u8] = b"ERR index out of range";
pub const DB_INDEX_OUT_OF_RANGE: &[u8] = b"ERR DB index is out of range";
/// A database index past a C int (Redis reads it with getIntFromObjectOrReply).
pub const NOT_AN_INT: &[u8] = b"ERR value is out of range, value must between -2147483648 and 2147483647";
pub const TIMEOUT_NOT_FLOAT: &[u8] = b"ERR timeout is not a float or out of range";
pub const TIMEOUT_NEGATIVE: &[u8] = b"ERR timeout is negative";
/// A timeout whose deadline (now + timeout) would not fit a 64-bit millisecond count.
pub const TIMEOUT_OUT_OF_RANGE: &[u8] = b"ERR timeout is out of range";

/// `ERR wrong number of arguments for '<name>' command` (name as the client typed it, lowercased
/// as Redis 7 prints it).
pub fn wrong_arity(out: &mut Vec<u8>, name: &[u8]) {
    let mut msg = b"ERR wrong number of arguments for '".to_vec();
    msg.extend(name.iter().map(|b| b.to_ascii_lowercase()));
    msg.extend_from_slice(b"' command");
    reply::error(out, &msg);
}

/// The wrong-arity error for `spec`, called as `name`: Redis's vector-set commands (a module
/// in Redis, group `module`) name themselves in capitals there, the others in lowercase.
pub fn wrong_arity_of(out: &mut Vec<u8>, spec: &crate::command::CommandSpec, name: &[u8]) {
    if spec.group == "module" {
        return wrong_arity_upper(out, spec.name.as_bytes());
    }
    wrong_arity(out, name)
}

/// The wrong-arity error with the name in capitals, as a Redis module's commands give it (the
/// vector-set handlers' own argument checks, and [`wrong_arity_of`]).
pub fn wrong_arity_upper(out: &mut Vec<u8>, name: &[u8]) {
    let mut msg = b"ERR wrong number of arguments for '".to_vec();
    msg.extend(name.iter().map(|b| b.to_ascii_uppercase()));
    msg.extend_from_slice(b"' command");
    reply::error(out, &msg);
}

/// `ERR unknown command '<name>', with args beginning with: '<a1>' '<a2>' ...` (Redis shows the
/// first args, each cut to 128 bytes, the whole preview to 128 args).
pub fn unknown_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(truncate(args[0]));
    msg.extend_from_slice(b"', with args beginning with: ");
    for a in args.iter().skip(1).take(128) {
        msg.push(b'\'');
        msg.extend_from_slice(truncate(a));
        msg.extend_from_slice(b"' ");
    }
    reply::error(out, &msg);
}

/// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
pub fn unknown_subcommand(out: &mut Vec<u8>, cmd: &[u8], sub: &[u8]) {
    reply::error(out, &unknown_subcommand_text(cmd, sub));
}

/// Redis's `addReplySubcommandSyntaxError`: a subcommand given arguments its own handler (not
/// the command table) refuses, named as the client wrote it: `unknown subcommand or wrong number
/// of arguments for '<sub>'. Try <CMD> HELP.`
pub fn subcommand_syntax_error(out: &mut Vec<u8>, cmd: &[u8], sub: &[u8]) {
    let mut msg = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    msg.extend_from_slice(truncate(sub));
    msg.extend_from_slice(b"'. Try ");
    msg.extend(cmd.iter().map(|b| b.to_ascii_uppercase()));
    msg.extend_from_slice(b" HELP.");
    reply::error(out, &msg);
}

/// The text of [`unknown_subcommand`]'s error.
pub fn unknown_subcommand_text(cmd: &[u8], sub: &[u8]) -> Vec<u8> {
    let mut msg = b"ERR unknown subcommand '".to_vec();
    msg.extend_from_slice(truncate(sub));
    msg.extend_from_slice(b"'. Try ");
    msg.extend(cmd.iter().map(|b| b.to_ascii_uppercase()));
    msg.extend_from_slice(b" HELP.");
    msg
}

fn truncate(a: &[u8]) -> &[u8] {
    &a[..a.len().min(128)]
}
