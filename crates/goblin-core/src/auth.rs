//! Users, passwords and permissions: `--auth-file` (Redis's ACL file format) and
//! `--requirepass`, the credential checks AUTH and HELLO use, and the permission check every
//! command of a user without full access meets.
//!
//! The file format, one directive per line (blank lines and lines starting with `#` are
//! ignored):
//!
//! ```text
//! user <name> <rule> [<rule> ...]
//! ```
//!
//! The rules are Redis's, with its meaning: `on`, `off`, `>password` and `<password` (add,
//! remove), `#<sha256>` and `!<sha256>`, `nopass`, `resetpass`, `reset`, command rules (`+get`,
//! `-set`, `+config|get`, `+@read`, `-@dangerous`, `allcommands`, `nocommands`), key patterns
//! (`~cache:*` for reading and writing, `%R~` reading only, `%W~` writing only, `allkeys`,
//! `resetkeys`), channel patterns (`&news.*`, `allchannels`, `resetchannels`), selectors
//! (`(~tmp:* +@write)`: another set of command, key and channel rules, any one of which may
//! allow a command) and `clearselectors`. Malformed lines and duplicate users are refused at
//! startup.
//!
//! A command is allowed when one selector (the user's root rules, or one in parentheses)
//! allows the command, every key it names with the access its key spec declares (a read needs
//! an `R` pattern, an insert, update or delete a `W` one: `commands::keyspec`), and every
//! channel it publishes or subscribes to. Otherwise the refusal reported is Redis's pick: the
//! command if no selector allowed it, else the last key or channel some selector refused.
//!
//! Without a `default` user in the file, `default` is `on nopass` (full access), as Redis
//! creates it; `--requirepass` then gives it that password. Passwords are kept only as
//! SHA-256 digests and compared in constant time.

use engine::CommandSpec;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

pub const DEFAULT_USER: &str = "default";

/// What a command rule names: every command, one command (all its subcommands), one
/// subcommand (`container|sub`), an ACL category, or a command with one first argument
/// (`+select|0`: Redis's allowed first-args, only ever allowed, compared without case).
#[derive(Clone, Debug, PartialEq)]
enum Target {
    All,
    Command(&'static str),
    Subcommand(&'static str),
    Category(String),
    FirstArg(&'static str, String),
}

/// A key pattern and the access it grants (`~p`: both, `%R~p`, `%W~p`).
#[derive(Clone, Debug, PartialEq)]
struct KeyPattern {
    glob: String,
    read: bool,
    write: bool,
}

impl KeyPattern {
    /// As ACL LIST and GETUSER print it.
    fn text(&self) -> String {
        match (self.read, self.write) {
            (true, true) => format!("~{}", self.glob),
            (true, false) => format!("%R~{}", self.glob),
            _ => format!("%W~{}", self.glob),
        }
    }
}

/// One set of command, key and channel rules: a user's root rules, or one selector.
#[derive(Clone, Debug, Default, PartialEq)]
struct Selector {
    /// The command rules, in the order given (`+get`, `-@dangerous`, `allcommands` ...): the
    /// last one that names a command decides it; none denies.
    commands: Vec<(bool, Target)>,
    /// Every key with any access (`allkeys`, `~*`); `keys` is then empty.
    all_keys: bool,
    keys: Vec<KeyPattern>,
    /// Every channel (`allchannels`, `&*`); `channels` is then empty.
    all_channels: bool,
    channels: Vec<String>,
}

/// Why a user may not run a command (the check order is Redis's: command, keys, channels).
/// Ordered as Redis ranks them when no selector allows a command: a channel refusal is
/// reported before a key refusal, a key refusal before the command's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

/// The channels a command publishes or subscribes to, from `args[1]` on: (how many, -1 for
/// all the rest; whether they are patterns, matched literally against the user's). Redis's
/// channel table; the unsubscribe commands are never refused.
fn channel_args(name: &str) -> Option<(i64, bool)> {
    match name {
        "subscribe" | "ssubscribe" => Some((-1, false)),
        "psubscribe" => Some((-1, true)),
        "publish" | "spublish" => Some((1, false)),
        _ => None,
    }
}

/// Whether `channel` (a pattern when `literal`) is among `allowed`: a channel matches a
/// glob, a pattern only the identical pattern (Redis: a PSUBSCRIBE pattern cannot be proved
/// narrower than an allowed one).
fn channel_allowed(allowed: &[String], channel: &[u8], literal: bool) -> bool {
    allowed.iter().any(|p| {
        if literal {
            p.as_bytes() == channel
        } else {
            engine::util::glob_match(p.as_bytes(), channel, false)
        }
    })
}

/// `acl-pubsub-default`: whether a new user or selector starts with every channel
/// (`allchannels`) or none (`resetchannels`, Redis 7's default).
static PUBSUB_ALL_BY_DEFAULT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// CONFIG GET/SET acl-pubsub-default.
pub fn pubsub_default() -> &'static str {
    if PUBSUB_ALL_BY_DEFAULT.load(std::sync::atomic::Ordering::Relaxed) {
        "allchannels"
    } else {
        "resetchannels"
    }
}

pub fn set_pubsub_default(all: bool) {
    PUBSUB_ALL_BY_DEFAULT.store(all, std::sync::atomic::Ordering::Relaxed);
}

impl Selector {
    /// A new user's or selector's rules: nothing allowed, channels by `acl-pubsub-default`.
    fn fresh() -> Selector {
        Selector {
            all_channels: PUBSUB_ALL_BY_DEFAULT.load(std::sync::atomic::Ordering::Relaxed),
            ..Default::default()
        }
    }

    /// Whether the command `spec` (`sub`: its subcommand's full name, `container|sub`) is
    /// allowed by the command rules.
    fn may_run_command(&self, spec: &CommandSpec, sub: Option<&str>, args: &[&[u8]]) -> bool {
        let mut allowed = false;
        let mut cats: Option<std::borrow::Cow<'static, [&'static str]>> = None;
        for (allow, target) in &self.commands {
            let hit = match target {
                Target::All => true,
                Target::Command(name) => *name == spec.name,
                Target::Subcommand(full) => Some(*full) == sub,
                Target::FirstArg(name, arg) => {
                    *name == spec.name && args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(arg.as_bytes()))
                }
                Target::Category(cat) => cats
                    .get_or_insert_with(|| crate::commands::command::categories_of(spec, sub))
                    .iter()
                    .any(|c| c[1..] == **cat),
            };
            if hit {
                allowed = *allow;
            }
        }
        allowed
    }

