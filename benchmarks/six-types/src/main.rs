//! The six-type dataset: one million values in each persistent type, loaded and verified over
//! RESP with deep pipelining, against goblin-core or redis-server alike.
//!
//! Layout (j = collection, k = element):
//! - strings   `str:{i}` -> `v{i:010}`, string_start <= i < string_start + strings
//! - hashes    `hash:{j}`, fields `f{k}` -> `v{k:06}`
//! - sets      `set:{j}`, members `m{k:06}`
//! - zsets     `zset:{j}`, members `m{k:06}` scored k
//! - lists     `list:{j}`, elements `e{k:06}` in order
//! - arrays    `arr:{j}`, elements `v{k:06}` at index k*1000
//!
//! `load` writes it (and with `--measure`, reports the `used_memory` each type added, per
//! element); `verify` reads every value back and fails on the first difference (`--string-start`
//! and `--collection-start` shift the ranges, so a later range appends to an earlier one); `grow` measures
//! the latency of each single SADD into one set growing to a million members.

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use resp::Frame;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Load, verify and measure the six-type dataset over RESP")]
struct Cli {
    /// Server port on 127.0.0.1.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the dataset.
    Load {
        #[command(flatten)]
        shape: Shape,
        /// Report used_memory added by each type, in bytes per element.
        #[arg(long)]
        measure: bool,
    },
    /// Read every value back and compare.
    Verify {
        #[command(flatten)]
        shape: Shape,
    },
    /// SADD one member at a time into one set and report the latency distribution.
    Grow {
        #[arg(long, default_value_t = 1_000_000)]
        members: u64,
        #[arg(long, default_value = "grow:set")]
        key: String,
    },
}

#[derive(clap::Args, Clone)]
struct Shape {
    /// Comma-separated subset of: strings,hashes,sets,zsets,lists,arrays.
    #[arg(long, default_value = "strings,hashes,sets,zsets,lists,arrays")]
    types: String,
    /// Number of string keys.
    #[arg(long, default_value_t = 1_000_000)]
    strings: u64,
    /// Index of the first string key (`str:{i}`): a later range appends to an earlier one.
    #[arg(long, default_value_t = 0)]
    string_start: u64,
    /// Collections per collection type.
    #[arg(long, default_value_t = 1000)]
    collections: u64,
    /// Index of the first collection (`hash:{j}`, ...): a later range appends new collections.
    #[arg(long, default_value_t = 0)]
    collection_start: u64,
    /// Elements per collection.
    #[arg(long, default_value_t = 1000)]
    elements: u64,
    /// Commands in flight per round trip.
    #[arg(long, default_value_t = 256)]
    pipeline: usize,
    /// Elements per write command (HSET/SADD/ZADD/RPUSH/ARMSET/MSET arguments).
    #[arg(long, default_value_t = 100)]
    per_command: u64,
}

/// A pipelined RESP2 connection.
struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    pending: usize,
}

impl Conn {
    fn open(port: u16) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, out: Vec::new(), inbuf: Vec::new(), pending: 0 })
    }

    fn queue<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        resp::reply::bulk_array(&mut self.out, args);
        self.pending += 1;
    }

    /// Sends everything queued and returns the replies in order.
    fn flush(&mut self) -> std::io::Result<Vec<Frame>> {
        self.stream.write_all(&self.out)?;
        self.out.clear();
        let mut replies = Vec::with_capacity(self.pending);
        let mut at = 0;
        while replies.len() < self.pending {
            match resp::decode_frame(&self.inbuf[at..]).map_err(|e| std::io::Error::other(e.to_string()))? {
                Some((f, used)) => {
                    at += used;
                    replies.push(f);
                }
                None => {
                    self.inbuf.drain(..at);
                    at = 0;
                    let mut chunk = vec![0u8; 1 << 20];
                    let n = self.stream.read(&mut chunk)?;
                    if n == 0 {
                        return Err(std::io::Error::other("server closed the connection"));
                    }
                    self.inbuf.extend_from_slice(&chunk[..n]);
                }
            }
        }
        self.inbuf.drain(..at);
        self.pending = 0;
        Ok(replies)
    }

    fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<Frame> {
        self.queue(args);
        Ok(self.flush()?.remove(0))
    }

    fn used_memory(&mut self) -> std::io::Result<u64> {
        let Frame::Bulk(Some(info)) = self.call(&["INFO", "memory"])? else {
            return Err(std::io::Error::other("INFO memory did not return a bulk string"));
        };
        let text = String::from_utf8_lossy(&info);
        text.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| std::io::Error::other("no used_memory in INFO"))
    }
}

