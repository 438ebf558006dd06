//! The handshake message each side sends once on the TCP socket (integers little-endian):
//!
//! ```text
//! 0   magic "GOBRDMA\0"
//! 8   u32 version (1)
//! 12  u8 fabric (1 verbs, 2 shm), 3 zero bytes
//! 16  u64 the sender's receive ring size (a power of two, 4096 to 1 GiB)
//! 24  u32 length of the fabric info (at most 1024), then the info
//! ```
//!
//! A server that refuses a connection sends an error line (`-ERR ...\r\n`) instead and closes.

use crate::fabric::FabricKind;

pub const MAGIC: [u8; 8] = *b"GOBRDMA\0";
pub const VERSION: u32 = 1;
const FIXED: usize = 28;
pub const MAX_INFO: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub fabric: FabricKind,
    pub ring: u64,
    pub info: Vec<u8>,
}

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FIXED + self.info.len());
        v.extend_from_slice(&MAGIC);
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&[self.fabric.code(), 0, 0, 0]);
        v.extend_from_slice(&self.ring.to_le_bytes());
        v.extend_from_slice(&(self.info.len() as u32).to_le_bytes());
        v.extend_from_slice(&self.info);
        v
    }
}

/// Parses a hello at the start of `buf`: `Ok(None)` when more bytes are needed, else the hello
/// and its length. Every field is checked; the error says what is wrong.
pub fn parse(buf: &[u8]) -> Result<Option<(Hello, usize)>, String> {
    let have = buf.len().min(MAGIC.len());
    if buf[..have] != MAGIC[..have] {
        if buf.first() == Some(&b'-') {
            // The server's refusal: its error line, once whole.
            return match buf.windows(2).position(|w| w == b"\r\n") {
                Some(nl) => Err(String::from_utf8_lossy(&buf[1..nl]).into_owned()),
                None if buf.len() > 512 => Err("overlong error line in RDMA handshake".into()),
                None => Ok(None),
            };
        }
        return Err("not an RDMA ring handshake (bad magic)".into());
    }
    // Each field is checked as soon as it is whole: a bad prefix is refused without waiting.
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().unwrap());
    if buf.len() < 12 {
        return Ok(None);
    }
    let version = u32_at(8);
    if version != VERSION {
        return Err(format!("unsupported RDMA ring handshake version {version}"));
    }
    if buf.len() < 13 {
        return Ok(None);
    }
    let fabric =
        FabricKind::from_code(buf[12]).ok_or_else(|| format!("unknown RDMA fabric code {}", buf[12]))?;
    if buf.len() < FIXED {
        return Ok(None);
    }
    let ring = u64::from_le_bytes(buf[16..24].try_into().unwrap());
    if !crate::valid_ring_size(ring) {
        return Err(format!("invalid RDMA ring size {ring} (a power of two, 4096 to 1 GiB)"));
    }
    let n = u32_at(24) as usize;
    if n > MAX_INFO {
        return Err(format!("RDMA fabric info of {n} bytes is too long"));
    }
    if buf.len() < FIXED + n {
        return Ok(None);
    }
    Ok(Some((Hello { fabric, ring, info: buf[FIXED..FIXED + n].to_vec() }, FIXED + n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_errors() {
        let h = Hello { fabric: FabricKind::Shm, ring: 65536, info: b"abc".to_vec() };
        let e = h.encode();
        for i in 0..e.len() {
            assert_eq!(parse(&e[..i]), Ok(None), "prefix of {i} bytes");
        }
        assert_eq!(parse(&e), Ok(Some((h.clone(), e.len()))));
        let mut bad = e.clone();
        bad[16] = 3; // ring size 65539
        assert!(parse(&bad).unwrap_err().contains("ring size"));
        assert_eq!(
            parse(b"-ERR max number of clients reached\r\n").unwrap_err(),
            "ERR max number of clients reached"
        );
        assert!(parse(b"GET k\r\n").unwrap_err().contains("magic"));
    }

    proptest! {
        /// Any bytes: an answer, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse(&b);
            let mut v = MAGIC.to_vec();
            v.extend_from_slice(&b);
            let _ = parse(&v);
        }
    }
}