    /// Whether a key with these key-spec flags may be used: a pattern matches that grants
    /// every access the flags name (`access` is a read; `insert`, `update`, `delete` writes).
    fn may_use_key(&self, key: &[u8], flags: &[&str]) -> bool {
        if self.all_keys {
            return true;
        }
        let read = flags.contains(&"access");
        let write = flags.iter().any(|f| matches!(*f, "insert" | "update" | "delete"));
        self.keys.iter().any(|p| {
            (p.read || !read)
                && (p.write || !write)
                && engine::util::glob_match(p.glob.as_bytes(), key, false)
        })
    }

    /// Whether every key may be read (a `%R~*` or `~*` pattern, or allkeys): SORT's BY and GET
    /// read keys named by the data, so Redis allows them only then.
    fn reads_every_key(&self) -> bool {
        self.all_keys || self.keys.iter().any(|p| p.read && p.glob == "*")
    }

    /// Redis's ACLSelectorCheckCmd: the command, then each key, then each channel.
    fn check(
        &self,
        spec: &CommandSpec,
        sub: Option<&str>,
        args: &[&[u8]],
        keys: &KeyCache,
    ) -> Result<(), Denied> {
        if !self.may_run_command(spec, sub, args) {
            return Err(Denied::Command);
        }
        if !self.all_keys {
            for &(i, flags) in keys.get(spec, args) {
                if !self.may_use_key(args[i], flags) {
                    return Err(Denied::Key(i));
                }
            }
        }
        if !self.all_channels {
            if let Some((count, literal)) = channel_args(spec.name) {
                let end = if count < 0 { args.len() } else { (1 + count as usize).min(args.len()) };
                for (i, ch) in args.iter().enumerate().take(end).skip(1) {
                    if !channel_allowed(&self.channels, ch, literal) {
                        return Err(Denied::Channel(i));
                    }
                }
            }
        }
        Ok(())
    }

