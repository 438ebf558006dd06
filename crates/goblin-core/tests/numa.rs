//! `--numa IFACE` against the real binary: virtual interfaces start unpinned, unknown ones are
//! refused (exit status 2, naming the interfaces there are), and a simulated NIC on node 0
//! (`--numa-sysfs-root` pointing at a fake tree) pins and binds the server thread before the
//! dataset is recovered, as /proc, the log and INFO show.

mod common;

use common::{free_port, temp_path, Server};
use std::path::{Path, PathBuf};
use std::process::Command;

fn info_server(s: &Server) -> std::collections::HashMap<String, String> {
    common::brokers::info(&mut s.conn(), "server")
}

/// A field of /proc/<pid>/status (the main thread: the server thread).
fn proc_status(pid: u32, field: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_once(':').unwrap().1.trim().to_string()
}

/// Runs the binary to its exit; returns (status code, stderr).
fn run_to_exit(args: &[&str]) -> (i32, String) {
    let port = free_port().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_goblin-core"))
        .args(["--port", &port, "--bind", "127.0.0.1"])
        .args(args)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A fake sysfs with one NIC, `fake0`, on node 0, whose cpulist is `cpus`.
fn fake_sysfs(tag: &str, cpus: &str) -> PathBuf {
    let root = temp_path(tag);
    let dev = root.join("devices/pci0000:00/0000:00:05.0");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("numa_node"), "0\n").unwrap();
    let node = root.join("devices/system/node/node0");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("cpulist"), format!("{cpus}\n")).unwrap();
    let class = root.join("class/net/fake0");
    std::fs::create_dir_all(&class).unwrap();
    std::os::unix::fs::symlink(&dev, class.join("device")).unwrap();
    root
}

fn position(log: &str, needle: &str) -> usize {
    log.find(needle).unwrap_or_else(|| panic!("{needle:?} not in the log:\n{log}"))
}

#[test]
fn lo_has_no_node_and_starts_unpinned() {
    let s = Server::start(&["--numa", "lo"]);
    let info = info_server(&s);
    assert_eq!(info["numa_interface"], "lo");
    assert_eq!(info["numa_node"], "-1");
    assert_eq!(info["numa_mempolicy"], "default");
    // Unpinned: the CPUs it may run on are all the process was given.
    assert_eq!(info["numa_cpus"], proc_status(s.pid(), "Cpus_allowed_list"));
    let log = s.log();
    assert!(log.contains("WARN"), "{log}");
    position(&log, "--numa lo: the interface has no NUMA node (virtual, or numa_node -1): not pinned");
    // Without --numa there are no numa fields.
    let plain = Server::start(&[]);
    assert!(!info_server(&plain).contains_key("numa_node"));
}

#[test]
fn unknown_and_malformed_interfaces_are_refused() {
    let (code, err) = run_to_exit(&["--numa", "gc-nope0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--numa gc-nope0: no such network interface (no /sys/class/net/gc-nope0)"), "{err}");
    assert!(err.contains("this host has: ") && err.contains("lo"), "{err}");
    assert!(!err.contains("Ready to accept connections"), "{err}");
    for bad in ["../lo", "", "a-name-far-too-long"] {
        let (code, err) = run_to_exit(&["--numa", bad]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("is not a network interface name"), "{err}");
    }
}

#[test]
fn simulated_nic_pins_and_binds_before_recovery() {
    // The node's CPUs: the last CPU this process may use, so pinning visibly narrows the
    // affinity on any host with two or more CPUs.
    let allowed = proc_status(std::process::id(), "Cpus_allowed_list");
    let last = allowed.rsplit([',', '-']).next().unwrap().to_string();
    let root = fake_sysfs("sysfs", &last);
    let root_s = root.to_str().unwrap();
    let snap = temp_path("numa.gcsn");
    let snap_s = snap.to_str().unwrap();
    let mut s = Server::start(&["--numa", "fake0", "--numa-sysfs-root", root_s, "--load", snap_s]);
    let info = info_server(&s);
    assert_eq!(info["numa_interface"], "fake0");
    assert_eq!(info["numa_node"], "0");
    assert_eq!(info["numa_cpus"], last);
    assert_eq!(info["numa_mempolicy"], "bind");
    assert_eq!(proc_status(s.pid(), "Cpus_allowed_list"), last);
    // The memory policy of the server thread, as the kernel reports it for its mappings.
    let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", s.pid())).unwrap();
    assert!(maps.lines().any(|l| l.contains(" bind:0 ")), "{maps}");
    // Pinned and bound before the snapshot was looked for, and before listening.
    let log = s.log();
    let placed = position(
        &log,
        &format!("--numa fake0: node 0; server thread pinned to CPUs {last}, memory bound to node 0"),
    );
    assert!(placed < position(&log, "does not exist"), "{log}");
    assert!(placed < position(&log, "Ready to accept connections"), "{log}");
    // The data path works under the policy.
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg(vec![7u8; 1 << 20]).query(&mut con).unwrap();
    let n: usize = redis::cmd("STRLEN").arg("k").query(&mut con).unwrap();
    assert_eq!(n, 1 << 20);
    assert!(s.stop().success());
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_file(&snap);
}

#[test]
fn a_node_without_cpus_stops_startup() {
    let root = fake_sysfs("sysfs-empty", "");
    let (code, err) = run_to_exit(&["--numa", "fake0", "--numa-sysfs-root", root.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--numa: node 0 has no CPUs"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A veth pair (virtual: no device link) made for the test, when this host lets us (root,
/// iproute2). Removed on drop.
struct Veth(String);

impl Veth {
    fn create() -> Option<Veth> {
        let name = format!("gcn{}", std::process::id() % 1_000_000);
        let peer = format!("{name}p");
        let ok = Command::new("ip")
            .args(["link", "add", &name, "type", "veth", "peer", "name", &peer])
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then_some(Veth(name))
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

#[test]
fn a_veth_interface_is_virtual() {
    let Some(veth) = Veth::create() else {
        eprintln!("skipped: cannot create a veth pair here (needs root and iproute2)");
        return;
    };
    assert!(Path::new("/sys/class/net").join(&veth.0).exists());
    let s = Server::start(&["--numa", &veth.0]);
    let info = info_server(&s);
    assert_eq!((info["numa_interface"].as_str(), info["numa_node"].as_str()), (veth.0.as_str(), "-1"));
    position(&s.log(), &format!("--numa {}: the interface has no NUMA node", veth.0));
}
