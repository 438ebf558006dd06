//! RESP3 side by side with redis-server: one scripted session per server, switched to RESP3
//! with `HELLO 3`, covering every reply shape RESP3 changes (maps, sets, doubles, nulls,
//! [member, score] pairs, verbatim strings) and the protocol switch itself (HELLO's options,
//! RESET, HELLO 2, MULTI/EXEC, blocked clients answered later). Replies are compared byte for
//! byte; the only normalisations are for what legitimately differs between the two servers:
//! HELLO's version and client id, the text inside INFO / CLIENT INFO, and the order of set
//! members and of map entries whose order Redis does not define.

mod common;

use common::{read_reply, RedisServer, Server};
use resp::Frame;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// How one reply is compared.
#[derive(Clone, Copy, Debug)]
enum Norm {
    /// Byte for byte.
    Exact,
    /// A set, or an array or map whose order is not defined: compared as a multiset.
    Unordered,
    /// The HELLO map: `version` and `id` blanked.
    Hello,
    /// Human-readable text (INFO, CLIENT INFO): a `txt` verbatim string; the text itself differs.
    Verbatim,
    /// Only the type of each value, recursively (COMMAND DOCS, whose fields differ).
    Types,
}

fn request(args: &[&str]) -> Vec<u8> {
    let mut req = Vec::new();
    resp::reply::bulk_array(&mut req, args);
    req
}

fn call(s: &mut TcpStream, args: &[&str]) -> Vec<u8> {
    s.write_all(&request(args)).unwrap();
    read_reply(s)
}

fn decode(bytes: &[u8]) -> Frame {
    let (f, n) = resp::decode_frame(bytes).unwrap().expect("a whole reply");
    assert_eq!(n, bytes.len());
    f
}

fn sorted(mut items: Vec<Frame>) -> Vec<Frame> {
    items.sort_by_key(|i| format!("{i:?}"));
    items
}

/// A value reduced to its type tags, recursively.
fn types(f: &Frame) -> String {
    match f {
        Frame::Simple(_) => "+".into(),
        Frame::Error(_) => "-".into(),
        Frame::Integer(_) => ":".into(),
        Frame::Bulk(Some(_)) => "$".into(),
        Frame::Bulk(None) => "$-1".into(),
        Frame::Array(None) => "*-1".into(),
        // Lists of maps (COMMAND DOCS arguments) differ in length between the servers: show
        // the first element's shape only.
        Frame::Array(Some(items)) => format!("*[{}]", items.first().map(types).unwrap_or_default()),
        Frame::Null => "_".into(),
        Frame::Double(_) => ",".into(),
        Frame::Boolean(_) => "#".into(),
        Frame::BigNumber(_) => "(".into(),
        Frame::Verbatim(fmt, _) => format!("={}", String::from_utf8_lossy(fmt)),
        Frame::Map(pairs) => {
            // Field sets differ (Redis has complexity/history); the common fields must agree.
            let mut keys: Vec<String> = pairs
                .iter()
                .filter(|(k, _)| matches!(k, Frame::Bulk(Some(b)) if !matches!(&b[..], b"complexity" | b"history" | b"doc_flags" | b"deprecated_since" | b"replaced_by")))
                .map(|(k, v)| format!("{}={}", String::from_utf8_lossy(match k { Frame::Bulk(Some(b)) => b, _ => unreachable!() }), types(v)))
                .collect();
            keys.sort();
            format!("%{{{}}}", keys.join(","))
        }
        Frame::Set(items) => format!("~[{}]", items.first().map(types).unwrap_or_default()),
        Frame::Push(items) => format!(">{}", items.len()),
    }
}

