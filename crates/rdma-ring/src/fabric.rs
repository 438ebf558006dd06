//! The fabric: what the ring protocol needs from RDMA hardware, and nothing more.

use std::io;
use std::os::fd::RawFd;

/// Which fabric a connection runs on (named in the hello, both sides must agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricKind {
    /// libibverbs (cargo feature `rdma`).
    Verbs,
    /// One-sided writes into a peer's memfd mapping: same host only.
    Shm,
}

impl FabricKind {
    pub fn code(self) -> u8 {
        match self {
            FabricKind::Verbs => 1,
            FabricKind::Shm => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<FabricKind> {
        match c {
            1 => Some(FabricKind::Verbs),
            2 => Some(FabricKind::Shm),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FabricKind::Verbs => "verbs",
            FabricKind::Shm => "shm",
        }
    }
}

/// The peer broke the protocol's invariants (an immediate announcing more than the ring
/// holds, credits for bytes never sent, queue indices out of range).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RDMA ring protocol violated by the peer")
    }
}
impl std::error::Error for Corrupt {}

pub(crate) fn corrupt() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, Corrupt)
}

/// One side of a reliable, ordered, one-sided-write connection.
///
/// Contract, as an RC queue pair gives it: writes are delivered in the order posted, each
/// exactly once; when [`Fabric::poll_imm`] returns a write's immediate, that write's bytes and
/// every earlier write's are visible in the local receive ring; before that, nothing is
/// promised about which of its bytes are visible. A post never blocks: a fabric that cannot
/// deliver an immediate yet (the peer's queue is full) keeps it and delivers it later, in order,
/// as hardware retries; [`Fabric::arm`] refuses to let its owner sleep while it holds one.
pub trait Fabric: Send {
    fn kind(&self) -> FabricKind;

    /// Bytes in the local receive ring (a power of two).
    fn rx_size(&self) -> usize;

    /// This side's address, for the hello (the peer's [`Fabric::connect`] reads it).
    fn local_info(&self) -> Vec<u8>;

    /// Connects to the peer described by its hello: its info and its receive ring size.
    /// `sock` is the connection's TCP socket (the shared-memory fabric's doorbell).
    fn connect(&mut self, peer_info: &[u8], peer_rx: usize, sock: RawFd) -> io::Result<()>;

    /// Posts one RDMA write of `src` to the peer's receive ring at `pos`, with immediate `imm`
    /// (`pos + src.len()` within the peer's ring; `src` may be empty).
    fn write_imm(&mut self, pos: usize, src: &[u8], imm: u32) -> io::Result<()>;

    /// The next immediate delivered to this side, if any.
    fn poll_imm(&mut self) -> io::Result<Option<u32>>;

    /// Copies `dst.len()` bytes of the local receive ring from `pos` (in bounds).
    fn rx_read(&self, pos: usize, dst: &mut [u8]);

    /// Before sleeping: requests a wake-up for the next delivery. Ok(true): nothing pending,
    /// sleep may begin; Ok(false): deliveries are waiting (or this side holds undelivered
    /// writes), poll instead.
    fn arm(&mut self) -> io::Result<bool>;

    /// Awake again: no wake-ups wanted while the owner polls anyway.
    fn disarm(&mut self);

    /// A descriptor besides the TCP socket that becomes readable on a wake-up (verbs: the
    /// completion channel), if the fabric has one.
    fn wake_fd(&self) -> Option<RawFd>;

    /// After waking: consumes the wake-up events of [`Fabric::wake_fd`].
    fn drain_wake(&mut self);
}

/// Creates the local side of a connection on `kind` with a receive ring of `rx` bytes.
pub fn open(kind: FabricKind, rx: usize) -> io::Result<Box<dyn Fabric>> {
    match kind {
        FabricKind::Shm => Ok(Box::new(crate::shm::ShmFabric::new(rx)?)),
        #[cfg(feature = "rdma")]
        FabricKind::Verbs => Ok(Box::new(crate::verbs::VerbsFabric::open(None, rx)?)),
        #[cfg(not(feature = "rdma"))]
        FabricKind::Verbs => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this build has no RDMA verbs support (cargo feature `rdma`)",
        )),
    }
}

/// Whether `kind` can be used on this host: verbs needs the feature and at least one device
/// (the error says which is missing); shared memory always can.
pub fn check(kind: FabricKind) -> io::Result<()> {
    match kind {
        FabricKind::Shm => Ok(()),
        #[cfg(feature = "rdma")]
        FabricKind::Verbs => crate::verbs::first_device().map(|_| ()),
        #[cfg(not(feature = "rdma"))]
        FabricKind::Verbs => open(kind, crate::MIN_RING as usize).map(|_| ()),
    }
}
