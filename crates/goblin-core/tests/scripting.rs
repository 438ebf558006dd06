//! Lua scripting against the real binary: replies compared byte for byte with redis-server 7.0
//! (conversion rules both ways in RESP2 and RESP3, errors, the sandbox, the libraries, the
//! script cache), the atomicity of a script's writes (one batch of exactly its canonical
//! mutations, replayable to the same digest), and the busy-script path (BUSY, SCRIPT KILL,
//! SHUTDOWN NOSAVE).

mod common;

use common::{read_reply, send, RedisServer, Server};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn call(s: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    send(s, &request(args));
    read_reply(s)
}

fn call_str(s: &mut TcpStream, args: &[&str]) -> Vec<u8> {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    call(s, &a)
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\\r\\n")
}

/// Data the scripts below read.
const SETUP: &[&[&str]] = &[
    &["SET", "str", "abc"],
    &["SET", "k1", "v1"],
    &["SET", "n", "10"],
    &["HSET", "h1", "f", "v"],
    &["ZADD", "z", "1.5", "m"],
    &["SADD", "s1", "one"],
    &["RPUSH", "l1", "a", "b", "c"],
];

/// (script, keys, args): each is run with EVAL on both servers.
const SCRIPTS: &[(&str, &[&str], &[&str])] = &[
    // Lua -> reply
    ("return 1", &[], &[]),
    ("return 3.99", &[], &[]),
    ("return -3.99", &[], &[]),
    ("return 'x'", &[], &[]),
    ("return ''", &[], &[]),
    ("return true", &[], &[]),
    ("return false", &[], &[]),
    ("return nil", &[], &[]),
    ("return", &[], &[]),
    ("return {1,'a',{2,false,true},3.5}", &[], &[]),
    ("return 1e20", &[], &[]),
    ("return -1e20", &[], &[]),
    ("return 0/0", &[], &[]),
    ("return 2^53 + 1", &[], &[]),
    ("return {1,nil,3}", &[], &[]),
    ("return {}", &[], &[]),
    ("return {ok='fine'}", &[], &[]),
    ("return {ok='two\\r\\nlines'}", &[], &[]),
    ("return {err='MY bad'}", &[], &[]),
    ("return {err='no-code'}", &[], &[]),
    ("return {double=3.5}", &[], &[]),
    // (Digits of inexact doubles differ between 7.0 and 8: differential.rs compares those
    // with redis-server 8.2, `double_replies_match_redis8`.)
    ("return {double=0.5}", &[], &[]),
    ("return {big_number='1234567890123456789012'}", &[], &[]),
    ("return {map={a=1}}", &[], &[]),
    ("return {set={x=true}}", &[], &[]),
    ("return {verbatim_string={format='txt', string='hi'}}", &[], &[]),
    ("return {1, {ok='in'}, {err='ERR inner'}}", &[], &[]),
    ("return redis.status_reply('OK2')", &[], &[]),
    ("return redis.error_reply('E1')", &[], &[]),
    ("return redis.error_reply('-CODE msg')", &[], &[]),
    ("return redis.error_reply('MY boom')", &[], &[]),
    ("return redis.error_reply()", &[], &[]),
    ("return redis.status_reply({})", &[], &[]),
    // reply -> Lua (RESP2 and, after setresp(3), RESP3)
    ("return redis.call('get', KEYS[1])", &["k1"], &[]),
    ("return redis.call('get', 'nokey')", &[], &[]),
    ("return type(redis.call('get', 'nokey'))", &[], &[]),
    ("return redis.call('hgetall', 'h1')", &[], &[]),
    ("return redis.call('zscore', 'z', 'm')", &[], &[]),
    ("return redis.call('incr', 'n')", &[], &[]),
    ("return redis.call('ping')", &[], &[]),
    ("return redis.call('ping')['ok']", &[], &[]),
    ("return redis.call('lrange', 'l1', 0, -1)", &[], &[]),
    ("return redis.call('smembers', 's1')", &[], &[]),
    ("return redis.call('set', KEYS[1], ARGV[1])", &["w1"], &["v"]),
    ("return redis.call('set', 'w2', 1.5)", &[], &[]),
    ("return redis.call('set', 'w3', 100)", &[], &[]),
    ("redis.setresp(3) return redis.call('hgetall', 'h1')", &[], &[]),
    ("redis.setresp(3) return redis.call('hgetall', 'h1')['map']['f']", &[], &[]),
    ("redis.setresp(3) return redis.call('get', 'nokey')", &[], &[]),
    ("redis.setresp(3) return type(redis.call('get', 'nokey'))", &[], &[]),
    ("redis.setresp(3) return redis.call('zscore', 'z', 'm')", &[], &[]),
    ("redis.setresp(3) return redis.call('zscore', 'z', 'm')['double']", &[], &[]),
    ("redis.setresp(3) return redis.call('smembers', 's1')", &[], &[]),
    ("redis.setresp(3) return redis.call('lrange', 'l1', 0, -1)", &[], &[]),
    ("redis.setresp(2) return redis.call('hgetall', 'h1')", &[], &[]),
    // errors from commands
    ("return redis.pcall('incr', 'str')", &[], &[]),
    ("return redis.call('incr', 'str')", &[], &[]),
    ("return redis.pcall('hget', 'str', 'f')", &[], &[]),
    ("return redis.call('nosuch')", &[], &[]),
    ("return redis.pcall('nosuch')", &[], &[]),
    ("return redis.call()", &[], &[]),
    ("return redis.call('set', 'a', {})", &[], &[]),
    ("return redis.call('get')", &[], &[]),
    ("return redis.call('multi')", &[], &[]),
    ("return redis.call('exec')", &[], &[]),
    ("return redis.call('watch', 'x')", &[], &[]),
    ("return redis.call('blpop', 'l', 0)", &[], &[]),
    // WAIT and WAITAOF answer the counts they have, at once (Redis 7.2+).
    ("return redis.pcall('wait', '1', '0')", &[], &[]),
    ("return redis.pcall('waitaof', '0', '1', '0')", &[], &[]),
    ("return redis.call('subscribe', 'c')", &[], &[]),
    ("return redis.call('eval', 'return 1', '0')", &[], &[]),
    ("return redis.call('script', 'load', 'return 1')", &[], &[]),
    ("return redis.call('client', 'list')", &[], &[]),
    ("return redis.call('config', 'get', 'port')", &[], &[]),
    ("local ok, e = pcall(redis.call, 'nosuch') return e", &[], &[]),
    ("local ok, e = pcall(redis.call, 'nosuch') return ok", &[], &[]),
    ("local r = {pcall(function() error({err='X y'}) end)} return r[2]", &[], &[]),
    // redis.call/redis.pcall read their arguments off the Lua stack and push the reply back
    // (scripting/call.rs): thousands of arguments, numbers of every shape, errors with lines.
    (
        "local t = {} for i = 1, 5000 do t[i] = i end redis.call('del', 'big') \
         redis.call('rpush', 'big', unpack(t)) return {redis.call('llen', 'big'), redis.call('lindex', 'big', -1)}",
        &[],
        &[],
    ),
    (
        "local t = {} for i = 1, 7990 do t[i] = 'e' .. i end redis.call('del', 'big2') \
         return {redis.pcall('rpush', 'big2', unpack(t)), redis.pcall('lindex', 'big2', 7989)}",
        &[],
        &[],
    ),
    (
        "local z, out = 0, {} \
         for _, v in ipairs({z, 0.5, 1e5, -5, 2^53 + 1, 1/0, -1/0}) do \
           redis.call('set', 'num', v) out[#out + 1] = redis.call('get', 'num') end return out",
        &[],
        &[],
    ),
    ("return redis.call('set', KEYS[1], ARGV[1], 'px', 100000)", &["k2"], &["\u{0}bin\r\n"]),
    ("return redis.call('get', KEYS[1])", &["k2"], &[]),
    ("return redis.call('zrange', 'z', 0, -1, 'withscores')", &[], &[]),
    ("redis.setresp(3) return redis.call('zrange', 'z', 0, -1, 'withscores')", &[], &[]),
    ("return {pcall(redis.call, 'incr', 'str')}", &[], &[]),
    ("return {redis.pcall('incr', 'str'), redis.pcall('nosuch'), redis.pcall()}", &[], &[]),
    ("\nredis.call('incr', 'str')", &[], &[]),
    ("\n\nreturn redis.call('set', 'x', {})", &[], &[]),
    ("KEYS[1] = 'changed' KEYS[5] = 'more' ARGV.x = 1 return {KEYS[1], #KEYS, #ARGV}", &["a"], &["b"]),
    ("return {KEYS[1], #KEYS, ARGV.x, #ARGV}", &["a"], &["b"]),
    ("return redis.call('echo', 'x', 'y')", &[], &[]),
    ("return redis.call('GET', 'k1')", &[], &[]),
    ("return redis.call('time')[3]", &[], &[]),
    // script errors
    ("error('plain')", &[], &[]),
    ("error({err='TBL err'})", &[], &[]),
    ("local t = {} t.x.y = 1", &[], &[]),
    ("return 'a' ..", &[], &[]),
    ("\n\nerror('third line')", &[], &[]),
    // the sandbox
    ("x = 1", &[], &[]),
    ("return y", &[], &[]),
    ("return loadfile", &[], &[]),
    ("return dofile", &[], &[]),
    ("return require", &[], &[]),
    ("return module", &[], &[]),
    ("return setfenv", &[], &[]),
    ("return getfenv", &[], &[]),
    ("return print", &[], &[]),
    ("return debug", &[], &[]),
    ("return newproxy", &[], &[]),
    ("return io", &[], &[]),
    ("rawset(_G, 'z', 1)", &[], &[]),
    ("string.rep = nil", &[], &[]),
    ("redis.call = nil", &[], &[]),
    ("cjson.encode = nil", &[], &[]),
    ("_G.newglobal = 1", &[], &[]),
    ("setmetatable(_G, nil)", &[], &[]),
    ("return type(loadstring)", &[], &[]),
    ("return type(pcall)", &[], &[]),
    ("local f = loadstring('return 7') return f()", &[], &[]),
    ("getmetatable('').__index.rep = nil", &[], &[]),
    ("return ('ab'):rep(2)", &[], &[]),
    ("return string.format('%d-%s', 5, 'x')", &[], &[]),
    // KEYS and ARGV
    ("return #KEYS + #ARGV", &["a", "b"], &["c"]),
    ("return KEYS", &["a", "b"], &["c"]),
    ("return ARGV", &["a"], &["b", "c"]),
    // redis.*
    ("return redis.sha1hex('abc')", &[], &[]),
    ("return redis.sha1hex('')", &[], &[]),
    ("return redis.sha1hex()", &[], &[]),
    ("redis.log(redis.LOG_WARNING, 'from a script')", &[], &[]),
    ("redis.log(99, 'x')", &[], &[]),
    ("redis.log(1)", &[], &[]),
    ("redis.log('x', 'y')", &[], &[]),
    ("redis.setresp(4)", &[], &[]),
    ("redis.setresp()", &[], &[]),
    ("redis.set_repl(redis.REPL_ALL)", &[], &[]),
    ("redis.set_repl(99)", &[], &[]),
    ("return redis.replicate_commands()", &[], &[]),
    (
        "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_REPLICA, redis.REPL_SLAVE, redis.REPL_ALL}",
        &[],
        &[],
    ),
    ("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}", &[], &[]),
    // cjson
    ("return cjson.encode({1,2,3,'a'})", &[], &[]),
    ("return cjson.encode({a=1})", &[], &[]),
    ("return cjson.encode({a={b={c='d'}}})", &[], &[]),
    ("return cjson.encode('x/y\"z\\n\\t')", &[], &[]),
    ("return cjson.encode(3.14)", &[], &[]),
    ("return cjson.encode(-0.5)", &[], &[]),
    ("return cjson.encode(1e100)", &[], &[]),
    ("return cjson.encode({})", &[], &[]),
    ("return cjson.encode(true)", &[], &[]),
    ("return cjson.encode(cjson.null)", &[], &[]),
    ("return cjson.encode({1, nil, 3})", &[], &[]),
    ("return cjson.decode('[1,2,3]')", &[], &[]),
    ("return cjson.decode('{\"a\":[1,{\"b\":2}]}').a[2].b", &[], &[]),
    ("return cjson.encode(cjson.decode('{\"a\":[1,2,{\"b\":null}]}'))", &[], &[]),
    ("return cjson.decode('\"\\\\u00e9\"')", &[], &[]),
    ("return cjson.decode('[true,false]')[2]", &[], &[]),
    ("return cjson.decode('null') == cjson.null", &[], &[]),
    ("return cjson.decode(' 12.5 ')", &[], &[]),
    // bit
    ("return bit.band(0xff, 0x0f)", &[], &[]),
    ("return bit.bor(1, 2, 4)", &[], &[]),
    ("return bit.bxor(5, 3)", &[], &[]),
    ("return bit.bnot(0)", &[], &[]),
    ("return bit.lshift(1, 31)", &[], &[]),
    ("return bit.lshift(1, 33)", &[], &[]),
    ("return bit.rshift(-1, 28)", &[], &[]),
    ("return bit.arshift(-256, 4)", &[], &[]),
    ("return bit.tohex(255)", &[], &[]),
    ("return bit.tohex(-1, -4)", &[], &[]),
    ("return bit.tohex(0x1234abcd, 3)", &[], &[]),
    // A count with no positive counterpart (it crashed the server once).
    ("return bit.tohex(65535, -2147483648)", &[], &[]),
    ("return bit.tohex(65535, 2147483647)", &[], &[]),
    ("return bit.tobit(2^32 + 5)", &[], &[]),
    ("return bit.tobit(0xffffffff)", &[], &[]),
    ("return bit.rol(0x80000001, 1)", &[], &[]),
    ("return bit.bswap(0x01020304)", &[], &[]),
    // struct
    ("return struct.pack('>I2', 258)", &[], &[]),
    ("return struct.pack('<i4', -5)", &[], &[]),
    ("return {struct.unpack('<i4', struct.pack('<i4', -5))}", &[], &[]),
    ("return struct.size('>iId')", &[], &[]),
    ("return struct.size('!>bId')", &[], &[]),
    ("return {struct.unpack('>hs', struct.pack('>hs', 7, 'abc'))}", &[], &[]),
    ("return struct.pack('c3', 'abcdef')", &[], &[]),
    ("return {struct.unpack('bB', '\\255\\255')}", &[], &[]),
    ("return {struct.unpack('>d', struct.pack('>d', 2.5))}", &[], &[]),
    ("return {struct.unpack('<f', struct.pack('<f', 0.5))}", &[], &[]),
    ("return {struct.unpack('BBc0', struct.pack('BBc0', 9, 3, 'xyz'))}", &[], &[]),
    ("return {struct.unpack('>I2', 'abcd', 3)}", &[], &[]),
    // cmsgpack
    ("return cmsgpack.pack({1,2,3})", &[], &[]),
    ("return cmsgpack.pack({a=1})", &[], &[]),
    ("return cmsgpack.pack('hello', 300, -1, -100, 70000, 1.5, true, false)", &[], &[]),
    ("return cmsgpack.pack(0.1)", &[], &[]),
    ("return cmsgpack.pack(-40000, 5000000000, -5000000000)", &[], &[]),
    ("return cmsgpack.pack(string.rep('x', 40))", &[], &[]),
    ("return cmsgpack.pack({})", &[], &[]),
    ("return {cmsgpack.unpack(cmsgpack.pack({1,2,{3,4}}, 'x', 123456789))}", &[], &[]),
    ("return cmsgpack.unpack(cmsgpack.pack({k='v'})).k", &[], &[]),
    ("return {cmsgpack.unpack(cmsgpack.pack(-1, -33, 255, 65536))}", &[], &[]),
];