/// One unit of work: a write command, or a read command with the exact reply it must get.
struct Step {
    args: Vec<Vec<u8>>,
    expect: Option<Frame>,
    elements: u64,
}

fn bulk(s: String) -> Frame {
    Frame::Bulk(Some(s.into_bytes()))
}

/// The steps that write (verify = false) or read back (verify = true) one type.
fn steps(kind: &str, s: &Shape, verify: bool) -> Box<dyn Iterator<Item = Step>> {
    let (n, per) = (s.elements, s.per_command.max(1));
    let collections = s.collection_start..s.collection_start + s.collections;
    let chunks = move |j: u64| (0..n.div_ceil(per)).map(move |c| (j, c * per..((c + 1) * per).min(n)));
    match kind {
        "strings" => {
            let (first, total) = (s.string_start, s.strings);
            Box::new((0..total.div_ceil(per)).map(move |c| {
                let r = first + c * per..first + ((c + 1) * per).min(total);
                let count = r.end - r.start;
                if verify {
                    let mut args = vec![b"MGET".to_vec()];
                    args.extend(r.clone().map(|i| format!("str:{i}").into_bytes()));
                    let expect = Frame::Array(Some(r.map(|i| bulk(format!("v{i:010}"))).collect()));
                    Step { args, expect: Some(expect), elements: count }
                } else {
                    let mut args = vec![b"MSET".to_vec()];
                    for i in r {
                        args.push(format!("str:{i}").into_bytes());
                        args.push(format!("v{i:010}").into_bytes());
                    }
                    Step { args, expect: None, elements: count }
                }
            }))
        }
        "hashes" => Box::new(collections.clone().flat_map(chunks).map(move |(j, r)| {
            let count = r.end - r.start;
            let key = format!("hash:{j}").into_bytes();
            if verify {
                let mut args = vec![b"HMGET".to_vec(), key];
                args.extend(r.clone().map(|k| format!("f{k}").into_bytes()));
                let expect = Frame::Array(Some(r.map(|k| bulk(format!("v{k:06}"))).collect()));
                Step { args, expect: Some(expect), elements: count }
            } else {
                let mut args = vec![b"HSET".to_vec(), key];
                for k in r {
                    args.push(format!("f{k}").into_bytes());
                    args.push(format!("v{k:06}").into_bytes());
                }
                Step { args, expect: None, elements: count }
            }
        })),
        "sets" => {
            if verify {
                // SMISMEMBER over every member plus SCARD proves exact set equality.
                Box::new(collections.clone().flat_map(move |j| {
                    let key = format!("set:{j}").into_bytes();
                    let mut args = vec![b"SMISMEMBER".to_vec(), key.clone()];
                    args.extend((0..n).map(|k| format!("m{k:06}").into_bytes()));
                    let all = Frame::Array(Some((0..n).map(|_| Frame::Integer(1)).collect()));
                    [
                        Step { args, expect: Some(all), elements: n },
                        Step {
                            args: vec![b"SCARD".to_vec(), key],
                            expect: Some(Frame::Integer(n as i64)),
                            elements: 0,
                        },
                    ]
                }))
            } else {
                Box::new(collections.clone().flat_map(chunks).map(move |(j, r)| {
                    let count = r.end - r.start;
                    let mut args = vec![b"SADD".to_vec(), format!("set:{j}").into_bytes()];
                    args.extend(r.map(|k| format!("m{k:06}").into_bytes()));
                    Step { args, expect: None, elements: count }
                }))
            }
        }
        "zsets" => {
            if verify {
                Box::new(collections.clone().map(move |j| {
                    let args = vec![
                        b"ZRANGE".to_vec(),
                        format!("zset:{j}").into_bytes(),
                        b"0".to_vec(),
                        b"-1".to_vec(),
                        b"WITHSCORES".to_vec(),
                    ];
                    let expect = Frame::Array(Some(
                        (0..n).flat_map(|k| [bulk(format!("m{k:06}")), bulk(format!("{k}"))]).collect(),
                    ));
                    Step { args, expect: Some(expect), elements: n }
                }))
            } else {
                Box::new(collections.clone().flat_map(chunks).map(move |(j, r)| {
                    let count = r.end - r.start;
                    let mut args = vec![b"ZADD".to_vec(), format!("zset:{j}").into_bytes()];
                    for k in r {
                        args.push(format!("{k}").into_bytes());
                        args.push(format!("m{k:06}").into_bytes());
                    }
                    Step { args, expect: None, elements: count }
                }))
            }
        }
        "lists" => {
            if verify {
                Box::new(collections.clone().map(move |j| {
                    let args = vec![
                        b"LRANGE".to_vec(),
                        format!("list:{j}").into_bytes(),
                        b"0".to_vec(),
                        b"-1".to_vec(),
                    ];
                    let expect = Frame::Array(Some((0..n).map(|k| bulk(format!("e{k:06}"))).collect()));
                    Step { args, expect: Some(expect), elements: n }
                }))
            } else {
                Box::new(collections.clone().flat_map(chunks).map(move |(j, r)| {
                    let count = r.end - r.start;
                    let mut args = vec![b"RPUSH".to_vec(), format!("list:{j}").into_bytes()];
                    args.extend(r.map(|k| format!("e{k:06}").into_bytes()));
                    Step { args, expect: None, elements: count }
                }))
            }
        }
        "arrays" => {
            if verify {
                Box::new(collections.clone().map(move |j| {
                    let last = (n.max(1) - 1) * 1000;
                    let args = vec![
                        b"ARSCAN".to_vec(),
                        format!("arr:{j}").into_bytes(),
                        b"0".to_vec(),
                        format!("{last}").into_bytes(),
                    ];
                    let expect = Frame::Array(Some(
                        (0..n)
                            .map(|k| {
                                Frame::Array(Some(vec![
                                    Frame::Integer((k * 1000) as i64),
                                    bulk(format!("v{k:06}")),
                                ]))
                            })
                            .collect(),
                    ));
                    Step { args, expect: Some(expect), elements: n }
                }))
            } else {
                Box::new(collections.clone().flat_map(chunks).map(move |(j, r)| {
                    let count = r.end - r.start;
                    let mut args = vec![b"ARMSET".to_vec(), format!("arr:{j}").into_bytes()];
                    for k in r {
                        args.push(format!("{}", k * 1000).into_bytes());
                        args.push(format!("v{k:06}").into_bytes());
                    }
                    Step { args, expect: None, elements: count }
                }))
            }
        }
        other => {
            eprintln!("unknown type {other}");
            std::process::exit(2);
        }
    }
}

