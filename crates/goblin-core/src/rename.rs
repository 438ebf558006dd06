//! `rename-command` (redis.conf, or `--rename-command OLD NEW` on the command line): a command
//! answers to another name, or, renamed to "", to none. Operators use it to hide FLUSHALL,
//! CONFIG, DEBUG ... from clients that should not reach them.
//!
//! Invariants: the renames are installed once, before the server listens, and never change.
//! Only the names clients and scripts use change: after the lookup, a command runs under its
//! own name (its handler, MULTI's queue, the journal, the replicas and ACL rules see that), as
//! Redis keeps a renamed command's own name for everything but the lookup.

use engine::command::CommandSpec;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

struct Renames {
    /// A new name (lowercase) -> the command it runs.
    by_new: HashMap<Vec<u8>, &'static CommandSpec>,
    /// Commands that no longer answer to their own names.
    hidden: HashSet<&'static str>,
}

static RENAMES: OnceLock<Renames> = OnceLock::new();

/// Checks `pairs` (old name, new name; "" hides the command) in order, as redis-server checks
/// each `rename-command` line, and installs them. Err: the failing pair's index and Redis's
/// reason.
pub fn install(pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), (usize, &'static str)> {
    let r = build(pairs)?;
    if !pairs.is_empty() {
        let _ = RENAMES.set(r);
    }
    Ok(())
}

fn build(pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<Renames, (usize, &'static str)> {
    let mut r = Renames { by_new: HashMap::new(), hidden: HashSet::new() };
    for (i, (old, new)) in pairs.iter().enumerate() {
        let old_l = old.to_ascii_lowercase();
        // The command as the name finds it now (it may be a name given by an earlier line).
        let spec = match r.by_new.remove(&old_l) {
            Some(spec) => spec,
            None => match engine::lookup(old) {
                Some(spec) if !r.hidden.contains(spec.name) => spec,
                _ => return Err((i, "No such command in rename-command")),
            },
        };
        r.hidden.insert(spec.name);
        if new.is_empty() {
            continue;
        }
        let new_l = new.to_ascii_lowercase();
        let taken = r.by_new.contains_key(&new_l)
            || engine::lookup(&new_l).is_some_and(|s| !r.hidden.contains(s.name));
        if taken {
            return Err((i, "Target command name already exists"));
        }
        r.by_new.insert(new_l, spec);
    }
    Ok(r)
}

/// The command a client (or a script) means by `name`.
#[inline]
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    match RENAMES.get() {
        None => engine::lookup(name),
        Some(r) => lookup_in(r, name),
    }
}

#[cold]
fn lookup_in(r: &Renames, name: &[u8]) -> Option<&'static CommandSpec> {
    if let Some(spec) = r.by_new.get(&name.to_ascii_lowercase()) {
        return Some(spec);
    }
    engine::lookup(name).filter(|s| !r.hidden.contains(s.name))
}

/// Whether `name` is not the command's own name (the caller then runs it under its own).
#[inline]
pub fn renamed(spec: &CommandSpec, name: &[u8]) -> bool {
    RENAMES.get().is_some() && !spec.name.as_bytes().eq_ignore_ascii_case(name)
}

/// A request that called `spec` by a name rename-command gave it, rewritten to the command's
/// own name (what its handler, MULTI's queue, ACL rules and the journal see); None when it
/// was called by its own name.
#[inline]
pub fn under_own_name<'a>(spec: &'static CommandSpec, args: &[&'a [u8]]) -> Option<Vec<&'a [u8]>> {
    renamed(spec, args[0])
        .then(|| std::iter::once(spec.name.as_bytes()).chain(args[1..].iter().copied()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        p.iter().map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec())).collect()
    }

    #[test]
    fn names_move_and_vanish() {
        let r = build(&pairs(&[("flushall", ""), ("CONFIG", "cfg-x"), ("cfg-x", "cfg-y")])).unwrap();
        let name = |n: &str| lookup_in(&r, n.as_bytes()).map(|s| s.name);
        assert_eq!(name("FLUSHALL"), None);
        assert_eq!(name("config"), None);
        assert_eq!(name("cfg-x"), None, "renamed again");
        assert_eq!(name("CFG-Y"), Some("config"));
        assert_eq!(name("get"), Some("get"));
        // A hidden command's name may be given to another.
        let r = build(&pairs(&[("get", ""), ("set", "get")])).unwrap();
        assert_eq!(lookup_in(&r, b"get").map(|s| s.name), Some("set"));
    }

    #[test]
    fn redis_refusals() {
        assert_eq!(build(&pairs(&[("nosuch", "x")])).err(), Some((0, "No such command in rename-command")));
        assert_eq!(build(&pairs(&[("get", "set")])).err(), Some((0, "Target command name already exists")));
        assert_eq!(
            build(&pairs(&[("get", ""), ("get", "x")])).err(),
            Some((1, "No such command in rename-command"))
        );
        assert_eq!(
            build(&pairs(&[("get", "a"), ("set", "A")])).err(),
            Some((1, "Target command name already exists"))
        );
    }
}