/// Other requests whose replies are compared: EVAL's own errors, EVALSHA, EVAL_RO, SCRIPT.
fn other_requests() -> Vec<Vec<&'static str>> {
    let load = "return 'loaded'";
    let sha = "5e6b6e0d1e23d9ed4c1e0a5c7b4f3d8d6ab0a6f2"; // not a loaded script
    vec![
        vec!["EVAL", "return 1", "-1"],
        vec!["EVAL", "return 1", "2", "a"],
        vec!["EVAL", "return 1", "x"],
        vec!["EVAL", "return 1"],
        vec!["EVALSHA", sha, "0"],
        vec!["EVALSHA", "abc", "0"],
        vec!["SCRIPT", "LOAD", load],
        vec!["SCRIPT", "LOAD", "return 'a' .."],
        vec!["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
        vec!["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8", sha],
        vec!["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "rw"],
        vec!["EVAL_RO", "return redis.call('set', KEYS[1], 'x')", "1", "rw"],
        vec!["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "rw"],
        vec!["EVALSHA_RO", sha, "0"],
        vec!["SCRIPT", "KILL"],
        vec!["SCRIPT", "FLUSH", "BOGUS"],
        vec!["SCRIPT", "FLUSH"],
        vec!["SCRIPT", "FLUSH", "ASYNC"],
        vec!["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8"],
        vec!["SCRIPT", "NOSUCH"],
        vec!["SCRIPT", "HELP"],
        vec!["SCRIPT", "DEBUG", "NO"],
        vec!["SCRIPT", "DEBUG", "MAYBE"],
        vec!["SCRIPT", "LOAD"],
        vec!["EVAL", "#!lua\nreturn 1", "0"],
        vec!["EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 1)", "0"],
        vec!["EVAL", "#!lua flags=no-writes,allow-stale\nreturn redis.call('get', 'a')", "0"],
        vec!["EVAL", "#!lua flags=bogus\nreturn 1", "0"],
        vec!["EVAL", "#!python\nreturn 1", "0"],
        vec!["EVAL", "#!lua foo=bar\nreturn 1", "0"],
        vec!["EVAL", "#!lua\nerror('x')", "0"],
        vec!["EVAL", "#!lua", "0"],
        vec!["EVAL_RO", "#!lua\nreturn 2", "0"],
        vec!["EVAL_RO", "#!lua flags=no-writes\nreturn 2", "0"],
        vec!["COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c"],
        vec!["COMMAND", "GETKEYS", "EVALSHA", "abc", "1", "k"],
        // A set's order is not deterministic: for scripts, SORT .. BY nosort sorts it (ALPHA).
        vec!["SADD", "sset", "delta", "alpha", "charlie", "bravo", "echo"],
        vec!["EVAL", "return redis.call('SORT', KEYS[1], 'BY', 'nosort')", "1", "sset"],
        vec![
            "EVAL",
            "return redis.call('SORT_RO', KEYS[1], 'BY', 'x', 'DESC', 'LIMIT', '1', '3')",
            "1",
            "sset",
        ],
        vec!["EVAL_RO", "return redis.call('PFCOUNT', KEYS[1])", "1", "nohll"],
        vec!["MULTI"],
        vec!["EVAL", "return redis.call('incr', KEYS[1])", "1", "counter"],
        vec!["SET", "after", "1"],
        vec!["EXEC"],
    ]
}

fn open(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn differential(resp3: bool) {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let (mut gs, mut rs) = (open(g.port), open(r.port));
    if resp3 {
        call_str(&mut gs, &["HELLO", "3"]);
        call_str(&mut rs, &["HELLO", "3"]);
    }
    for cmd in SETUP {
        call_str(&mut gs, cmd);
        call_str(&mut rs, cmd);
    }
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (body, keys, args) in SCRIPTS {
        let n = keys.len().to_string();
        let mut req = vec!["EVAL", body, &n];
        req.extend_from_slice(keys);
        req.extend_from_slice(args);
        let (ours, theirs) = (call_str(&mut gs, &req), call_str(&mut rs, &req));
        if ours != theirs {
            mismatches.push(format!("EVAL {body:?}\n  goblin: {}\n  redis:  {}", show(&ours), show(&theirs)));
        }
        compared += 1;
    }
    for req in other_requests() {
        let (ours, theirs) = (call_str(&mut gs, &req), call_str(&mut rs, &req));
        if ours != theirs {
            mismatches.push(format!("{req:?}\n  goblin: {}\n  redis:  {}", show(&ours), show(&theirs)));
        }
        compared += 1;
    }
    assert!(
        mismatches.is_empty(),
        "{} of {compared} replies differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn script_replies_match_redis_resp2() {
    differential(false);
}

#[test]
fn script_replies_match_redis_resp3() {
    differential(true);
}

/// Where goblin-core deliberately differs from Redis 7.0: `os` holds `clock` (Redis 8's
/// sandbox) and nothing else; pairs and next list a read-only library's members (as over
/// Redis 8's read-only tables) without handing out the table behind it.
#[test]
fn os_has_only_clock() {
    let g = Server::start(&[]);
    let mut s = g.raw();
    let listed = "local t = {} for k, v in pairs(os) do t[#t + 1] = k .. ':' .. type(v) end return t";
    assert_eq!(call_str(&mut s, &["EVAL", listed, "0"]), b"*1\r\n$14\r\nclock:function\r\n");
    assert_eq!(call_str(&mut s, &["EVAL", "return next(os)", "0"]), b"$5\r\nclock\r\n");
    let count = "local n = 0 for _ in pairs(string) do n = n + 1 end return n";
    assert_eq!(call_str(&mut s, &["EVAL", count, "0"]), b":15\r\n", "string's 15 functions");
    let state = "local f, t = pairs(os) return tostring(t == os)";
    assert_eq!(call_str(&mut s, &["EVAL", state, "0"]), b"$4\r\ntrue\r\n", "the proxy, not the table");
    let r = call_str(&mut s, &["EVAL", "local f, t = pairs(os) t.x = 1", "0"]);
    assert!(r.starts_with(b"-ERR user_script:1: Attempt to modify a readonly table"), "{}", show(&r));
    let plain = "local n = 0 for k in pairs({a = 1, b = 2}) do n = n + 1 end return n";
    assert_eq!(call_str(&mut s, &["EVAL", plain, "0"]), b":2\r\n");
    assert_eq!(call_str(&mut s, &["EVAL", "return type(os.clock())", "0"]), b"$6\r\nnumber\r\n");
    assert_eq!(call_str(&mut s, &["EVAL", "return type(os.time)", "0"]), b"$3\r\nnil\r\n");
    assert_eq!(call_str(&mut s, &["EVAL", "return type(os.execute)", "0"]), b"$3\r\nnil\r\n");
    let r = call_str(&mut s, &["EVAL", "os.exit = 1", "0"]);
    assert!(r.starts_with(b"-ERR user_script:1: Attempt to modify a readonly table"), "{}", show(&r));
}

/// TIME answers one instant through a script or a transaction (Redis 8 freezes the time of
/// an execution unit), and moves on between them.
#[test]
fn time_is_frozen_in_a_script_and_a_transaction() {
    let g = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut s = g.raw();
    let spin = "local a = redis.call('TIME') local x = 0 for i = 1, 3000000 do x = x + i end \
                local b = redis.call('TIME') return {a[1], a[2], b[1], b[2]}";
    let r = String::from_utf8_lossy(&call_str(&mut s, &["EVAL", spin, "0"])).into_owned();
    let parts: Vec<&str> = r.split("\r\n").collect();
    assert_eq!((parts[2], parts[4]), (parts[6], parts[8]), "{r}");
    for c in [&["MULTI"][..], &["TIME"], &["DEBUG", "SLEEP", "0.02"], &["TIME"]] {
        call_str(&mut s, c);
    }
    let r = String::from_utf8_lossy(&call_str(&mut s, &["EXEC"])).into_owned();
    let parts: Vec<&str> = r.split("\r\n").collect();
    // *3, *2, $n, secs, $n, micros, +OK, *2, $n, secs, $n, micros
    assert_eq!((parts[3], parts[5]), (parts[9], parts[11]), "{r}");
    let before = call_str(&mut s, &["TIME"]);
    std::thread::sleep(Duration::from_millis(5));
    assert_ne!(before, call_str(&mut s, &["TIME"]), "outside a unit TIME moves");
}

/// Bytecode is refused, as script and through loadstring/load (Redis's parser reads it as
/// text: its compile error is compared byte for byte).
#[test]
fn binary_chunks_are_refused() {
    let g = Server::start(&[]);
    let r = RedisServer::start();
    let (mut gs, mut rs) = (g.raw(), r.raw());
    let req: &[&[u8]] = &[b"EVAL", b"\x1bLuaQ\x00\x01\x04", b"0"];
    assert_eq!(show(&call(&mut gs, req)), show(&call(&mut rs, req)));
    let s = "local f = loadstring(string.dump(function() return 1 end)) return f == nil";
    assert_eq!(call_str(&mut gs, &["EVAL", s, "0"]), b":1\r\n");
    let s = "local done = false \
             local f = load(function() if done then return nil end done = true \
             return string.dump(function() return 1 end) end) return f == nil";
    assert_eq!(call_str(&mut gs, &["EVAL", s, "0"]), b":1\r\n");
    assert_eq!(call_str(&mut gs, &["EVAL", "return loadstring('return 3')()", "0"]), b":3\r\n");
}

/// A script's state does not leak into the next one: a table a script filled is gone, the
/// protocol for `redis.call` goes back to RESP2, and a global made by `rawset` is refused.
#[test]
fn scripts_do_not_leak_state() {
    let g = Server::start(&[]);
    let mut s = g.raw();
    call_str(&mut s, &["HSET", "h", "f", "v"]);
    call_str(&mut s, &["EVAL", "redis.setresp(3) return 1", "0"]);
    // RESP2 again: HGETALL is a flat array.
    assert_eq!(
        call_str(&mut s, &["EVAL", "return redis.call('hgetall', 'h')", "0"]),
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    let r = call_str(&mut s, &["EVAL", "return leaked", "0"]);
    assert!(
        r.starts_with(b"-ERR user_script:1: Script attempted to access nonexistent global variable 'leaked'")
    );
}

#[test]
fn evalsha_script_load_exists_flush() {
    let g = Server::start(&[]);
    let mut s = g.raw();
    let body = "return ARGV[1] .. KEYS[1]";
    let sha = {
        let r = call_str(&mut s, &["SCRIPT", "LOAD", body]);
        String::from_utf8(r[5..45].to_vec()).unwrap()
    };
    assert_eq!(sha, sha1_smol::Sha1::from(body).digest().to_string());
    assert_eq!(call_str(&mut s, &["EVALSHA", &sha, "1", "k", "a"]), b"$2\r\nak\r\n");
    assert_eq!(call_str(&mut s, &["EVALSHA", &sha.to_uppercase(), "1", "k", "b"]), b"$2\r\nbk\r\n");
    assert_eq!(call_str(&mut s, &["EVALSHA_RO", &sha, "1", "k", "c"]), b"$2\r\nck\r\n");
    assert_eq!(
        call_str(&mut s, &["SCRIPT", "EXISTS", &sha, "0000000000000000000000000000000000000000"]),
        b"*2\r\n:1\r\n:0\r\n"
    );
    // EVAL caches what it runs, under the body's SHA1.
    call_str(&mut s, &["EVAL", "return 42", "0"]);
    let sha42 = "1fa00e76656cc152ad327c13fe365858fd7be306";
    assert_eq!(call_str(&mut s, &["EVALSHA", sha42, "0"]), b":42\r\n");
    assert_eq!(call_str(&mut s, &["SCRIPT", "FLUSH"]), b"+OK\r\n");
    assert_eq!(call_str(&mut s, &["SCRIPT", "EXISTS", &sha]), b"*1\r\n:0\r\n");
    assert_eq!(
        call_str(&mut s, &["EVALSHA", sha42, "0"]),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
}

// ---- atomicity and the batch --------------------------------------------------------------

use redis::Value;

#[derive(Debug)]
struct Batch {
    origin: String,
    first: i64,
    mutations: Vec<Vec<Vec<u8>>>,
}

fn batches(con: &mut redis::Connection, count: usize) -> Vec<Batch> {
    let v: Value = redis::cmd("DEBUG").arg("BATCHES").arg(count).query(con).unwrap();
    let Value::Array(items) = v else { panic!("{v:?}") };
    let bytes = |v: &Value| match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        other => panic!("not a string: {other:?}"),
    };
    items
        .iter()
        .map(|b| {
            let Value::Array(parts) = b else { panic!("{b:?}") };
            let Value::Int(first) = parts[1] else { panic!("{parts:?}") };
            let Value::Array(muts) = &parts[2] else { panic!("{parts:?}") };
            let mutations = muts
                .iter()
                .map(|m| match m {
                    Value::Array(args) => args.iter().map(bytes).collect(),
                    other => panic!("{other:?}"),
                })
                .collect();
            Batch { origin: String::from_utf8(bytes(&parts[0])).unwrap(), first, mutations }
        })
        .collect()
}

fn strs(m: &[Vec<u8>]) -> Vec<String> {
    m.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

fn offset(con: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("replication").query(con).unwrap();
    let line = info.lines().find(|l| l.starts_with("master_repl_offset:")).expect("offset field");
    line["master_repl_offset:".len()..].trim().parse().unwrap()
}

#[test]
fn script_writes_commit_one_batch_of_its_canonical_mutations() {
    let s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut con = s.conn();
    let _: () = redis::cmd("SET").arg("before").arg("1").query(&mut con).unwrap();
    let start = offset(&mut con);
    let script = "redis.call('set', KEYS[1], ARGV[1]) \
                  redis.call('incr', KEYS[2]) \
                  redis.call('sadd', KEYS[3], 'a', 'b') \
                  redis.call('expire', KEYS[1], 100) \
                  redis.call('get', KEYS[1]) \
                  return redis.call('incrbyfloat', KEYS[2], '0.5')";
    let r: String =
        redis::cmd("EVAL").arg(script).arg(3).arg("k").arg("c").arg("s").arg("v").query(&mut con).unwrap();
    assert_eq!(r, "1.5");
    let end = offset(&mut con);
    let mut last = batches(&mut con, 1);
    let b = last.pop().unwrap();
    assert_eq!(b.origin, "script");
    assert_eq!(b.first, start + 1);
    assert_eq!(end - start, b.mutations.len() as i64, "the offset advanced by exactly the batch");
    let muts: Vec<Vec<String>> = b.mutations.iter().map(|m| strs(m)).collect();
    assert_eq!(muts.len(), 6, "{muts:?}");
    assert_eq!(muts[0], ["SET", "k", "v"]);
    assert_eq!(muts[1], ["SET", "c", "1", "KEEPTTL"]);
    assert_eq!(muts[2], ["SADD", "s", "a"]);
    assert_eq!(muts[3], ["SADD", "s", "b"]);
    assert_eq!(muts[4][0], "PEXPIREAT", "relative times become absolute: {muts:?}");
    assert_eq!(muts[5], ["SET", "c", "1.5", "KEEPTTL"]);

    // A script that fails midway keeps the writes made before the error, as one batch.
    let before = offset(&mut con);
    let r: redis::RedisResult<Value> = redis::cmd("EVAL")
        .arg("redis.call('set', 'e1', 'x') redis.call('set', 'e2', 'y') redis.call('incr', 'e1') return 1")
        .arg(0)
        .query(&mut con);
    assert!(r.is_err());
    let b = batches(&mut con, 1).pop().unwrap();
    assert_eq!(b.origin, "script");
    assert_eq!(b.first, before + 1);
    let muts: Vec<Vec<String>> = b.mutations.iter().map(|m| strs(m)).collect();
    assert_eq!(muts, [vec!["SET", "e1", "x"], vec!["SET", "e2", "y"]]);

    // A read-only script commits nothing.
    let before = offset(&mut con);
    let _: Value = redis::cmd("EVAL").arg("return redis.call('get', 'e1')").arg(0).query(&mut con).unwrap();
    assert_eq!(offset(&mut con), before);

    // Inside MULTI, the script's writes join the EXEC batch.
    let before = offset(&mut con);
    let _: Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("m1")
        .arg("1")
        .cmd("EVAL")
        .arg("redis.call('set', 'm2', '2') return redis.call('set', 'm3', '3')")
        .arg(0)
        .cmd("SET")
        .arg("m4")
        .arg("4")
        .query(&mut con)
        .unwrap();
    let b = batches(&mut con, 1).pop().unwrap();
    assert_eq!(b.origin, "exec");
    assert_eq!(b.first, before + 1);
    let keys: Vec<String> = b.mutations.iter().map(|m| String::from_utf8_lossy(&m[1]).into_owned()).collect();
    assert_eq!(keys, ["m1", "m2", "m3", "m4"]);
}

/// The scripts' committed batches, applied by record to a fresh engine, give the server's
/// DEBUG DIGEST.
#[test]
fn script_batches_replay_to_the_same_digest() {
    let s = Server::start(&["--enable-debug-command", "yes", "--debug-batch-history", "yes"]);
    let mut con = s.conn();
    let scripts = [
        "for i = 1, 20 do redis.call('hset', 'h', 'f' .. i, i) end return 1",
        "redis.call('rpush', 'l', 'a', 'b', 'c') redis.call('lpop', 'l') return redis.call('llen', 'l')",
        "redis.call('zadd', 'z', 1, 'a', 2, 'b') redis.call('zincrby', 'z', 2.5, 'a') return 1",
        "redis.call('set', 'k', 'v', 'EX', 1000) redis.call('append', 'k', 'w') return 1",
        "redis.call('sadd', 's', 'x', 'y', 'z') redis.call('spop', 's') return 1",
        "redis.call('set', 'n', 5) redis.call('incrbyfloat', 'n', 1.25) redis.call('del', 'h') return 1",
    ];
    for sc in scripts {
        let _: Value = redis::cmd("EVAL").arg(sc).arg(0).query(&mut con).unwrap();
    }
    let all = batches(&mut con, 256);
    assert!(all.iter().all(|b| b.origin == "script"), "{all:?}");
    assert_eq!(all.len(), scripts.len());
    let mut e = engine::Engine::default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for b in &all {
        for (i, m) in b.mutations.iter().enumerate() {
            let args: Vec<&[u8]> = m.iter().map(Vec::as_slice).collect();
            let record = request(&args);
            e.apply_record(&record, Some(b.first as u64 + i as u64), now)
                .unwrap_or_else(|err| panic!("record {:?}: {err:?}", strs(m)));
        }
    }
    let theirs: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
    let ours = engine::util::hex(&engine::digest::dataset_digest(&e.ks));
    assert_eq!(ours, theirs);
    assert_ne!(theirs, "0".repeat(40));
}

// ---- busy scripts ---------------------------------------------------------------------------

/// Sends PING until the server answers BUSY (a hang guard, not a timing assertion).
fn wait_busy(s: &mut TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = call_str(s, &["PING"]);
        if r.starts_with(b"-BUSY") {
            assert_eq!(
                r,
                b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
            );
            return;
        }
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn busy_script_answers_busy_and_script_kill_stops_it() {
    let mut g = Server::start(&["--busy-reply-threshold", "100"]);
    let mut other = g.raw();
    assert_eq!(call_str(&mut other, &["SCRIPT", "KILL"]), b"-NOTBUSY No scripts in execution right now.\r\n");
    assert_eq!(
        call_str(&mut other, &["CONFIG", "GET", "lua-time-limit"]),
        b"*2\r\n$14\r\nlua-time-limit\r\n$3\r\n100\r\n"
    );
    let mut runner = g.raw();
    runner.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut in_multi = g.raw();
    assert_eq!(call_str(&mut in_multi, &["MULTI"]), b"+OK\r\n");
    send(&mut runner, &request(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]));
    wait_busy(&mut other);
    // A new connection is accepted and answered too.
    let mut third = g.raw();
    assert!(call_str(&mut third, &["GET", "x"]).starts_with(b"-BUSY"));
    // A BUSY inside MULTI fails the transaction.
    assert!(call_str(&mut in_multi, &["SET", "x", "1"]).starts_with(b"-BUSY"));
    assert_eq!(call_str(&mut other, &["SCRIPT", "KILL"]), b"+OK\r\n");
    let r = read_reply(&mut runner);
    let sha = sha1_smol::Sha1::from("local i = 0 while true do i = i + 1 end").digest().to_string();
    assert_eq!(
        show(&r),
        format!("-ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.\\r\\n")
    );
    // Everyone is served normally again, the runner included.
    assert_eq!(call_str(&mut other, &["PING"]), b"+PONG\r\n");
    assert_eq!(call_str(&mut runner, &["PING"]), b"+PONG\r\n");
    assert_eq!(
        call_str(&mut in_multi, &["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );

    // A loop inside a coroutine is seen too.
    send(
        &mut runner,
        &request(&[
            b"EVAL",
            b"local co = coroutine.create(function() while true do end end) coroutine.resume(co)",
            b"0",
        ]),
    );
    wait_busy(&mut other);
    assert_eq!(call_str(&mut other, &["SCRIPT", "KILL"]), b"+OK\r\n");
    let r = read_reply(&mut runner);
    assert!(r.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."), "{}", show(&r));
    // ... and so is one under pcall, which may not catch the kill.
    send(
        &mut runner,
        &request(&[b"EVAL", b"while true do pcall(function() while true do end end) end", b"0"]),
    );
    wait_busy(&mut other);
    assert_eq!(call_str(&mut other, &["SCRIPT", "KILL"]), b"+OK\r\n");
    let r = read_reply(&mut runner);
    assert!(r.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."), "{}", show(&r));

    // A script that wrote cannot be killed; SHUTDOWN NOSAVE is the way out, and its writes
    // are never committed.
    send(&mut runner, &request(&[b"EVAL", b"redis.call('set', 'w', '1') while true do end", b"0"]));
    wait_busy(&mut other);
    let r = call_str(&mut other, &["SCRIPT", "KILL"]);
    assert!(r.starts_with(b"-UNKILLABLE Sorry the script already executed write commands"), "{}", show(&r));
    other.write_all(&request(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    let status = g.wait_exit(Duration::from_secs(30)).expect("the server exits");
    assert!(status.success(), "{status:?}");
}

/// A client that connects in the same loop turn as a script's request (the listener's event
/// was collected with the request's, before the script ran) is accepted and answered during
/// the script, not left in the backlog until it ends. DEBUG SLEEP holds the loop so that both
/// arrive before the next wait: the request first, then the connection.
#[test]
fn a_client_connecting_with_the_scripts_request_is_answered_busy() {
    let g = Server::start(&[
        "--busy-reply-threshold",
        "100",
        "--enable-debug-command",
        "yes",
        "--debug-batch-history",
        "yes",
    ]);
    let mut sleeper = g.raw();
    let mut runner = g.raw();
    runner.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    send(&mut sleeper, &request(&[b"DEBUG", b"SLEEP", b"0.5"]));
    std::thread::sleep(Duration::from_millis(150));
    send(&mut runner, &request(&[b"EVAL", b"while true do end", b"0"]));
    std::thread::sleep(Duration::from_millis(50));
    // The kernel completes the handshake; the server has not accepted it yet.
    let mut late = g.raw();
    assert_eq!(read_reply(&mut sleeper), b"+OK\r\n");
    // raw()'s 10 s read timeout turns a client left in the backlog into a failure.
    let r = call_str(&mut late, &["PING"]);
    assert!(r.starts_with(b"-BUSY"), "{}", show(&r));
    assert_eq!(call_str(&mut late, &["SCRIPT", "KILL"]), b"+OK\r\n");
    let r = read_reply(&mut runner);
    assert!(r.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."), "{}", show(&r));
    assert_eq!(call_str(&mut late, &["PING"]), b"+PONG\r\n");
}

#[test]
fn busy_threshold_is_configurable() {
    let g = Server::start(&[]);
    let mut s = g.raw();
    assert_eq!(
        call_str(&mut s, &["CONFIG", "GET", "busy-reply-threshold"]),
        b"*2\r\n$20\r\nbusy-reply-threshold\r\n$4\r\n5000\r\n"
    );
    assert_eq!(call_str(&mut s, &["CONFIG", "SET", "lua-time-limit", "250"]), b"+OK\r\n");
    assert_eq!(
        call_str(&mut s, &["CONFIG", "GET", "busy-reply-threshold"]),
        b"*2\r\n$20\r\nbusy-reply-threshold\r\n$3\r\n250\r\n"
    );
    let r = call_str(&mut s, &["CONFIG", "SET", "busy-reply-threshold", "-1"]);
    assert!(r.starts_with(b"-ERR CONFIG SET failed"), "{}", show(&r));
}

/// A script's writes reach everything a client's writes reach: WATCH, clients blocked on the
/// keys, and a subscriber of a channel the script publishes to.
#[test]
fn script_writes_touch_watchers_blocked_clients_and_subscribers() {
    let g = Server::start(&[]);
    // WATCH: a key written by another client's script aborts the transaction.
    let mut w = g.raw();
    let mut other = g.raw();
    assert_eq!(call_str(&mut w, &["WATCH", "wk"]), b"+OK\r\n");
    call_str(&mut other, &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "wk"]);
    assert_eq!(call_str(&mut w, &["MULTI"]), b"+OK\r\n");
    assert_eq!(call_str(&mut w, &["SET", "wk", "mine"]), b"+QUEUED\r\n");
    assert_eq!(call_str(&mut w, &["EXEC"]), b"*-1\r\n");
    // A client blocked on a list is served by a script's push, after the script.
    let mut b = g.raw();
    send(&mut b, &request(&[b"BLPOP", b"bl", b"0"]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&call_str(&mut other, &["CLIENT", "LIST"])).contains("cmd=blpop") {
        assert!(Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        call_str(
            &mut other,
            &["EVAL", "redis.call('rpush', 'bl', 'a', 'b') return redis.call('llen', 'bl')", "0"]
        ),
        b":2\r\n"
    );
    assert_eq!(read_reply(&mut b), b"*2\r\n$2\r\nbl\r\n$1\r\na\r\n");
    // PUBLISH from a script; the caller subscribed in RESP3 gets its push after the reply
    // (Redis 7.2+).
    let mut sub = g.raw();
    call_str(&mut sub, &["HELLO", "3"]);
    call_str(&mut sub, &["SUBSCRIBE", "ch"]);
    assert_eq!(call_str(&mut other, &["EVAL", "return redis.call('publish', 'ch', 'hi')", "0"]), b":1\r\n");
    assert_eq!(read_reply(&mut sub), b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    let r = call_str(&mut sub, &["EVAL", "return redis.call('publish', 'ch', 'self')", "0"]);
    assert_eq!(r, b":1\r\n");
    assert_eq!(read_reply(&mut sub), b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n");
}

/// cmsgpack.unpack_limit / unpack_one and cjson.encode_keep_buffer, and numbers given to
/// redis.call, answer as in redis-server.
#[test]
fn msgpack_partial_unpack_and_number_arguments_match_redis() {
    let g = Server::start(&[]);
    let r = common::RedisServer::start();
    let scripts = [
        "local s = cmsgpack.pack(1,2,3); local r = {cmsgpack.unpack_limit(s, 2, 0)}; \
         local o = {cmsgpack.unpack_one(s, r[1])}; cjson.encode_keep_buffer(false); \
         return {r[1], r[2], r[3], o[1], o[2]}",
        "redis.call('SET', KEYS[1], 9007199254740991); return redis.call('GET', KEYS[1])",
        "redis.call('SET', KEYS[1], 3.5); return redis.call('GET', KEYS[1])",
    ];
    for script in scripts {
        let mut replies = Vec::new();
        for mut c in [g.conn(), r.conn()] {
            let v: redis::RedisResult<redis::Value> =
                redis::cmd("EVAL").arg(script).arg(1).arg("k").query(&mut c);
            replies.push(format!("{v:?}"));
        }
        assert_eq!(replies[0], replies[1], "{script}");
    }
}

/// Over maxmemory a script's write is refused with the OOM error; a table's metatable plays no
/// part in its conversion to a reply (returning _G gives an empty array); both as in Redis.
#[test]
fn script_oom_and_raw_table_conversion_match_redis() {
    let g = Server::start(&[]);
    let r = common::RedisServer::start();
    for mut c in [g.conn(), r.conn()] {
        redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("1").query::<()>(&mut c).unwrap();
        let err = redis::cmd("EVAL")
            .arg("redis.call('set', 'x', 1)")
            .arg(0)
            .query::<redis::Value>(&mut c)
            .unwrap_err();
        assert!(err.to_string().contains("command not allowed when used memory"), "{err}");
        redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0").query::<()>(&mut c).unwrap();
        let v: redis::Value = redis::cmd("EVAL").arg("return _G").arg(0).query(&mut c).unwrap();
        assert_eq!(v, redis::Value::Array(vec![]));
    }
}

/// Many small scripts leave garbage (argument tables, reply strings) that a collection step
/// every 50 runs reclaims, as in Redis: used_memory_lua stays under the 100 KiB Redis's suite
/// allows after 10000 runs ("EVAL does not leak in the Lua stack").
#[test]
fn many_scripts_keep_lua_memory_small() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    call_str(&mut c, &["SCRIPT", "FLUSH"]);
    call_str(&mut c, &["SET", "x", "0"]);
    // Pipelined, as the suite sends them; replies read afterwards.
    let one = request(&[b"EVAL", b"return redis.call('incr',KEYS[1])", b"1", b"x"]);
    let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 500).collect();
    for _ in 0..20 {
        send(&mut c, &batch);
        for _ in 0..500 {
            read_reply(&mut c);
        }
    }
    assert_eq!(call_str(&mut c, &["GET", "x"]), b"$5\r\n10000\r\n");
    let info = String::from_utf8(call_str(&mut c, &["INFO", "memory"])).unwrap();
    let lua: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_lua:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory_lua in INFO");
    assert!(lua < 100 * 1024, "used_memory_lua {lua} after 10000 scripts");
}

/// Every distinct script SCRIPT LOAD cached stays cached and callable, however many there
/// are: 12,000 loads of different bodies, then each one's EVALSHA, and 12,000 functions in
/// 120 libraries, each called. (A compiled chunk held as an `mlua::Function` took a slot of
/// mlua's auxiliary stack, and the 7,997th distinct script aborted the server.)
#[test]
fn twelve_thousand_distinct_scripts_and_functions_stay_callable() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let n = 12_000;
    let mut batch = Vec::new();
    let sha = |i: usize| sha1_smol::Sha1::from(format!("return {i}")).digest().to_string();
    for i in 0..n {
        batch.extend(request(&[b"SCRIPT", b"LOAD", format!("return {i}").as_bytes()]));
    }
    send(&mut c, &batch);
    for i in 0..n {
        assert_eq!(read_reply(&mut c), format!("$40\r\n{}\r\n", sha(i)).into_bytes(), "SCRIPT LOAD #{i}");
    }
    batch.clear();
    for i in 0..n {
        let sha = sha(i);
        batch.extend(request(&[b"EVALSHA", sha.as_bytes(), b"0"]));
    }
    send(&mut c, &batch);
    for i in 0..n {
        assert_eq!(read_reply(&mut c), format!(":{i}\r\n").into_bytes(), "EVALSHA #{i}");
    }
    batch.clear();
    for lib in 0..120 {
        let mut code = format!("#!lua name=lib{lib}\n");
        for f in 0..100 {
            code.push_str(&format!(
                "redis.register_function('f{lib}_{f}', function() return {} end)\n",
                lib * 100 + f
            ));
        }
        batch.extend(request(&[b"FUNCTION", b"LOAD", code.as_bytes()]));
    }
    send(&mut c, &batch);
    for lib in 0..120 {
        let name = format!("lib{lib}");
        assert_eq!(read_reply(&mut c), format!("${}\r\n{name}\r\n", name.len()).into_bytes());
    }
    batch.clear();
    for i in 0..n {
        batch.extend(request(&[b"FCALL", format!("f{}_{}", i / 100, i % 100).as_bytes(), b"0"]));
    }
    send(&mut c, &batch);
    for i in 0..n {
        assert_eq!(read_reply(&mut c), format!(":{i}\r\n").into_bytes(), "FCALL #{i}");
    }
}

/// EVAL's script cache keeps the 500 most recently run scripts EVAL cached, as Redis 7.4 and
/// later do (an application that builds a new body per call would otherwise grow it without
/// bound): the least recently run goes first (EVAL and EVALSHA both count as a run), SCRIPT
/// LOAD's scripts are never dropped and do not count (nor does a later SCRIPT LOAD of a body
/// EVAL cached make it safe, as in Redis 8.2), `evicted_scripts` counts the dropped ones and
/// CONFIG RESETSTAT clears it. The same session against redis-server 8.2, answer by answer.
#[test]
fn eval_scripts_are_evicted_least_recently_run_first_as_redis8() {
    let g = Server::start(&[]);
    let r = RedisServer::start8();
    let sha = |body: &str| sha1_smol::Sha1::from(body).digest().to_string();
    let field = |c: &mut TcpStream, section: &str, name: &str| -> String {
        let info = String::from_utf8(call_str(c, &["INFO", section])).unwrap();
        let line = info.lines().find(|l| l.starts_with(&format!("{name}:"))).expect(name).to_string();
        line[name.len() + 1..].to_string()
    };
    let mut sessions = Vec::new();
    for port in [g.port, r.port] {
        let mut c = open(port);
        let mut got = Vec::new();
        let mut log = |what: &str, reply: Vec<u8>| got.push(format!("{what} -> {}", show(&reply)));
        call_str(&mut c, &["CONFIG", "RESETSTAT"]);
        log("load kept", call_str(&mut c, &["SCRIPT", "LOAD", "return 'kept'"]));
        log("eval kept", call_str(&mut c, &["EVAL", "return 'kept'", "0"]));
        log("eval promoted", call_str(&mut c, &["EVAL", "return 'promoted'", "0"]));
        log("load promoted", call_str(&mut c, &["SCRIPT", "LOAD", "return 'promoted'"]));
        // 'promoted' and 'return 0'..'return 498': 500 scripts EVAL cached.
        let mut batch = Vec::new();
        for i in 0..499 {
            batch.extend(request(&[b"EVAL", format!("return {i}").as_bytes(), b"0"]));
        }
        send(&mut c, &batch);
        for i in 0..499 {
            assert_eq!(read_reply(&mut c), format!(":{i}\r\n").into_bytes(), "EVAL #{i}");
        }
        log("before", field(&mut c, "memory", "number_of_cached_scripts").into_bytes());
        // 'return 0' becomes the most recently run: 'promoted', then 'return 1' go first.
        log("evalsha 0", call_str(&mut c, &["EVALSHA", &sha("return 0"), "0"]));
        log("eval 499", call_str(&mut c, &["EVAL", "return 499", "0"]));
        log("eval 500", call_str(&mut c, &["EVAL", "return 500", "0"]));
        let names = ["return 'kept'", "return 'promoted'", "return 0", "return 1", "return 2", "return 500"];
        let mut exists = vec!["SCRIPT".to_string(), "EXISTS".to_string()];
        exists.extend(names.iter().map(|b| sha(b)));
        let exists: Vec<&str> = exists.iter().map(String::as_str).collect();
        log("exists", call_str(&mut c, &exists));
        log("evalsha 1", call_str(&mut c, &["EVALSHA", &sha("return 1"), "0"]));
        log("evicted", field(&mut c, "stats", "evicted_scripts").into_bytes());
        log("cached", field(&mut c, "memory", "number_of_cached_scripts").into_bytes());
        call_str(&mut c, &["CONFIG", "RESETSTAT"]);
        log("evicted after resetstat", field(&mut c, "stats", "evicted_scripts").into_bytes());
        sessions.push(got);
    }
    for (ours, theirs) in sessions[0].iter().zip(&sessions[1]) {
        assert_eq!(ours, theirs, "goblin-core against redis-server 8.2");
    }
    let ours = sessions[0].join("\n");
    assert!(ours.contains("exists -> *6\\r\\n:1\\r\\n:0\\r\\n:1\\r\\n:0\\r\\n:1\\r\\n:1"), "{ours}");
    assert!(ours.contains("evicted -> 2\n"), "{ours}");
    assert!(ours.contains("cached -> 501\n"), "{ours}");
}
