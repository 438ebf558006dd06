//! Users and passwords: `--auth-file` (a subset of Redis's ACL file format) and
//! `--requirepass`, and the credential checks AUTH and HELLO use.
//!
//! The file format, one directive per line (blank lines and lines starting with `#` are
//! ignored):
//!
//! ```text
//! user <name> <rule> [<rule> ...]
//! ```
//!
//! Rules accepted, with Redis's meaning: `on`, `off`, `>password` (add a password),
//! `#<64 hex digits>` (add a password by its SHA-256), `nopass` (any password works),
//! `resetpass` (forget passwords and nopass), `reset` (back to a new user: off, no passwords,
//! no permissions), command rules (`+get`, `-set`, `+config|get`, `+@read`, `-@dangerous`,
//! `allcommands`, `nocommands`), every key or none (`allkeys`, `~*`, `%RW~*`, `resetkeys`) and
//! every channel or none (`allchannels`, `&*`, `resetchannels`). Key and channel patterns and
//! selectors are not supported: such a rule is refused at startup rather than silently
//! ignored, as are duplicate users and malformed lines. [`User::check`] enforces the rest.
//!
//! Without a `default` user in the file, `default` is `on nopass` (full access), as Redis
//! creates it; `--requirepass` then gives it that password. Passwords are kept only as
//! SHA-256 digests and compared in constant time.

use engine::CommandSpec;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

pub const DEFAULT_USER: &str = "default";

/// The answer to a rule outside the supported subset.
const UNSUPPORTED: &str = "goblin-core supports on, off, >password, <password, #<sha256>, !<sha256>, nopass, \
     resetpass, reset, command rules (+cmd, -cmd, +cmd|sub, +@category, -@category, allcommands, nocommands), \
     every key or none (allkeys, ~*, %RW~*, resetkeys) and every channel or none (allchannels, &*, \
     resetchannels); key and channel patterns and selectors are not supported";

