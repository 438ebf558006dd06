//! The command table: every command goblin-core knows, as data.
//!
//! Generic checks (existence, arity) run once from the table before any handler, so a handler
//! may index its arguments up to the arity without checking.

use crate::ctx::Ctx;
use std::collections::HashMap;
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

fn table() -> &'static HashMap<&'static [u8], &'static CommandSpec> {
    static TABLE: OnceLock<HashMap<&'static [u8], &'static CommandSpec>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = HashMap::new();
        for spec in all() {
            let old = m.insert(spec.name.as_bytes(), spec);
            assert!(old.is_none(), "command {} defined twice", spec.name);
        }
        m
    })
}

/// Every command, in table order.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    crate::commands::TABLES.iter().flat_map(|t| t.iter())
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    table().get(&*lower).copied()
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
}
