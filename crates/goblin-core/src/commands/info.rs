//! INFO [section ...]: Redis's `# Section\r\nfield:value\r\n` text, sections separated by a
//! blank line. Field names are Redis's, so monitoring tools and client libraries read them.

use crate::conn::Conn;
use crate::server::Server;
use std::fmt::Write as _;

/// The Redis version we announce (INFO, HELLO): clients enable features by it (redis-py's
/// client-side cache needs 7.4), and we serve Redis 7.4's command surface, hash-field
/// expiration included, less clustering and Redis replication (replicas follow
/// GOBLIN.FIREHOSE).
pub const REDIS_VERSION: &str = "7.4.0";
pub const GOBLIN_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every section we have, in Redis's output order (`INFO all` / `INFO everything`).
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "kafka",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// Plain INFO (and `INFO default`): every section but commandstats and latencystats (Redis
/// 7.0 includes errorstats here but not those two).
fn default_sections() -> impl Iterator<Item = String> {
    ALL_SECTIONS.iter().filter(|s| !matches!(**s, "commandstats" | "latencystats")).map(|s| s.to_string())
}

/// jemalloc's `stats.active` and `stats.resident`: bytes in pages holding allocations, and
/// bytes of physically resident allocator pages (read after [`allocated_bytes`] advanced the
/// stats epoch).
fn allocator_active_resident() -> (u64, u64) {
    let active = tikv_jemalloc_ctl::stats::active::read().map(|n| n as u64).unwrap_or(0);
    let resident = tikv_jemalloc_ctl::stats::resident::read().map(|n| n as u64).unwrap_or(0);
    (active, resident)
}

/// Physical memory of the machine (Redis's `total_system_memory`).
fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64) * (page.max(0) as u64)
}

/// `used_memory` cheap enough to read before every command (the maxmemory check).
/// [`allocated_bytes`] advances jemalloc's stats epoch, which merges every arena's counters
/// (about 10 us: read per command it cut throughput fifteenfold), so it is read at most once a
/// millisecond; in between, the server thread's own allocations and frees since that read are
/// added (jemalloc's cumulative per-thread counters: two loads). Other threads' allocations
/// (librdkafka's, the replica connector's) show up at the next full read.
///
/// Only the server thread may call [`UsedMemory::read`]: the counters are that thread's.
#[derive(Default)]
pub struct UsedMemory {
    base: u64,
    thread_net_at_base: u64,
    refreshed: Option<std::time::Instant>,
    counters:
        Option<(tikv_jemalloc_ctl::thread::ThreadLocal<u64>, tikv_jemalloc_ctl::thread::ThreadLocal<u64>)>,
}

impl UsedMemory {
    pub fn read(&mut self) -> u64 {
        if self.counters.is_none() {
            let a = tikv_jemalloc_ctl::thread::allocatedp::read();
            let d = tikv_jemalloc_ctl::thread::deallocatedp::read();
            if let (Ok(a), Ok(d)) = (a, d) {
                self.counters = Some((a, d));
            }
        }
        // Allocated minus freed by this thread, as a wrapping difference (it frees memory
        // other threads allocated too).
        let net = self.counters.map_or(0, |(a, d)| a.get().wrapping_sub(d.get()));
        let now = std::time::Instant::now();
        if self.counters.is_none()
            || self.refreshed.is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_millis(1))
        {
            self.base = allocated_bytes();
            self.thread_net_at_base = net;
            self.refreshed = Some(now);
            return self.base;
        }
        let delta = net.wrapping_sub(self.thread_net_at_base) as i64;
        (self.base as i64).saturating_add(delta).max(0) as u64
    }
}

/// Bytes the process has allocated through jemalloc and not freed (advances jemalloc's stats
/// epoch first, so the number is fresh). jemalloc's `stats.allocated` also counts what the
/// threads' caches hold after frees (a few hundred KiB, more after a burst of frees), which
/// the program has given back: that is taken off, so that used_memory is the program's, as
/// Redis counts it, and eviction sees its frees at once.
pub fn allocated_bytes() -> u64 {
    let (allocated, cached) = allocator_allocated_cached();
    allocated.saturating_sub(cached)
}