    /// The rules as ACL LIST prints them: keys, channels, then commands.
    fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.all_keys {
            parts.push("~*".into());
        } else {
            parts.extend(self.keys.iter().map(KeyPattern::text));
        }
        if self.all_channels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            parts.extend(self.channels.iter().map(|c| format!("&{c}")));
        }
        parts.push(self.commands_text());
        parts.join(" ")
    }

    /// GETUSER's `keys` field.
    fn keys_text(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        self.keys.iter().map(KeyPattern::text).collect::<Vec<_>>().join(" ")
    }

    /// GETUSER's `channels` field.
    fn channels_text(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        self.channels.iter().map(|c| format!("&{c}")).collect::<Vec<_>>().join(" ")
    }

    /// The command rules as ACL LIST and GETUSER print them: `+@all` or `-@all`, then the
    /// rules after the last one naming every command.
    fn commands_text(&self) -> String {
        let from = self.commands.iter().rposition(|r| r.1 == Target::All);
        let mut text = match from {
            Some(i) if self.commands[i].0 => "+@all".to_string(),
            _ => "-@all".to_string(),
        };
        for (allow, target) in &self.commands[from.map_or(0, |i| i + 1)..] {
            text.push(' ');
            text.push(if *allow { '+' } else { '-' });
            match target {
                Target::All => {}
                Target::Command(n) | Target::Subcommand(n) => text.push_str(n),
                Target::FirstArg(n, a) => {
                    text.push_str(n);
                    text.push('|');
                    text.push_str(a);
                }
                Target::Category(c) => {
                    text.push('@');
                    text.push_str(c);
                }
            }
        }
        text
    }

    /// Applies one command, key or channel rule (Redis's ACLSetSelector); Err: its reason.
    fn apply(&mut self, rule: &str) -> Result<(), String> {
        const SYNTAX: &str = "Syntax error";
        let lower = rule.to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => self.commands = vec![(true, Target::All)],
            "nocommands" | "-@all" => self.commands = vec![(false, Target::All)],
            _ if rule.starts_with('~') || rule.starts_with('%') => {
                if self.all_keys {
                    return Err("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns".into());
                }
                let (read, write, glob) = if let Some(glob) = rule.strip_prefix('~') {
                    (true, true, glob)
                } else {
                    // %R~, %W~, %RW~, %WR~ (each letter once, at least one).
                    let (perms, glob) = rule[1..].split_once('~').ok_or(SYNTAX)?;
                    let (mut r, mut w) = (false, false);
                    for b in perms.bytes() {
                        match b.to_ascii_uppercase() {
                            b'R' if !r => r = true,
                            b'W' if !w => w = true,
                            _ => return Err(SYNTAX.into()),
                        }
                    }
                    if !r && !w {
                        return Err(SYNTAX.into());
                    }
                    (r, w, glob)
                };
                if glob.bytes().any(|b| b.is_ascii_whitespace() || b == 0) {
                    return Err(SYNTAX.into());
                }
                match self.keys.iter_mut().find(|p| p.glob == glob) {
                    Some(p) => {
                        p.read |= read;
                        p.write |= write;
                    }
                    None => self.keys.push(KeyPattern { glob: glob.to_string(), read, write }),
                }
            }
            _ if rule.starts_with('&') => {
                if self.all_channels {
                    return Err("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels".into());
                }
                let glob = &rule[1..];
                if glob.bytes().any(|b| b.is_ascii_whitespace() || b == 0) {
                    return Err(SYNTAX.into());
                }
                if !self.channels.iter().any(|c| c == glob) {
                    self.channels.push(glob.to_string());
                }
            }
            _ => match User::command_rule(rule) {
                Some(r) => {
                    let r = r?;
                    // A rule replaces an earlier one for the same command (and, for a whole
                    // command, those for its subcommands) or category, as Redis 7.2 keeps
                    // them: each decides nothing the new rule does not decide again.
                    match &r.1 {
                        Target::All => self.commands.clear(),
                        Target::Command(name) => self.commands.retain(|(_, t)| match t {
                            Target::Command(n) | Target::FirstArg(n, _) => n != name,
                            Target::Subcommand(full) => full.split('|').next() != Some(*name),
                            _ => true,
                        }),
                        // First arguments add up (the same one, in any case, once).
                        Target::FirstArg(name, arg) => self.commands.retain(|(_, t)| match t {
                            Target::FirstArg(n, a) => n != name || !a.eq_ignore_ascii_case(arg),
                            _ => true,
                        }),
                        target => self.commands.retain(|(_, t)| t != target),
                    }
                    self.commands.push(r);
                }
                None => return Err(SYNTAX.into()),
            },
        }
        Ok(())
    }
}

/// Whether every subscription in `subs` is among `channels` (channels by glob, patterns
/// literally).
fn subscriptions_allowed(channels: &[String], subs: &crate::pubsub::ConnSubs) -> bool {
    subs.channels.iter().chain(&subs.shard).all(|c| channel_allowed(channels, c, false))
        && subs.patterns.iter().all(|p| channel_allowed(channels, p, true))
}

/// A command's keys with their flags, found once for all of a user's selectors.
struct KeyCache(std::cell::OnceCell<Vec<(usize, &'static [&'static str])>>);

impl KeyCache {
    fn new() -> KeyCache {
        KeyCache(std::cell::OnceCell::new())
    }

    /// The keys; a command whose key arguments are malformed names none (it fails on its own).
    fn get(&self, spec: &CommandSpec, args: &[&[u8]]) -> &[(usize, &'static [&'static str])] {
        self.0.get_or_init(|| {
            crate::commands::command::keys_with_flags(spec, args).ok().flatten().unwrap_or_default()
        })
    }
}

/// One user and what it may do.
#[derive(Clone, Debug)]
pub struct User {
    pub name: Arc<str>,
    pub enabled: bool,
    /// Any password authenticates (Redis's `nopass`).
    pub nopass: bool,
    /// SHA-256 digests of the accepted passwords.
    pub passwords: Vec<[u8; 32]>,
    /// `sanitize-payload` (Some(true), every new user's, as in Redis 8) or
    /// `skip-sanitize-payload` (Some(false)), shown by ACL LIST. RESTORE checks every payload
    /// whole either way.
    sanitize: Option<bool>,
    /// The rules outside parentheses.
    root: Selector,
    /// The selectors, in the order added.
    selectors: Vec<Selector>,
}

