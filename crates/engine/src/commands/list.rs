//! list commands. (Being written.)

use crate::command::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
