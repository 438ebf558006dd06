//! One module per value type: its compact representation and its type API. Command handlers
//! live in the engine crate, in a module of the same name.

pub mod array;
pub mod hash;
pub mod list;
pub(crate) mod packed;
pub mod set;
pub mod string;
pub mod zset;

pub use array::SparseArray;
pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use zset::ZSet;