impl User {
    /// A user as Redis 8 creates one: off, no password, no nopass, no commands, no keys, no
    /// channels, `sanitize-payload`.
    fn new(name: &str) -> User {
        User {
            name: name.into(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            sanitize: Some(true),
            root: Selector::fresh(),
            selectors: Vec::new(),
        }
    }

    /// Whether this user may run everything (no check is needed for it).
    pub fn full_access(&self) -> bool {
        let r = &self.root;
        r.all_keys && r.all_channels && r.commands.last().is_some_and(|c| *c == (true, Target::All))
    }

    /// Whether the user may run `args` (a command `spec` whose arity was checked): None, or
    /// what is denied (Redis's ACLCheckAllUserCommandPerm: allowed if one selector allows it
    /// all; else the command if no selector allowed it, or the last key or channel refused).
    pub fn check(&self, spec: &CommandSpec, args: &[&[u8]]) -> Option<Denied> {
        let sub = args.get(1).and_then(|a| crate::commands::command::full_subcommand_name(spec.name, a));
        let keys = KeyCache::new();
        let mut worst = Denied::Command;
        for sel in std::iter::once(&self.root).chain(&self.selectors) {
            match sel.check(spec, sub, args, &keys) {
                Ok(()) => return None,
                Err(d) => worst = worst.max(d),
            }
        }
        Some(worst)
    }

    /// Whether some selector allows this command and every key read (SORT's BY and GET).
    pub fn reads_every_key(&self, spec: &CommandSpec, args: &[&[u8]]) -> bool {
        let sub = args.get(1).and_then(|a| crate::commands::command::full_subcommand_name(spec.name, a));
        let keys = KeyCache::new();
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| s.reads_every_key() && s.check(spec, sub, args, &keys).is_ok())
    }

    /// Whether a connection of this user subscribed to `subs` may stay once the user's rules
    /// are these (Redis closes it otherwise): every channel and pattern it holds is among
    /// the channels of all its selectors together.
    pub fn keeps_subscriber(&self, subs: &crate::pubsub::ConnSubs) -> bool {
        let selectors = || std::iter::once(&self.root).chain(&self.selectors);
        if selectors().any(|s| s.all_channels) {
            return true;
        }
        let all: Vec<String> = selectors().flat_map(|s| s.channels.iter().cloned()).collect();
        subscriptions_allowed(&all, subs)
    }

    /// ACL LIST's line for this user.
    pub fn describe(&self) -> String {
        let mut line = format!("user {} {}", self.name, if self.enabled { "on" } else { "off" });
        if self.nopass {
            line.push_str(" nopass");
        }
        match self.sanitize {
            Some(true) => line.push_str(" sanitize-payload"),
            Some(false) => line.push_str(" skip-sanitize-payload"),
            None => {}
        }
        for p in &self.passwords {
            line.push_str(" #");
            line.push_str(&hex(p));
        }
        line.push(' ');
        line.push_str(&self.root.describe());
        for s in &self.selectors {
            line.push_str(" (");
            line.push_str(&s.describe());
            line.push(')');
        }
        line
    }

