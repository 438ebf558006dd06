//! Redis's key specifications: where a command's keys are in its arguments and how it uses
//! each (the `RO`/`RW`/`OW`/`RM` and `access`/`insert`/`update`/`delete` flags). The table of
//! specs is Redis 7.0's, generated into `redis_meta.rs`; this module gives them to COMMAND INFO
//! as Redis prints them and follows them to find a command's keys with their flags, as Redis's
//! `getKeysUsingKeySpecs` does. The ACL key patterns (`%R~`, `%W~`) decide by these flags.

use resp::{reply, Proto};

/// What Redis 7.0's COMMAND says of one command or subcommand (`container|sub`): the table in
/// `redis_meta.rs` holds one per command Redis has.
#[derive(Debug)]
pub struct CommandMeta {
    pub name: &'static str,
    pub arity: i64,
    pub flags: &'static [&'static str],
    /// The legacy key range: first key, last key (negative: from the end), step.
    pub first: i64,
    pub last: i64,
    pub step: i64,
    /// ACL categories (`@read` ...).
    pub categories: &'static [&'static str],
    /// Command tips (`nondeterministic_output`, `request_policy:all_shards` ...).
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
}

/// One key specification.
#[derive(Debug)]
pub struct KeySpec {
    /// Redis's remark on the spec ("" when it has none).
    pub notes: &'static str,
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

/// Where the search for the spec's keys starts.
#[derive(Debug)]
pub enum Begin {
    /// At this argument.
    Index(i64),
    /// Right after this keyword, searched from `startfrom` (negative: from the end, backwards).
    Keyword(&'static str, i64),
    /// The keys cannot be found from the arguments alone (a getkeys function finds them).
    Unknown,
}

/// How many keys there are from the start.
#[derive(Debug)]
pub enum Find {
    /// Up to `lastkey` past the start (negative: counted from the end; with a `limit`, that
    /// fraction of what remains), every `keystep`.
    Range {
        lastkey: i64,
        keystep: i64,
        limit: i64,
    },
    /// The argument `keynumidx` past the start says how many; they start `firstkey` past it.
    Keynum {
        keynumidx: i64,
        firstkey: i64,
        keystep: i64,
    },
    Unknown,
}

impl KeySpec {
    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// The spec as COMMAND INFO gives it (a map; RESP2: a flat array), field for field as
    /// Redis 7.0 writes it.
    pub fn write_info(&self, out: &mut Vec<u8>, proto: Proto) {
        reply::map_len(out, proto, if self.notes.is_empty() { 3 } else { 4 });
        if !self.notes.is_empty() {
            reply::bulk(out, b"notes");
            reply::bulk(out, self.notes.as_bytes());
        }
        reply::bulk(out, b"flags");
        reply::set_len(out, proto, self.flags.len());
        for f in self.flags {
            reply::simple(out, f.as_bytes());
        }
        let int = |out: &mut Vec<u8>, name: &[u8], v: i64| {
            reply::bulk(out, name);
            reply::integer(out, v);
        };
        reply::bulk(out, b"begin_search");
        reply::map_len(out, proto, 2);
        reply::bulk(out, b"type");
        match self.begin {
            Begin::Index(i) => {
                reply::bulk(out, b"index");
                reply::bulk(out, b"spec");
                reply::map_len(out, proto, 1);
                int(out, b"index", i);
            }
            Begin::Keyword(k, from) => {
                reply::bulk(out, b"keyword");
                reply::bulk(out, b"spec");
                reply::map_len(out, proto, 2);
                reply::bulk(out, b"keyword");
                reply::bulk(out, k.as_bytes());
                int(out, b"startfrom", from);
            }
            Begin::Unknown => {
                reply::bulk(out, b"unknown");
                reply::bulk(out, b"spec");
                reply::map_len(out, proto, 0);
            }
        }
        reply::bulk(out, b"find_keys");
        reply::map_len(out, proto, 2);
        reply::bulk(out, b"type");
        match self.find {
            Find::Range { lastkey, keystep, limit } => {
                reply::bulk(out, b"range");
                reply::bulk(out, b"spec");
                reply::map_len(out, proto, 3);
                int(out, b"lastkey", lastkey);
                int(out, b"keystep", keystep);
                int(out, b"limit", limit);
            }
            Find::Keynum { keynumidx, firstkey, keystep } => {
                reply::bulk(out, b"keynum");
                reply::bulk(out, b"spec");
                reply::map_len(out, proto, 3);
                int(out, b"keynumidx", keynumidx);
                int(out, b"firstkey", firstkey);
                int(out, b"keystep", keystep);
            }
            Find::Unknown => {
                reply::bulk(out, b"unknown");
                reply::bulk(out, b"spec");
                reply::map_len(out, proto, 0);
            }
        }
    }
}

/// Whether following `specs` finds a command's keys with their true flags: some spec names
/// real keys (not `not_key`) and none says its flags depend on the arguments (SET's GET).
/// Otherwise the command's own key finder decides (Redis's getkeys procedures).
pub fn reliable(specs: &[KeySpec]) -> bool {
    specs.iter().any(|s| !s.has("not_key")) && !specs.iter().any(|s| s.has("variable_flags"))
}

/// The keys `specs` find in `argv` (positions, each with its spec's flags), in spec order.
/// None where a spec cannot be followed (an unknown or incomplete spec, a count that is not a
/// number, keys past the end): the caller falls back to the command's own key finder, as
/// Redis does. A keyword that is absent finds no keys for its spec.
pub fn find_keys(specs: &'static [KeySpec], argv: &[&[u8]]) -> Option<Vec<(usize, &'static [&'static str])>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        if spec.has("not_key") {
            continue;
        }
        let mut first = match spec.begin {
            Begin::Index(i) => i,
            Begin::Keyword(word, from) => {
                // Redis's bounds: never the last argument going forwards, never the first
                // going backwards.
                let is_word = |i: &i64| argv[*i as usize].eq_ignore_ascii_case(word.as_bytes());
                let hit = if from > 0 {
                    (from..argc - 1).find(is_word)
                } else {
                    (2..=argc + from).rev().find(is_word)
                };
                match hit {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range { lastkey, keystep, limit } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (last, keystep)
            }
            Find::Keynum { keynumidx, firstkey, keystep } => {
                let at = first + keynumidx;
                if at >= argc {
                    return None;
                }
                let n = engine::util::parse_i64(argv[at as usize]).filter(|&n| n >= 0)?;
                first += firstkey;
                (first + n - 1, keystep)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, spec.flags));
            i += step.max(1);
        }
        if spec.has("incomplete") {
            return None;
        }
    }
    Some(keys)
}
