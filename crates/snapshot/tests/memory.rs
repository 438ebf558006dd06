//! A loaded keyspace holds no more memory than the one saved, measured by jemalloc itself on
//! a dataset built with churn (deletions leave dead records, grown buffers and tables behind).
//! The only test in this binary, so nothing else allocates while it measures.

mod common;

use common::{meta, run};
use engine::Engine;
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> usize {
    epoch::advance().expect("jemalloc epoch");
    stats::allocated::read().expect("jemalloc stats.allocated")
}

fn b(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

#[test]
fn loading_never_grows_the_dataset() {
    let mut e = Engine::default();
    let now = 1_700_000_000_000;
    for i in 0..20_000 {
        run(&mut e, &[b("SET"), b(format!("s{i}")), b(format!("value-{i}"))], now);
        if i % 3 == 0 {
            run(&mut e, &[b("PEXPIREAT"), b(format!("s{i}")), b((now + 1000 * i).to_string())], now);
        }
    }
    for j in 0..100 {
        let (h, s, z, l, a) =
            (format!("h{j}"), format!("S{j}"), format!("z{j}"), format!("l{j}"), format!("a{j}"));
        let n = 50 + j * 20;
        for k in 0..n {
            run(&mut e, &[b("HSET"), b(&h), b(format!("field{k}")), b(format!("v{k:05}"))], now);
            run(&mut e, &[b("SADD"), b(&s), b(format!("member-{k}"))], now);
            run(&mut e, &[b("ZADD"), b(&z), b((k % 97).to_string()), b(format!("m{k}"))], now);
            run(&mut e, &[b("RPUSH"), b(&l), b(format!("e{k}"))], now);
            run(&mut e, &[b("ARSET"), b(&a), b((k * 7).to_string()), b(format!("x{k}"))], now);
            e.commit(engine::Origin::Command);
        }
        // Churn: remove two thirds of every collection.
        for k in (0..n).filter(|k| k % 3 != 0) {
            run(&mut e, &[b("HDEL"), b(&h), b(format!("field{k}"))], now);
            run(&mut e, &[b("SREM"), b(&s), b(format!("member-{k}"))], now);
            run(&mut e, &[b("ZREM"), b(&z), b(format!("m{k}"))], now);
            run(&mut e, &[b("ARDEL"), b(&a), b((k * 7).to_string())], now);
            e.commit(engine::Origin::Command);
        }
        run(&mut e, &[b("LTRIM"), b(&l), b((n / 3).to_string()), b("-1")], now);
        e.commit(engine::Origin::Command);
    }
    let ks = std::mem::take(&mut e.ks);
    drop(e);
    let path = std::env::temp_dir().join(format!("gcsn-memory-{}.gcsn", std::process::id()));
    // The key list lives through all three measurements, so it cancels out.
    let mut keys = Vec::new();
    ks.for_each(|k, _, _| keys.push(k.to_vec()));
    let usage_before: usize = keys.iter().map(|k| ks.mem_usage(k).unwrap()).sum();
    let with_data = allocated();
    let written = snapshot::save_atomic(&path, |w| snapshot::write(w, &ks, &meta(), &mut |_| {})).unwrap();
    drop(ks);
    let empty = allocated();
    let before = with_data - empty;
    let (loaded, _, read) = snapshot::read(std::fs::File::open(&path).unwrap(), &mut |_| {}).unwrap();
    let after = allocated() - empty;
    std::fs::remove_file(&path).unwrap();
    let usage_after: usize = keys.iter().map(|k| loaded.mem_usage(k).unwrap()).sum();
    println!(
        "{} keys, {} file bytes: {before} bytes before save, {after} after load; MEMORY USAGE \
         {usage_before} -> {usage_after}",
        read.keys, written.bytes
    );
    assert_eq!(read.keys, written.keys);
    // Thread caches may hold a few freed blocks of the loader: allow 64 KiB of slack.
    assert!(after <= before + 64 * 1024, "loaded {after} bytes > saved {before}");
    assert!(usage_after <= usage_before);
}
