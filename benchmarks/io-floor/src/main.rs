//! io-floor: the cheapest server that redis-benchmark accepts.
//!
//! It parses each request (with the project's own RESP parser, so pipelined and split requests
//! are counted right) and answers `+OK`, nothing else: no keyspace, no command table, no
//! statistics. Whatever CPU it spends per request is what the kernel charges any server for one
//! loopback TCP round trip (receive, send, readiness), so `benchmarks/redis_compare.py` runs it
//! beside goblin-core and redis-server and reports its CPU per request as the floor: the lowest
//! goblin/redis CPU ratio that any user-space engine could reach through the kernel's TCP path.
//!
//! Two I/O back ends, to show which part of that floor the I/O interface decides:
//! - `epoll`: edge-triggered epoll, one `read` and one `write` per ready connection per turn,
//!   the same system calls goblin-core and Redis make;
//! - `io-uring`: one `io_uring_enter` per loop turn that submits every send and re-armed
//!   receive and waits for the next completions (single issuer, deferred task work).

use clap::{Parser, ValueEnum};
use resp::{Limits, RequestParser};
use std::net::TcpListener;
use std::os::fd::{IntoRawFd, RawFd};

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    Epoll,
    IoUring,
}

#[derive(Parser)]
#[command(about = "A RESP responder with no engine: every request gets +OK")]
struct Cli {
    /// TCP port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    #[arg(long, value_enum, default_value_t = Backend::Epoll)]
    backend: Backend,
}

const READ_CHUNK: usize = 16 * 1024;

/// One client: bytes received but not yet parsed, and the parser's progress over them.
struct Client {
    fd: RawFd,
    input: Vec<u8>,
    parser: RequestParser,
}

impl Client {
    fn new(fd: RawFd) -> Client {
        set_nodelay(fd);
        Client { fd, input: Vec::with_capacity(READ_CHUNK), parser: RequestParser::new(Limits::default()) }
    }

    /// Parses every whole request in `input` and appends one `+OK` per request to `out`.
    /// Returns false on a protocol error (the connection is then closed).
    fn answer(&mut self, out: &mut Vec<u8>) -> bool {
        let mut used = 0;
        loop {
            match self.parser.next(&self.input[used..]) {
                Ok(Some(n)) => {
                    used += n;
                    out.extend_from_slice(b"+OK\r\n");
                }
                Ok(None) => break,
                Err(_) => return false,
            }
        }
        self.input.drain(..used);
        true
    }
}

fn set_nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: fd is an open socket; the option value is a c_int that outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn main() {
    let cli = Cli::parse();
    let listener = match TcpListener::bind(("127.0.0.1", cli.port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("io-floor: cannot listen on 127.0.0.1:{}: {e}", cli.port);
            std::process::exit(1);
        }
    };
    let result = match cli.backend {
        Backend::Epoll => epoll::run(listener),
        Backend::IoUring => uring::run(listener),
    };
    if let Err(e) = result {
        eprintln!("io-floor: {e}");
        std::process::exit(1);
    }
}

mod epoll {
    use super::*;
    use std::collections::HashMap;
    use std::io;

    pub fn run(listener: TcpListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        let lfd = listener.into_raw_fd();
        // SAFETY: plain system calls on descriptors this function owns; buffers outlive calls.
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            if ep < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: lfd as u64 };
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, &mut ev);
            let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
            let mut clients: HashMap<RawFd, Client> = HashMap::new();
            let mut chunk = vec![0u8; READ_CHUNK];
            let mut out = Vec::with_capacity(READ_CHUNK);
            loop {
                let n = libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1);
                for e in &events[..n.max(0) as usize] {
                    let fd = e.u64 as RawFd;
                    if fd == lfd {
                        loop {
                            let c = libc::accept4(
                                lfd,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                                libc::SOCK_NONBLOCK,
                            );
                            if c < 0 {
                                break;
                            }
                            let mut ev = libc::epoll_event {
                                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                                u64: c as u64,
                            };
                            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c, &mut ev);
                            clients.insert(c, Client::new(c));
                        }
                        continue;
                    }
                    let Some(client) = clients.get_mut(&fd) else { continue };
                    // Edge-triggered: read until a short read (the socket is then drained).
                    let mut open = true;
                    loop {
                        let r = libc::read(fd, chunk.as_mut_ptr() as *mut libc::c_void, chunk.len());
                        if r == 0 || (r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock)
                        {
                            open = false;
                            break;
                        }
                        if r < 0 {
                            break;
                        }
                        client.input.extend_from_slice(&chunk[..r as usize]);
                        out.clear();
                        if !client.answer(&mut out) {
                            open = false;
                            break;
                        }
                        // Replies are tiny and the client reads them: a short write is not
                        // expected from redis-benchmark, and this tool does not buffer one.
                        if !out.is_empty() {
                            libc::write(fd, out.as_ptr() as *const libc::c_void, out.len());
                        }
                        if (r as usize) < chunk.len() {
                            break;
                        }
                    }
                    if !open {
                        libc::close(fd);
                        clients.remove(&fd);
                    }
                }
            }
        }
    }
}