/// jemalloc's `stats.allocated`, and the part of it the threads' caches hold (after advancing
/// the stats epoch).
fn allocator_allocated_cached() -> (u64, u64) {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().map(|n| n as u64).unwrap_or(0);
    // SAFETY: a read of a size_t statistic by its documented name (4096 is
    // MALLCTL_ARENAS_ALL: every arena merged), NUL-terminated.
    let cached: usize =
        unsafe { tikv_jemalloc_ctl::raw::read(b"stats.arenas.4096.tcache_bytes\0") }.unwrap_or(0);
    (allocated, cached as u64)
}

/// Resident set size from /proc/self/statm (pages * page size), 0 if unavailable.
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else { return 0 };
    let pages: u64 = s.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// Redis's human-readable byte counts: `942.20K`, `6.80M`, `123B`.
pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    const UNITS: [(&str, f64); 5] = [
        ("P", 1024f64 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("T", 1024f64 * 1024.0 * 1024.0 * 1024.0),
        ("G", 1024f64 * 1024.0 * 1024.0),
        ("M", 1024f64 * 1024.0),
        ("K", 1024f64),
    ];
    for (u, size) in UNITS {
        if n >= size {
            return format!("{:.2}{u}", n / size);
        }
    }
    format!("{}B", n as u64)
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_stime), secs(ru.ru_utime))
}

/// INFO command.
pub fn info(s: &mut Server, c: &mut Conn, args: &[&[u8]]) {
    let mut wanted: Vec<String> = Vec::new();
    for a in &args[1..] {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        match a.as_str() {
            "default" => wanted.extend(default_sections()),
            "all" | "everything" => wanted.extend(ALL_SECTIONS.iter().map(|s| s.to_string())),
            _ => wanted.push(a),
        }
    }
    if args.len() == 1 {
        wanted.extend(default_sections());
    }
    let text = render(s, c, &wanted);
    resp::reply::verbatim(&mut c.out, c.proto, b"txt", text.as_bytes());
}

