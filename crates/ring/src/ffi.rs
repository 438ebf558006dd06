//! The C API (`include/goblin_ring.h`): connect, query, free, close. Every function catches
//! panics at the boundary and reports failures as NULL / -1 with errno set.

use crate::Client;
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Opaque to C.
pub struct GoblinRing(Client);

fn set_errno(e: &std::io::Error) {
    unsafe { *libc::__errno_location() = e.raw_os_error().unwrap_or(libc::EIO) };
}

/// Connects to a goblin-core `--ring` socket. NULL on failure (errno set).
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn goblin_ring_connect(path: *const c_char) -> *mut GoblinRing {
    if path.is_null() {
        set_errno(&std::io::Error::from_raw_os_error(libc::EINVAL));
        return std::ptr::null_mut();
    }
    let path = CStr::from_ptr(path).to_bytes();
    let r = catch_unwind(|| {
        use std::os::unix::ffi::OsStrExt;
        Client::connect(std::ffi::OsStr::from_bytes(path))
    });
    match r {
        Ok(Ok(c)) => Box::into_raw(Box::new(GoblinRing(c))),
        Ok(Err(e)) => {
            set_errno(&e);
            std::ptr::null_mut()
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// Sends one command (`argc` arguments, binary-safe) and waits for its whole reply, stored in
/// a buffer the caller frees with `goblin_ring_free_reply`. Returns the reply's length, or -1.
///
/// # Safety
/// `ring` comes from `goblin_ring_connect`; `argv[i]` points to `argvlen[i]` bytes; `reply`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn goblin_ring_query(
    ring: *mut GoblinRing,
    argc: c_int,
    argv: *const *const c_char,
    argvlen: *const usize,
    reply: *mut *mut c_char,
) -> isize {
    if ring.is_null() || argc <= 0 || argv.is_null() || argvlen.is_null() || reply.is_null() {
        set_errno(&std::io::Error::from_raw_os_error(libc::EINVAL));
        return -1;
    }
    let client = &mut (*ring).0;
    let args: Vec<&[u8]> = (0..argc as usize)
        .map(|i| std::slice::from_raw_parts(*argv.add(i) as *const u8, *argvlen.add(i)))
        .collect();
    match catch_unwind(AssertUnwindSafe(|| client.query(&args))) {
        Ok(Ok(bytes)) => {
            // malloc'd and NUL-terminated, so C may print a simple reply directly.
            let p = libc::malloc(bytes.len() + 1) as *mut u8;
            if p.is_null() {
                set_errno(&std::io::Error::from_raw_os_error(libc::ENOMEM));
                return -1;
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            *p.add(bytes.len()) = 0;
            *reply = p as *mut c_char;
            bytes.len() as isize
        }
        Ok(Err(e)) => {
            set_errno(&e);
            -1
        }
        Err(_) => -1,
    }
}

/// Frees a reply returned by `goblin_ring_query` (NULL is ignored).
///
/// # Safety
/// `reply` comes from `goblin_ring_query` and is freed once.
#[no_mangle]
pub unsafe extern "C" fn goblin_ring_free_reply(reply: *mut c_char) {
    libc::free(reply.cast());
}

/// Closes the connection and frees it (NULL is ignored).
///
/// # Safety
/// `ring` comes from `goblin_ring_connect` and is closed once.
#[no_mangle]
pub unsafe extern "C" fn goblin_ring_close(ring: *mut GoblinRing) {
    if !ring.is_null() {
        drop(Box::from_raw(ring));
    }
}