mod uring {
    use super::*;
    use io_uring::{opcode, squeue, types, IoUring};
    use std::io;

    const ACCEPT: u64 = u64::MAX;
    const SEND_BIT: u64 = 1;

    /// A client slot: the receive buffer the kernel writes into, replies being sent, and
    /// replies waiting for the send in flight to finish (one send in flight keeps order).
    struct Slot {
        client: Client,
        recv_buf: Box<[u8]>,
        sending: Vec<u8>,
        waiting: Vec<u8>,
        in_flight: bool,
        /// The client hung up or sent garbage; close once no send is in flight.
        closing: bool,
    }

    pub fn run(listener: TcpListener) -> io::Result<()> {
        let lfd = listener.into_raw_fd();
        let mut ring: IoUring = IoUring::builder().setup_single_issuer().setup_defer_taskrun().build(4096)?;
        let mut slots: Vec<Option<Slot>> = Vec::new();
        let mut pending: Vec<squeue::Entry> =
            vec![opcode::AcceptMulti::new(types::Fd(lfd)).build().user_data(ACCEPT)];
        let recv = |s: &mut Slot, id: usize| {
            opcode::Recv::new(types::Fd(s.client.fd), s.recv_buf.as_mut_ptr(), s.recv_buf.len() as u32)
                .build()
                .user_data((id as u64) << 1)
        };
        loop {
            for e in pending.drain(..) {
                // SAFETY: every buffer an entry points into lives in `slots`, which keeps a
                // slot (and its boxed buffers) until the kernel has completed its operations.
                while unsafe { ring.submission().push(&e) }.is_err() {
                    ring.submit()?;
                }
            }
            ring.submit_and_wait(1)?;
            let done: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (data, res) in done {
                if data == ACCEPT {
                    if res >= 0 {
                        let id = slots.iter().position(Option::is_none).unwrap_or(slots.len());
                        if id == slots.len() {
                            slots.push(None);
                        }
                        let mut slot = Slot {
                            client: Client::new(res),
                            recv_buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
                            sending: Vec::new(),
                            waiting: Vec::new(),
                            in_flight: false,
                            closing: false,
                        };
                        pending.push(recv(&mut slot, id));
                        slots[id] = Some(slot);
                    }
                    continue;
                }
                let id = (data >> 1) as usize;
                let Some(slot) = slots[id].as_mut() else { continue };
                if data & SEND_BIT == 0 {
                    let mut waiting = std::mem::take(&mut slot.waiting);
                    let ok = res > 0 && {
                        slot.client.input.extend_from_slice(&slot.recv_buf[..res as usize]);
                        slot.client.answer(&mut waiting)
                    };
                    slot.waiting = waiting;
                    if !ok {
                        slot.closing = true;
                    } else {
                        pending.push(recv(slot, id));
                    }
                } else {
                    slot.in_flight = false;
                    if res > 0 {
                        slot.sending.drain(..res as usize);
                    } else {
                        slot.closing = true;
                    }
                }
                if slot.closing {
                    if !slot.in_flight {
                        // SAFETY: the slot owns the descriptor and no operation is in flight.
                        unsafe { libc::close(slot.client.fd) };
                        slots[id] = None;
                    }
                    continue;
                }
                if !slot.in_flight && (!slot.sending.is_empty() || !slot.waiting.is_empty()) {
                    let waiting = std::mem::take(&mut slot.waiting);
                    slot.sending.extend_from_slice(&waiting);
                    slot.waiting = waiting;
                    slot.waiting.clear();
                    slot.in_flight = true;
                    pending.push(
                        opcode::Send::new(
                            types::Fd(slot.client.fd),
                            slot.sending.as_ptr(),
                            slot.sending.len() as u32,
                        )
                        .build()
                        .user_data((id as u64) << 1 | SEND_BIT),
                    );
                }
            }
        }
    }
}
