//! Builds the six-type dataset (the shapes of `benchmarks/six-types`), writes it as a snapshot
//! and loads it back, with and without LZ4, printing size, write time, load time, and the
//! memory jemalloc holds for the dataset before the save and after the load.
//!
//! Usage: `cargo run --release -p snapshot --example measure -- [scale] [dir]`. `scale` 1.0
//! (the default) is the benchmark's size: 1,000,000 strings and 1,000 collections of 1,000
//! elements per collection type; 0.1 is a tenth of each count. Files go to `dir` (default the
//! system temp folder) and are removed afterwards.

use snapshot::{Compression, Meta, Options};
use std::time::Instant;
use store::types::{Hash, List, Set, SparseArray, ZSet};
use store::{Keyspace, Value};
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runs per timing (the best is reported); `MEASURE_ROUNDS` overrides it (e.g. for a
/// profile dominated by loads).
fn rounds() -> usize {
    std::env::var("MEASURE_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3)
}

fn allocated() -> usize {
    epoch::advance().unwrap();
    stats::allocated::read().unwrap()
}

fn build(scale: f64, types: &str) -> Keyspace {
    let strings = (1_000_000.0 * scale) as u64;
    let collections = ((1000.0 * scale.sqrt()) as u64).max(1);
    let elements = ((1000.0 * scale.sqrt()) as u64).max(1);
    let mut ks = Keyspace::new();
    let on = |t: &str| types.split(',').any(|x| x == t || x == "all");
    for i in (0..strings).filter(|_| on("strings")) {
        ks.insert(format!("str:{i}").as_bytes(), Value::Str(format!("v{i:010}").into_bytes()), None);
    }
    let (hs, ss, zs, ls, ars) = (on("hashes"), on("sets"), on("zsets"), on("lists"), on("arrays"));
    for j in 0..collections {
        let mut h = Hash::new();
        let mut s = Set::new();
        let mut z = ZSet::new();
        let mut l = List::new();
        let mut a = SparseArray::new();
        for k in 0..elements {
            let m = format!("m{k:06}");
            let v = format!("v{k:06}");
            if hs {
                h.set(format!("f{k}").as_bytes(), v.as_bytes());
            }
            if ss {
                s.add(m.as_bytes());
            }
            if zs {
                z.insert(m.as_bytes(), k as f64);
            }
            if ls {
                l.push_back(format!("e{k:06}").as_bytes());
            }
            if ars {
                a.set(k * 1000, v.as_bytes());
            }
        }
        let values = [
            (hs, "hash", Value::Hash(Box::new(h))),
            (ss, "set", Value::Set(Box::new(s))),
            (zs, "zset", Value::ZSet(Box::new(z))),
            (ls, "list", Value::List(Box::new(l))),
            (ars, "arr", Value::Array(Box::new(a))),
        ];
        for (wanted, prefix, v) in values {
            if wanted {
                ks.insert(format!("{prefix}:{j}").as_bytes(), v, None);
            }
        }
    }
    ks
}

#[cfg(target_os = "linux")]
fn evict(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; the call only drops cached pages of this file.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

#[cfg(not(target_os = "linux"))]
fn evict(_: &std::fs::File) {}

/// What MEMORY USAGE reports for every key, plus the table's buckets.
fn usage(ks: &Keyspace) -> u64 {
    let mut keys = Vec::new();
    ks.for_each(|k, _, _| keys.push(k.to_vec()));
    (keys.iter().map(|k| ks.mem_usage(k).unwrap_or(0)).sum::<usize>() + ks.table_overhead()) as u64
}

fn mb(n: u64) -> f64 {
    n as f64 / (1 << 20) as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let scale: f64 = args.next().map(|s| s.parse().expect("scale: a number")).unwrap_or(1.0);
    let dir = args.next().map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let types = args.next().unwrap_or_else(|| "all".into());
    let meta = Meta {
        server_version: "measure".into(),
        created_unix_ms: 0,
        replid: "0".repeat(40),
        logical_offset: 0,
        kafka_acked_offset: -1,
        kafka_consumer_position: -1,
        functions: Vec::new(),
        unconfirmed: Vec::new(),
        previous: None,
    };

    let base = allocated();
    let t = Instant::now();
    let ks = build(scale, &types);
    let built = allocated() - base;
    println!(
        "dataset: {} keys, {:.1} MiB allocated (built in {:.2} s)",
        ks.len(),
        mb(built as u64),
        t.elapsed().as_secs_f64()
    );
    let mut ks = Some(ks);
    for (name, compression) in [("none", Compression::None), ("lz4", Compression::Lz4)] {
        let opts = Options { compression, ..Options::default() };
        let path = dir.join(format!("measure-{}-{name}.gcsn", std::process::id()));
        let src = ks.take().expect("dataset");
        // The machine is shared: every time is the best of `rounds()` runs.
        let mut write_s = f64::MAX;
        let mut s = None;
        for _ in 0..rounds() {
            let t = Instant::now();
            s = Some(
                snapshot::save_atomic(&path, |w| snapshot::write_with(w, &src, &meta, &opts, &mut |_| {}))
                    .expect("write"),
            );
            write_s = write_s.min(t.elapsed().as_secs_f64());
        }
        let s = s.expect("written");
        let before = allocated() - base;
        let usage_before = usage(&src);
        drop(src);
        let (mut cold_s, mut warm_s) = (f64::MAX, f64::MAX);
        let mut loaded = None;
        for _ in 0..rounds() {
            drop(loaded.take());
            // A cold load: the file's pages are dropped from the page cache first (the file
            // was synced by save_atomic, so they are clean and the advice is followed).
            let f = std::fs::File::open(&path).expect("open");
            evict(&f);
            let t = Instant::now();
            let (ks, _, rs) = snapshot::read(f, &mut |_| {}).expect("read");
            cold_s = cold_s.min(t.elapsed().as_secs_f64());
            assert_eq!(rs.keys, s.keys);
            drop(ks);
            // And a warm one (the pages now cached): CPU time alone.
            let t = Instant::now();
            let (ks, _, _) =
                snapshot::read(std::fs::File::open(&path).expect("open"), &mut |_| {}).expect("read");
            warm_s = warm_s.min(t.elapsed().as_secs_f64());
            loaded = Some(ks);
        }
        let loaded = loaded.expect("loaded");
        let after = allocated() - base;
        let usage_after = usage(&loaded);
        println!(
            "{name:>4}: {:8.1} MiB file ({:5.1}% of raw {:.1} MiB), {} blocks, write {:.3} s, load cold {:.3} s, warm {:.3} s; memory before save {:.1} MiB, after load {:.1} MiB ({:+.2}%); MEMORY USAGE sum {:.1} -> {:.1} MiB",
            mb(s.bytes),
            100.0 * s.bytes as f64 / s.raw_data_bytes.max(1) as f64,
            mb(s.raw_data_bytes),
            s.blocks,
            write_s,
            cold_s,
            warm_s,
            mb(before as u64),
            mb(after as u64),
            100.0 * (after as f64 - before as f64) / before as f64,
            mb(usage_before),
            mb(usage_after),
        );
        std::fs::remove_file(&path).expect("remove");
        ks = Some(loaded);
    }
}