    /// GETUSER's flags.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(true) => f.push("sanitize-payload"),
            Some(false) => f.push("skip-sanitize-payload"),
            None => {}
        }
        f
    }

    /// GETUSER's `commands`, `keys` and `channels` of the root rules, then of each selector.
    pub fn selector_texts(&self) -> Vec<[String; 3]> {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .map(|s| [s.commands_text(), s.keys_text(), s.channels_text()])
            .collect()
    }

    /// A command rule (`+name`, `-name`, `+name|sub`, `+@category`, ...), or None for a word
    /// that is not one. Err: it names no command, subcommand or category.
    fn command_rule(rule: &str) -> Option<Result<(bool, Target), String>> {
        let allow = match rule.as_bytes().first() {
            Some(b'+') => true,
            Some(b'-') => false,
            _ => return None,
        };
        let body = rule[1..].to_ascii_lowercase();
        const UNKNOWN: &str = "Unknown command or category name in ACL";
        if let Some(cat) = body.strip_prefix('@') {
            if cat == "all" {
                return Some(Ok((allow, Target::All)));
            }
            if !crate::commands::command::all_categories().iter().any(|c| c[1..] == *cat) {
                return Some(Err(UNKNOWN.into()));
            }
            return Some(Ok((allow, Target::Category(cat.to_string()))));
        }
        if let Some((head, last)) = body.rsplit_once('|') {
            use crate::commands::command::{full_subcommand_name, is_container};
            // `-name|x` can only name a subcommand.
            let (container, sub) = match head.split_once('|') {
                Some((c, s)) => (c, Some(s)),
                None => (head, None),
            };
            let Some(spec) = engine::lookup(container.as_bytes()) else { return Some(Err(UNKNOWN.into())) };
            if !allow {
                return Some(match (sub, full_subcommand_name(spec.name, last.as_bytes())) {
                    (None, Some(full)) => Ok((false, Target::Subcommand(full))),
                    _ => Err(UNKNOWN.into()),
                });
            }
            // Redis's order: the command, a subcommand's first argument, an empty last part.
            if let Some(sub) = sub {
                return Some(Err(match full_subcommand_name(spec.name, sub.as_bytes()) {
                    Some(_) => "Allowing first-arg of a subcommand is not supported".into(),
                    None => UNKNOWN.into(),
                }));
            }
            if last.is_empty() {
                return Some(Err("Syntax error".into()));
            }
            if is_container(spec.name) {
                let full = full_subcommand_name(spec.name, last.as_bytes());
                return Some(full.map(|f| (true, Target::Subcommand(f))).ok_or_else(|| UNKNOWN.into()));
            }
            // A plain command with one first argument (`+select|0`), kept as written.
            let arg = &rule[rule.len() - last.len()..];
            return Some(Ok((true, Target::FirstArg(spec.name, arg.to_string()))));
        }
        Some(
            engine::lookup(body.as_bytes())
                .map(|spec| (allow, Target::Command(spec.name)))
                .ok_or_else(|| UNKNOWN.into()),
        )
    }

    /// Whether the password with this digest authenticates this user (an enabled one). Every
    /// stored digest is compared, each in constant time, so the timing reveals neither which
    /// one matched nor how much of a digest did.
    fn accepts(&self, digest: &[u8; 32]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let mut ok = false;
        for p in &self.passwords {
            ok |= ct_eq(p, digest);
        }
        ok
    }

    /// Applies one rule (Redis's ACLSetUser; a selector is one rule, `(...)`, here); Err: the
    /// reason, in Redis's words.
    fn apply(&mut self, rule: &str) -> Result<(), String> {
        if rule.is_empty() {
            return Ok(());
        }
        match rule.to_ascii_lowercase().as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "sanitize-payload" => self.sanitize = Some(true),
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "reset" => {
                *self = User::new(&self.name);
                self.root.commands = vec![(false, Target::All)];
            }
            "clearselectors" => self.selectors.clear(),
            _ if rule.starts_with('(') && rule.ends_with(')') && rule.len() >= 2 => {
                let mut sel = Selector::fresh();
                for r in rule[1..rule.len() - 1].split_ascii_whitespace() {
                    sel.apply(r)?;
                }
                self.selectors.push(sel);
            }
            _ if rule.starts_with('>') => {
                self.add_password(sha256(&rule.as_bytes()[1..]));
            }
            _ if rule.starts_with('#') => {
                let digest = parse_hex32(&rule[1..]).ok_or(HASH_FORMAT)?;
                self.add_password(digest);
            }
            // Removing a password, by its text or its digest.
            _ if rule.starts_with('<') => {
                let digest = sha256(&rule.as_bytes()[1..]);
                self.remove_password(&digest)?;
            }
            _ if rule.starts_with('!') => {
                let digest = parse_hex32(&rule[1..]).ok_or(HASH_FORMAT)?;
                self.remove_password(&digest)?;
            }
            _ => self.root.apply(rule)?,
        }
        Ok(())
    }

    fn remove_password(&mut self, digest: &[u8; 32]) -> Result<(), String> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != digest);
        if self.passwords.len() == before {
            return Err("The password you are trying to remove from the user does not exist".into());
        }
        Ok(())
    }

    fn add_password(&mut self, digest: [u8; 32]) {
        // As in Redis, a password clears nopass.
        self.nopass = false;
        if !self.passwords.contains(&digest) {
            self.passwords.push(digest);
        }
    }
}

/// ACL LOAD and SAVE without `--auth-file` (Redis's reply without an aclfile).
const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

const HASH_FORMAT: &str =
    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";

/// Redis's ACLMergeSelectorArguments: a selector may be spread over several arguments
/// (`(~a*` `+get)`); they are joined with spaces. Err: Redis's reply text when a parenthesis
/// is left open.
pub fn merge_selectors<'a>(rules: &[&'a str]) -> Result<Vec<std::borrow::Cow<'a, str>>, String> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, &r) in rules.iter().enumerate() {
        match &mut open {
            None if r.starts_with('(') && !r.ends_with(')') => open = Some((i, r.to_string())),
            None => out.push(std::borrow::Cow::Borrowed(r)),
            Some((_, sel)) => {
                sel.push(' ');
                sel.push_str(r);
                if r.ends_with(')') {
                    out.push(std::borrow::Cow::Owned(open.take().expect("open").1));
                }
            }
        }
    }
    if let Some((i, _)) = open {
        return Err(format!("ERR Unmatched parenthesis in acl selector starting at '{}'.", rules[i]));
    }
    Ok(out)
}

/// Every user the server knows (ACL SETUSER adds and changes them, ACL DELUSER removes them;
/// connections hold the user's name, not an index).
#[derive(Clone, Debug)]
pub struct Users {
    users: Vec<User>,
    /// Index of `default` in `users`.
    default: usize,
    /// `--auth-file`: what ACL LOAD reads and ACL SAVE writes.
    file: Option<std::path::PathBuf>,
}

