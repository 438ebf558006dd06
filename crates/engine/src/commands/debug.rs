//! The parts of DEBUG that run inside the engine: two deliberate crashes that let tests prove
//! the write path's panic policy against the real binary (see `Engine::execute`). They are not
//! in the command table: the server's DEBUG runs them, only with `--enable-debug-command`.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;

/// `DEBUG CRASH-WRITE key`: writes `key`, emits its mutation, then panics. A write that
/// crashes must stop the server (fail-stop).
pub static CRASH_WRITE: CommandSpec = spec(
    "debug",
    -3,
    Flags::WRITE,
    (2, 2, 1),
    "server",
    "Crashes inside a write (tests).",
    Handler::Data(crash_write),
);

/// `DEBUG CRASH-READ key`: reads `key` (expiring it lazily if it is due), then panics. A read
/// that crashes gets an error reply; the expiry it made is still committed.
pub static CRASH_READ: CommandSpec = spec(
    "debug",
    -3,
    Flags::READONLY,
    (2, 2, 1),
    "server",
    "Crashes inside a read (tests).",
    Handler::Data(crash_read),
);

fn crash_write(c: &mut Ctx, _out: &mut Vec<u8>, args: &[&[u8]]) {
    c.ks.put(args[2], store::Value::Str(b"crashed".to_vec()), None);
    c.emit(&[b"SET", args[2], b"crashed"]);
    panic!("DEBUG CRASH-WRITE: a deliberate crash inside a write");
}

fn crash_read(c: &mut Ctx, _out: &mut Vec<u8>, args: &[&[u8]]) {
    let _ = c.read(args[2]);
    panic!("DEBUG CRASH-READ: a deliberate crash inside a read");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Origin, Outcome};

    #[test]
    fn a_crashing_write_is_reported_and_a_crashing_read_answers_an_error() {
        let mut e = Engine::default();
        let mut out = Vec::new();
        assert_eq!(
            e.execute(
                &CRASH_WRITE,
                &[b"DEBUG", b"CRASH-WRITE", b"k"],
                0,
                &mut out,
                resp::Proto::Resp2,
                false
            ),
            Outcome::WritePanicked
        );
        // The caller must stop: nothing is committed on its behalf.
        assert_eq!(e.repl.offset, 0);

        let mut e = Engine::default();
        crate::testing::reply(&mut e, 1000, &["SET", "k", "v", "PX", "10"]);
        e.commit(Origin::Command);
        let mut out = b"+before\r\n".to_vec();
        assert_eq!(
            e.execute(
                &CRASH_READ,
                &[b"DEBUG", b"CRASH-READ", b"k"],
                2000,
                &mut out,
                resp::Proto::Resp2,
                false
            ),
            Outcome::Done
        );
        assert_eq!(out, b"+before\r\n-ERR internal error while executing 'debug'\r\n");
        // The lazy expiry the read made before crashing is a real change: it stays pending and
        // commits with its offset.
        let b = e.commit(Origin::Command).unwrap();
        assert_eq!(b.to_args(), vec![vec![b"DEL".to_vec(), b"k".to_vec()]]);
        assert_eq!((b.first_offset, e.repl.offset), (2, 2));
        assert!(!e.ks.contains(b"k"));
    }
}
