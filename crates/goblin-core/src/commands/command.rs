//! COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST [FILTERBY ...] | GETKEYS cmd ... |
//! HELP], generated from the engine's command table in Redis 7's reply shapes (redis-cli asks
//! for COMMAND DOCS when it starts; cluster clients read COMMAND INFO for key positions).

use super::{help, sub_arity_ok};
use crate::conn::Conn;
use engine::command::all;
use engine::{errors, CommandSpec, Flags};
use resp::reply;

pub fn command(c: &mut Conn, args: &[&[u8]]) {
    let out = &mut c.out;
    if args.len() == 1 {
        let specs: Vec<_> = all().collect();
        reply::array_len(out, specs.len());
        for s in specs {
            write_info(out, s);
        }
        return;
    }
    let sub = args[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"count" => {
            if sub_arity_ok(out, args, 2) {
                reply::integer(out, all().count() as i64);
            }
        }
        b"info" => {
            if args.len() == 2 {
                let specs: Vec<_> = all().collect();
                reply::array_len(out, specs.len());
                for s in specs {
                    write_info(out, s);
                }
                return;
            }
            reply::array_len(out, args.len() - 2);
            for name in &args[2..] {
                match engine::lookup(name) {
                    Some(s) => write_info(out, s),
                    None => reply::null_bulk(out), // as Redis 7 answers an unknown name
                }
            }
        }
        b"docs" => {
            let specs: Vec<&CommandSpec> = if args.len() == 2 {
                all().collect()
            } else {
                args[2..].iter().filter_map(|n| engine::lookup(n)).collect()
            };
            reply::array_len(out, specs.len() * 2);
            for s in specs {
                reply::bulk(out, s.name.as_bytes());
                reply::array_len(out, 4);
                reply::bulk(out, b"summary");
                reply::bulk(out, s.summary.as_bytes());
                reply::bulk(out, b"group");
                reply::bulk(out, s.group.as_bytes());
            }
        }
        b"list" => list(out, args),
        b"getkeys" => {
            if sub_arity_ok(out, args, -3) {
                getkeys(out, &args[2..]);
            }
        }
        b"help" => help(
            out,
            &[
                "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "(no subcommand)",
                "    Return details about all commands.",
                "COUNT",
                "    Return the total number of commands in this server.",
                "LIST",
                "    Return a list of all commands in this server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple commands.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple commands.",
                "GETKEYS <full-command>",
                "    Return the keys from a full command.",
                "HELP",
                "    Print this help.",
            ],
        ),
        _ => errors::unknown_subcommand(out, args[0], args[1]),
    }
}

/// ACL categories, derived from the flags and the group as Redis assigns them.
fn acl_categories(s: &CommandSpec) -> Vec<&'static str> {
    let mut v = Vec::new();
    if s.flags.has(Flags::WRITE) {
        v.push("@write");
    }
    if s.flags.has(Flags::READONLY) {
        v.push("@read");
    }
    match s.group {
        "string" => v.push("@string"),
        "generic" => v.push("@keyspace"),
        "hash" => v.push("@hash"),
        "list" => v.push("@list"),
        "set" => v.push("@set"),
        "sorted_set" | "sorted-set" | "zset" => v.push("@sortedset"),
        "connection" => v.push("@connection"),
        "transactions" => v.push("@transaction"),
        _ => {}
    }
    if s.flags.has(Flags::ADMIN) {
        v.push("@admin");
        v.push("@dangerous");
    }
    if s.flags.has(Flags::BLOCKING) {
        v.push("@blocking");
    }
    v.push(if s.flags.has(Flags::FAST) { "@fast" } else { "@slow" });
    v
}