fn total_elements(kind: &str, s: &Shape) -> u64 {
    if kind == "strings" {
        s.strings
    } else {
        s.collections * s.elements
    }
}

fn bar(len: u64, label: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(label.to_string());
    pb
}

/// Runs one type's steps; returns the number of mismatches (verify) or errors (load).
fn run_type(conn: &mut Conn, kind: &str, s: &Shape, verify: bool) -> std::io::Result<u64> {
    let pb = bar(total_elements(kind, s), kind);
    let mut bad = 0u64;
    let mut batch: Vec<Step> = Vec::with_capacity(s.pipeline);
    let mut check = |conn: &mut Conn, batch: &mut Vec<Step>| -> std::io::Result<()> {
        let replies = conn.flush()?;
        for (step, reply) in batch.drain(..).zip(replies) {
            let ok = match &step.expect {
                Some(e) => *e == reply,
                None => !matches!(reply, Frame::Error(_)),
            };
            if !ok {
                if bad < 5 {
                    let cmd: Vec<String> =
                        step.args.iter().take(4).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                    pb.println(format!("MISMATCH {kind}: {} ... -> {:?}", cmd.join(" "), truncate(&reply)));
                }
                bad += 1;
            }
            pb.inc(step.elements);
        }
        Ok(())
    };
    for step in steps(kind, s, verify) {
        conn.queue(&step.args);
        batch.push(step);
        if batch.len() >= s.pipeline {
            check(conn, &mut batch)?;
        }
    }
    if !batch.is_empty() {
        check(conn, &mut batch)?;
    }
    pb.finish();
    Ok(bad)
}

