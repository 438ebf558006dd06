//! `--numa IFACE`: run the server thread on the NUMA node its network interface is attached to.
//!
//! At startup, before the dataset is recovered (docs/ARCHITECTURE.md, "Startup order"), `main`
//! reads the interface's node from sysfs, pins the calling thread (the server thread) to that
//! node's CPUs with `sched_setaffinity(2)` and binds its memory policy to the node with
//! `set_mempolicy(2)` (`MPOL_BIND`), so the pages the dataset is loaded into, and every later
//! allocation of the server thread, come from the node whose memory controller is next to the
//! NIC. Threads started afterwards (librdkafka's, BGSAVE's child) inherit both.
//!
//! The sysfs facts (sysfs-class-net, the node directory):
//! - `<root>/class/net/<iface>` exists for every interface of this network namespace; a name
//!   without it is refused (an unknown interface).
//! - `<root>/class/net/<iface>/device` links to the device; its `numa_node` (or, for devices
//!   that sit on a bus device, such as virtio-net on its PCI function, the nearest parent's)
//!   holds the node, `-1` when the platform gives the device no affinity. Virtual interfaces
//!   (`lo`, veth, bridges, dummies) have no `device` link at all.
//! - `<root>/devices/system/node/node<N>/cpulist` holds the node's CPUs in list syntax
//!   (`0-3,8-11`).
//!
//! An interface without affinity (no device, no `numa_node`, or `-1`) is not an error: a
//! single-node host commonly reports `-1`, and refusing would stop the same command line that
//! works on a multi-node host. The server then starts unpinned and unbound, with a warning,
//! and INFO says `numa_node:-1`.
//!
//! Everything that reads sysfs takes a [`Sysfs`] root, so the unit tests build a fake
//! two-node tree in a temp dir; the system calls are thin wrappers tested on this host.

use std::path::{Path, PathBuf};

/// The real sysfs mount.
pub const SYSFS: &str = "/sys";

/// Largest CPU or node number accepted from sysfs (the kernel's NR_CPUS is at most 8192; this
/// bounds the masks we build).
const MAX_CPU: usize = 1 << 16;

/// `set_mempolicy(2)` modes (linux/mempolicy.h).
#[cfg(test)]
pub const MPOL_DEFAULT: i32 = 0;
pub const MPOL_BIND: i32 = 2;

/// Bits in a mask word of the kernel's CPU and node masks.
const WORD_BITS: usize = libc::c_ulong::BITS as usize;

/// Parses the kernel's list syntax (`0-3,8-11`, `5`, empty for no CPUs) into a sorted set
/// without duplicates. Trailing whitespace (sysfs files end with a newline) is ignored;
/// anything else that is not `N` or `A-B` with `A <= B`, separated by single commas, is an
/// error naming the bad part.
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    let text = text.trim_end();
    let mut out = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    let number = |s: &str| -> Result<usize, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("'{s}' is not a CPU number"));
        }
        match s.parse::<usize>() {
            Ok(n) if n <= MAX_CPU => Ok(n),
            _ => Err(format!("CPU number '{s}' is larger than {MAX_CPU}")),
        }
    };
    for part in text.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(part)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("range '{part}' runs backwards"));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The shortest list syntax for `cpus` (any order, duplicates allowed): runs of consecutive
/// numbers become `A-B`, as the kernel prints them. Empty for an empty set.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if i == j {
            out.push_str(&v[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", v[i], v[j]));
        }
        i = j + 1;
    }
    out
}

/// An interface name as the kernel accepts one (IFNAMSIZ: at most 15 bytes; no `/`, no
/// whitespace, not `.` or `..`), so a name can never walk out of `class/net`.
pub fn check_iface_name(name: &str) -> Result<(), String> {
    let bad = name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0);
    if bad {
        return Err(format!("--numa: '{name}' is not a network interface name"));
    }
    Ok(())
}

/// Why `--numa` stopped startup: a usage error (the flag names no interface: exit status 2)
/// or a failure of this host (sysfs unreadable, a system call refused: exit status 1).
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    Usage(String),
    System(String),
}

impl Error {
    pub fn exit_status(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::System(_) => 1,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(m) | Error::System(m) => f.write_str(m),
        }
    }
}