impl Users {
    /// The users `--auth-file` and `--requirepass` describe (neither: `default`, on, nopass).
    pub fn from_config(auth_file: Option<&Path>, requirepass: Option<&str>) -> Result<Users, String> {
        let mut users = match auth_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("--auth-file {}: cannot read it: {e}", path.display()))?;
                parse_file(&text).map_err(|e| format!("--auth-file {}: {e}", path.display()))?
            }
            None => Vec::new(),
        };
        let default = match users.iter().position(|u| &*u.name == DEFAULT_USER) {
            Some(i) => {
                if requirepass.is_some() {
                    // Two sources for one password: refuse rather than pick one silently.
                    return Err(format!(
                        "--requirepass cannot be combined with an --auth-file that defines the '{DEFAULT_USER}' user"
                    ));
                }
                i
            }
            None => {
                let mut d = User::new(DEFAULT_USER);
                d.enabled = true;
                d.nopass = true;
                d.root.all_keys = true;
                d.root.all_channels = true;
                d.root.commands = vec![(true, Target::All)];
                users.push(d);
                users.len() - 1
            }
        };
        let mut users = Users { users, default, file: auth_file.map(Path::to_path_buf) };
        if let Some(pw) = requirepass {
            users.set_requirepass(pw);
        }
        Ok(users)
    }

    /// `requirepass` (flag or CONFIG SET): the default user's only password, or nopass when
    /// empty, as Redis applies it (`resetpass` then `>pw`, or `nopass`).
    pub fn set_requirepass(&mut self, pw: &str) {
        let d = &mut self.users[self.default];
        d.nopass = false;
        d.passwords.clear();
        if pw.is_empty() {
            d.nopass = true;
        } else {
            d.add_password(sha256(pw.as_bytes()));
        }
    }

    pub fn default_index(&self) -> usize {
        self.default
    }

    pub fn get(&self, i: usize) -> &User {
        &self.users[i]
    }

    /// Whether a connection on the default user starts authenticated: Redis's test, the
    /// default user is nopass and enabled.
    /// Whether the default user has no password (`nopass`), enabled or not: what Redis's
    /// protected mode looks at.
    pub fn default_has_no_password(&self) -> bool {
        self.users[self.default].nopass
    }

    pub fn default_is_open(&self) -> bool {
        let d = &self.users[self.default];
        d.nopass && d.enabled
    }

    /// Index of the user these credentials authenticate, or None (unknown user, disabled user
    /// or wrong password: the caller answers WRONGPASS for all three alike).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<usize> {
        // Hashed first, whether or not the user exists, so that the time taken does not
        // tell an unknown user from a wrong password.
        let digest = sha256(password);
        let i = self.users.iter().position(|u| u.name.as_bytes() == name)?;
        self.users[i].accepts(&digest).then_some(i)
    }

    /// ACL SETUSER in one step (the server stages, checks subscribers, then puts).
    #[cfg(test)]
    pub fn setuser(&mut self, name: &str, rules: &[&str]) -> Result<(), String> {
        let user = self.staged(name, rules)?;
        self.put(user);
        Ok(())
    }

    /// ACL SETUSER's user: `name` (created if needed) with `rules` applied left to right, all
    /// or nothing, changing nothing yet (the server compares it with the user's subscribers,
    /// then [`Users::put`]s it). Err is the whole error reply text (Redis's wording).
    pub fn staged(&self, name: &str, rules: &[&str]) -> Result<User, String> {
        if !valid_name(name) {
            return Err("ERR Usernames can't contain spaces or null characters".into());
        }
        let mut user = match self.users.iter().find(|u| &*u.name == name) {
            Some(u) => u.clone(),
            None => User::new(name),
        };
        for rule in merge_selectors(rules)? {
            if let Err(why) = user.apply(&rule) {
                return Err(format!("ERR Error in ACL SETUSER modifier '{rule}': {why}"));
            }
        }
        Ok(user)
    }

    /// Installs `user`, replacing the user of that name if there is one.
    pub fn put(&mut self, user: User) {
        match self.users.iter().position(|u| u.name == user.name) {
            Some(i) => self.users[i] = user,
            None => self.users.push(user),
        }
    }

    /// ACL DELUSER: removes the named users that exist; returns how many. `default` cannot be
    /// removed (Err: Redis's reply).
    pub fn deluser(&mut self, names: &[&str]) -> Result<usize, String> {
        if names.contains(&DEFAULT_USER) {
            return Err("ERR The 'default' user cannot be removed".into());
        }
        let before = self.users.len();
        self.users.retain(|u| !names.contains(&&*u.name));
        let removed = before - self.users.len();
        self.default = self.users.iter().position(|u| &*u.name == DEFAULT_USER).expect("default is kept");
        Ok(removed)
    }

    /// The user called `name`.
    pub fn find(&self, name: &[u8]) -> Option<&User> {
        self.users.iter().find(|u| u.name.as_bytes() == name)
    }

    /// ACL LIST: one line per user, sorted by name, as Redis prints them.
    pub fn list(&self) -> Vec<String> {
        let mut users: Vec<&User> = self.users.iter().collect();
        users.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        users.iter().map(|u| u.describe()).collect()
    }

    /// The permission check of a connection on user `name` for `args` (see [`User::check`]);
    /// a user that no longer exists may do nothing.
    pub fn check(&self, name: &str, spec: &CommandSpec, args: &[&[u8]]) -> Option<Denied> {
        match self.users.iter().find(|u| &*u.name == name) {
            Some(u) => u.check(spec, args),
            None => Some(Denied::Command),
        }
    }

    /// ACL LOAD: every user from `--auth-file` again, all or nothing. A file without a
    /// `default` user leaves the current one as it is (its `--requirepass` too). Err: the reply.
    pub fn reload(&mut self) -> Result<(), String> {
        let Some(path) = self.file.clone() else { return Err(NO_ACL_FILE.into()) };
        let loaded = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|text| parse_file(&text).map_err(|e| format!("{}: {e}", path.display())));
        let mut users = match loaded {
            Ok(users) => users,
            Err(e) => {
                return Err(format!(
                    "ERR {e}. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
                ))
            }
        };
        if !users.iter().any(|u| &*u.name == DEFAULT_USER) {
            users.push(self.users[self.default].clone());
        }
        self.default = users.iter().position(|u| &*u.name == DEFAULT_USER).expect("present");
        self.users = users;
        Ok(())
    }

    /// ACL SAVE: every user, as ACL LIST prints them, into `--auth-file` (written whole to a
    /// temporary file beside it, synced, then renamed over it). Err: the reply.
    pub fn save(&self) -> Result<(), String> {
        let Some(path) = &self.file else { return Err(NO_ACL_FILE.into()) };
        let mut text = self.list().join("\n");
        text.push('\n');
        let tmp = path.with_extension("goblin-acl-tmp");
        let written = (|| -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        written.map_err(|e| {
            tracing::warn!("ACL SAVE to {}: {e}", path.display());
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information"
                .to_string()
        })
    }

    /// The names, sorted (ACL USERS lists them in this order in Redis).
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.users.iter().map(|u| &*u.name).collect();
        v.sort_unstable();
        v
    }
}

