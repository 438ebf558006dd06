//! COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST [FILTERBY ...] | GETKEYS cmd ... |
//! HELP], generated from the engine's command table in Redis 7's reply shapes (redis-cli asks
//! for COMMAND DOCS when it starts; cluster clients read COMMAND INFO for key positions).

use super::keyspec::{CommandMeta, KeySpec};
use super::{help, sub_arity_ok};
use crate::conn::Conn;
use engine::command::all;
use engine::{errors, syntax, CommandSpec, Flags};
use resp::{reply, Proto};

pub fn command(c: &mut Conn, args: &[&[u8]]) {
    let proto = c.proto;
    let out = &mut c.out;
    if args.len() == 1 {
        let specs: Vec<_> = all().collect();
        reply::array_len(out, specs.len());
        for s in specs {
            write_info(out, proto, s);
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
                    write_info(out, proto, s);
                }
                return;
            }
            reply::array_len(out, args.len() - 2);
            for name in &args[2..] {
                match engine::lookup(name) {
                    Some(s) => write_info(out, proto, s),
                    None => reply::null_bulk(out, proto), // as Redis 7 answers an unknown name
                }
            }
        }
        b"docs" => {
            // Unknown names are left out of the reply, as Redis 7 does; `parent|sub` names one
            // subcommand of a container.
            let names: Vec<(&str, &CommandSpec)> = if args.len() == 2 {
                all().map(|s| (s.name, s)).collect()
            } else {
                args[2..].iter().filter_map(|n| docs_target(n)).collect()
            };
            reply::map_len(out, proto, names.len());
            for (name, s) in names {
                reply::bulk(out, name.as_bytes());
                write_doc(out, proto, name, s);
            }
        }
        b"list" => list(out, args),
        b"getkeys" => {
            if sub_arity_ok(out, args, -3) {
                getkeys(out, &args[2..], false);
            }
        }
        b"getkeysandflags" => {
            if sub_arity_ok(out, args, -3) {
                getkeys(out, &args[2..], true);
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

/// Whether a request carries a command flag, as Redis decides it before running the request:
/// the command's own (`own`, an [`engine::Flags`] bit), or the one Redis gives the
/// subcommand it names (`name`: FUNCTION LOAD is `write` and `denyoom`, FUNCTION is neither).
pub(crate) fn request_flagged(spec: &CommandSpec, args: &[&[u8]], own: u32, name: &str) -> bool {
    spec.flags.has(own) || args.get(1).is_some_and(|sub| subcommand_has_flag(spec, sub, name))
}

/// Whether `spec` is a container whose subcommand `sub` Redis flags `flag`.
pub(crate) fn subcommand_has_flag(spec: &CommandSpec, sub: &[u8], flag: &str) -> bool {
    full_subcommand_name(spec.name, sub).and_then(meta_of).is_some_and(|m| m.flags.contains(&flag))
}

/// Whether a request carries the command flag `name` as Redis itself records it (the
/// subcommand's record for a container's subcommand, the command's otherwise); the table's
/// bit `own` for what Redis does not have. The flags Redis's checks read where goblin-core's
/// table keeps a bit of its own (PING is not `stale` in Redis, so a replica whose link is down
/// with replica-serve-stale-data no refuses it).
pub(crate) fn redis_flagged(spec: &CommandSpec, args: &[&[u8]], own: u32, name: &str) -> bool {
    if let Some(m) = args.get(1).and_then(|sub| full_subcommand_name(spec.name, sub)).and_then(meta_of) {
        return m.flags.contains(&name);
    }
    match meta_of_spec(spec) {
        Some(m) if subcommand_metas(spec.name).is_empty() => m.flags.contains(&name),
        _ => spec.flags.has(own),
    }
}

/// Redis's record of `name` (`container|sub` for a subcommand), when Redis has it.
fn meta_of(name: &str) -> Option<&'static CommandMeta> {
    let meta = super::redis_meta::META;
    meta.binary_search_by(|e| e.name.cmp(name)).ok().map(|i| &meta[i])
}

/// Redis's record of the command `spec`, found by the spec's address: the ACL check of a
/// restricted user's every command asks it (a category rule, the key specs), where a search
/// of the table by name would cost a dozen string comparisons.
fn meta_of_spec(spec: &CommandSpec) -> Option<&'static CommandMeta> {
    /// The address of a `&'static CommandSpec`, spread over the bits (addresses are aligned).
    #[derive(Default)]
    struct AddrHash(u64);
    impl std::hash::Hasher for AddrHash {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
        fn write_usize(&mut self, n: usize) {
            self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    type ByAddr =
        std::collections::HashMap<usize, &'static CommandMeta, std::hash::BuildHasherDefault<AddrHash>>;
    static BY_SPEC: std::sync::OnceLock<ByAddr> = std::sync::OnceLock::new();
    BY_SPEC
        .get_or_init(|| {
            engine::command::all()
                .filter_map(|s| meta_of(s.name).map(|m| (s as *const CommandSpec as usize, m)))
                .collect()
        })
        .get(&(spec as *const CommandSpec as usize))
        .copied()
}

/// Redis's ACL categories and command tips for `name` (`container|sub` for a
/// subcommand), when Redis has the command.
fn redis_meta(name: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    meta_of(name).map(|m| (m.categories, m.tips))
}

/// The full name (`container|sub`) of `cmd`'s subcommand `sub`: one of this server's
/// container commands, or one whose subcommands Redis describes (`xgroup|create`,
/// `object|encoding` ...: commands the engine runs whole).
pub(crate) fn full_subcommand_name(cmd: &str, sub: &[u8]) -> Option<&'static str> {
    // Asked of every command a restricted user sends (its first argument is most often a
    // key): one set lookup for the commands that have no subcommands.
    if !is_container(cmd) {
        return None;
    }
    if let Some(full) = super::subcommand_name(cmd, sub) {
        return Some(full);
    }
    if cmd.len() + 1 + sub.len() > 40 {
        return None;
    }
    let name = format!("{cmd}|{}", String::from_utf8_lossy(sub).to_ascii_lowercase());
    meta_of(&name).map(|m| m.name)
}

/// Whether `name` is a container command (CLIENT, XGROUP, OBJECT ...: one whose first argument
/// names a subcommand).
pub(crate) fn is_container(name: &str) -> bool {
    static CONTAINERS: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    CONTAINERS
        .get_or_init(|| {
            let redis = super::redis_meta::META.iter().filter_map(|m| m.name.split_once('|').map(|(c, _)| c));
            redis.chain(super::subcommand_containers()).collect()
        })
        .contains(name)
}

/// Redis's key specs for `name` (`container|sub` for a subcommand), when Redis has
/// the command.
fn redis_key_specs(name: &str) -> Option<&'static [KeySpec]> {
    meta_of(name).map(|m| m.key_specs)
}