fn normalize(f: Frame, norm: Norm) -> String {
    match (norm, f) {
        (Norm::Exact, f) => format!("{f:?}"),
        (Norm::Unordered, Frame::Set(items)) => format!("{:?}", Frame::Set(sorted(items))),
        (Norm::Unordered, Frame::Array(Some(items))) => format!("{:?}", Frame::Array(Some(sorted(items)))),
        (Norm::Unordered, Frame::Map(mut pairs)) => {
            pairs.sort_by_key(|p| format!("{p:?}"));
            format!("{:?}", Frame::Map(pairs))
        }
        (Norm::Hello, Frame::Map(pairs)) => {
            let pairs: Vec<(Frame, Frame)> = pairs
                .into_iter()
                .map(|(k, v)| match &k {
                    Frame::Bulk(Some(b)) if b == b"version" => (k, Frame::Bulk(Some(b"X".to_vec()))),
                    Frame::Bulk(Some(b)) if b == b"id" => (k, Frame::Integer(0)),
                    // Redis 8 lists its built-in modules (vectorset); goblin-core has none.
                    Frame::Bulk(Some(b)) if b == b"modules" => (k, Frame::Array(Some(vec![]))),
                    _ => (k, v),
                })
                .collect();
            format!("{:?}", Frame::Map(pairs))
        }
        (Norm::Hello, Frame::Array(Some(mut items))) => {
            // RESP2's flat form: version is the 4th value, id the 8th.
            assert_eq!(items.len(), 14);
            items[3] = Frame::Bulk(Some(b"X".to_vec()));
            items[7] = Frame::Integer(0);
            items[13] = Frame::Array(Some(vec![]));
            format!("{:?}", Frame::Array(Some(items)))
        }
        (Norm::Verbatim, Frame::Verbatim(fmt, text)) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            assert!(text.ends_with('\n'), "{text:?}");
            format!("verbatim {} ending in a newline", String::from_utf8_lossy(&fmt))
        }
        (Norm::Types, f) => types(&f),
        (norm, f) => panic!("{norm:?} does not apply to {f:?}"),
    }
}

/// Sends `args` to both servers and compares the replies under `norm`.
fn same(g: &mut TcpStream, r: &mut TcpStream, args: &[&str], norm: Norm) -> Frame {
    let (gb, rb) = (call(g, args), call(r, args));
    let (gf, rf) = (decode(&gb), decode(&rb));
    if matches!(norm, Norm::Exact) {
        assert_eq!(String::from_utf8_lossy(&gb), String::from_utf8_lossy(&rb), "{args:?}");
    }
    assert_eq!(normalize(gf.clone(), norm), normalize(rf, norm), "{args:?}");
    gf
}