/// A sysfs tree: `/sys`, or a fake one in tests.
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// The NUMA node `iface` is attached to: `Ok(None)` when it has none (a virtual interface
    /// without a `device` link, no `numa_node` file up the device's parents, or `-1`);
    /// `Err(Usage)` for a name that is not an interface here.
    pub fn iface_node(&self, iface: &str) -> Result<Option<u32>, Error> {
        check_iface_name(iface).map_err(Error::Usage)?;
        let class = self.root.join("class/net").join(iface);
        if !class.exists() {
            let known = self.interfaces();
            return Err(Error::Usage(format!(
                "--numa {iface}: no such network interface (no {}); this host has: {}",
                class.display(),
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        }
        // Resolve the device link, then walk up to the nearest `numa_node`, staying inside the
        // tree's `devices` folder.
        let Ok(device) = class.join("device").canonicalize() else { return Ok(None) };
        let top = self.root.canonicalize().map(|r| r.join("devices")).unwrap_or_default();
        let mut dir: &Path = &device;
        loop {
            let file = dir.join("numa_node");
            if file.exists() {
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| Error::System(format!("--numa {iface}: {}: {e}", file.display())))?;
                return match text.trim().parse::<i64>() {
                    Ok(n) if n < 0 => Ok(None),
                    Ok(n) if n as usize <= MAX_CPU => Ok(Some(n as u32)),
                    _ => Err(Error::System(format!(
                        "--numa {iface}: {} holds {:?}, not a node number",
                        file.display(),
                        text.trim()
                    ))),
                };
            }
            match dir.parent() {
                Some(p) if p.starts_with(&top) && p != top => dir = p,
                _ => return Ok(None),
            }
        }
    }

    /// The CPUs of `node`, from its `cpulist`. A node without the file (not online here) or
    /// without CPUs (a memory-only node) is an error: there is nothing to pin to.
    pub fn node_cpus(&self, node: u32) -> Result<Vec<usize>, Error> {
        let file = self.root.join(format!("devices/system/node/node{node}/cpulist"));
        let text = std::fs::read_to_string(&file)
            .map_err(|e| Error::System(format!("--numa: node {node}: {}: {e}", file.display())))?;
        let cpus = parse_cpulist(&text)
            .map_err(|e| Error::System(format!("--numa: node {node}: {}: {e}", file.display())))?;
        if cpus.is_empty() {
            return Err(Error::System(format!(
                "--numa: node {node} has no CPUs ({} is empty)",
                file.display()
            )));
        }
        Ok(cpus)
    }

    /// The interfaces of this tree, sorted (for the unknown-interface message).
    fn interfaces(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.root.join("class/net"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// What `--numa` will do: read from sysfs, before any system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub iface: String,
    /// None: the interface has no affinity; nothing is pinned or bound.
    pub node: Option<u32>,
    /// The node's CPUs (empty without a node).
    pub cpus: Vec<usize>,
}

/// Reads the plan for `iface` from `sysfs`.
pub fn plan(sysfs: &Sysfs, iface: &str) -> Result<Plan, Error> {
    let node = sysfs.iface_node(iface)?;
    let cpus = match node {
        Some(n) => sysfs.node_cpus(n)?,
        None => Vec::new(),
    };
    Ok(Plan { iface: iface.to_string(), node, cpus })
}

/// What `--numa` did, for INFO and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub iface: String,
    /// -1: no affinity (not pinned, not bound).
    pub node: i64,
    /// The server thread's CPU affinity read back after pinning (unpinned: what it may run on).
    pub cpus: Vec<usize>,
    /// Whether the memory policy is MPOL_BIND to `node`.
    pub bound: bool,
}

impl Placement {
    /// The log line (info with a node, a warning without).
    pub fn describe(&self) -> String {
        if self.bound {
            format!(
                "--numa {}: node {}; server thread pinned to CPUs {}, memory bound to node {}",
                self.iface,
                self.node,
                format_cpulist(&self.cpus),
                self.node
            )
        } else {
            format!(
                "--numa {}: the interface has no NUMA node (virtual, or numa_node -1): \
                 not pinned (CPUs {}), memory policy left at the default",
                self.iface,
                format_cpulist(&self.cpus)
            )
        }
    }
}

/// Carries out `plan` on the calling thread: memory first (so nothing the pinning allocates
/// comes from elsewhere), then the CPUs; then reads both back from the kernel, so INFO and
/// the log report what holds, not what was asked.
pub fn apply(plan: &Plan) -> Result<Placement, Error> {
    let sys = |e: String| Error::System(format!("--numa {}: {e}", plan.iface));
    if let Some(node) = plan.node {
        bind_memory(node).map_err(sys)?;
        pin_cpus(&plan.cpus).map_err(sys)?;
    }
    let cpus = current_cpus().map_err(sys)?;
    let (mode, nodes) = current_mempolicy().map_err(|e| sys(format!("get_mempolicy: {e}")))?;
    let bound = match plan.node {
        Some(node) if mode == MPOL_BIND && nodes == [node as usize] => true,
        Some(node) => {
            return Err(sys(format!(
                "the memory policy reads back as mode {mode} on nodes {nodes:?}, not bound to node {node}"
            )))
        }
        None => false,
    };
    Ok(Placement { iface: plan.iface.clone(), node: plan.node.map_or(-1, i64::from), cpus, bound })
}

/// A kernel bit mask (array of unsigned longs) with `bits` set, `words` long at least.
fn mask(bits: &[usize], words: usize) -> Vec<libc::c_ulong> {
    let len = words.max(bits.iter().max().map_or(0, |m| m / WORD_BITS + 1));
    let mut m = vec![0 as libc::c_ulong; len];
    for &b in bits {
        m[b / WORD_BITS] |= 1 << (b % WORD_BITS);
    }
    m
}

/// The bits set in a kernel mask.
fn bits_of(mask: &[libc::c_ulong]) -> Vec<usize> {
    let mut out = Vec::new();
    for (w, &word) in mask.iter().enumerate() {
        for b in 0..WORD_BITS {
            if word & (1 << b) != 0 {
                out.push(w * WORD_BITS + b);
            }
        }
    }
    out
}

/// `sched_setaffinity(0, ...)`: the calling thread may run only on `cpus`. The kernel keeps
/// the CPUs that the cpuset allows too, and refuses (EINVAL) when none of them is allowed.
pub fn pin_cpus(cpus: &[usize]) -> Result<(), String> {
    let m = mask(cpus, 1);
    // SAFETY: the mask is `m.len()` words long and lives across the call; pid 0 is this thread.
    let rc = unsafe {
        libc::sched_setaffinity(0, std::mem::size_of_val(&m[..]), m.as_ptr() as *const libc::cpu_set_t)
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("sched_setaffinity to CPUs {}: {e}", format_cpulist(cpus)));
    }
    Ok(())
}

/// The calling thread's CPU affinity (`sched_getaffinity`).
pub fn current_cpus() -> Result<Vec<usize>, String> {
    let mut m = vec![0 as libc::c_ulong; MAX_CPU / WORD_BITS + 1];
    // SAFETY: the kernel writes at most the given number of bytes into `m`.
    let rc = unsafe {
        libc::syscall(libc::SYS_sched_getaffinity, 0, std::mem::size_of_val(&m[..]), m.as_mut_ptr())
    };
    if rc < 0 {
        return Err(format!("sched_getaffinity: {}", std::io::Error::last_os_error()));
    }
    Ok(bits_of(&m))
}

/// `set_mempolicy(MPOL_BIND, {node})`: the calling thread's pages come only from `node`.
pub fn bind_memory(node: u32) -> Result<(), String> {
    set_mempolicy(MPOL_BIND, &[node as usize])
        .map_err(|e| format!("set_mempolicy(MPOL_BIND, node {node}): {e}"))
}

/// `set_mempolicy(mode, nodes)`; `MPOL_DEFAULT` takes no nodes.
pub fn set_mempolicy(mode: i32, nodes: &[usize]) -> std::io::Result<()> {
    let m = mask(nodes, 1);
    // The kernel reads `maxnode - 1` bits (set_mempolicy(2): pass one more than the bits used).
    let maxnode = (m.len() * WORD_BITS + 1) as libc::c_ulong;
    let ptr = if nodes.is_empty() { std::ptr::null() } else { m.as_ptr() };
    let maxnode = if nodes.is_empty() { 0 } else { maxnode };
    // SAFETY: the mask is `maxnode - 1` bits long and lives across the call.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's memory policy: the mode and its nodes (`get_mempolicy(2)` with no
/// flags).
pub fn current_mempolicy() -> std::io::Result<(i32, Vec<usize>)> {
    let mut mode: libc::c_int = 0;
    let mut m = vec![0 as libc::c_ulong; 1024 / WORD_BITS];
    let maxnode = (m.len() * WORD_BITS) as libc::c_ulong;
    // SAFETY: `mode` and the `maxnode`-bit mask are valid for writes during the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            m.as_mut_ptr(),
            maxnode,
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((mode, bits_of(&m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpulist_examples() {
        assert_eq!(parse_cpulist("0-3,8-11\n").unwrap(), vec![0, 1, 2, 3, 8, 9, 10, 11]);
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("3,1-2,2").unwrap(), vec![1, 2, 3]);
        assert_eq!(format_cpulist(&[11, 8, 9, 10, 0, 1, 2, 3]), "0-3,8-11");
        assert_eq!(format_cpulist(&[4, 6, 7]), "4,6-7");
        assert_eq!(format_cpulist(&[]), "");
        for bad in [
            ",",
            "1,",
            ",1",
            "1,,2",
            "-",
            "1-",
            "-1",
            "3-1",
            "1-2-3",
            "a",
            "0x1",
            " 1",
            "1 ,2",
            "+1",
            "0-4:2/4",
            "99999999999999999999999",
            "65537",
        ] {
            assert!(parse_cpulist(bad).is_err(), "{bad:?} accepted");
        }
    }

    proptest! {
        #[test]
        fn cpulist_round_trips(set in proptest::collection::btree_set(0usize..2048, 0..200)) {
            let v: Vec<usize> = set.into_iter().collect();
            let text = format_cpulist(&v);
            prop_assert_eq!(parse_cpulist(&text).unwrap(), v.clone());
            prop_assert_eq!(parse_cpulist(&format!("{text}\n")).unwrap(), v);
        }

        #[test]
        fn cpulist_garbage_never_panics(s in "[0-9,\\- a:/]{0,24}") {
            // Whatever is accepted is a set whose canonical text parses back to it.
            if let Ok(v) = parse_cpulist(&s) {
                prop_assert_eq!(parse_cpulist(&format_cpulist(&v)).unwrap(), v);
            }
        }

        #[test]
        fn masks_round_trip(set in proptest::collection::btree_set(0usize..4096, 0..64)) {
            let v: Vec<usize> = set.into_iter().collect();
            prop_assert_eq!(bits_of(&mask(&v, 1)), v);
        }
    }

    #[test]
    fn interface_names() {
        for ok in ["eth0", "lo", "eno1", "enp65s0f1np1", "veth-a.10"] {
            assert_eq!(check_iface_name(ok), Ok(()));
        }
        for bad in ["", ".", "..", "../../etc", "a/b", "eth 0", "sixteen-chars-xx", "eth0:1"] {
            assert!(check_iface_name(bad).unwrap_err().contains("not a network interface name"));
        }
    }

    /// A fake sysfs: two nodes (CPUs 0-3,8-11 and 4-7,12-15), a PCI NIC on node 1, a virtio
    /// NIC whose PCI function says node 0, a device with -1, and `lo` without a device.
    pub(crate) fn fake_sysfs(tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("goblin-numa-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("devices/system/node/node0/cpulist", "0-3,8-11\n");
        w("devices/system/node/node1/cpulist", "4-7,12-15\n");
        w("devices/system/node/node2/cpulist", "\n");
        w("devices/pci0000:40/0000:41:00.0/numa_node", "1\n");
        w("devices/pci0000:00/0000:00:03.0/numa_node", "0\n");
        w("devices/pci0000:00/0000:00:04.0/numa_node", "-1\n");
        w("devices/pci0000:80/0000:81:00.0/numa_node", "2\n");
        w("devices/pci0000:90/0000:91:00.0/numa_node", "7\n");
        std::fs::create_dir_all(root.join("devices/pci0000:00/0000:00:03.0/virtio2")).unwrap();
        std::fs::create_dir_all(root.join("devices/virtual/net/lo")).unwrap();
        std::fs::create_dir_all(root.join("class/net")).unwrap();
        let link = |name: &str, dev: Option<&str>| {
            let dir = root.join("class/net").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            if let Some(d) = dev {
                std::os::unix::fs::symlink(root.join("devices").join(d), dir.join("device")).unwrap();
            }
        };
        link("eth1", Some("pci0000:40/0000:41:00.0"));
        link("eth0", Some("pci0000:00/0000:00:03.0/virtio2"));
        link("eth2", Some("pci0000:00/0000:00:04.0"));
        link("ib0", Some("pci0000:80/0000:81:00.0"));
        link("ib1", Some("pci0000:90/0000:91:00.0"));
        link("lo", None);
        root
    }

    #[test]
    fn two_node_machine() {
        let root = fake_sysfs("two-node");
        let fs = Sysfs::new(&root);
        let p = plan(&fs, "eth1").unwrap();
        assert_eq!((p.node, format_cpulist(&p.cpus)), (Some(1), "4-7,12-15".to_string()));
        // virtio-net: the node is the PCI function's, one level above the device link.
        let p = plan(&fs, "eth0").unwrap();
        assert_eq!((p.node, format_cpulist(&p.cpus)), (Some(0), "0-3,8-11".to_string()));
        // No affinity: -1, or no device at all.
        for name in ["eth2", "lo"] {
            assert_eq!(plan(&fs, name).unwrap(), Plan { iface: name.into(), node: None, cpus: vec![] });
        }
        // A memory-only node, and a node that is not there: nothing to pin to.
        let e = plan(&fs, "ib0").unwrap_err();
        assert!(matches!(&e, Error::System(m) if m.contains("node 2 has no CPUs")), "{e}");
        let e = plan(&fs, "ib1").unwrap_err();
        assert!(matches!(&e, Error::System(m) if m.contains("node7/cpulist")), "{e}");
        // Unknown interfaces are usage errors naming the ones there are.
        let e = plan(&fs, "eth9").unwrap_err();
        assert_eq!(e.exit_status(), 2);
        assert!(e.to_string().contains("--numa eth9: no such network interface"), "{e}");
        assert!(e.to_string().contains("this host has: eth0, eth1, eth2, ib0, ib1, lo"), "{e}");
        assert_eq!(plan(&fs, "../x").unwrap_err().exit_status(), 2);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn this_hosts_interfaces() {
        // lo is virtual everywhere: no node, never an error.
        assert_eq!(Sysfs::new(SYSFS).iface_node("lo"), Ok(None));
        assert_eq!(Sysfs::new(SYSFS).iface_node("no-such-if0").unwrap_err().exit_status(), 2);
    }

    /// The system calls, on a thread of their own (affinity and memory policy are per
    /// thread, so the test harness's other threads keep theirs): bind and pin to node 0,
    /// which every Linux host has, and read both back.
    #[test]
    fn calls_pin_and_bind_this_thread() {
        std::thread::spawn(|| {
            let cpus = Sysfs::new(SYSFS).node_cpus(0).expect("node 0");
            let before = current_cpus().unwrap();
            let plan = Plan { iface: "test".into(), node: Some(0), cpus: cpus.clone() };
            let placed = apply(&plan).unwrap();
            assert!(placed.bound && placed.node == 0);
            // The kernel keeps what the cpuset allows of the node's CPUs.
            let want: Vec<usize> = cpus.iter().copied().filter(|c| before.contains(c)).collect();
            assert_eq!(placed.cpus, want);
            assert_eq!(current_cpus().unwrap(), want);
            assert_eq!(current_mempolicy().unwrap(), (MPOL_BIND, vec![0]));
            assert!(placed.describe().contains("memory bound to node 0"), "{}", placed.describe());
            // Allocations still work under the policy.
            let v = vec![1u8; 8 << 20];
            assert_eq!(v.iter().map(|&b| b as usize).sum::<usize>(), 8 << 20);
            set_mempolicy(MPOL_DEFAULT, &[]).unwrap();
            assert_eq!(current_mempolicy().unwrap().0, MPOL_DEFAULT);
            // A CPU that does not exist is refused with the list in the message.
            assert!(pin_cpus(&[MAX_CPU]).unwrap_err().contains("sched_setaffinity to CPUs 65536"));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn no_node_leaves_the_thread_alone() {
        std::thread::spawn(|| {
            let before = (current_cpus().unwrap(), current_mempolicy().unwrap());
            let placed = apply(&Plan { iface: "lo".into(), node: None, cpus: vec![] }).unwrap();
            assert_eq!((placed.node, placed.bound), (-1, false));
            assert_eq!((current_cpus().unwrap(), current_mempolicy().unwrap()), before);
            assert!(placed.describe().contains("not pinned"));
        })
        .join()
        .unwrap();
    }
}