/// The ACL categories of `spec`, or of its subcommand `sub` (`container|sub`) when Redis
/// gives that its own.
pub(crate) fn categories_of(
    spec: &CommandSpec,
    sub: Option<&str>,
) -> std::borrow::Cow<'static, [&'static str]> {
    // Redis's table first (no allocation: every ACL check of a category rule asks).
    let meta = match sub {
        Some(full) => meta_of(full),
        None => meta_of_spec(spec),
    };
    match meta.map(|m| m.categories) {
        Some(cats) => std::borrow::Cow::Borrowed(cats),
        None => std::borrow::Cow::Owned(acl_categories(spec)),
    }
}

/// Every ACL category some command belongs to (`@read`, `@dangerous` ...), sorted.
pub(crate) fn all_categories() -> Vec<&'static str> {
    let mut cats: Vec<&'static str> = engine::command::all().flat_map(acl_categories).collect();
    cats.extend(super::redis_meta::META.iter().flat_map(|m| m.categories.iter().copied()));
    cats.sort_unstable();
    cats.dedup();
    cats
}

/// ACL categories: Redis's for the commands it has, else derived from the flags and the
/// group as Redis assigns them.
pub(crate) fn acl_categories(s: &CommandSpec) -> Vec<&'static str> {
    if let Some(cats) = meta_of_spec(s).map(|m| m.categories) {
        return cats.to_vec();
    }
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
        "scripting" => v.push("@scripting"),
        "bitmap" => v.push("@bitmap"),
        "hyperloglog" => v.push("@hyperloglog"),
        "geo" => v.push("@geo"),
        "stream" => v.push("@stream"),
        // The PUBSUB container itself is only @slow in Redis; its members are @pubsub.
        "pubsub" if s.flags.has(Flags::PUBSUB) => v.push("@pubsub"),
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
/// specs, subcommands. In RESP3 Redis 7.0 sends the flags, categories, tips, key specs and an
/// empty subcommand list as sets, and each key spec and its parts as maps.
fn write_info(out: &mut Vec<u8>, proto: Proto, s: &CommandSpec) {
    reply::array_len(out, 10);
    reply::bulk(out, s.name.as_bytes());
    // Redis's own record where it has one (its flags name what the table's bits do not:
    // allow_busy, no_multi, skip_monitor ...; a container has none and no key range); the
    // table's bits otherwise. The arity too: Redis reports -1 for its vector-set commands
    // (module commands check their own arguments), where the table holds the real one.
    let meta = meta_of_spec(s);
    reply::integer(out, meta.map_or(s.arity as i64, |m| m.arity));
    let mut flags = match meta {
        Some(m) => m.flags.to_vec(),
        None => s.flags.names(),
    };
    if movable_keys(s) && !flags.contains(&"movablekeys") {
        flags.push("movablekeys");
    }
    reply::set_len(out, proto, flags.len());
    for f in flags {
        reply::simple(out, f.as_bytes());
    }
    let (first, last, step) = match meta {
        Some(m) => (m.first, m.last, m.step),
        None => (s.first_key as i64, s.last_key as i64, s.key_step as i64),
    };
    reply::integer(out, first);
    reply::integer(out, last);
    reply::integer(out, step);
    let cats = acl_categories(s);
    reply::set_len(out, proto, cats.len());
    for cat in cats {
        reply::simple(out, cat.as_bytes());
    }
    // Tips are bulk strings in Redis's reply (flags and categories are status strings).
    let tips = redis_meta(s.name).map_or(&[][..], |m| m.1);
    reply::set_len(out, proto, tips.len());
    for tip in tips {
        reply::bulk(out, tip.as_bytes());
    }
    if let Some(specs) = redis_key_specs(s.name) {
        reply::set_len(out, proto, specs.len());
        for spec in specs {
            spec.write_info(out, proto);
        }
    } else if s.first_key > 0 {
        // A command Redis lacks: one spec from first/last/step and the generic flags.
        reply::set_len(out, proto, 1);
        reply::map_len(out, proto, 3);
        reply::bulk(out, b"flags");
        let kflags = key_flags(s);
        reply::set_len(out, proto, kflags.len());
        for f in kflags {
            reply::simple(out, f.as_bytes());
        }
        reply::bulk(out, b"begin_search");
        reply::map_len(out, proto, 2);
        reply::bulk(out, b"type");
        reply::bulk(out, b"index");
        reply::bulk(out, b"spec");
        reply::map_len(out, proto, 1);
        reply::bulk(out, b"index");
        reply::integer(out, s.first_key as i64);
        reply::bulk(out, b"find_keys");
        reply::map_len(out, proto, 2);
        reply::bulk(out, b"type");
        reply::bulk(out, b"range");
        reply::bulk(out, b"spec");
        reply::map_len(out, proto, 3);
        reply::bulk(out, b"lastkey");
        // Relative to the first key; negative values count from the end.
        let last = if s.last_key < 0 { s.last_key } else { s.last_key - s.first_key };
        reply::integer(out, last as i64);
        reply::bulk(out, b"keystep");
        reply::integer(out, s.key_step as i64);
        reply::bulk(out, b"limit");
        reply::integer(out, 0);
    } else {
        reply::set_len(out, proto, 0);
    }
    // A container's subcommands, each an entry of its own (Redis's records of the ones
    // this server has); a command without subcommands answers an empty set, as Redis 7.0.
    let subs = subcommand_metas(s.name);
    reply::set_len(out, proto, subs.len());
    for m in subs {
        write_meta_info(out, proto, m);
    }
}