/// Builds the INFO text for `sections` (in Redis's order, each once; unknown names are skipped).
pub fn render(s: &Server, current: &Conn, sections: &[String]) -> String {
    let mut text = String::new();
    for name in ALL_SECTIONS {
        if !sections.iter().any(|w| w == name) {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        match *name {
            "server" => server(s, &mut text),
            "clients" => clients(s, current, &mut text),
            "memory" => memory(s, &mut text),
            "persistence" => {
                text.push_str("# Persistence\r\n");
                s.persistence_info(&mut text);
            }
            "stats" => stats(s, &mut text),
            "replication" => replication(s, &mut text),
            "kafka" => {
                text.push_str("# Kafka\r\n");
                s.kafka_info(&mut text);
            }
            "cpu" => cpu(&mut text),
            "modules" => text.push_str("# Modules\r\n"),
            "commandstats" => commandstats(s, &mut text),
            "errorstats" => errorstats(s, &mut text),
            "latencystats" => latencystats(s, &mut text),
            "cluster" => {
                let on = u8::from(s.cfg.cluster_enabled);
                text.push_str(&format!("# Cluster\r\ncluster_enabled:{on}\r\n"));
            }
            "keyspace" => keyspace(s, &mut text),
            _ => {}
        }
    }
    // Shown only when asked for by name (not in `all` or `everything`), last, as in Redis.
    if sections.iter().any(|w| w == "debug") {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        debug(s, &mut text);
    }
    text
}

macro_rules! field {
    ($t:expr, $name:expr, $($v:tt)*) => {{
        let _ = write!($t, "{}:", $name);
        let _ = write!($t, $($v)*);
        $t.push_str("\r\n");
    }};
}

fn server(s: &Server, t: &mut String) {
    let uptime = s.started.elapsed().as_secs();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
    t.push_str("# Server\r\n");
    field!(t, "redis_version", "{REDIS_VERSION}");
    field!(t, "goblin_version", "{GOBLIN_VERSION}");
    field!(t, "redis_git_sha1", "00000000");
    field!(t, "redis_git_dirty", "0");
    field!(t, "redis_build_id", "0");
    field!(t, "redis_mode", "standalone");
    field!(t, "os", "{} {}", std::env::consts::OS, std::env::consts::ARCH);
    field!(t, "arch_bits", "{}", usize::BITS);
    field!(t, "monotonic_clock", "POSIX clock_gettime");
    field!(t, "multiplexing_api", "epoll");
    field!(t, "atomicvar_api", "c11-builtin");
    field!(t, "gcc_version", "0.0.0");
    field!(t, "process_id", "{}", std::process::id());
    // As Redis reports it: `auto` resolved by the environment.
    field!(t, "process_supervised", "{}", s.cfg.supervised.resolved().name());
    field!(t, "run_id", "{}", s.run_id);
    field!(t, "tcp_port", "{}", s.cfg.port);
    field!(t, "server_time_usec", "{now_us}");
    field!(t, "uptime_in_seconds", "{uptime}");
    field!(t, "uptime_in_days", "{}", uptime / 86400);
    field!(t, "hz", "{}", s.cfg.hz);
    field!(t, "configured_hz", "{}", s.cfg.hz);
    // Redis's 24-bit LRU clock: seconds, wrapping.
    field!(t, "lru_clock", "{}", (now_us / 1_000_000) as u64 & ((1 << 24) - 1));
    field!(t, "executable", "{exe}");
    let config_file = s.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    field!(t, "config_file", "{config_file}");
    field!(t, "io_threads_active", "0");
    // Only while a shutdown waits for its replicas, as in Redis (shutdown.rs).
    if s.shutdown_wait.is_some() {
        field!(t, "shutdown_in_milliseconds", "{}", s.shutdown_in_ms());
    }
    // --numa only: the interface, its node (-1: none), the server thread's CPUs as read back
    // after pinning, and whether its memory is bound to the node.
    if let Some(n) = &s.numa {
        field!(t, "numa_interface", "{}", n.iface);
        field!(t, "numa_node", "{}", n.node);
        field!(t, "numa_cpus", "{}", crate::numa::format_cpulist(&n.cpus));
        field!(t, "numa_mempolicy", "{}", if n.bound { "bind" } else { "default" });
    }
}

fn clients(s: &Server, current: &Conn, t: &mut String) {
    let all = s.conns.iter().flatten().map(|c| &**c).chain(std::iter::once(current));
    let (mut blocked, mut max_in, mut max_out, mut pubsub, mut watching) = (0, 0, 0, 0, 0);
    for c in all {
        // Held by CLIENT PAUSE, or waiting in SHUTDOWN for the replicas, counts as blocked, as
        // in Redis.
        blocked += (c.parked.is_some() || c.paused.is_some() || s.shutdown_waits_for(c.id)) as usize;
        max_in = max_in.max(c.pending.len());
        max_out = max_out.max(c.out_pending());
        pubsub += c
            .pubsub
            .as_ref()
            .is_some_and(|p| !(p.channels.is_empty() && p.patterns.is_empty() && p.shard.is_empty()))
            as usize;
        watching += !c.watching.is_empty() as usize;
    }
    // Keys with a waiting client, and those of them a missing key also answers (an
    // XREADGROUP waits there: a deleted stream wakes it with NOGROUP).
    let (mut blocking_keys, mut on_nokey) = (0, 0);
    for (db, key) in s.blocked.keys() {
        blocking_keys += 1;
        let xreadgroup = |slot: usize, id: u64| {
            // The connection running INFO is out of its slot.
            let conn = s.conns.get(slot).and_then(|c| c.as_deref()).or(Some(current));
            conn.filter(|c| c.id == id)
                .and_then(|c| c.parked.as_ref())
                .is_some_and(|p| p.args[0].eq_ignore_ascii_case(b"XREADGROUP"))
        };
        on_nokey += s.blocked.waiting(db, key).any(|(slot, id)| xreadgroup(slot, id)) as usize;
    }
    t.push_str("# Clients\r\n");
    // Replicas are not clients here, as in Redis (INFO replication counts them).
    let replicas = s.redis_replicas.slots.len() + s.firehose.subs.len();
    field!(t, "connected_clients", "{}", s.nclients.saturating_sub(replicas));
    field!(t, "cluster_connections", "0");
    field!(t, "maxclients", "{}", s.cfg.maxclients);
    field!(t, "client_recent_max_input_buffer", "{max_in}");
    field!(t, "client_recent_max_output_buffer", "{max_out}");
    field!(t, "blocked_clients", "{blocked}");
    field!(t, "tracking_clients", "{}", s.tracking.clients);
    field!(t, "pubsub_clients", "{pubsub}");
    field!(t, "watching_clients", "{watching}");
    field!(t, "clients_in_timeout_table", "{}", s.blocked.timeouts_len());
    field!(t, "total_watched_keys", "{}", s.watches.keys_len());
    field!(t, "total_blocking_keys", "{blocking_keys}");
    field!(t, "total_blocking_keys_on_nokey", "{on_nokey}");
}

/// The memory figures INFO's `memory` section and MEMORY STATS report, read once.
pub(crate) struct MemoryFigures {
    /// When `peak` was reached (unix seconds).
    pub peak_time: u64,
    /// Allocated by the program and not freed (Redis's `used_memory`).
    pub used: u64,
    /// jemalloc's own `stats.allocated`: `used` plus what the thread caches hold (INFO
    /// `allocator_allocated`, the base of the allocator's fragmentation figures).
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub rss: u64,
    pub peak: u64,
    /// In use when the server became ready.
    pub startup: u64,
    /// The connections' input and output buffers (their capacity).
    pub clients_normal: u64,
    /// Firehose subscribers' queues (outside the allocator) and redis-server replicas' output
    /// buffers: Redis's replica buffers.
    pub clients_replicas: u64,
    pub lua: u64,
    pub scripts: u64,
    pub cached_scripts: usize,
    /// Startup memory, client buffers and script cache: Redis's `used_memory_overhead` for
    /// what this server has.
    pub overhead: u64,
    /// The rest of `used`.
    pub dataset: u64,
}

impl MemoryFigures {
    pub(crate) fn read(s: &Server) -> MemoryFigures {
        let (allocated, cached) = allocator_allocated_cached();
        let used = allocated.saturating_sub(cached);
        // A peak reached since the cron's last sample is recorded now.
        let (peak, peak_time) = s.stats.note_memory(used);
        let (active, resident) = allocator_active_resident();
        // A redis-server replica's connection counts among the replicas' buffers, not here.
        let clients_normal = s
            .conns
            .iter()
            .flatten()
            .filter(|c| c.redis_replica.is_none())
            .map(|c| (c.pending.capacity() + c.out.capacity()) as u64)
            .sum();
        let (lua, scripts, cached_scripts) =
            s.scripting.as_ref().map(|sc| (sc.vm_bytes(), sc.body_bytes(), sc.cached())).unwrap_or_default();
        let startup = s.stats.startup_memory;
        // The redis-server replicas' buffers are in the allocator (the firehose queues are not).
        let redis_replicas = s.redis_replica_buffer_bytes();
        let overhead = startup + clients_normal + redis_replicas + scripts as u64;
        MemoryFigures {
            used,
            allocated,
            active,
            resident,
            rss: rss_bytes(),
            peak,
            peak_time,
            startup,
            clients_normal,
            clients_replicas: s.firehose_queue_bytes() as u64 + redis_replicas,
            lua: lua as u64,
            scripts: scripts as u64,
            cached_scripts,
            overhead,
            dataset: used.saturating_sub(overhead),
        }
    }

    /// `a / b`, 0 when `b` is.
    pub(crate) fn ratio(a: u64, b: u64) -> f64 {
        if b > 0 {
            a as f64 / b as f64
        } else {
            0.0
        }
    }
}

fn memory(s: &Server, t: &mut String) {
    let m = MemoryFigures::read(s);
    let MemoryFigures {
        used, active, resident, rss, peak, startup, clients_normal, overhead, dataset, ..
    } = m;
    let (lua, scripts, cached) = (m.lua, m.scripts, m.cached_scripts);
    let total_mem = total_system_memory();
    t.push_str("# Memory\r\n");
    field!(t, "used_memory", "{used}");
    field!(t, "used_memory_human", "{}", human_bytes(used));
    field!(t, "used_memory_rss", "{rss}");
    field!(t, "used_memory_rss_human", "{}", human_bytes(rss));
    field!(t, "used_memory_peak", "{peak}");
    field!(t, "used_memory_peak_human", "{}", human_bytes(peak));
    field!(t, "used_memory_peak_time", "{}", m.peak_time);
    field!(
        t,
        "used_memory_peak_perc",
        "{:.2}%",
        if peak > 0 { used as f64 * 100.0 / peak as f64 } else { 100.0 }
    );
    field!(t, "used_memory_overhead", "{overhead}");
    field!(t, "used_memory_startup", "{startup}");
    field!(t, "used_memory_dataset", "{dataset}");
    field!(
        t,
        "used_memory_dataset_perc",
        "{:.2}%",
        if used > startup { dataset as f64 * 100.0 / (used - startup) as f64 } else { 0.0 }
    );
    field!(t, "allocator_allocated", "{}", m.allocated);
    field!(t, "allocator_active", "{active}");
    field!(t, "allocator_resident", "{resident}");
    field!(t, "total_system_memory", "{total_mem}");
    field!(t, "total_system_memory_human", "{}", human_bytes(total_mem));
    // The Lua VM and the script cache (zero before the first script, and inside one: the VM
    // is out of the server while a script runs).
    field!(t, "used_memory_lua", "{lua}");
    field!(t, "used_memory_vm_eval", "{lua}");
    field!(t, "used_memory_lua_human", "{}", human_bytes(lua));
    field!(t, "used_memory_scripts_eval", "{scripts}");
    field!(t, "number_of_cached_scripts", "{cached}");
    // The functions' VM (its own, as in Redis) and the libraries' code.
    field!(t, "used_memory_vm_functions", "{}", s.functions.as_ref().map_or(0, |f| f.vm_bytes()));
    field!(t, "used_memory_functions", "{}", s.engine.functions.code_bytes());
    field!(t, "number_of_functions", "{}", s.functions.as_ref().map_or(0, |f| f.function_count()));
    field!(t, "number_of_libraries", "{}", s.engine.functions.len());
    let vm_total = lua + s.functions.as_ref().map_or(0, |f| f.vm_bytes()) as u64;
    field!(t, "used_memory_vm_total", "{vm_total}");
    field!(t, "used_memory_vm_total_human", "{}", human_bytes(vm_total));
    let scripts_total = scripts + s.engine.functions.code_bytes() as u64;
    field!(t, "used_memory_scripts", "{scripts_total}");
    field!(t, "used_memory_scripts_human", "{}", human_bytes(scripts_total));
    // Firehose subscribers' fixed queues: anonymous mappings outside the allocator (so not in
    // used_memory), prefaulted, so all of it is resident; Redis's name for replica buffers.
    field!(t, "mem_clients_slaves", "{}", m.clients_replicas);
    // The keyspaces' old bucket arrays while they rehash (incrementally, as Redis's dicts).
    let rehashing: usize = s.engine.database_refs().iter().map(|(_, ks)| ks.rehashing_overhead()).sum();
    field!(t, "mem_overhead_db_hashtable_rehashing", "{rehashing}");
    let ev = &s.engine.evict;
    field!(t, "maxmemory", "{}", ev.maxmemory);
    field!(t, "maxmemory_human", "{}", human_bytes(ev.maxmemory));
    field!(t, "maxmemory_policy", "{}", ev.policy.name());
    let ratio = MemoryFigures::ratio;
    field!(t, "allocator_frag_ratio", "{:.2}", ratio(active, m.allocated));
    field!(t, "allocator_frag_bytes", "{}", active as i64 - m.allocated as i64);
    field!(t, "allocator_rss_ratio", "{:.2}", ratio(resident, active));
    field!(t, "allocator_rss_bytes", "{}", resident as i64 - active as i64);
    field!(t, "rss_overhead_ratio", "{:.2}", ratio(rss, resident));
    field!(t, "rss_overhead_bytes", "{}", rss as i64 - resident as i64);
    field!(t, "mem_fragmentation_ratio", "{:.2}", ratio(rss, used));
    field!(t, "mem_fragmentation_bytes", "{}", rss as i64 - used as i64);
    // The DEBUG BATCHES history, which eviction leaves out (dispatch.rs, over_maxmemory).
    field!(t, "mem_not_counted_for_evict", "{}", s.not_counted_for_evict());
    field!(t, "mem_replication_backlog", "{}", s.redis_replicas.backlog_bytes());
    field!(t, "mem_total_replication_buffers", "{}", m.clients_replicas);
    field!(t, "mem_clients_normal", "{clients_normal}");
    field!(t, "mem_cluster_links", "0");
    field!(t, "mem_aof_buffer", "0");
    field!(t, "mem_allocator", "jemalloc-5.3.0");
    field!(t, "active_defrag_running", "0");
    field!(t, "lazyfree_pending_objects", "0");
    field!(t, "lazyfreed_objects", "0");
}

/// The cron's sample ring (about the last 1.6 s), as Redis averages its samples: the newest
/// and the oldest sample's indexes and the milliseconds between them; None before two.
fn sample_span(s: &Server) -> Option<(usize, usize, u64)> {
    let n = s.stats.ops_sample_at;
    if n < 2 {
        return None;
    }
    let (newest, oldest) = ((n - 1) % 16, if n > 16 { n % 16 } else { 0 });
    Some((newest, oldest, s.stats.ops_samples[newest].0.saturating_sub(s.stats.ops_samples[oldest].0)))
}

/// Ops/sec over the cron's sample ring.
fn instantaneous_ops(s: &Server) -> u64 {
    match sample_span(s) {
        Some((newest, oldest, dt)) if dt > 0 => {
            s.stats.ops_samples[newest].1.saturating_sub(s.stats.ops_samples[oldest].1) * 1000 / dt
        }
        _ => 0,
    }
}

/// KB/s read and written (clients, then the replication link's input and the replicas'
/// output) over the cron's sample ring.
fn instantaneous_kbps(s: &Server) -> [f64; 4] {
    let mut kbps = [0.0; 4];
    if let Some((newest, oldest, dt)) = sample_span(s).filter(|&(_, _, dt)| dt > 0) {
        let (newest, oldest) = (s.stats.net_samples[newest], s.stats.net_samples[oldest]);
        for i in 0..4 {
            kbps[i] = newest[i].saturating_sub(oldest[i]) as f64 * 1000.0 / dt as f64 / 1024.0;
        }
    }
    kbps
}

/// Redis's hidden `debug` section: the event loop's extremes and the cron's share.
fn debug(s: &Server, t: &mut String) {
    let el = &s.stats.eventloop;
    t.push_str("# Debug\r\n");
    // No append-only file here: the Kafka journal's work is in the loop's own time.
    field!(t, "eventloop_duration_aof_sum", "0");
    field!(t, "eventloop_duration_cron_sum", "{}", el.cron_nanos / 1000);
    field!(t, "eventloop_duration_max", "{}", el.max_nanos / 1000);
    field!(t, "eventloop_cmd_per_cycle_max", "{}", el.max_cmds);
}

/// Event loop turns per second, and the mean turn in microseconds, over the cron's samples
/// (about the last 1.6 s; Redis's `instantaneous_eventloop_*`).
fn instantaneous_eventloop(s: &Server) -> (u64, u64) {
    let Some((newest, oldest, dt)) = sample_span(s) else { return (0, 0) };
    let (c1, d1) = s.stats.eventloop_samples[newest];
    let (c0, d0) = s.stats.eventloop_samples[oldest];
    let cycles = c1.saturating_sub(c0);
    let per_sec = (cycles * 1000).checked_div(dt).unwrap_or(0);
    let mean = d1.saturating_sub(d0).checked_div(cycles).unwrap_or(0) / 1000;
    (per_sec, mean)
}

fn stats(s: &Server, t: &mut String) {
    let e = &s.engine.stats;
    t.push_str("# Stats\r\n");
    field!(t, "total_connections_received", "{}", s.stats.total_connections_received);
    field!(t, "total_commands_processed", "{}", s.total_commands());
    field!(t, "instantaneous_ops_per_sec", "{}", instantaneous_ops(s));
    field!(t, "total_net_input_bytes", "{}", s.stats.net_input_bytes);
    field!(t, "total_net_output_bytes", "{}", s.stats.net_output_bytes);
    field!(t, "total_net_repl_input_bytes", "{}", s.stats.net_repl_input_bytes);
    field!(t, "total_net_repl_output_bytes", "{}", s.stats.net_repl_output_bytes);
    let kbps = instantaneous_kbps(s);
    field!(t, "instantaneous_input_kbps", "{:.2}", kbps[0]);
    field!(t, "instantaneous_output_kbps", "{:.2}", kbps[1]);
    field!(t, "instantaneous_input_repl_kbps", "{:.2}", kbps[2]);
    field!(t, "instantaneous_output_repl_kbps", "{:.2}", kbps[3]);
    field!(t, "rejected_connections", "{}", s.stats.rejected_connections);
    field!(t, "expired_keys", "{}", e.expired_keys);
    field!(t, "expired_subkeys", "{}", e.expired_fields);
    field!(t, "evicted_keys", "{}", e.evicted_keys);
    field!(t, "evicted_clients", "{}", s.stats.evicted_clients);
    field!(t, "evicted_scripts", "{}", s.stats.evicted_scripts);
    field!(t, "total_eviction_exceeded_time", "0");
    field!(t, "current_eviction_exceeded_time", "0");
    field!(t, "client_query_buffer_limit_disconnections", "{}", s.stats.query_buffer_limit_disconnections);
    field!(t, "client_output_buffer_limit_disconnections", "{}", s.stats.output_limit_disconnections);
    field!(t, "keyspace_hits", "{}", e.keyspace_hits);
    field!(t, "keyspace_misses", "{}", e.keyspace_misses);
    field!(t, "sync_full", "{}", s.redis_replicas.full_syncs);
    field!(t, "sync_partial_ok", "{}", s.redis_replicas.partial_ok);
    field!(t, "sync_partial_err", "{}", s.redis_replicas.partial_err);
    field!(t, "expired_stale_perc", "0.00");
    field!(t, "expired_time_cap_reached_count", "{}", s.stats.expire_time_cap_reached);
    field!(t, "expire_cycle_cpu_milliseconds", "{}", s.stats.expire_cycle_usec / 1000);
    field!(t, "pubsub_channels", "{}", s.pubsub.channels_len());
    field!(t, "pubsub_patterns", "{}", s.pubsub.patterns_len());
    field!(t, "pubsubshard_channels", "{}", s.pubsub.shard_len());
    field!(t, "latest_fork_usec", "{}", s.stats.latest_fork_usec);
    field!(t, "total_forks", "{}", s.stats.total_forks);
    field!(t, "migrate_cached_sockets", "0");
    field!(t, "slave_expires_tracked_keys", "0");
    field!(t, "active_defrag_hits", "0");
    field!(t, "active_defrag_misses", "0");
    field!(t, "active_defrag_key_hits", "0");
    field!(t, "active_defrag_key_misses", "0");
    field!(t, "total_active_defrag_time", "0");
    field!(t, "current_active_defrag_time", "0");
    field!(t, "tracking_total_keys", "{}", s.tracking.total_keys());
    field!(t, "tracking_total_items", "{}", s.tracking.total_items());
    field!(t, "tracking_total_prefixes", "{}", s.tracking.total_prefixes());
    // Commands of a Redis primary's stream that failed here (there is no AOF to load).
    field!(t, "unexpected_error_replies", "{}", s.stats.unexpected_error_replies);
    field!(t, "total_error_replies", "{}", s.stats.cmds.total_error_replies);
    field!(t, "dump_payload_sanitizations", "0");
    let [auth, cmd, key, channel] = s.acl_log.denied;
    field!(t, "acl_access_denied_auth", "{auth}");
    field!(t, "acl_access_denied_cmd", "{cmd}");
    field!(t, "acl_access_denied_key", "{key}");
    field!(t, "acl_access_denied_channel", "{channel}");
    field!(t, "total_reads_processed", "{}", s.stats.reads_processed);
    field!(t, "total_writes_processed", "{}", s.stats.writes_processed);
    field!(t, "io_threaded_reads_processed", "0");
    field!(t, "io_threaded_writes_processed", "0");
    field!(t, "reply_buffer_shrinks", "0");
    field!(t, "reply_buffer_expands", "0");
    let el = &s.stats.eventloop;
    field!(t, "eventloop_cycles", "{}", el.cycles);
    field!(t, "eventloop_duration_sum", "{}", el.nanos / 1000);
    field!(t, "eventloop_duration_cmd_sum", "{}", el.cmd_nanos / 1000);
    let (cycles_per_sec, mean_usec) = instantaneous_eventloop(s);
    field!(t, "instantaneous_eventloop_cycles_per_sec", "{cycles_per_sec}");
    field!(t, "instantaneous_eventloop_duration_usec", "{mean_usec}");
    field!(t, "busy_poll_spins", "{}", s.stats.busy_poll_spins);
}

fn replication(s: &Server, t: &mut String) {
    t.push_str("# Replication\r\n");
    s.replication_info(t);
    // The backlog of the stream redis-server replicas follow (`replication::redis_replicas`),
    // in that stream's byte offsets, with its own ID; firehose subscribers have fixed queues.
    let (active, first, histlen, replid, offset) = s.redis_replicas.backlog_info();
    field!(t, "repl_backlog_active", "{}", active as u8);
    field!(t, "repl_backlog_size", "{}", s.redis_replicas.backlog_size);
    field!(t, "repl_backlog_first_byte_offset", "{first}");
    field!(t, "repl_backlog_histlen", "{histlen}");
    field!(t, "redis_stream_replid", "{replid}");
    field!(t, "redis_stream_offset", "{offset}");
}

fn cpu(t: &mut String) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    let (tsys, tuser) = rusage(libc::RUSAGE_THREAD);
    t.push_str("# CPU\r\n");
    field!(t, "used_cpu_sys", "{sys:.6}");
    field!(t, "used_cpu_user", "{user:.6}");
    field!(t, "used_cpu_sys_children", "{csys:.6}");
    field!(t, "used_cpu_user_children", "{cuser:.6}");
    field!(t, "used_cpu_sys_main_thread", "{tsys:.6}");
    field!(t, "used_cpu_user_main_thread", "{tuser:.6}");
}

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..` for
/// every command (or `cmd|sub`) used since start or the last CONFIG RESETSTAT.
fn commandstats(s: &Server, t: &mut String) {
    t.push_str("# Commandstats\r\n");
    for (name, c) in s.stats.cmds.commands() {
        let per_call = c.usec_per_call();
        field!(
            t,
            format_args!("cmdstat_{name}"),
            "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
            c.calls,
            c.usec(),
            c.rejected,
            c.failed
        );
    }
}

/// `latency_percentiles_usec_<name>:p50=..,p99=..,p99.9=..` per command with tracked calls,
/// at the percentiles of `latency-tracking-info-percentiles`, in microseconds.
fn latencystats(s: &Server, t: &mut String) {
    use std::fmt::Write;
    t.push_str("# Latencystats\r\n");
    for (name, c) in s.stats.cmds.commands() {
        let Some(h) = c.latency.as_deref() else { continue };
        let _ = write!(t, "latency_percentiles_usec_{name}:");
        for (i, p) in s.introspection.latency_percentiles.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let micros = h.at_percentile(*p) as f64 / 1000.0;
            let _ = write!(t, "{sep}p{}={micros:.3}", super::config::percentile_name(*p));
        }
        t.push_str("\r\n");
    }
}

/// `errorstat_<PREFIX>:count=..` per first word of the error replies sent.
fn errorstats(s: &Server, t: &mut String) {
    t.push_str("# Errorstats\r\n");
    for (prefix, n) in s.stats.cmds.errors() {
        field!(t, format_args!("errorstat_{prefix}"), "count={n}");
    }
}

fn keyspace(s: &Server, t: &mut String) {
    t.push_str("# Keyspace\r\n");
    for (db, ks) in s.engine.nonempty_dbs() {
        field!(
            t,
            format_args!("db{db}"),
            "keys={},expires={},avg_ttl=0,subexpiry={}",
            ks.len(),
            ks.volatile_len(),
            ks.field_deadline_keys()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_like_redis() {
        assert_eq!(human_bytes(123), "123B");
        assert_eq!(human_bytes(964816), "942.20K");
        assert_eq!(human_bytes(7135232), "6.80M");
        assert_eq!(human_bytes(25276059648), "23.54G");
    }
}