/// Why an entry is in the ACL log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

impl From<Denied> for Reason {
    fn from(d: Denied) -> Reason {
        match d {
            Denied::Command => Reason::Command,
            Denied::Key(_) => Reason::Key,
            Denied::Channel(_) => Reason::Channel,
        }
    }
}

/// Where a refused command was: sent by the client, queued in or run by a transaction, or
/// called by a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

/// One ACL LOG entry: a refusal, or several alike within a minute.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command's name, the key or channel refused, or the authenticating command.
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// The last refusal's client (CLIENT INFO line, without its newline).
    pub client_info: String,
    pub id: u64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// Refusals and failed authentications, newest first (Redis's ACL LOG): entries alike within
/// 60 s among the 10 newest are counted together; at most `max_len` are kept
/// (`acllog-max-len`). The per-reason totals are INFO's `acl_access_denied_*`.
#[derive(Debug)]
pub struct AclLog {
    entries: std::collections::VecDeque<LogEntry>,
    next_id: u64,
    pub max_len: usize,
    /// Refusals by reason since startup: auth, command, key, channel.
    pub denied: [u64; 4],
}

/// Refusals this far apart or closer are counted in one entry (Redis's grouping window).
const LOG_GROUPING_MS: i64 = 60_000;

impl Default for AclLog {
    fn default() -> Self {
        AclLog { entries: Default::default(), next_id: 0, max_len: 128, denied: [0; 4] }
    }
}

impl AclLog {
    pub fn add(
        &mut self,
        reason: Reason,
        context: Context,
        object: &[u8],
        username: &[u8],
        client_info: String,
        now_ms: i64,
    ) {
        let slot = match reason {
            Reason::Auth => 0,
            Reason::Command => 1,
            Reason::Key => 2,
            Reason::Channel => 3,
        };
        self.denied[slot] += 1;
        if self.max_len == 0 {
            self.entries.clear();
            return;
        }
        let alike = self.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && (e.updated_ms - now_ms).abs() <= LOG_GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = alike {
            let mut e = self.entries.remove(i).expect("found");
            e.count += 1;
            e.client_info = client_info;
            e.updated_ms = now_ms;
            self.entries.push_front(e);
            return;
        }
        self.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            client_info,
            id: self.next_id,
            created_ms: now_ms,
            updated_ms: now_ms,
        });
        self.next_id += 1;
        self.entries.truncate(self.max_len);
    }

    /// The newest `count` entries (all, when None).
    pub fn entries(&self, count: Option<usize>) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter().take(count.unwrap_or(usize::MAX))
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// `acllog-max-len` changed. As in Redis, the entries past it stay until the next one is
    /// logged (`add` trims then).
    pub fn set_max_len(&mut self, n: usize) {
        self.max_len = n;
    }
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

impl LogEntry {
    pub fn reason_name(&self) -> &'static str {
        self.reason.name()
    }
}

/// Parses the file's text; errors name the line number and the offending rule.
fn parse_file(text: &str) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lineno = n + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_ascii_whitespace();
        if words.next() != Some("user") {
            return Err(format!("line {lineno}: expected 'user <name> <rules...>'"));
        }
        let Some(name) = words.next() else {
            return Err(format!("line {lineno}: 'user' without a name"));
        };
        if !valid_name(name) {
            return Err(format!("line {lineno}: invalid user name '{name}'"));
        }
        if users.iter().any(|u| &*u.name == name) {
            return Err(format!("line {lineno}: Duplicate user '{name}' found"));
        }
        let mut user = User::new(name);
        let words: Vec<&str> = words.collect();
        let rules = merge_selectors(&words)
            .map_err(|e| format!("line {lineno}: {}", e.trim_start_matches("ERR ")))?;
        for rule in rules {
            user.apply(&rule).map_err(|why| format!("line {lineno}: rule '{rule}': {why}"))?;
        }
        users.push(user);
    }
    Ok(users)
}