/// The subcommands of container `name` that this server has, as Redis records them: the
/// ones the server's subcommand table lists, or, for a container the engine runs whole
/// (XGROUP, OBJECT ...), every one Redis has.
pub(crate) fn subcommand_metas(name: &str) -> Vec<&'static CommandMeta> {
    let prefix = format!("{name}|");
    let meta = super::redis_meta::META;
    let at = meta.partition_point(|e| e.name < prefix.as_str());
    let all: Vec<&CommandMeta> = meta[at..].iter().take_while(|e| e.name.starts_with(&prefix)).collect();
    let listed = |m: &CommandMeta| super::subcommand_name(name, &m.name.as_bytes()[prefix.len()..]).is_some();
    if all.iter().any(|m| listed(m)) {
        all.into_iter().filter(|m| listed(m)).collect()
    } else {
        all
    }
}

/// One COMMAND INFO entry from Redis's record (a subcommand's), field for field.
fn write_meta_info(out: &mut Vec<u8>, proto: Proto, m: &CommandMeta) {
    reply::array_len(out, 10);
    reply::bulk(out, m.name.as_bytes());
    reply::integer(out, m.arity);
    let set = |out: &mut Vec<u8>, items: &[&str]| {
        reply::set_len(out, proto, items.len());
        for i in items {
            reply::simple(out, i.as_bytes());
        }
    };
    set(out, m.flags);
    reply::integer(out, m.first);
    reply::integer(out, m.last);
    reply::integer(out, m.step);
    set(out, m.categories);
    reply::set_len(out, proto, m.tips.len());
    for tip in m.tips {
        reply::bulk(out, tip.as_bytes());
    }
    reply::set_len(out, proto, m.key_specs.len());
    for spec in m.key_specs {
        spec.write_info(out, proto);
    }
    reply::set_len(out, proto, 0);
}

