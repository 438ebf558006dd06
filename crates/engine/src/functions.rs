//! Redis 7 function libraries as replicated state.
//!
//! The engine keeps each library as opaque text: its name and its full code (the `#!lua
//! name=<lib>` line included). Compiling and running the code is the server's business
//! (goblin-core's scripting layer, which has the Lua VM); the engine only has to hold the
//! libraries so that every path that carries state carries them too: canonical mutations and
//! [`crate::Engine::apply_record`] (Kafka, the firehose), and snapshots.
//!
//! The canonical mutations are three commands, all keyless (no compaction key: a FLUSH undoes
//! earlier LOADs of any library, so no record may be dropped by compaction):
//!
//! ```text
//! FUNCTION LOAD REPLACE <code>     the library named by <code>'s first line now holds <code>
//! FUNCTION DELETE <library>        the library is gone (it must exist)
//! FUNCTION FLUSH                   no library is left
//! ```
//!
//! Every change bumps [`Functions::generation`]: the server rebuilds its Lua registry of
//! callable functions when the generation it built from is not the current one (after a
//! replayed record, a snapshot load, a GOBLIN.LOAD).

use std::collections::BTreeMap;

/// The loaded libraries: name -> code, in name order. Equality is the libraries' (the
/// generation is a local cache key, not state).
#[derive(Clone, Debug, Default)]
pub struct Functions {
    libs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The sum of the codes' lengths, kept as they change: FUNCTION LOAD bounds it on every
    /// load, which summing the map each time made quadratic in the number of libraries.
    code_bytes: usize,
    /// Bumped by every change; compared by readers that cache something derived.
    generation: u64,
}

impl Functions {
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.libs.get(name).map(Vec::as_slice)
    }

    /// (name, code) in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.libs.iter().map(|(n, c)| (n.as_slice(), c.as_slice()))
    }

    pub fn len(&self) -> usize {
        self.libs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.libs.is_empty()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes of library code (INFO).
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }

    /// Stores `code` under `name`, replacing what was there.
    pub fn insert(&mut self, name: Vec<u8>, code: Vec<u8>) {
        self.code_bytes += code.len();
        if let Some(old) = self.libs.insert(name, code) {
            self.code_bytes -= old.len();
        }
        self.generation += 1;
    }

    pub fn remove(&mut self, name: &[u8]) -> bool {
        let old = self.libs.remove(name);
        if let Some(code) = &old {
            self.code_bytes -= code.len();
        }
        self.generation += old.is_some() as u64;
        old.is_some()
    }

    pub fn clear(&mut self) {
        self.libs.clear();
        self.code_bytes = 0;
        self.generation += 1;
    }

    /// Replaces everything with `libs` (a snapshot's), each named by its metadata line. A code
    /// whose metadata does not parse is an error naming it.
    pub fn replace_all(&mut self, codes: Vec<Vec<u8>>) -> Result<(), String> {
        let mut libs = BTreeMap::new();
        for code in codes {
            let md = metadata(&code).map_err(|e| String::from_utf8_lossy(&e).into_owned())?;
            libs.insert(md.name, code);
        }
        self.code_bytes = libs.values().map(Vec::len).sum();
        self.libs = libs;
        self.generation += 1;
        Ok(())
    }
}

impl PartialEq for Functions {
    fn eq(&self, other: &Self) -> bool {
        self.libs == other.libs
    }
}

impl Eq for Functions {}

/// What a library's first line says (`#!<engine> name=<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub engine: Vec<u8>,
    pub name: Vec<u8>,
    /// Where the code after the metadata line starts (at that line's newline, which the code
    /// keeps so that line numbers in errors match the text the user sent).
    pub body: usize,
}

/// Parses a library's metadata line as Redis 7.0 does; the error is Redis's text (with `ERR`).
/// The checks and their order: a `#!` prefix, a newline, the words (split like a Redis
/// command line, quotes allowed), `name=` given once and nothing else, the name's characters.
pub fn metadata(code: &[u8]) -> Result<Metadata, Vec<u8>> {
    if !code.starts_with(b"#!") {
        return Err(b"ERR Missing library metadata".to_vec());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err(b"ERR Invalid library metadata".to_vec());
    };
    let words = match crate::util::split_args(&code[..end]) {
        Some(w) if !w.is_empty() => w,
        _ => return Err(b"ERR Invalid library metadata".to_vec()),
    };
    let engine = words[0][2..].to_vec();
    let mut name: Option<Vec<u8>> = None;
    for w in &words[1..] {
        if w.len() >= 5 && w[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(b"ERR Invalid metadata value, name argument was given multiple times".to_vec());
            }
            name = Some(w[5..].to_vec());
            continue;
        }
        let mut e = b"ERR Invalid metadata value given: ".to_vec();
        e.extend_from_slice(w);
        return Err(e);
    }
    let Some(name) = name else {
        return Err(b"ERR Library name was not given".to_vec());
    };
    if !valid_name(&name) {
        return Err(NAME_RULE.to_vec());
    }
    Ok(Metadata { engine, name, body: end })
}

/// Redis's rule for library and function names.
pub const NAME_RULE: &[u8] = b"ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Letters, digits and underscores, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_follows_redis() {
        let md = metadata(b"#!lua name=lib1\nreturn 1").unwrap();
        assert_eq!((md.engine.as_slice(), md.name.as_slice(), md.body), (&b"lua"[..], &b"lib1"[..], 15));
        assert_eq!(metadata(b"#!lua NAME=\"x\"\n").unwrap().name, b"x");
        let err = |c: &[u8]| String::from_utf8(metadata(c).unwrap_err()).unwrap();
        assert_eq!(err(b"return 1"), "ERR Missing library metadata");
        assert_eq!(err(b"#!lua name=a"), "ERR Invalid library metadata");
        assert_eq!(err(b"#!lua\n"), "ERR Library name was not given");
        assert_eq!(err(b"#!lua name=a foo=b\n"), "ERR Invalid metadata value given: foo=b");
        assert_eq!(
            err(b"#!lua name=a name=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert!(err(b"#!lua name=a-b\n").starts_with("ERR Library names can only"));
        assert_eq!(err(b"#!lua name=\"a\n"), "ERR Invalid library metadata");
    }
}