/// What a command rule names: every command, one command (all its subcommands), one
/// subcommand (`container|sub`), or an ACL category.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    All,
    Command(&'static str),
    Subcommand(&'static str),
    Category(String),
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
    /// The command rules, in the order given (`+get`, `-@dangerous`, `allcommands` ...): the
    /// last one that names a command decides it; none denies.
    commands: Vec<(bool, Target)>,
    /// Every key (`allkeys`, `~*`) or none (`resetkeys`, a new user's).
    pub all_keys: bool,
    /// Every pub/sub channel (`allchannels`, `&*`) or none (`resetchannels`, a new user's).
    pub all_channels: bool,
}

/// Why a user may not run a command (the check order is Redis's: command, keys, channels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl User {
    /// A user as Redis's `reset` leaves it: off, no password, no nopass, no commands, no keys,
    /// no channels.
    fn new(name: &str) -> User {
        User {
            name: name.into(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            commands: Vec::new(),
            all_keys: false,
            all_channels: false,
        }
    }

    /// Whether this user may run everything (no check is needed for it).
    pub fn full_access(&self) -> bool {
        self.all_keys && self.all_channels && self.commands.last().is_some_and(|r| *r == (true, Target::All))
    }

    /// Whether the command `spec` (`sub`: its subcommand's full name, `container|sub`) is
    /// allowed by the command rules.
    fn may_run_command(&self, spec: &CommandSpec, sub: Option<&str>) -> bool {
        let mut allowed = false;
        let mut cats: Option<Vec<&'static str>> = None;
        for (allow, target) in &self.commands {
            let hit = match target {
                Target::All => true,
                Target::Command(name) => *name == spec.name,
                Target::Subcommand(full) => Some(*full) == sub,
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

    /// Whether the user may run `args` (a command `spec` whose arity was checked): None, or
    /// what is denied (the argument position of the key or channel refused).
    pub fn check(&self, spec: &CommandSpec, args: &[&[u8]]) -> Option<Denied> {
        let sub = args.get(1).and_then(|a| crate::commands::subcommand_name(spec.name, a));
        if !self.may_run_command(spec, sub) {
            return Some(Denied::Command);
        }
        if !self.all_keys {
            if let Ok(Some(keys)) = crate::commands::command::key_positions(spec, args) {
                if let Some(&k) = keys.first() {
                    return Some(Denied::Key(k));
                }
            }
        }
        if !self.all_channels {
            // The first channel argument of the commands that name channels.
            if matches!(spec.name, "publish" | "spublish" | "subscribe" | "ssubscribe" | "psubscribe") {
                return Some(Denied::Channel(1));
            }
        }
        None
    }

    /// The command rules as ACL LIST and GETUSER print them: `+@all` or `-@all`, then the
    /// rules after the last one naming every command.
    pub fn commands_text(&self) -> String {
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
                Target::Category(c) => {
                    text.push('@');
                    text.push_str(c);
                }
            }
        }
        text
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
        if let Some((container, sub)) = body.split_once('|') {
            let full = engine::lookup(container.as_bytes())
                .and_then(|spec| crate::commands::subcommand_name(spec.name, sub.as_bytes()));
            return Some(full.map(|f| (allow, Target::Subcommand(f))).ok_or_else(|| UNKNOWN.into()));
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

    /// Applies one rule; Err for a rule outside the supported subset.
    fn apply(&mut self, rule: &str) -> Result<(), String> {
        match rule {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "reset" => *self = User::new(&self.name),
            "~*" | "%RW~*" | "allkeys" => self.all_keys = true,
            "resetkeys" => self.all_keys = false,
            "&*" | "allchannels" => self.all_channels = true,
            "resetchannels" => self.all_channels = false,
            "allcommands" => self.commands = vec![(true, Target::All)],
            "nocommands" => self.commands = vec![(false, Target::All)],
            r if Self::command_rule(r).is_some() => {
                let rule = Self::command_rule(r).expect("checked")?;
                if rule.1 == Target::All {
                    // Every earlier rule is overridden.
                    self.commands.clear();
                }
                self.commands.push(rule);
            }
            r if r.starts_with('>') => {
                self.add_password(sha256(&r.as_bytes()[1..]));
            }
            r if r.starts_with('#') => {
                let hex = &r[1..];
                let digest = parse_hex32(hex).ok_or_else(|| {
                    "a '#' rule needs a SHA-256 digest of exactly 64 hexadecimal digits".to_string()
                })?;
                self.add_password(digest);
            }
            // Removing a password, by its text or its digest.
            r if r.starts_with('<') => {
                let digest = sha256(&r.as_bytes()[1..]);
                self.remove_password(&digest)?;
            }
            r if r.starts_with('!') => {
                let digest = parse_hex32(&r[1..]).ok_or_else(|| {
                    "a '!' rule needs a SHA-256 digest of exactly 64 hexadecimal digits".to_string()
                })?;
                self.remove_password(&digest)?;
            }
            _ => return Err(UNSUPPORTED.into()),
        }
        Ok(())
    }

    fn remove_password(&mut self, digest: &[u8; 32]) -> Result<(), String> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != digest);
        if self.passwords.len() == before {
            return Err("no such password".into());
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

/// Every user the server knows (ACL SETUSER adds and changes them, ACL DELUSER removes them;
/// connections hold the user's name, not an index).
#[derive(Clone, Debug)]
pub struct Users {
    users: Vec<User>,
    /// Index of `default` in `users`.
    default: usize,
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
                d.all_keys = true;
                d.all_channels = true;
                d.commands = vec![(true, Target::All)];
                users.push(d);
                users.len() - 1
            }
        };
        let mut users = Users { users, default };
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

    /// ACL SETUSER: creates `name` if needed and applies `rules` left to right, all or
    /// nothing. Err is the whole error reply text (Redis's wording).
    pub fn setuser(&mut self, name: &str, rules: &[&str]) -> Result<(), String> {
        if !valid_name(name) {
            return Err("ERR Usernames can't contain spaces or null characters".into());
        }
        let mut user = match self.users.iter().find(|u| &*u.name == name) {
            Some(u) => u.clone(),
            None => User::new(name),
        };
        for rule in rules {
            if let Err(why) = user.apply(rule) {
                return Err(format!("ERR Error in ACL SETUSER modifier '{rule}': {why}"));
            }
        }
        match self.users.iter().position(|u| &*u.name == name) {
            Some(i) => self.users[i] = user,
            None => self.users.push(user),
        }
        Ok(())
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
        users
            .iter()
            .map(|u| {
                let mut line = format!("user {} {}", u.name, if u.enabled { "on" } else { "off" });
                if u.nopass {
                    line.push_str(" nopass");
                }
                for p in &u.passwords {
                    line.push_str(" #");
                    line.push_str(&hex(p));
                }
                if u.all_keys {
                    line.push_str(" ~*");
                }
                line.push_str(if u.all_channels { " &*" } else { " resetchannels" });
                line.push(' ');
                line.push_str(&u.commands_text());
                line
            })
            .collect()
    }

    /// Whether the user called `name` may run everything (connections on such a user skip the
    /// permission check; an unknown name, a user just deleted, has none).
    pub fn full_access(&self, name: &str) -> bool {
        self.users.iter().find(|u| &*u.name == name).is_some_and(User::full_access)
    }

    /// The permission check of a connection on user `name` for `args` (see [`User::check`]);
    /// a user that no longer exists may do nothing.
    pub fn check(&self, name: &str, spec: &CommandSpec, args: &[&[u8]]) -> Option<Denied> {
        match self.users.iter().find(|u| &*u.name == name) {
            Some(u) => u.check(spec, args),
            None => Some(Denied::Command),
        }
    }

    /// The names, sorted (ACL USERS lists them in this order in Redis).
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.users.iter().map(|u| &*u.name).collect();
        v.sort_unstable();
        v
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
            return Err(format!("line {lineno}: duplicate user '{name}'"));
        }
        let mut user = User::new(name);
        for rule in words {
            user.apply(rule).map_err(|why| format!("line {lineno}: rule '{rule}': {why}"))?;
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
            users.push(d);
        }
        let default = users.iter().position(|u| &*u.name == DEFAULT_USER).unwrap();
        Ok(Users { users, default })
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
            ("user a on >p ~cache:*\n", "line 1: rule '~cache:*'"),
            ("\nuser a on &news.*\n", "line 2: rule '&news.*'"),
            ("user a on +nosuch\n", "rule '+nosuch': Unknown command or category name in ACL"),
            ("user a on -@nosuch\n", "rule '-@nosuch'"),
            ("user a on #abc\n", "rule '#abc'"),
            ("user a on\nuser a off\n", "line 2: duplicate user 'a'"),
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
