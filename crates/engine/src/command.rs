//! The command table: every command goblin-core knows, as data.
//!
//! Generic checks (existence, arity) run once from the table before any handler, so a handler
//! may index its arguments up to the arity without checking.

use crate::ctx::Ctx;
use std::sync::OnceLock;

/// A data command's handler: read `args` (args[0] is the command name), write exactly one reply
/// into `out`, emit canonical mutations through `ctx`.
pub type DataHandler = fn(&mut Ctx, &mut Vec<u8>, &[&[u8]]);

#[derive(Clone, Copy)]
pub enum Handler {
    /// Runs in the engine against the keyspace.
    Data(DataHandler),
    /// Needs connection or server state (CLIENT, INFO, QUIT, ...): the server dispatches it by
    /// name. The engine never runs it.
    Server,
}

/// Command flags, as `COMMAND INFO` reports them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Flags(pub u32);

impl Flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    pub const NO_AUTH: u32 = 1 << 10;
    pub const MOVABLEKEYS: u32 = 1 << 11;
    /// A read that may still write (PFCOUNT stores a refreshed cache): read-only scripts refuse
    /// it as Redis's `may-replicate` commands. Not listed by `COMMAND INFO` (Redis 7.0 lists
    /// it only in `COMMAND DOCS`), so not in [`Flags::names`].
    pub const MAY_REPLICATE: u32 = 1 << 12;

    pub fn has(self, f: u32) -> bool {
        self.0 & f != 0
    }

    /// Flag names in `COMMAND INFO` order.
    pub fn names(self) -> Vec<&'static str> {
        const NAMES: [(u32, &str); 12] = [
            (Flags::WRITE, "write"),
            (Flags::READONLY, "readonly"),
            (Flags::DENYOOM, "denyoom"),
            (Flags::ADMIN, "admin"),
            (Flags::PUBSUB, "pubsub"),
            (Flags::NOSCRIPT, "noscript"),
            (Flags::BLOCKING, "blocking"),
            (Flags::LOADING, "loading"),
            (Flags::STALE, "stale"),
            (Flags::FAST, "fast"),
            (Flags::NO_AUTH, "no_auth"),
            (Flags::MOVABLEKEYS, "movablekeys"),
        ];
        NAMES.iter().filter(|(b, _)| self.0 & b != 0).map(|(_, n)| *n).collect()
    }
}

/// One row of the command table.
pub struct CommandSpec {
    /// Lowercase name.
    pub name: &'static str,
    /// Redis's convention: n > 0 means exactly n args (name included); -n means at least n.
    pub arity: i32,
    pub flags: Flags,
    /// Key positions for COMMAND INFO / GETKEYS: first, last (-1 = last arg), step; 0,0,0 = no keys.
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    /// Group for COMMAND DOCS ("string", "generic", "hash", "server", ...).
    pub group: &'static str,
    /// One-line summary for COMMAND DOCS.
    pub summary: &'static str,
    pub handler: Handler,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            argc == a as usize
        } else {
            argc >= (-a) as usize
        }
    }

    pub fn is_write(&self) -> bool {
        self.flags.has(Flags::WRITE)
    }
}

/// Shorthand used by the command modules to build their tables.
#[allow(clippy::too_many_arguments)]
pub const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    group: &'static str,
    summary: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: Flags(flags),
        first_key: keys.0,
        last_key: keys.1,
        key_step: keys.2,
        group,
        summary,
        handler,
    }
}

/// The lookup table: open addressing over a power-of-two array, keyed by a case-folding
/// multiplicative hash of the name. Built once; every request goes through [`lookup`], so the
/// probe avoids SipHash and the copy into a lowercase buffer that a `HashMap` would need.
struct Table {
    slots: Box<[Option<&'static CommandSpec>]>,
    mask: usize,
    /// `64 - log2(slots.len())`: the slot is the hash's top bits, which mix every input byte.
    shift: u32,
}

/// Hash of a command name that ignores ASCII case. `b | 0x20` lowercases letters; it also maps
/// some non-letters together (`@` and `` ` ``), which only costs a probe, because a match is
/// confirmed with `eq_ignore_ascii_case`. Names equal up to ASCII case always hash alike.
#[inline]
fn name_hash(name: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (name.len() as u64).wrapping_mul(K);
    for &b in name {
        h = (h.rotate_left(5) ^ u64::from(b | 0x20)).wrapping_mul(K);
    }
    h
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let n = all().count();
        // At most a quarter full: probe sequences stay a slot or two long.
        let size = (n * 4).next_power_of_two().max(16);
        let mask = size - 1;
        let shift = 64 - size.trailing_zeros();
        let mut slots = vec![None; size].into_boxed_slice();
        for spec in all() {
            let mut i = (name_hash(spec.name.as_bytes()) >> shift) as usize;
            loop {
                match slots[i] {
                    None => {
                        slots[i] = Some(spec);
                        break;
                    }
                    Some(other) => {
                        assert!(other.name != spec.name, "command {} defined twice", spec.name);
                        i = (i + 1) & mask;
                    }
                }
            }
        }
        Table { slots, mask, shift }
    })
}

/// Every command, in table order.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    crate::commands::TABLES.iter().flat_map(|t| t.iter())
}

/// `name` equals `lower` (a table name, all lowercase) up to ASCII case. Cheaper than
/// `eq_ignore_ascii_case`, which lowercases both sides.
#[inline]
fn eq_lowercase(lower: &[u8], name: &[u8]) -> bool {
    lower.len() == name.len()
        && lower.iter().zip(name).all(|(&l, &b)| l == b || (b | 0x20 == l && l.is_ascii_lowercase()))
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let t = table();
    let mut i = (name_hash(name) >> t.shift) as usize;
    // Linear probing ends at the first empty slot; the table is never full (see `table`).
    while let Some(spec) = t.slots[i] {
        if eq_lowercase(spec.name.as_bytes(), name) {
            return Some(spec);
        }
        i = (i + 1) & t.mask;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        // Building the table panics on duplicates.
        assert!(lookup(b"GeT").is_some());
        for s in all() {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(s.arity != 0, "{}", s.name);
            assert!(
                s.flags.has(Flags::WRITE) != s.flags.has(Flags::READONLY) || !s.flags.has(Flags::WRITE),
                "{} is both write and readonly",
                s.name
            );
        }
    }

    #[test]
    fn lookup_finds_every_command_in_any_case() {
        for s in all() {
            let upper = s.name.to_ascii_uppercase();
            assert!(std::ptr::eq(lookup(s.name.as_bytes()).unwrap(), s), "{}", s.name);
            assert!(std::ptr::eq(lookup(upper.as_bytes()).unwrap(), s), "{}", s.name);
        }
        for unknown in [&b""[..], b"gett", b"ge", b"g\xc5t", b"get\0", &[b'a'; 100]] {
            assert!(lookup(unknown).is_none(), "{unknown:?}");
        }
    }
}