/// Resolves a COMMAND DOCS name: a command, or `parent|sub` for a documented subcommand.
fn docs_target(name: &[u8]) -> Option<(&'static str, &'static CommandSpec)> {
    match name.iter().position(|&b| b == b'|') {
        None => engine::lookup(name).map(|s| (s.name, s)),
        Some(i) => {
            let parent = engine::lookup(&name[..i])?;
            let full = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
            syntax::doc(&full).map(|d| (d.name, parent))
        }
    }
}

/// One COMMAND DOCS entry in Redis 7's shape: a map (flat in RESP2) of summary, since, group, then
/// `arguments` (left out when the command takes none) or, for a container, `subcommands` (a map
/// of `parent|sub` to its own entry). `name` is the command's or the subcommand's.
fn write_doc(out: &mut Vec<u8>, proto: Proto, name: &str, s: &CommandSpec) {
    let doc = syntax::doc(name);
    let subs: Vec<&syntax::Doc> =
        if name.contains('|') { Vec::new() } else { syntax::subcommands(name).collect() };
    let args = doc.map_or(&[][..], |d| &d.args[..]);
    let summary = doc.and_then(|d| d.summary).unwrap_or(s.summary);
    // Redis's vector-set commands come from a module and say which one.
    let module = (s.group == "module").then_some("vectorset");
    let fields = 2
        + usize::from(doc.is_some())
        + usize::from(module.is_some())
        + usize::from(!args.is_empty())
        + usize::from(!subs.is_empty());
    reply::map_len(out, proto, fields);
    reply::bulk(out, b"summary");
    reply::bulk(out, summary.as_bytes());
    if let Some(d) = doc {
        reply::bulk(out, b"since");
        reply::bulk(out, d.since.as_bytes());
    }
    reply::bulk(out, b"group");
    reply::bulk(out, s.group.as_bytes());
    if let Some(m) = module {
        reply::bulk(out, b"module");
        reply::bulk(out, m.as_bytes());
    }
    if !args.is_empty() {
        reply::bulk(out, b"arguments");
        write_args(out, proto, args);
    }
    if !subs.is_empty() {
        reply::bulk(out, b"subcommands");
        reply::map_len(out, proto, subs.len());
        for sub in subs {
            reply::bulk(out, sub.name.as_bytes());
            write_doc(out, proto, sub.name, s);
        }
    }
}

