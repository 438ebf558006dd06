//! The verbs fabric (cargo feature `rdma`): an RC queue pair through libibverbs, via the C
//! shim in csrc/verbs_shim.c (the post and poll calls are static inline in verbs.h).
//!
//! Mapping of the [`Fabric`] contract: the receive ring is a memory region registered for
//! remote writes; [`Fabric::write_imm`] copies the bytes into a registered staging area at the
//! same offset as in the peer's ring (a staging byte is rewritten only after the peer credited
//! its range, by which time the HCA has long read it) and posts IBV_WR_RDMA_WRITE_WITH_IMM;
//! [`Fabric::poll_imm`] polls the receive completion queue and re-posts one receive per
//! completion; [`Fabric::arm`] is `ibv_req_notify_cq` followed by one more poll, and the
//! completion channel's descriptor is the wake-up. A full send queue keeps the write in a
//! local backlog (its bytes are already staged), posted in order later, so nothing blocks.
//!
//! Info in the hello (little-endian): qpn u32, psn u32, lid u16, gid [16], ring address u64,
//! rkey u32.
//!
//! This code compiles and links in CI (scripts/test.sh builds `--features rdma`), but the
//! development host has no verbs device (its kernel is built without CONFIG_INFINIBAND: no
//! rdma_rxe, no siw), so it has never carried a byte; see ARCHITECTURE.md "RDMA ring".

use crate::fabric::{Fabric, FabricKind};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CStr};
use std::io;
use std::os::fd::RawFd;

#[repr(C)]
struct Gv {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Default)]
struct GvInfo {
    qpn: u32,
    psn: u32,
    lid: u16,
    gid: [u8; 16],
    addr: u64,
    rkey: u32,
}

const GV_AGAIN: c_int = -2;

extern "C" {
    fn gv_device_count(name: *mut c_char, len: usize) -> c_int;
    fn gv_open(want: *const c_char, rx_len: usize, err: *mut c_char, errlen: usize) -> *mut Gv;
    fn gv_close(g: *mut Gv);
    fn gv_error(g: *mut Gv) -> *const c_char;
    fn gv_rx(g: *mut Gv) -> *mut u8;
    fn gv_tx(g: *mut Gv) -> *mut u8;
    fn gv_wake_fd(g: *mut Gv) -> c_int;
    fn gv_info(g: *mut Gv, out: *mut GvInfo);
    fn gv_connect(g: *mut Gv, peer: *const GvInfo, peer_rx: usize) -> c_int;
    fn gv_write_imm(g: *mut Gv, pos: usize, len: usize, imm: u32) -> c_int;
    fn gv_poll(g: *mut Gv, imm: *mut u32) -> c_int;
    fn gv_arm(g: *mut Gv) -> c_int;
    fn gv_drain_events(g: *mut Gv);
}

/// The name of the first verbs device, or the error that names what is missing.
pub fn first_device() -> io::Result<String> {
    let mut name = [0 as c_char; 64];
    let n = unsafe { gv_device_count(name.as_mut_ptr(), name.len()) };
    if n <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no RDMA device: ibv_get_device_list found none (no RDMA NIC, and no soft-RoCE \
             rdma_rxe or siw device is configured); on a host without one, --rdma-fabric shm \
             runs the same ring over shared memory",
        ));
    }
    Ok(unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned())
}

pub struct VerbsFabric {
    g: *mut Gv,
    rx: usize,
    tx: usize,
    /// Writes staged but not yet posted (the send queue was full): (pos, len, imm).
    backlog: VecDeque<(usize, usize, u32)>,
}

// The handle is used by one thread at a time (the endpoint owns it).
unsafe impl Send for VerbsFabric {}

impl Drop for VerbsFabric {
    fn drop(&mut self) {
        unsafe { gv_close(self.g) }
    }
}

impl VerbsFabric {
    /// Opens `device` (None: the first) with a receive ring of `rx` bytes.
    pub fn open(device: Option<&str>, rx: usize) -> io::Result<VerbsFabric> {
        let want = device.map(|d| std::ffi::CString::new(d).unwrap_or_default());
        let mut err = [0 as c_char; 256];
        let g = unsafe {
            gv_open(want.as_ref().map_or(std::ptr::null(), |w| w.as_ptr()), rx, err.as_mut_ptr(), err.len())
        };
        if g.is_null() {
            let msg = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
            return Err(io::Error::other(msg));
        }
        Ok(VerbsFabric { g, rx, tx: 0, backlog: VecDeque::new() })
    }

    fn err(&self) -> io::Error {
        io::Error::other(unsafe { CStr::from_ptr(gv_error(self.g)) }.to_string_lossy().into_owned())
    }