fn truncate(f: &Frame) -> String {
    let s = format!("{f:?}");
    s.chars().take(200).collect()
}

fn main() {
    let cli = Cli::parse();
    let mut conn = match Conn::open(cli.port) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot connect to 127.0.0.1:{}: {e}", cli.port);
            std::process::exit(1);
        }
    };
    let result = match cli.cmd {
        Cmd::Load { shape, measure } => load(&mut conn, &shape, measure),
        Cmd::Verify { shape } => verify(&mut conn, &shape),
        Cmd::Grow { members, key } => grow(&mut conn, members, &key),
    };
    match result {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn load(conn: &mut Conn, s: &Shape, measure: bool) -> std::io::Result<bool> {
    let mut ok = true;
    for kind in s.types.split(',') {
        let before = if measure { conn.used_memory()? } else { 0 };
        let t = Instant::now();
        let errors = run_type(conn, kind, s, false)?;
        let secs = t.elapsed().as_secs_f64();
        let n = total_elements(kind, s);
        if errors > 0 {
            eprintln!("{kind}: {errors} commands failed");
            ok = false;
        }
        if measure {
            let after = conn.used_memory()?;
            let per = (after as f64 - before as f64) / n as f64;
            // Machine-readable line for benchmark scripts.
            println!(
                "MEM {kind} elements={n} bytes={} per_element={per:.2} secs={secs:.2}",
                after - before.min(after)
            );
        } else {
            println!("LOADED {kind} elements={n} secs={secs:.2}");
        }
    }
    Ok(ok)
}

fn verify(conn: &mut Conn, s: &Shape) -> std::io::Result<bool> {
    let mut ok = true;
    for kind in s.types.split(',') {
        let bad = run_type(conn, kind, s, true)?;
        println!("VERIFY {kind} elements={} mismatches={bad}", total_elements(kind, s));
        ok &= bad == 0;
    }
    Ok(ok)
}

fn grow(conn: &mut Conn, members: u64, key: &str) -> std::io::Result<bool> {
    conn.call(&["DEL", key])?;
    let mut hist =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
    let pb = bar(members, "grow");
    for i in 0..members {
        let member = format!("m{i:07}");
        let t = Instant::now();
        let r = conn.call(&["SADD", key, member.as_str()])?;
        let us = t.elapsed().as_micros() as u64;
        hist.saturating_record(us.max(1));
        if r != Frame::Integer(1) {
            eprintln!("SADD {key} {member} -> {r:?}");
            return Ok(false);
        }
        if i % 4096 == 0 {
            pb.set_position(i);
        }
    }
    pb.finish();
    println!(
        "GROW members={members} p50_us={} p99_us={} p999_us={} p9999_us={} max_us={}",
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.value_at_quantile(0.9999),
        hist.max()
    );
    Ok(true)
}