/// An argument list: one map per argument (flat in RESP2; its flags a set in RESP3) with name, type, then whichever of
/// key_spec_index, token, flags and (for oneof/block) the nested arguments apply.
fn write_args(out: &mut Vec<u8>, proto: Proto, args: &[syntax::Arg]) {
    reply::array_len(out, args.len());
    for a in args {
        let is_key = a.kind == syntax::ArgType::Key;
        let flags = a.flags();
        let display = display_text(a);
        let n = 2
            + usize::from(display.is_some())
            + usize::from(is_key)
            + usize::from(a.token.is_some())
            + usize::from(!flags.is_empty())
            + usize::from(!a.args.is_empty());
        reply::map_len(out, proto, n);
        reply::bulk(out, b"name");
        reply::bulk(out, a.name.as_bytes());
        reply::bulk(out, b"type");
        reply::bulk(out, a.kind.as_str().as_bytes());
        if let Some(d) = display {
            reply::bulk(out, b"display_text");
            reply::bulk(out, d.as_bytes());
        }
        if is_key {
            // COMMAND INFO reports a single key spec covering every key position.
            reply::bulk(out, b"key_spec_index");
            reply::integer(out, 0);
        }
        if let Some(t) = &a.token {
            reply::bulk(out, b"token");
            reply::bulk(out, t.as_bytes());
        }
        if !flags.is_empty() {
            reply::bulk(out, b"flags");
            reply::set_len(out, proto, flags.len());
            for f in flags {
                reply::simple(out, f.as_bytes());
            }
        }
        if !a.args.is_empty() {
            reply::bulk(out, b"arguments");
            write_args(out, proto, &a.args);
        }
    }
}

/// The text a help line shows for an argument (Redis 7.2+ `display_text`): every argument
/// but a oneof or block has one. The syntax lines name arguments as Redis's help shows them,
/// so it is the name, except SORT's ALPHA, which Redis shows as `sorting`.
fn display_text(a: &syntax::Arg) -> Option<&str> {
    match a.kind {
        syntax::ArgType::OneOf | syntax::ArgType::Block => None,
        syntax::ArgType::PureToken if a.name == "alpha" => Some("sorting"),
        _ => Some(&a.name),
    }
}

/// COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]
fn list(out: &mut Vec<u8>, args: &[&[u8]]) {
    // Every command, then the subcommands (`client|list` ...), which carry their parent's
    // categories.
    let with_subs = || -> Vec<(&'static str, &'static CommandSpec)> {
        let mut v: Vec<(&'static str, &'static CommandSpec)> = all().map(|s| (s.name, s)).collect();
        let documented = syntax::SUBCOMMANDS
            .iter()
            .filter_map(|(full, ..)| engine::lookup(full.split('|').next()?.as_bytes()).map(|p| (*full, p)));
        // And every subcommand COMMAND INFO lists (Redis's records).
        let recorded = all().flat_map(|s| subcommand_metas(s.name).into_iter().map(move |m| (m.name, s)));
        let mut subs: Vec<(&'static str, &'static CommandSpec)> = Vec::new();
        for (n, p) in documented.chain(recorded) {
            if !subs.iter().any(|(m, _)| *m == n) {
                subs.push((n, p));
            }
        }
        v.extend(subs);
        v
    };
    let names: Vec<&'static str> = match args.len() {
        2 => with_subs().into_iter().map(|(n, _)| n).collect(),
        5 if args[2].eq_ignore_ascii_case(b"FILTERBY") => {
            let val = args[4];
            match args[3].to_ascii_lowercase().as_slice() {
                // Redis's vector sets are its one built-in module here.
                b"module" if val.eq_ignore_ascii_case(b"vectorset") => {
                    all().filter(|s| s.group == "module").map(|s| s.name).collect()
                }
                b"module" => Vec::new(),
                b"aclcat" => {
                    let mut cat = b"@".to_vec();
                    cat.extend(val.iter().map(u8::to_ascii_lowercase));
                    with_subs()
                        .into_iter()
                        .filter(|&(n, s)| {
                            categories_of(s, (n != s.name).then_some(n)).iter().any(|c| c.as_bytes() == cat)
                        })
                        .map(|(n, _)| n)
                        .collect()
                }
                b"pattern" => with_subs()
                    .into_iter()
                    .filter(|(n, _)| engine::util::glob_match(val, n.as_bytes(), true))
                    .map(|(n, _)| n)
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

/// Commands whose keys are not at fixed positions (a count argument says how many, or an option
/// names them): Redis flags them `movablekeys` in COMMAND INFO, and cluster clients then ask
/// COMMAND GETKEYS instead of trusting first/last/step.
fn movable_keys(s: &CommandSpec) -> bool {
    matches!(
        s.name,
        "eval"
            | "evalsha"
            | "eval_ro"
            | "evalsha_ro"
            | "fcall"
            | "fcall_ro"
            | "zunionstore"
            | "zinterstore"
            | "zdiffstore"
            | "zunion"
            | "zinter"
            | "zdiff"
            | "zintercard"
            | "sintercard"
            | "sunioncard"
            | "sdiffcard"
            | "migrate"
            | "lmpop"
            | "blmpop"
            | "zmpop"
            | "bzmpop"
            | "sort"
            | "sort_ro"
            | "georadius"
            | "georadiusbymember"
    )
}

/// The key-spec flags COMMAND INFO and GETKEYSANDFLAGS give the keys of `s` when neither
/// Redis's key specs nor the tables below say more.
fn key_flags(s: &CommandSpec) -> KeyFlags {
    if s.flags.has(Flags::WRITE) {
        RW_UPDATE
    } else if s.flags.has(Flags::READONLY) {
        RO_ACCESS
    } else if s.flags.has(Flags::PUBSUB) {
        // Shard channels sit in key positions for cluster routing but are not keys.
        &["not_key"]
    } else {
        &[]
    }
}

/// One key's key-spec flags (`RW`, `access`, ...), as Redis 7.0 names them.
pub(crate) type KeyFlags = &'static [&'static str];
const RO: KeyFlags = &["RO"];
const RO_ACCESS: KeyFlags = &["RO", "access"];
const RW_ACCESS: KeyFlags = &["RW", "access"];
const RW_UPDATE: KeyFlags = &["RW", "update"];
const RW_INSERT: KeyFlags = &["RW", "insert"];
const RW_DELETE: KeyFlags = &["RW", "delete"];
const RW_ACCESS_UPDATE: KeyFlags = &["RW", "access", "update"];
const RW_ACCESS_DELETE: KeyFlags = &["RW", "access", "delete"];
const RW_ACCESS_INSERT: KeyFlags = &["RW", "access", "insert"];
const OW_UPDATE: KeyFlags = &["OW", "update"];
const OW_INSERT: KeyFlags = &["OW", "insert"];
const RM_DELETE: KeyFlags = &["RM", "delete"];

/// `cmd`'s keys with each one's key-spec flags, found as Redis finds them: by Redis 7.0's key
/// specs where they are reliable for the command (or its subcommand), else by the command's
/// own key finder ([`key_positions`]) with the flags of the tables above. Err and Ok(None) as
/// for [`key_positions`].
pub(crate) fn keys_with_flags(s: &CommandSpec, cmd: &[&[u8]]) -> Result<Option<Vec<(usize, KeyFlags)>>, ()> {
    let full = cmd.get(1).and_then(|a| full_subcommand_name(s.name, a)).unwrap_or(s.name);
    let specs = if full == s.name { meta_of_spec(s).map(|m| m.key_specs) } else { redis_key_specs(full) };
    // Only `not_key` specs (the sharded pub/sub commands' channels): no keys, as Redis's ACL
    // and COMMAND GETKEYS find none; the channels are checked as channels.
    if specs.is_some_and(|specs| !specs.is_empty() && specs.iter().all(|k| k.has("not_key"))) {
        return Ok(None);
    }
    if let Some(specs) = specs.filter(|specs| super::keyspec::reliable(specs)) {
        if let Some(keys) = super::keyspec::find_keys(specs, cmd) {
            return Ok(Some(keys));
        }
    }
    let Some(positions) = key_positions(s, cmd)? else { return Ok(None) };
    let uniform = uniform_key_flags(s.name, cmd);
    let roles = role_key_flags(s.name);
    Ok(Some(
        positions
            .into_iter()
            .enumerate()
            .map(|(n, i)| {
                let f = match (uniform, roles) {
                    (Some(f), _) => f,
                    (None, Some((first, rest))) => {
                        if n == 0 {
                            first
                        } else {
                            rest
                        }
                    }
                    (None, None) => key_flags(s),
                };
                (i, f)
            })
            .collect(),
    ))
}

/// The flags of every key of a command whose keys all play one role, where Redis's key spec
/// says more than the generic RW update / RO access (None: the generic [`key_flags`]).
fn uniform_key_flags(name: &str, cmd: &[&[u8]]) -> Option<KeyFlags> {
    Some(match name {
        // SET overwrites unless GET reads the old value first (Redis's setGetKeys).
        "set" if cmd.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) => RW_ACCESS_UPDATE,
        "set" | "mset" | "setex" | "psetex" | "restore" => OW_UPDATE,
        // BITFIELD reads only when every operation is a GET (Redis's bitfieldGetKeys).
        "bitfield" => {
            let mut i = 2;
            let mut read_only = true;
            while i < cmd.len() {
                let left = cmd.len() - i - 1;
                if cmd[i].eq_ignore_ascii_case(b"get") && left >= 2 {
                    i += 3;
                } else if cmd[i].eq_ignore_ascii_case(b"overflow") && left >= 1 {
                    i += 2;
                } else {
                    read_only = false;
                    break;
                }
            }
            if read_only {
                RO_ACCESS
            } else {
                RW_ACCESS_UPDATE
            }
        }
        "msetnx" | "setnx" => OW_INSERT,
        "getset" | "getex" | "incr" | "incrby" | "decr" | "decrby" | "incrbyfloat" | "increx" | "hincrby"
        | "hincrbyfloat" | "eval" | "evalsha" | "fcall" => RW_ACCESS_UPDATE,
        "lpush" | "rpush" | "append" | "sadd" | "linsert" => RW_INSERT,
        "expire" | "pexpire" | "expireat" | "pexpireat" | "persist" | "setrange" | "lset" => RW_UPDATE,
        "ltrim" | "xdelex" | "xackdel" => RW_DELETE,
        "getdel" | "lpop" | "rpop" | "blpop" | "brpop" | "spop" | "zpopmin" | "zpopmax" | "bzpopmin"
        | "bzpopmax" | "lmpop" | "blmpop" | "zmpop" | "bzmpop" => RW_ACCESS_DELETE,
        // Redis's spec for both of MIGRATE's key positions (incomplete: its own finder runs).
        "migrate" => RW_ACCESS_DELETE,
        "exists" | "touch" | "object" | "watch" | "memory" => RO,
        // Redis 7.0's key spec for XREADGROUP's streams (it writes only the group's state).
        "xreadgroup" => RO_ACCESS,
        "pfcount" => RW_ACCESS,
        "del" | "unlink" => RM_DELETE,
        _ => return None,
    })
}

/// For commands whose keys play different roles: the flags of the first key, and of the
/// others (a destination first, sources after, or a source then a destination).
fn role_key_flags(name: &str) -> Option<(KeyFlags, KeyFlags)> {
    Some(match name {
        "lmove" | "blmove" | "lmovem" | "blmovem" | "rpoplpush" | "brpoplpush" | "smove" => {
            (RW_ACCESS_DELETE, RW_INSERT)
        }
        "rename" => (RW_ACCESS_DELETE, OW_UPDATE),
        "renamenx" => (RW_ACCESS_DELETE, OW_INSERT),
        "copy" | "sort" | "georadius" | "georadiusbymember" => (RO_ACCESS, OW_UPDATE),
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" | "sunionstore" | "sdiffstore"
        | "bitop" => (OW_UPDATE, RO_ACCESS),
        "sinterstore" => (RW_UPDATE, RO_ACCESS),
        "pfmerge" => (RW_ACCESS_INSERT, RO_ACCESS),
        _ => return None,
    })
}

/// The argv positions of `cmd`'s keys. Err: the arguments that say where the keys are are
/// invalid; Ok(None): the command has no keys at all.
pub(crate) fn key_positions(s: &CommandSpec, cmd: &[&[u8]]) -> Result<Option<Vec<usize>>, ()> {
    let argc = cmd.len();
    // `numkeys` at `at`, the keys right after it.
    let counted = |at: usize| -> Result<Vec<usize>, ()> {
        match cmd.get(at).and_then(|a| engine::util::parse_i64(a)) {
            Some(n) if n >= 0 && (n as usize) < argc - at => Ok((at + 1..at + 1 + n as usize).collect()),
            _ => Err(()),
        }
    };
    // The value after a STORE (or STOREDIST) option from `from` on.
    let store = |from: usize, dist: bool| -> Option<usize> {
        (from..argc.saturating_sub(1))
            .rev()
            .find(|&i| {
                cmd[i].eq_ignore_ascii_case(b"store") || (dist && cmd[i].eq_ignore_ascii_case(b"storedist"))
            })
            .map(|i| i + 1)
    };
    Ok(Some(match s.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop" | "bzmpop" => {
            counted(2)?
        }
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "sunioncard" | "sdiffcard"
        | "lmpop" | "zmpop" => counted(1)?,
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut keys = vec![1];
            keys.extend(counted(2)?);
            keys
        }
        "sort" | "sort_ro" => {
            let mut keys = vec![1];
            keys.extend(if s.name == "sort" { store(2, false) } else { None });
            keys
        }
        "georadius" | "georadiusbymember" => {
            let mut keys = vec![1];
            keys.extend(store(if s.name == "georadius" { 6 } else { 5 }, true));
            keys
        }
        "memory" if argc >= 3 && cmd[1].eq_ignore_ascii_case(b"usage") => vec![2],
        "migrate" => super::migrate::key_positions(cmd),
        // The first half of what follows the STREAMS keyword (Redis's key spec: keyword
        // search, then a range of half the remaining arguments).
        "xread" | "xreadgroup" => {
            let at = (1..argc).find(|&i| cmd[i].eq_ignore_ascii_case(b"streams")).ok_or(())?;
            let rest = argc - at - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return Err(());
            }
            (at + 1..at + 1 + rest / 2).collect()
        }
        _ => {
            if s.first_key <= 0 {
                return Ok(None);
            }
            let first = s.first_key as i64;
            let last = if s.last_key < 0 {
                argc as i64 + s.last_key as i64
            } else {
                (s.last_key as i64).min(argc as i64 - 1)
            };
            let step = (s.key_step as i64).max(1);
            (first..=last).step_by(step as usize).map(|i| i as usize).collect()
        }
    }))
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS: the keys of `cmd` (a full command), found as Redis's
/// key specs find them (counted keys, STORE options), with their key-spec flags.
fn getkeys(out: &mut Vec<u8>, cmd: &[&[u8]], flags: bool) {
    let Some(s) = engine::lookup(cmd[0]) else {
        return reply::error(out, b"ERR Invalid command specified");
    };
    if !s.arity_ok(cmd.len()) {
        return reply::error(out, b"ERR Invalid number of arguments specified for command");
    }
    let keys = match keys_with_flags(s, cmd) {
        Ok(Some(k)) => k,
        Ok(None) => return reply::error(out, b"ERR The command has no key arguments"),
        Err(()) => return reply::error(out, b"ERR Invalid arguments specified for command"),
    };
    reply::array_len(out, keys.len());
    for (i, f) in keys {
        if !flags {
            reply::bulk(out, cmd[i]);
            continue;
        }
        reply::array_len(out, 2);
        reply::bulk(out, cmd[i]);
        reply::array_len(out, f.len());
        for flag in f {
            reply::simple(out, flag.as_bytes());
        }
    }
}