fn open(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn resp3_replies_match_redis() {
    use Norm::*;
    let goblin = Server::start(&[]);
    let redis = RedisServer::start8();
    let (mut g, mut r) = (open(goblin.port), open(redis.port));
    let script: &[(&[&str], Norm)] = &[
        // The handshake and its options: failures leave the protocol as it was.
        (&["HELLO", "4"], Exact),
        (&["HELLO", "x"], Exact),
        (&["HELLO", "3", "AUTH", "nobody", "pw"], Exact),
        (&["HELLO", "3", "SETNAME", "bad name"], Exact),
        // Redis 7.2+: every option's syntax and the name are checked before the credentials.
        (&["HELLO", "3", "AUTH", "nobody", "pw", "BOGUS"], Exact),
        (&["HELLO", "3", "AUTH", "nobody", "pw", "SETNAME", "bad name"], Exact),
        (&["HELLO", "3", "AUTH", "default", "x", "AUTH", "nobody", "pw"], Exact),
        (&["GET", "nokey"], Exact), // still RESP2: $-1
        (&["HELLO", "3"], Hello),
        (&["GET", "nokey"], Exact), // now RESP3: _
        (&["HELLO"], Hello),
        (&["HELLO", "3", "AUTH", "default", "anything", "SETNAME", "conn1"], Hello),
        (&["CLIENT", "GETNAME"], Exact),
        (&["CLIENT", "SETNAME", ""], Exact),
        (&["CLIENT", "GETNAME"], Exact),
        // Strings and nulls.
        (&["SET", "s", "1"], Exact),
        (&["INCRBYFLOAT", "s", "1.5"], Exact),
        (&["SET", "s", "x", "GET"], Exact),
        (&["SET", "new", "x", "GET"], Exact),
        (&["SET", "s", "y", "NX"], Exact),
        (&["MGET", "s", "nokey"], Exact),
        (&["GETDEL", "nokey"], Exact),
        (&["GETEX", "nokey"], Exact),
        (&["GETRANGE", "nokey", "0", "1"], Exact),
        // Hashes: HGETALL is a map, WITHVALUES pairs are arrays.
        (&["HSET", "h", "a", "1", "b", "2", "c", "3"], Exact),
        (&["HGETALL", "h"], Unordered),
        (&["HGETALL", "nokey"], Exact),
        (&["HMGET", "h", "a", "zz"], Exact),
        (&["HGET", "h", "zz"], Exact),
        (&["HINCRBYFLOAT", "h", "a", "0.5"], Exact),
        (&["HRANDFIELD", "nokey"], Exact),
        (&["HRANDFIELD", "nokey", "2", "WITHVALUES"], Exact),
        (&["HRANDFIELD", "h", "5", "WITHVALUES"], Unordered),
        (&["HRANDFIELD", "h", "5"], Unordered),
        (&["HKEYS", "h"], Unordered),
        (&["HSET", "h1", "f", "v"], Exact),
        (&["HRANDFIELD", "h1", "-2", "WITHVALUES"], Exact),
        (&["HSCAN", "h1", "0"], Exact),
        // Sets: `~` for members, arrays for SMISMEMBER and SRANDMEMBER.
        (&["SADD", "st", "a", "b", "c"], Exact),
        (&["SMEMBERS", "st"], Unordered),
        (&["SMEMBERS", "nokey"], Exact),
        (&["SINTER", "st", "st"], Unordered),
        (&["SINTER", "st", "nokey"], Exact),
        (&["SUNION", "st", "nokey"], Unordered),
        (&["SDIFF", "st", "nokey"], Unordered),
        (&["SMISMEMBER", "st", "a", "z"], Exact),
        (&["SRANDMEMBER", "nokey"], Exact),
        (&["SRANDMEMBER", "nokey", "2"], Exact),
        (&["SRANDMEMBER", "st", "5"], Unordered),
        (&["SPOP", "nokey"], Exact),
        (&["SPOP", "nokey", "2"], Exact),
        (&["SPOP", "st", "10"], Unordered),
        (&["SADD", "st", "only"], Exact),
        (&["SPOP", "st", "1"], Exact),
        // Sorted sets: doubles, pairs, the flat ZPOPMIN without a count.
        // (Scores exact in binary: the digits of others differ between 7.0 and 8, compared with
        // redis-server 8.2 in differential.rs, `double_replies_match_redis8`.)
        (&["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c", "0.125", "d"], Exact),
        (&["ZSCORE", "z", "a"], Exact),
        (&["ZSCORE", "z", "b"], Exact),
        (&["ZSCORE", "z", "c"], Exact),
        (&["ZSCORE", "z", "d"], Exact),
        (&["ZSCORE", "z", "zz"], Exact),
        (&["ZMSCORE", "z", "a", "zz", "c"], Exact),
        (&["ZMSCORE", "nokey", "a"], Exact),
        (&["ZINCRBY", "z", "0.25", "a"], Exact),
        (&["ZINCRBY", "z", "1e3", "b"], Exact),
        (&["ZADD", "z", "INCR", "1", "a"], Exact),
        (&["ZADD", "z", "NX", "INCR", "1", "a"], Exact),
        (&["ZADD", "z", "XX", "INCR", "1", "nomember"], Exact),
        (&["ZRANGE", "z", "0", "-1"], Exact),
        (&["ZRANGE", "z", "0", "-1", "WITHSCORES"], Exact),
        (&["ZRANGE", "nokey", "0", "-1", "WITHSCORES"], Exact),
        (&["ZREVRANGE", "z", "0", "1", "WITHSCORES"], Exact),
        (&["ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2"], Exact),
        (&["ZREVRANGEBYSCORE", "z", "+inf", "(0", "WITHSCORES"], Exact),
        (&["ZRANGE", "z", "+inf", "(1", "BYSCORE", "REV", "WITHSCORES"], Exact),
        (&["ZRANGEBYLEX", "z", "-", "+"], Exact),
        (&["ZRANK", "z", "zz"], Exact),
        (&["ZREVRANK", "z", "a"], Exact),
        (&["ZUNION", "1", "z", "WITHSCORES"], Exact),
        (&["ZINTER", "2", "z", "z", "WITHSCORES"], Exact),
        (&["ZDIFF", "1", "z", "WITHSCORES"], Exact),
        (&["ZUNION", "1", "z"], Exact),
        (&["ZRANDMEMBER", "nokey"], Exact),
        (&["ZRANDMEMBER", "nokey", "2", "WITHSCORES"], Exact),
        (&["ZRANDMEMBER", "z", "10", "WITHSCORES"], Exact),
        (&["ZSCAN", "z", "0"], Exact),
        (&["ZPOPMIN", "z"], Exact),
        (&["ZPOPMIN", "z", "1"], Exact),
        (&["ZPOPMAX", "z", "5"], Exact),
        (&["ZPOPMIN", "nokey"], Exact),
        (&["ZPOPMIN", "nokey", "2"], Exact),
        (&["ZADD", "z", "1", "a", "2", "b", "3", "c"], Exact),
        (&["ZMPOP", "1", "z", "MIN"], Exact),
        (&["ZMPOP", "1", "z", "MAX", "COUNT", "5"], Exact),
        (&["ZMPOP", "1", "nokey", "MIN"], Exact),
        (&["ZADD", "z", "1", "a", "2", "b", "3", "c"], Exact),
        (&["BZPOPMIN", "z", "0"], Exact),
        (&["BZPOPMAX", "z", "0"], Exact),
        (&["BZMPOP", "0", "1", "z", "MIN", "COUNT", "3"], Exact),
        // Blocking commands that time out (parked, then answered by the deadline).
        (&["BZPOPMIN", "nokey", "0.01"], Exact),
        (&["BZMPOP", "0.01", "1", "nokey", "MIN"], Exact),
        (&["BLPOP", "nokey", "0.01"], Exact),
        (&["BRPOP", "nokey", "0.01"], Exact),
        (&["BLMOVE", "nokey", "x", "LEFT", "LEFT", "0.01"], Exact),
        (&["BLMPOP", "0.01", "1", "nokey", "LEFT"], Exact),
        // Lists.
        (&["RPUSH", "l", "a", "b", "c"], Exact),
        (&["LPOP", "l"], Exact),
        (&["LPOP", "l", "2"], Exact),
        (&["LPOP", "l", "2"], Exact),
        (&["LPOP", "nokey", "2"], Exact),
        (&["RPOP", "nokey"], Exact),
        (&["LINDEX", "nokey", "0"], Exact),
        (&["RPUSH", "l", "a", "b", "a"], Exact),
        (&["LPOS", "l", "x"], Exact),
        (&["LPOS", "l", "a", "COUNT", "0"], Exact),
        (&["LPOS", "l", "x", "COUNT", "2"], Exact),
        (&["LMPOP", "1", "nokey", "LEFT"], Exact),
        (&["LMPOP", "1", "l", "RIGHT", "COUNT", "2"], Exact),
        (&["RPOPLPUSH", "nokey", "x"], Exact),
        (&["LMOVE", "nokey", "x", "LEFT", "LEFT"], Exact),
        (&["LRANGE", "l", "0", "-1"], Exact),
        // Keyspace.
        (&["TTL", "nokey"], Exact),
        (&["TYPE", "h"], Exact),
        (&["OBJECT", "ENCODING", "nokey"], Exact),
        (&["EXISTS", "h", "nokey"], Exact),
        (&["KEYS", "*"], Unordered),
        // Errors are the same in both protocols.
        (&["HGETALL", "s"], Exact),
        (&["ZSCORE", "s", "a"], Exact),
        (&["SMEMBERS", "h"], Exact),
        // Server commands.
        (&["CONFIG", "GET", "maxmemory"], Exact),
        (&["CONFIG", "GET", "maxmemory-policy"], Exact),
        (&["CONFIG", "GET", "nosuch"], Exact),
        (&["MEMORY", "USAGE", "nokey"], Exact),
        (&["INFO"], Verbatim),
        (&["INFO", "server"], Verbatim),
        (&["CLIENT", "INFO"], Verbatim),
        (&["CLIENT", "LIST"], Verbatim),
        (&["CLIENT", "LIST", "ID", "999999"], Exact),
        (&["COMMAND", "INFO", "get", "nosuch"], Exact),
        (&["COMMAND", "INFO", "zadd", "hget"], Exact),
        // Content differs here (tips, key-spec flags): the RESP3 types must not.
        (&["COMMAND", "INFO", "set", "ping", "lpush"], Types),
        (&["COMMAND", "DOCS", "get", "set", "nosuch"], Types),
        (&["ROLE"], Types), // the offset differs (goblin counts mutations)
        (&["PING"], Exact),
        (&["ECHO", "x"], Exact),
        // MULTI/EXEC: each reply in the connection's protocol.
        (&["MULTI"], Exact),
        (&["GET", "nokey"], Exact),
        (&["HGETALL", "h1"], Exact),
        (&["ZSCORE", "nokey", "a"], Exact),
        (&["SMEMBERS", "nokey"], Exact),
        (&["BLPOP", "nokey", "0"], Exact),
        (&["ZADD", "zz", "1.5", "m"], Exact),
        (&["ZRANGE", "zz", "0", "-1", "WITHSCORES"], Exact),
        (&["EXEC"], Exact),
        // RESET returns to RESP2; HELLO 2 answers with the flat array.
        (&["RESET"], Exact),
        (&["GET", "nokey"], Exact),
        (&["HELLO"], Hello),
        (&["HELLO", "3"], Hello),
        (&["HELLO", "2"], Hello),
        (&["HGETALL", "h1"], Exact),
        (&["ZSCORE", "zz", "m"], Exact),
    ];
    for (args, norm) in script {
        same(&mut g, &mut r, args, *norm);
    }
    // CLIENT INFO tells the protocol.
    for (s, proto) in [(&mut g, "2"), (&mut r, "2")] {
        let info = String::from_utf8(call(s, &["CLIENT", "INFO"])).unwrap();
        assert!(info.contains(&format!(" resp={proto}")), "{info}");
        call(s, &["HELLO", "3"]);
        let info = String::from_utf8(call(s, &["CLIENT", "INFO"])).unwrap();
        assert!(info.starts_with('=') && info.contains(" resp=3"), "{info}");
    }
}

/// Replies that come later, in the client's protocol: a WATCH-aborted EXEC, a blocked pop
/// served by another client's write.
#[test]
fn late_and_aborted_replies_in_resp3() {
    let goblin = Server::start(&[]);
    let redis = RedisServer::start();
    for port in [goblin.port, redis.port] {
        let (mut a, mut b) = (open(port), open(port));
        call(&mut a, &["HELLO", "3"]);
        assert_eq!(call(&mut a, &["WATCH", "w"]), b"+OK\r\n");
        assert_eq!(call(&mut b, &["SET", "w", "1"]), b"+OK\r\n");
        assert_eq!(call(&mut a, &["MULTI"]), b"+OK\r\n");
        assert_eq!(call(&mut a, &["GET", "w"]), b"+QUEUED\r\n");
        assert_eq!(call(&mut a, &["EXEC"]), b"_\r\n", "port {port}");

        a.write_all(&request(&["BZPOPMIN", "bz", "5"])).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(call(&mut b, &["ZADD", "bz", "1.5", "m"]), b":1\r\n");
        assert_eq!(
            String::from_utf8(read_reply(&mut a)).unwrap(),
            "*3\r\n$2\r\nbz\r\n$1\r\nm\r\n,1.5\r\n",
            "port {port}"
        );

        a.write_all(&request(&["BLPOP", "bl", "5"])).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // CLIENT UNBLOCK answers the parked client with a null, as a timeout would.
        let list = String::from_utf8(call(&mut b, &["CLIENT", "LIST"])).unwrap();
        let blocked = list
            .lines()
            .find(|l| l.contains("cmd=blpop"))
            .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
            .unwrap_or_else(|| panic!("no blocked client in {list}"))
            .to_string();
        assert_eq!(call(&mut b, &["CLIENT", "UNBLOCK", &blocked]), b":1\r\n");
        assert_eq!(read_reply(&mut a), b"_\r\n", "port {port}");
    }
}