    /// Posts backlogged writes in order while the send queue has room.
    fn progress(&mut self) -> io::Result<()> {
        while let Some(&(pos, len, imm)) = self.backlog.front() {
            match unsafe { gv_write_imm(self.g, pos, len, imm) } {
                0 => {
                    self.backlog.pop_front();
                }
                GV_AGAIN => break,
                _ => return Err(self.err()),
            }
        }
        Ok(())
    }
}

impl Fabric for VerbsFabric {
    fn kind(&self) -> FabricKind {
        FabricKind::Verbs
    }

    fn rx_size(&self) -> usize {
        self.rx
    }

    fn local_info(&self) -> Vec<u8> {
        let mut i = GvInfo::default();
        unsafe { gv_info(self.g, &mut i) };
        let mut v = Vec::with_capacity(42);
        v.extend_from_slice(&i.qpn.to_le_bytes());
        v.extend_from_slice(&i.psn.to_le_bytes());
        v.extend_from_slice(&i.lid.to_le_bytes());
        v.extend_from_slice(&i.gid);
        v.extend_from_slice(&i.addr.to_le_bytes());
        v.extend_from_slice(&i.rkey.to_le_bytes());
        v
    }

    fn connect(&mut self, peer: &[u8], peer_rx: usize, _sock: RawFd) -> io::Result<()> {
        if peer.len() != 42 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad verbs fabric info"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(peer[i..i + 4].try_into().unwrap());
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&peer[10..26]);
        let i = GvInfo {
            qpn: u32_at(0),
            psn: u32_at(4),
            lid: u16::from_le_bytes([peer[8], peer[9]]),
            gid,
            addr: u64::from_le_bytes(peer[26..34].try_into().unwrap()),
            rkey: u32_at(34),
        };
        if unsafe { gv_connect(self.g, &i, peer_rx) } != 0 {
            return Err(self.err());
        }
        self.tx = peer_rx;
        Ok(())
    }

    fn write_imm(&mut self, pos: usize, src: &[u8], imm: u32) -> io::Result<()> {
        if pos + src.len() > self.tx {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "write past the peer's ring"));
        }
        // SAFETY: in bounds of the staging area (tx bytes), which the handle owns.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), gv_tx(self.g).add(pos), src.len()) };
        self.backlog.push_back((pos, src.len(), imm));
        self.progress()
    }

    fn poll_imm(&mut self) -> io::Result<Option<u32>> {
        self.progress()?;
        let mut imm = 0u32;
        match unsafe { gv_poll(self.g, &mut imm) } {
            1 => Ok(Some(imm)),
            0 => Ok(None),
            _ => Err(self.err()),
        }
    }

    fn rx_read(&self, pos: usize, dst: &mut [u8]) {
        assert!(pos + dst.len() <= self.rx);
        // SAFETY: in bounds of the registered receive ring, which the handle owns.
        unsafe { std::ptr::copy_nonoverlapping(gv_rx(self.g).add(pos), dst.as_mut_ptr(), dst.len()) }
    }

    fn arm(&mut self) -> io::Result<bool> {
        self.progress()?;
        if !self.backlog.is_empty() {
            return Ok(false);
        }
        if unsafe { gv_arm(self.g) } != 0 {
            return Err(self.err());
        }
        // A completion that arrived before the request raised no event: the caller polls
        // once more before sleeping (Endpoint::arm_read checks for input after arming).
        Ok(true)
    }

    fn disarm(&mut self) {
        // A requested event cannot be withdrawn; a spurious wake-up costs one poll.
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(unsafe { gv_wake_fd(self.g) })
    }

    fn drain_wake(&mut self) {
        unsafe { gv_drain_events(self.g) }
    }
}

#[cfg(test)]
mod tests {
    /// On a host without a verbs device (the development host: its kernel has no
    /// CONFIG_INFINIBAND), opening the fabric fails with the error that names what is missing.
    #[test]
    fn no_device_is_a_clear_error() {
        if std::path::Path::new("/sys/class/infiniband").exists() {
            eprintln!("this host may have a verbs device: nothing to check");
            return;
        }
        let e = super::first_device().unwrap_err();
        assert!(e.to_string().starts_with("no RDMA device"), "{e}");
        let e = super::VerbsFabric::open(None, 4096).err().expect("no device, no fabric");
        assert!(e.to_string().starts_with("no RDMA device"), "{e}");
        let e = crate::fabric::check(crate::FabricKind::Verbs).unwrap_err();
        assert!(e.to_string().contains("--rdma-fabric shm"), "{e}");
    }
}
