//! `sbe-load`: sends the same pipelined write commands over goblin-core's SBE listener or over
//! RESP, with the same connection count and pipeline depth, and prints ops/s as JSON.
//!
//! Each connection pre-encodes one batch of `--pipeline` requests (keys cycling through
//! `--keys`), then writes the batch and reads its replies, over and over until `--seconds`
//! pass. Every reply is read and counted (RESP: each of these commands answers one line; SBE:
//! each Ack is one length-prefixed frame), and a reply that is an error stops the run, so the
//! figure is answered writes per second.
//!
//!     sbe-load --port P --proto sbe|resp --command set|hset|zadd|sadd [--conns 4]
//!              [--pipeline 64] [--seconds 5] [--value-size 16] [--keys 10000]

use clap::Parser;
use goblin_sbe::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    port: u16,
    #[arg(long)]
    proto: String,
    #[arg(long)]
    command: String,
    #[arg(long, default_value_t = 4)]
    conns: usize,
    #[arg(long, default_value_t = 64)]
    pipeline: usize,
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[arg(long = "value-size", default_value_t = 16)]
    value_size: usize,
    #[arg(long, default_value_t = 10000)]
    keys: usize,
}

const HDR: usize = message_header_codec::ENCODED_LENGTH;

/// One framed SBE request for `command` on key `key`.
fn sbe_request(command: &str, corr: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 6 + 256 + 2 * value.len() + key.len()];
    let len = {
        let w = WriteBuf::new(&mut buf[6..]);
        match command {
            "set" => {
                let e = string_set_codec::StringSetEncoder::default().wrap(w, HDR);
                let mut e = e.header(0).parent().unwrap();
                e.correlation_id(corr)
                    .condition(string_condition::StringCondition::NONE)
                    .expiry(expiry::Expiry::NONE)
                    .return_old(boolean_type::BooleanType::F)
                    .expiry_value(0);
                e.key(key).value(value).comparand(b"");
                HDR + e.encoded_length()
            }
            "hset" => {
                let e = hash_set_codec::HashSetEncoder::default().wrap(w, HDR);
                let mut e = e.header(0).parent().unwrap();
                e.correlation_id(corr).op(hash_set_op::HashSetOp::HSET);
                let mut g = e.fields_encoder(1, Default::default());
                g.advance().unwrap();
                g.field(b"field").value(value);
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            "zadd" => {
                let e = sorted_set_add_codec::SortedSetAddEncoder::default().wrap(w, HDR);
                let mut e = e.header(0).parent().unwrap();
                e.correlation_id(corr)
                    .condition(sorted_set_condition::SortedSetCondition::NONE)
                    .comparison(sorted_set_comparison::SortedSetComparison::NONE)
                    .changed(boolean_type::BooleanType::F);
                let mut g = e.entries_encoder(1, Default::default());
                g.advance().unwrap();
                g.score(corr as f64 * 0.5);
                g.member(value);
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            "sadd" => {
                let e = set_write_codec::SetWriteEncoder::default().wrap(w, HDR);
                let mut e = e.header(0).parent().unwrap();
                e.correlation_id(corr).op(set_op::SetOp::SADD);
                let mut g = e.members_encoder(1, Default::default());
                g.advance().unwrap();
                g.member(value);
                let mut e = g.parent().unwrap();
                e.key(key);
                HDR + e.encoded_length()
            }
            other => panic!("unknown command {other}"),
        }
    };
    buf.truncate(6 + len);
    buf[..4].copy_from_slice(&((6 + len) as u32).to_be_bytes());
    buf[4..6].copy_from_slice(&0x5BE0u16.to_be_bytes());
    buf
}

/// The same request as a RESP array of bulk strings.
fn resp_request(command: &str, corr: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let score = (corr as f64 * 0.5).to_string();
    let args: Vec<&[u8]> = match command {
        "set" => vec![b"SET", key, value],
        "hset" => vec![b"HSET", key, b"field", value],
        "zadd" => vec![b"ZADD", key, score.as_bytes(), value],
        "sadd" => vec![b"SADD", key, value],
        other => panic!("unknown command {other}"),
    };
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads until `n` replies arrived; `buf` keeps a partial reply for the next call.
fn read_replies(s: &mut TcpStream, sbe: bool, n: usize, buf: &mut Vec<u8>) {
    let mut seen = 0;
    let mut chunk = [0u8; 64 * 1024];
    loop {
        // Consume whole replies from the front of buf.
        let mut pos = 0;
        while seen < n {
            if sbe {
                if buf.len() - pos < 6 {
                    break;
                }
                let len = u32::from_be_bytes(buf[pos..pos + 4].try_into().unwrap()) as usize;
                if buf.len() - pos < len {
                    break;
                }
                // Template id 101 is an Error.
                assert_ne!(u16::from_le_bytes([buf[pos + 8], buf[pos + 9]]), 101, "an SBE Error reply");
                pos += len;
            } else {
                let Some(end) = buf[pos..].windows(2).position(|w| w == b"\r\n") else { break };
                assert_ne!(buf[pos], b'-', "{}", String::from_utf8_lossy(&buf[pos..pos + end]));
                pos += end + 2;
            }
            seen += 1;
        }
        buf.drain(..pos);
        if seen == n {
            return;
        }
        let r = s.read(&mut chunk).expect("read");
        assert!(r > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..r]);
    }
}

fn main() {
    let a = Args::parse();
    let sbe = match a.proto.as_str() {
        "sbe" => true,
        "resp" => false,
        p => panic!("--proto sbe|resp, not {p}"),
    };
    let deadline = Instant::now() + Duration::from_secs_f64(a.seconds);
    let started = Instant::now();
    let threads: Vec<_> = (0..a.conns)
        .map(|c| {
            let (command, pipeline, keys, vsize, port) =
                (a.command.clone(), a.pipeline, a.keys, a.value_size, a.port);
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                s.set_nodelay(true).unwrap();
                let value = vec![b'v'; vsize];
                let mut batch = Vec::new();
                for i in 0..pipeline {
                    let n = (c * pipeline + i) as u64;
                    let key = format!("{command}:{}", n as usize % keys);
                    let r = if sbe {
                        sbe_request(&command, n, key.as_bytes(), &value)
                    } else {
                        resp_request(&command, n, key.as_bytes(), &value)
                    };
                    batch.extend_from_slice(&r);
                }
                let mut buf = Vec::new();
                let mut ops = 0u64;
                while Instant::now() < deadline {
                    s.write_all(&batch).expect("write");
                    read_replies(&mut s, sbe, pipeline, &mut buf);
                    ops += pipeline as u64;
                }
                ops
            })
        })
        .collect();
    let ops: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{{\"proto\": \"{}\", \"command\": \"{}\", \"conns\": {}, \"pipeline\": {}, \"ops\": {ops}, \"secs\": {secs:.3}, \"ops_per_sec\": {:.0}}}",
        a.proto,
        a.command,
        a.conns,
        a.pipeline,
        ops as f64 / secs
    );
}