/// Redis refuses names with spaces or control characters (ACLStringHasSpaces); a name cannot
/// start a rule either.
fn valid_name(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_graphic())
}

/// Lowercase hex, as ACL LIST and GETUSER print password digests.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Equality of two digests in time independent of where they differ.
fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for i in 0..32 {
        diff |= a[i] ^ b[i];
    }
    // black_box keeps the optimiser from turning the fold into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.as_bytes().chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Users, String> {
        let mut users = parse_file(text)?;
        if !users.iter().any(|u| &*u.name == DEFAULT_USER) {
            let mut d = User::new(DEFAULT_USER);
            d.enabled = true;
            d.nopass = true;
            d.root.commands = vec![(true, Target::All)];
            users.push(d);
        }
        let default = users.iter().position(|u| &*u.name == DEFAULT_USER).unwrap();
        Ok(Users { users, default, file: None })
    }

    #[test]
    fn command_rules_replace_earlier_ones_for_the_same_command() {
        let mut users = Users::from_config(None, None).unwrap();
        let text = |users: &mut Users, rules: &[&str]| {
            users.setuser("t", &["reset"]).unwrap();
            users.setuser("t", rules).unwrap();
            users.find(b"t").unwrap().selector_texts()[0][0].clone()
        };
        assert_eq!(text(&mut users, &["+get", "+set", "-get"]), "-@all +set -get");
        assert_eq!(text(&mut users, &["+xgroup|create", "-xgroup"]), "-@all -xgroup");
        assert_eq!(text(&mut users, &["-xgroup", "+xgroup|create"]), "-@all -xgroup +xgroup|create");
        assert_eq!(text(&mut users, &["+@read", "-@read", "+@all", "-keys"]), "+@all -keys");
        // What the rules decide: the last one naming a command (or its subcommand) wins.
        users.setuser("t", &["reset", "+@stream", "-xgroup", "+xgroup|create", "~*"]).unwrap();
        let u = users.find(b"t").unwrap();
        let xgroup = engine::lookup(b"xgroup").unwrap();
        let create: &[&[u8]] = &[b"xgroup", b"create", b"s", b"g", b"$"];
        let destroy: &[&[u8]] = &[b"xgroup", b"destroy", b"s", b"g"];
        assert_eq!(u.check(xgroup, create), None);
        assert_eq!(u.check(xgroup, destroy), Some(Denied::Command));
        assert_eq!(u.check(engine::lookup(b"xlen").unwrap(), &[b"xlen", b"s"]), None);
    }

    #[test]
    fn rules_and_passwords() {
        let hash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"; // "secret"
        let u = parse(&format!(
            "# comment\n\nuser alice on >pw1 >pw2 ~* &* +@all\nuser bob on #{hash} allkeys\n\
             user carol off >pw\nuser dave on nopass\nuser erin on >x resetpass >y\n"
        ))
        .unwrap();
        assert!(u.authenticate(b"alice", b"pw1").is_some());
        assert!(u.authenticate(b"alice", b"pw2").is_some());
        assert!(u.authenticate(b"alice", b"pw3").is_none());
        assert!(u.authenticate(b"bob", b"secret").is_some());
        assert!(u.authenticate(b"carol", b"pw").is_none(), "off");
        assert!(u.authenticate(b"dave", b"anything").is_some());
        assert!(u.authenticate(b"erin", b"x").is_none() && u.authenticate(b"erin", b"y").is_some());
        assert!(u.authenticate(b"nobody", b"x").is_none());
        assert!(u.default_is_open());
        assert_eq!(u.names(), ["alice", "bob", "carol", "dave", "default", "erin"]);
    }

    #[test]
    fn refusals_name_the_line_and_rule() {
        for (text, want) in [
            ("user a on >p ~* ~cache:*\n", "line 1: rule '~cache:*': Adding a pattern after the * pattern"),
            ("\nuser a on %X~news.*\n", "line 2: rule '%X~news.*': Syntax error"),
            ("user a on (+get ~a\n", "line 1: Unmatched parenthesis in acl selector starting at '(+get'"),
            ("user a on +nosuch\n", "rule '+nosuch': Unknown command or category name in ACL"),
            ("user a on -@nosuch\n", "rule '-@nosuch'"),
            ("user a on #abc\n", "rule '#abc'"),
            ("user a on\nuser a off\n", "line 2: Duplicate user 'a' found"),
            ("usr a on\n", "line 1: expected"),
            ("user\n", "line 1: 'user' without a name"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn requirepass_sets_and_clears_the_default_password() {
        let mut u = Users::from_config(None, Some("pw")).unwrap();
        assert!(!u.default_is_open());
        assert!(u.authenticate(b"default", b"pw").is_some());
        assert!(u.authenticate(b"default", b"other").is_none());
        u.set_requirepass("");
        assert!(u.default_is_open());
    }
}
