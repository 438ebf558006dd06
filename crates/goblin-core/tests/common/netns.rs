//! A network namespace joined to the host by a veth pair, for tests that need a peer off the
//! loopback interface (a replica across a real network boundary, protected mode). Needs root
//! and iproute2; every address is inside 10.213.0.0/16 on links the test creates.

use super::unwaited::Unwaited;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace joined to the host by a veth pair: `host` is the host side's address,
/// `inner` the namespace's. Removed on drop.
pub struct Netns {
    pub name: String,
    pub host: String,
    pub inner: String,
}

impl Netns {
    pub fn create() -> Netns {
        // Unique among this test binary's threads (the counter) and, as far as 200 subnets
        // allow, across binaries (the process id); cargo runs test binaries one at a time.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = (std::process::id() + n * 37) % 200 + 20;
        let name = format!("goblin-test-{}-{n}", std::process::id());
        let (a, b) = (format!("gbh{id}"), format!("gbn{id}"));
        let (host, inner) = (format!("10.213.{id}.1"), format!("10.213.{id}.2"));
        let ip = |args: &[&str]| {
            let out =
                std::process::Command::new("ip").args(args).output().expect("iproute2 (`ip`) is required");
            assert!(
                out.status.success(),
                "ip {args:?}: {} (network namespaces need root)",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let _ = std::process::Command::new("ip").args(["netns", "del", &name]).output();
        let _ = std::process::Command::new("ip").args(["link", "del", &a]).output();
        ip(&["netns", "add", &name]);
        let ns = Netns { name: name.clone(), host: host.clone(), inner: inner.clone() };
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        ip(&["link", "set", &b, "netns", &name]);
        ip(&["addr", "add", &format!("{host}/24"), "dev", &a]);
        ip(&["link", "set", &a, "up"]);
        ip(&["netns", "exec", &name, "ip", "addr", "add", &format!("{inner}/24"), "dev", &b]);
        ip(&["netns", "exec", &name, "ip", "link", "set", &b, "up"]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        ns
    }

    /// Starts goblin-core inside the namespace, listening on its veth address; returns once
    /// the host can connect to it.
    /// The host's connections come from another address, so protected mode is off for it.
    pub fn goblin(&self, args: &[&str]) -> Unwaited {
        let args = [args, &["--protected-mode", "no"][..]].concat();
        let s = Unwaited::start_in(&["ip", "netns", "exec", &self.name], &self.inner, &args);
        drop(s.conn_by(Instant::now() + Duration::from_secs(20)));
        s
    }
}

impl Netns {
    /// From inside the namespace (so from `inner`, an address off the server's loopback):
    /// connects to `host:port`, sends `request`, and returns what came back until the server
    /// closed the connection (then `<EOF>` is appended) or went quiet for a second.
    pub fn exchange(&self, host: &str, port: u16, request: &str) -> String {
        const CLIENT: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)
s.sendall(sys.argv[3].encode())
s.settimeout(1.0)
out = b''
try:
    while True:
        d = s.recv(65536)
        if not d:
            out += b'<EOF>'
            break
        out += d
except socket.timeout:
    pass
sys.stdout.write(out.decode('latin-1'))
"#;
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.name, "python3", "-c", CLIENT, host, &port.to_string(), request])
            .output()
            .expect("python3 inside the namespace");
        assert!(out.status.success(), "client in the namespace: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, and with it the pair.
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}
