//! Values as the keyspace hands them out.

use crate::types::stream::PlainStream;
use crate::types::vset::{PlainVset, VectorSet};
use crate::types::{Hash, List, Set, SparseArray, Stream, ZSet};
use std::collections::{BTreeMap, BTreeSet};

/// The type of a value, as `TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Str,
    Hash,
    Set,
    ZSet,
    List,
    Array,
    Stream,
    VectorSet,
}

impl Kind {
    /// The name `TYPE` replies with and `SCAN ... TYPE` matches.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Str => "string",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::List => "list",
            Kind::Array => "array",
            Kind::Stream => "stream",
            Kind::VectorSet => "vectorset",
        }
    }
}

/// An owned value, moved into or out of the keyspace.
#[derive(Clone, Debug)]
pub enum Value {
    /// Any byte string. The keyspace stores canonical integers as integers (see
    /// [`crate::types::string`]); callers never need to care.
    Str(Vec<u8>),
    /// An integer string, e.g. the result of INCR, stored without formatting it.
    Int(i64),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    List(Box<List>),
    Array(Box<SparseArray>),
    Stream(Box<Stream>),
    VectorSet(Box<VectorSet>),
}

impl Value {
    pub fn kind(&self) -> Kind {
        match self {
            Value::Str(_) | Value::Int(_) => Kind::Str,
            Value::Hash(_) => Kind::Hash,
            Value::Set(_) => Kind::Set,
            Value::ZSet(_) => Kind::ZSet,
            Value::List(_) => Kind::List,
            Value::Array(_) => Kind::Array,
            Value::Stream(_) => Kind::Stream,
            Value::VectorSet(_) => Kind::VectorSet,
        }
    }

    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(b) => ValueRef::Str(StrRef::Bytes(b)),
            Value::Int(i) => ValueRef::Str(StrRef::Int(*i)),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::Set(s) => ValueRef::Set(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::List(l) => ValueRef::List(l),
            Value::Array(a) => ValueRef::Array(a),
            Value::Stream(s) => ValueRef::Stream(s),
            Value::VectorSet(v) => ValueRef::VectorSet(v),
        }
    }
}

/// A string value as stored: raw bytes or an integer.
#[derive(Clone, Copy, Debug)]
pub enum StrRef<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl StrRef<'_> {
    /// The string's bytes (integers are formatted in decimal).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            StrRef::Bytes(b) => b.to_vec(),
            StrRef::Int(i) => itoa::Buffer::new().format(*i).as_bytes().to_vec(),
        }
    }
    /// Length in bytes of the string form.
    pub fn len(&self) -> usize {
        match self {
            StrRef::Bytes(b) => b.len(),
            StrRef::Int(i) => itoa::Buffer::new().format(*i).len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `f` with the string's bytes without allocating.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            StrRef::Bytes(b) => f(b),
            StrRef::Int(i) => f(itoa::Buffer::new().format(*i).as_bytes()),
        }
    }
}

/// A borrowed view of a stored value.
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    Str(StrRef<'a>),
    Hash(&'a Hash),
    Set(&'a Set),
    ZSet(&'a ZSet),
    List(&'a List),
    Array(&'a SparseArray),
    Stream(&'a Stream),
    VectorSet(&'a VectorSet),
}

impl ValueRef<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            ValueRef::Str(_) => Kind::Str,
            ValueRef::Hash(_) => Kind::Hash,
            ValueRef::Set(_) => Kind::Set,
            ValueRef::ZSet(_) => Kind::ZSet,
            ValueRef::List(_) => Kind::List,
            ValueRef::Array(_) => Kind::Array,
            ValueRef::Stream(_) => Kind::Stream,
            ValueRef::VectorSet(_) => Kind::VectorSet,
        }
    }

    /// A canonical, comparable copy of the value.
    pub fn to_plain(&self) -> Plain {
        match self {
            ValueRef::Str(s) => Plain::Str(s.to_vec()),
            ValueRef::Hash(h) => h.to_plain(),
            ValueRef::Set(s) => s.to_plain(),
            ValueRef::ZSet(z) => z.to_plain(),
            ValueRef::List(l) => l.to_plain(),
            ValueRef::Array(a) => a.to_plain(),
            ValueRef::Stream(s) => s.to_plain(),
            ValueRef::VectorSet(v) => v.to_plain(),
        }
    }

    /// An owned deep copy (COPY, and commands that read one key and store into another).
    pub fn to_owned_value(&self) -> Value {
        match self {
            ValueRef::Str(StrRef::Bytes(b)) => Value::Str(b.to_vec()),
            ValueRef::Str(StrRef::Int(i)) => Value::Int(*i),
            ValueRef::Hash(h) => Value::Hash(Box::new((*h).clone())),
            ValueRef::Set(s) => Value::Set(Box::new((*s).clone())),
            ValueRef::ZSet(z) => Value::ZSet(Box::new((*z).clone())),
            ValueRef::List(l) => Value::List(Box::new((*l).clone())),
            ValueRef::Array(a) => Value::Array(Box::new((*a).clone())),
            ValueRef::Stream(s) => Value::Stream(Box::new((*s).clone())),
            ValueRef::VectorSet(v) => Value::VectorSet(Box::new((*v).clone())),
        }
    }

    /// `OBJECT ENCODING`'s answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            ValueRef::Str(StrRef::Int(_)) => "int",
            ValueRef::Str(StrRef::Bytes(b)) if b.len() <= 44 => "embstr",
            ValueRef::Str(StrRef::Bytes(_)) => "raw",
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::Set(s) => s.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::List(l) => l.encoding(),
            ValueRef::Array(a) => a.encoding(),
            ValueRef::Stream(s) => s.encoding(),
            ValueRef::VectorSet(v) => v.encoding(),
        }
    }
}

/// A mutable view of a stored value. Strings are not mutable in place (their stored size may
/// change): replace them with [`crate::Keyspace::replace_value`].
#[derive(Debug)]
pub enum ValueMut<'a> {
    Str(StrRef<'a>),
    Hash(&'a mut Hash),
    Set(&'a mut Set),
    ZSet(&'a mut ZSet),
    List(&'a mut List),
    Array(&'a mut SparseArray),
    Stream(&'a mut Stream),
    VectorSet(&'a mut VectorSet),
}

/// A canonical dump of a value: two stores hold the same data exactly when their dumps are
/// equal. Scores are compared by their bit patterns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Plain {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A hash some of whose fields have deadlines: the fields, and (field, unix ms).
    HashWithDeadlines(BTreeMap<Vec<u8>, Vec<u8>>, BTreeMap<Vec<u8>, i64>),
    Set(BTreeSet<Vec<u8>>),
    /// (member, score bits), sorted by member.
    ZSet(Vec<(Vec<u8>, u64)>),
    List(Vec<Vec<u8>>),
    /// (index, value) sorted by index, and the ARINSERT cursor (see `SparseArray::cursor`).
    Array(Vec<(u64, Vec<u8>)>, u64),
    Stream(Box<PlainStream>),
    /// Parameters and (name, stored vector, attributes) by name; not the graph's shape.
    VectorSet(Box<PlainVset>),
}