/// One COMMAND INFO entry: name, arity, flags, first/last/step, ACL categories, tips, key
/// specs, subcommands.
fn write_info(out: &mut Vec<u8>, s: &CommandSpec) {
    reply::array_len(out, 10);
    reply::bulk(out, s.name.as_bytes());
    reply::integer(out, s.arity as i64);
    let flags = s.flags.names();
    reply::array_len(out, flags.len());
    for f in flags {
        reply::simple(out, f.as_bytes());
    }
    reply::integer(out, s.first_key as i64);
    reply::integer(out, s.last_key as i64);
    reply::integer(out, s.key_step as i64);
    let cats = acl_categories(s);
    reply::array_len(out, cats.len());
    for cat in cats {
        reply::simple(out, cat.as_bytes());
    }
    reply::array_len(out, 0); // tips
    if s.first_key > 0 {
        reply::array_len(out, 1);
        reply::array_len(out, 6);
        reply::bulk(out, b"flags");
        let kflags: &[&[u8]] = if s.flags.has(Flags::WRITE) {
            &[b"RW", b"update"]
        } else if s.flags.has(Flags::READONLY) {
            &[b"RO", b"access"]
        } else {
            &[]
        };
        reply::array_len(out, kflags.len());
        for f in kflags {
            reply::simple(out, f);
        }
        reply::bulk(out, b"begin_search");
        reply::array_len(out, 4);
        reply::bulk(out, b"type");
        reply::bulk(out, b"index");
        reply::bulk(out, b"spec");
        reply::array_len(out, 2);
        reply::bulk(out, b"index");
        reply::integer(out, s.first_key as i64);
        reply::bulk(out, b"find_keys");
        reply::array_len(out, 4);
        reply::bulk(out, b"type");
        reply::bulk(out, b"range");
        reply::bulk(out, b"spec");
        reply::array_len(out, 6);
        reply::bulk(out, b"lastkey");
        // Relative to the first key; negative values count from the end.
        let last = if s.last_key < 0 { s.last_key } else { s.last_key - s.first_key };
        reply::integer(out, last as i64);
        reply::bulk(out, b"keystep");
        reply::integer(out, s.key_step as i64);
        reply::bulk(out, b"limit");
        reply::integer(out, 0);
    } else {
        reply::array_len(out, 0);
    }
    reply::array_len(out, 0); // subcommands
}

/// COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]
fn list(out: &mut Vec<u8>, args: &[&[u8]]) {
    let names: Vec<&'static str> = match args.len() {
        2 => all().map(|s| s.name).collect(),
        5 if args[2].eq_ignore_ascii_case(b"FILTERBY") => {
            let val = args[4];
            match args[3].to_ascii_lowercase().as_slice() {
                b"module" => Vec::new(),
                b"aclcat" => {
                    let mut cat = b"@".to_vec();
                    cat.extend(val.iter().map(u8::to_ascii_lowercase));
                    all()
                        .filter(|s| acl_categories(s).iter().any(|c| c.as_bytes() == cat))
                        .map(|s| s.name)
                        .collect()
                }
                b"pattern" => all()
                    .filter(|s| engine::util::glob_match(val, s.name.as_bytes(), true))
                    .map(|s| s.name)
                    .collect(),
                _ => return reply::error(out, errors::SYNTAX),
            }
        }
        _ => return reply::error(out, errors::SYNTAX),
    };
    reply::array_len(out, names.len());
    for n in names {
        reply::bulk(out, n.as_bytes());
    }
}

/// COMMAND GETKEYS: the keys of `cmd` (a full command) from its table key positions.
fn getkeys(out: &mut Vec<u8>, cmd: &[&[u8]]) {
    let Some(s) = engine::lookup(cmd[0]) else {
        return reply::error(out, b"ERR Invalid command specified");
    };
    if !s.arity_ok(cmd.len()) {
        return reply::error(out, b"ERR Invalid number of arguments specified for command");
    }
    if s.first_key <= 0 {
        return reply::error(out, b"ERR The command has no key arguments");
    }
    let argc = cmd.len() as i64;
    let first = s.first_key as i64;
    let last = if s.last_key < 0 { argc + s.last_key as i64 } else { (s.last_key as i64).min(argc - 1) };
    let step = (s.key_step as i64).max(1);
    let keys: Vec<&[u8]> = (first..=last).step_by(step as usize).map(|i| cmd[i as usize]).collect();
    reply::array_len(out, keys.len());
    for k in keys {
        reply::bulk(out, k);
    }
}
