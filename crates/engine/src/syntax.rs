//! Argument syntax of every command, for `COMMAND DOCS`.
//!
//! Each command gets one line in the documented call syntax (`key field value [field value
//! ...]`), parsed once into the argument tree that Redis 7 reports under `arguments`. redis-cli
//! builds its interactive hints from that tree, so a missing or malformed tree means no hints.
//!
//! Syntax-line grammar (the usual notation of command reference pages, plus two small marks):
//! - a lowercase word is a value argument; its type comes from its name (`key`, `count`,
//!   `score`, ...; see [`infer_type`]) unless it carries an explicit `:type` suffix
//!   (`min:double`, `dst:key`).
//! - an UPPERCASE word is a literal token. Followed by one value it names that value's token
//!   (`EX seconds`); followed by several it tokenizes a block (`LIMIT offset count`); alone it is
//!   a pure token (`WITHSCORES`).
//! - `[ ... ]` is optional, `< ... >` is required grouping; `|` inside separates alternatives
//!   (a `oneof`); several arguments in one alternative form a `block`.
//! - `x [x ...]` repeats `x` (flag `multiple`); when `x` starts with a token the token repeats too
//!   (`multiple_token`). A lone `[x ...]` is an optional repeated `x`.
//! - `label:` right after `[` or `<` names the group (`[condition: NX | XX]`); otherwise a group
//!   is named after its members.
//!
//! Container commands (CLIENT, CONFIG, ...) have an empty line of their own; each subcommand
//! has a line under a `parent|sub` name, with its own summary, as Redis reports them under
//! `subcommands`.

use std::collections::HashMap;
use std::sync::OnceLock;

/// `(name, since, syntax)` for every plain command. The `since` versions are the Redis releases
/// that introduced each command; the array and conditional-write commands carry the versions in
/// `shared/spec/redis-arrays-and-conditional-writes.md`.
pub static SYNTAX: &[(&str, &str, &str)] = &[
    // connection / server
    ("ping", "1.0.0", "[message]"),
    ("echo", "1.0.0", "message"),
    ("cluster", "3.0.0", "subcommand [argument ...]"),
    ("readonly", "3.0.0", ""),
    ("readwrite", "3.0.0", ""),
    ("asking", "3.0.0", ""),
    ("info", "1.0.0", "[section [section ...]]"),
    ("hello", "6.0.0", "[arguments: protover:integer [AUTH username password] [SETNAME clientname]]"),
    ("auth", "1.0.0", "[username] password"),
    ("quit", "1.0.0", ""),
    ("reset", "6.2.0", ""),
    ("select", "1.0.0", "index"),
    ("time", "2.6.0", ""),
    ("role", "2.8.12", ""),
    ("bgrewriteaof", "1.0.0", ""),
    ("replicaof", "5.0.0", "<args: host port:integer | NO ONE>"),
    ("failover", "6.2.0", "[TO host port:integer [FORCE]] [ABORT] [TIMEOUT milliseconds:integer]"),
    ("slaveof", "1.0.0", "<args: host port:integer | NO ONE>"),
    ("shutdown", "1.0.0", "[save-selector: NOSAVE | SAVE] [NOW] [FORCE] [ABORT]"),
    ("multi", "1.2.0", ""),
    ("exec", "1.2.0", ""),
    ("discard", "2.0.0", ""),
    ("watch", "2.2.0", "key [key ...]"),
    ("unwatch", "2.2.0", ""),
    // pub/sub
    ("subscribe", "2.0.0", "channel [channel ...]"),
    ("unsubscribe", "2.0.0", "[channel [channel ...]]"),
    ("psubscribe", "2.0.0", "pattern [pattern ...]"),
    ("punsubscribe", "2.0.0", "[pattern [pattern ...]]"),
    ("ssubscribe", "7.0.0", "shardchannel [shardchannel ...]"),
    ("sunsubscribe", "7.0.0", "[shardchannel [shardchannel ...]]"),
    ("publish", "2.0.0", "channel message"),
    ("spublish", "7.0.0", "shardchannel message"),
    ("pubsub", "2.8.0", ""),
    // scripting
    ("eval", "2.6.0", "script numkeys [key [key ...]] [arg [arg ...]]"),
    ("evalsha", "2.6.0", "sha1 numkeys [key [key ...]] [arg [arg ...]]"),
    ("eval_ro", "7.0.0", "script numkeys [key [key ...]] [arg [arg ...]]"),
    ("evalsha_ro", "7.0.0", "sha1 numkeys [key [key ...]] [arg [arg ...]]"),
    ("script", "2.6.0", ""),
    ("fcall", "7.0.0", "function numkeys [key [key ...]] [arg [arg ...]]"),
    ("fcall_ro", "7.0.0", "function numkeys [key [key ...]] [arg [arg ...]]"),
    ("function", "7.0.0", ""),
    // containers: no arguments of their own, see SUBCOMMANDS
    ("client", "2.4.0", ""),
    ("acl", "6.0.0", ""),
    ("config", "2.0.0", ""),
    ("command", "2.8.13", ""),
    ("memory", "4.0.0", ""),
    ("monitor", "1.0.0", ""),
    ("slowlog", "2.2.12", ""),
    ("hotkeys", "8.6.0", ""),
    ("module", "4.0.0", ""),
    ("lolwut", "5.0.0", "[VERSION version:integer]"),
    ("latency", "2.8.13", ""),
    ("debug", "1.0.0", ""),
    ("save", "1.0.0", ""),
    ("bgsave", "1.0.0", "[SCHEDULE]"),
    ("lastsave", "1.0.0", ""),
    ("goblin.dumpworld", "0.1.0", "[EOF]"),
    ("goblin.load", "0.1.0", "path"),
    ("goblin.firehose", "0.1.0", ""),
    ("wait", "3.0.0", "numreplicas:integer timeout:integer"),
    ("waitaof", "7.2.0", "numlocal:integer numreplicas:integer timeout:integer"),
    ("replconf", "3.0.0", ""),
    ("sync", "1.0.0", ""),
    ("psync", "2.8.0", "replicationid:string offset:integer"),
    ("object", "2.2.3", ""),
    // generic keyspace
    ("del", "1.0.0", "key [key ...]"),
    ("unlink", "4.0.0", "key [key ...]"),
    ("exists", "1.0.0", "key [key ...]"),
    ("type", "1.0.0", "key"),
    ("rename", "1.0.0", "key newkey"),
    ("renamenx", "1.0.0", "key newkey"),
    ("copy", "6.2.0", "source destination [DB destination-db:integer] [REPLACE]"),
    ("dump", "2.6.0", "key"),
    ("migrate", "2.6.0", "host port:integer <key_or_empty_string: key | \"\"> destination-db:integer timeout:integer [COPY] [REPLACE] [authentication: [AUTH password] | [AUTH2 username password]] [KEYS key [key ...]]"),
    ("restore", "2.6.0", "key ttl:integer serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds:integer] [FREQ frequency:integer]"),
    ("keys", "1.0.0", "pattern"),
    ("scan", "2.8.0", "cursor [MATCH pattern] [COUNT count] [TYPE type]"),
    ("randomkey", "1.0.0", ""),
    ("dbsize", "1.0.0", ""),
    ("move", "1.0.0", "key db:integer"),
    ("swapdb", "4.0.0", "index1:integer index2:integer"),
    ("flushall", "1.0.0", "[flush-type: ASYNC | SYNC]"),
    ("flushdb", "1.0.0", "[flush-type: ASYNC | SYNC]"),
    ("expire", "1.0.0", "key seconds [condition: NX | XX | GT | LT]"),
    ("pexpire", "2.6.0", "key milliseconds [condition: NX | XX | GT | LT]"),
    ("expireat", "1.2.0", "key unix-time-seconds [condition: NX | XX | GT | LT]"),
    ("pexpireat", "2.6.0", "key unix-time-milliseconds [condition: NX | XX | GT | LT]"),
    ("ttl", "1.0.0", "key"),
    ("pttl", "2.6.0", "key"),
    ("expiretime", "7.0.0", "key"),
    ("pexpiretime", "7.0.0", "key"),
    ("persist", "2.2.0", "key"),
    ("touch", "3.2.1", "key [key ...]"),
    // strings
    ("get", "1.0.0", "key"),
    (
        "set",
        "1.0.0",
        "key value [condition: NX | XX | IFEQ ifeq-value | IFNE ifne-value | IFDEQ ifdeq-digest \
         | IFDNE ifdne-digest] [GET] [expiration: EX seconds | PX milliseconds \
         | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]",
    ),
    ("setnx", "1.0.0", "key value"),
    ("setex", "2.0.0", "key seconds value"),
    ("psetex", "2.6.0", "key milliseconds value"),
    ("mget", "1.0.0", "key [key ...]"),
    ("mset", "1.0.1", "key value [key value ...]"),
    ("msetnx", "1.0.1", "key value [key value ...]"),
    ("getset", "1.0.0", "key value"),
    ("getdel", "6.2.0", "key"),
    (
        "getex",
        "6.2.0",
        "key [expiration: EX seconds | PX milliseconds | EXAT unix-time-seconds \
         | PXAT unix-time-milliseconds | PERSIST]",
    ),
    ("append", "2.0.0", "key value"),
    ("strlen", "2.2.0", "key"),
    ("getrange", "2.4.0", "key start end"),
    ("substr", "1.0.0", "key start end"),
    ("setrange", "2.2.0", "key offset value"),
    ("incr", "1.0.0", "key"),
    ("decr", "1.0.0", "key"),
    ("incrby", "1.0.0", "key increment"),
    ("decrby", "1.0.0", "key decrement"),
    ("incrbyfloat", "2.6.0", "key increment:double"),
    ("increx", "8.8.0", "key [increment: BYFLOAT float:double | BYINT integer:integer] [LBOUND lowerbound] [UBOUND upperbound] [SATURATE] [expiration: EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | PERSIST] [ENX]"),
    // bitmaps (commands/bits.rs); the trees match what Redis 7.0 reports
    ("setbit", "2.2.0", "key offset value:integer"),
    ("getbit", "2.2.0", "key offset"),
    ("bitcount", "2.6.0", "key [index: start end [index_unit: BYTE | BIT]]"),
    ("bitpos", "2.8.7", "key bit:integer [index: start [end_index: end [index_unit: BYTE | BIT]]]"),
    ("bitop", "2.6.0", "operation destkey:key key [key ...]"),
    (
        "bitfield",
        "3.2.0",
        "key [<operation: GET encoding offset | <write: [OVERFLOW <wrap_sat_fail: WRAP | SAT | FAIL>] \
         <write_operation: SET encoding offset value:integer | INCRBY encoding offset increment>>> ...]",
    ),
    ("bitfield_ro", "6.0.0", "key [GET encoding offset [GET encoding offset ...]]"),
    // conditional writes
    (
        "delex",
        "8.4.0",
        "key [condition: IFEQ ifeq-value | IFNE ifne-value | IFDEQ ifdeq-digest | IFDNE ifdne-digest]",
    ),
    ("digest", "8.4.0", "key"),
    (
        "msetex",
        "8.4.0",
        "numkeys key value [key value ...] [condition: NX | XX] [expiration: EX seconds \
         | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]",
    ),
    ("delifeq", "9.0.0", "key value"),
    // hashes
    ("hset", "2.0.0", "key field value [field value ...]"),
    ("hmset", "2.0.0", "key field value [field value ...]"),
    ("hsetnx", "2.0.0", "key field value"),
    ("hget", "2.0.0", "key field"),
    ("hmget", "2.0.0", "key field [field ...]"),
    ("hgetall", "2.0.0", "key"),
    ("hkeys", "2.0.0", "key"),
    ("hvals", "2.0.0", "key"),
    ("hdel", "2.0.0", "key field [field ...]"),
    ("hgetdel", "8.0.0", "key FIELDS numfields:integer field [field ...]"),
    ("hexpire", "7.4.0", "key seconds:integer [NX | XX | GT | LT] FIELDS numfields:integer field [field ...]"),
    ("hpexpire", "7.4.0", "key milliseconds:integer [NX | XX | GT | LT] FIELDS numfields:integer field [field ...]"),
    ("hexpireat", "7.4.0", "key unix-time-seconds:integer [NX | XX | GT | LT] FIELDS numfields:integer field [field ...]"),
    ("hpexpireat", "7.4.0", "key unix-time-milliseconds:integer [NX | XX | GT | LT] FIELDS numfields:integer field [field ...]"),
    ("httl", "7.4.0", "key FIELDS numfields:integer field [field ...]"),
    ("hpttl", "7.4.0", "key FIELDS numfields:integer field [field ...]"),
    ("hexpiretime", "7.4.0", "key FIELDS numfields:integer field [field ...]"),
    ("hpexpiretime", "7.4.0", "key FIELDS numfields:integer field [field ...]"),
    ("hpersist", "7.4.0", "key FIELDS numfields:integer field [field ...]"),
    (
        "hgetex",
        "8.0.0",
        "key [EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds:integer | PXAT unix-time-milliseconds:integer | PERSIST] FIELDS numfields:integer field [field ...]",
    ),
    (
        "hsetex",
        "8.0.0",
        "key [FNX | FXX] [EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds:integer | PXAT unix-time-milliseconds:integer | KEEPTTL] FIELDS numfields:integer field value [field value ...]",
    ),
    ("hexists", "2.0.0", "key field"),
    ("hlen", "2.0.0", "key"),
    ("hstrlen", "3.2.0", "key field"),
    ("hincrby", "2.0.0", "key field increment"),
    ("hincrbyfloat", "2.6.0", "key field increment:double"),
    ("hrandfield", "6.2.0", "key [options: count [WITHVALUES]]"),
    ("hscan", "2.8.0", "key cursor [MATCH pattern] [COUNT count]"),
    // lists
    ("lpush", "1.0.0", "key element [element ...]"),
    ("rpush", "1.0.0", "key element [element ...]"),
    ("lpushx", "2.2.0", "key element [element ...]"),
    ("rpushx", "2.2.0", "key element [element ...]"),
    ("lpop", "1.0.0", "key [count]"),
    ("rpop", "1.0.0", "key [count]"),
    ("llen", "1.0.0", "key"),
    ("lrange", "1.0.0", "key start stop"),
    ("lindex", "1.0.0", "key index"),
    ("lset", "1.0.0", "key index element"),
    ("linsert", "2.2.0", "key <where: BEFORE | AFTER> pivot element"),
    ("lrem", "1.0.0", "key count element"),
    ("ltrim", "1.0.0", "key start stop"),
    ("lpos", "6.0.6", "key element [RANK rank] [COUNT num-matches] [MAXLEN len]"),
    ("lmove", "6.2.0", "source destination <wherefrom: LEFT | RIGHT> <whereto: LEFT | RIGHT>"),
    ("rpoplpush", "1.2.0", "source destination"),
    ("lmpop", "7.0.0", "numkeys key [key ...] <where: LEFT | RIGHT> [COUNT count]"),
    ("blpop", "2.0.0", "key [key ...] timeout"),
    ("brpop", "2.0.0", "key [key ...] timeout"),
    ("blmove", "6.2.0", "source destination <wherefrom: LEFT | RIGHT> <whereto: LEFT | RIGHT> timeout"),
    ("lmovem", "8.10.0", "source destination <wherefrom: LEFT | RIGHT> <whereto: LEFT | RIGHT> [how-many: <COUNT count | EXACTLY count> <ordering: OBO | BULK>]"),
    ("blmovem", "8.10.0", "source destination <wherefrom: LEFT | RIGHT> <whereto: LEFT | RIGHT> timeout [how-many: <COUNT count | EXACTLY count> <ordering: OBO | BULK>]"),
    ("brpoplpush", "2.2.0", "source destination timeout"),
    ("blmpop", "7.0.0", "timeout numkeys key [key ...] <where: LEFT | RIGHT> [COUNT count]"),
    // sets
    ("sadd", "1.0.0", "key member [member ...]"),
    ("srem", "1.0.0", "key member [member ...]"),
    ("smembers", "1.0.0", "key"),
    ("sismember", "1.0.0", "key member"),
    ("smismember", "6.2.0", "key member [member ...]"),
    ("scard", "1.0.0", "key"),
    ("spop", "1.0.0", "key [count]"),
    ("srandmember", "1.0.0", "key [count]"),
    ("smove", "1.0.0", "source destination member"),
    ("sinter", "1.0.0", "key [key ...]"),
    ("sintercard", "7.0.0", "numkeys key [key ...] [LIMIT limit]"),
    ("sinterstore", "1.0.0", "destination key [key ...]"),
    ("sunion", "1.0.0", "key [key ...]"),
    ("sunionstore", "1.0.0", "destination key [key ...]"),
    ("sdiff", "1.0.0", "key [key ...]"),
    ("sdiffstore", "1.0.0", "destination key [key ...]"),
    ("sunioncard", "8.10.0", "numkeys key [key ...] [APPROX] [LIMIT limit]"),
    ("sdiffcard", "8.10.0", "numkeys key [key ...] [LIMIT limit]"),
    ("sscan", "2.8.0", "key cursor [MATCH pattern] [COUNT count]"),
    // sorted sets
    (
        "zadd",
        "1.2.0",
        "key [condition: NX | XX] [comparison: GT | LT] [change: CH] [increment: INCR] score member [score member ...]",
    ),
    ("zincrby", "1.2.0", "key increment:double member"),
    ("zrem", "1.2.0", "key member [member ...]"),
    ("zscore", "1.2.0", "key member"),
    ("zmscore", "6.2.0", "key member [member ...]"),
    ("zcard", "1.2.0", "key"),
    ("zcount", "2.0.0", "key min:double max:double"),
    ("zlexcount", "2.8.9", "key min max"),
    (
        "zrange",
        "1.2.0",
        "key start:string stop:string [sortby: BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]",
    ),
    ("zrangestore", "6.2.0", "dst:key src:key min max [sortby: BYSCORE | BYLEX] [REV] [LIMIT offset count]"),
    ("zrangebyscore", "1.0.5", "key min:double max:double [WITHSCORES] [LIMIT offset count]"),
    ("zrevrangebyscore", "2.2.0", "key max:double min:double [WITHSCORES] [LIMIT offset count]"),
    ("zrangebylex", "2.8.9", "key min max [LIMIT offset count]"),
    ("zrevrangebylex", "2.8.9", "key max min [LIMIT offset count]"),
    ("zrevrange", "1.2.0", "key start stop [WITHSCORES]"),
    ("zrank", "2.0.0", "key member [WITHSCORE]"),
    ("zrevrank", "2.0.0", "key member [WITHSCORE]"),
    ("zpopmin", "5.0.0", "key [count]"),
    ("zpopmax", "5.0.0", "key [count]"),
    ("zmpop", "7.0.0", "numkeys key [key ...] <where: MIN | MAX> [COUNT count]"),
    ("bzpopmin", "5.0.0", "key [key ...] timeout"),
    ("bzpopmax", "5.0.0", "key [key ...] timeout"),
    ("bzmpop", "7.0.0", "timeout numkeys key [key ...] <where: MIN | MAX> [COUNT count]"),
    ("zrandmember", "6.2.0", "key [options: count [WITHSCORES]]"),
    ("zremrangebyrank", "2.0.0", "key start stop"),
    ("zremrangebyscore", "1.2.0", "key min:double max:double"),
    ("zremrangebylex", "2.8.9", "key min max"),
    (
        "zunion",
        "6.2.0",
        "numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>] [WITHSCORES]",
    ),
    (
        "zinter",
        "6.2.0",
        "numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>] [WITHSCORES]",
    ),
    ("zdiff", "6.2.0", "numkeys key [key ...] [WITHSCORES]"),
    (
        "zunionstore",
        "2.0.0",
        "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>]",
    ),
    (
        "zinterstore",
        "2.0.0",
        "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>]",
    ),
    ("zdiffstore", "6.2.0", "destination numkeys key [key ...]"),
    ("zintercard", "7.0.0", "numkeys key [key ...] [LIMIT limit]"),
    ("zscan", "2.8.0", "key cursor [MATCH pattern] [COUNT count]"),
    // sort (commands/sort.rs), HyperLogLog (hll.rs), geo (geo.rs), LCS (lcs.rs)
    (
        "sort",
        "1.0.0",
        "key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [order: ASC | DESC] [ALPHA] \
         [STORE destination:key]",
    ),
    (
        "sort_ro",
        "7.0.0",
        "key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [order: ASC | DESC] [ALPHA]",
    ),
    ("pfadd", "2.8.9", "key [element [element ...]]"),
    ("pfcount", "2.8.9", "key [key ...]"),
    ("pfmerge", "2.8.9", "destkey:key sourcekey:key [sourcekey:key ...]"),
    ("pfdebug", "2.8.9", "subcommand:string key"),
    ("pfselftest", "2.8.9", ""),
    (
        "geoadd",
        "3.2.0",
        "key [condition: NX | XX] [change: CH] longitude:double latitude:double member \
         [longitude:double latitude:double member ...]",
    ),
    ("geodist", "3.2.0", "key member1:string member2:string [unit: M | KM | FT | MI]"),
    ("geohash", "3.2.0", "key member [member ...]"),
    ("geopos", "3.2.0", "key member [member ...]"),
    (
        "geosearch",
        "6.2.0",
        "key <from: FROMMEMBER member | FROMLONLAT longitude:double latitude:double> \
         <by: <circle: <BYRADIUS radius:double> <unit: M | KM | FT | MI>> \
         | <box: <BYBOX width:double> height:double <unit: M | KM | FT | MI>>> \
         [order: ASC | DESC] [count-block: COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]",
    ),
    (
        "geosearchstore",
        "6.2.0",
        "destination:key source:key <from: FROMMEMBER member | FROMLONLAT longitude:double latitude:double> \
         <by: <circle: <BYRADIUS radius:double> <unit: M | KM | FT | MI>> \
         | <box: <BYBOX width:double> height:double <unit: M | KM | FT | MI>>> \
         [order: ASC | DESC] [count-block: COUNT count [ANY]] [STOREDIST]",
    ),
    (
        "georadius",
        "3.2.0",
        "key longitude:double latitude:double radius:double <unit: M | KM | FT | MI> [WITHCOORD] [WITHDIST] \
         [WITHHASH] [count-block: COUNT count [ANY]] [order: ASC | DESC] [STORE key] [STOREDIST key]",
    ),
    (
        "georadius_ro",
        "3.2.10",
        "key longitude:double latitude:double radius:double <unit: M | KM | FT | MI> [WITHCOORD] [WITHDIST] \
         [WITHHASH] [count-block: COUNT count [ANY]] [order: ASC | DESC]",
    ),
    (
        "georadiusbymember",
        "3.2.0",
        "key member radius:double <unit: M | KM | FT | MI> [WITHCOORD] [WITHDIST] [WITHHASH] \
         [count-block: COUNT count [ANY]] [order: ASC | DESC] [STORE key] [STOREDIST key]",
    ),
    (
        "georadiusbymember_ro",
        "3.2.10",
        "key member radius:double <unit: M | KM | FT | MI> [WITHCOORD] [WITHDIST] [WITHHASH] \
         [count-block: COUNT count [ANY]] [order: ASC | DESC]",
    ),
    ("lcs", "7.0.0", "key1:key key2:key [LEN] [IDX] [MINMATCHLEN min-match-len:integer] [WITHMATCHLEN]"),
    // streams
    (
        "xadd",
        "5.0.0",
        "key [NOMKSTREAM] [condition: KEEPREF | DELREF | ACKED] [idmp: IDMPAUTO pid:string | IDMP pid:string iid:string] \
         [trim: <strategy: MAXLEN | MINID> [operator: = | ~] threshold [LIMIT count]] <id-selector: * | id> field value [field value ...]",
    ),
    ("xrange", "5.0.0", "key start:string end:string [COUNT count]"),
    ("xrevrange", "5.0.0", "key end:string start:string [COUNT count]"),
    ("xlen", "5.0.0", "key"),
    ("xdel", "5.0.0", "key id [id ...]"),
    ("xtrim", "5.0.0", "key <trim: <strategy: MAXLEN | MINID> [operator: = | ~] threshold [LIMIT count]> [condition: KEEPREF | DELREF | ACKED]"),
    ("xcfgset", "8.6.0", "key [IDMP-DURATION duration:integer] [IDMP-MAXSIZE maxsize:integer]"),
    ("xidmprecord", "8.8.0", "key pid:string iid:string stream-id:string"),
    ("xdelex", "8.2.0", "key [condition: KEEPREF | DELREF | ACKED] <ids: IDS numids id [id ...]>"),
    (
        "xsetid",
        "5.0.0",
        "key last-id [ENTRIESADDED entries-added:integer] [MAXDELETEDID max-deleted-id]",
    ),
    ("xread", "5.0.0", "[COUNT count] [MAXCOUNT maxcount:integer] [MAXSIZE maxsize:integer] [BLOCK milliseconds:integer] STREAMS key [key ...] id [id ...]"),
    (
        "xreadgroup",
        "5.0.0",
        "GROUP group consumer [COUNT count] [MAXCOUNT maxcount:integer] [MAXSIZE maxsize:integer] [BLOCK milliseconds:integer] [NOACK] \
         [CLAIM min-idle-time:integer] STREAMS key [key ...] \
         id [id ...]",
    ),
    ("xgroup", "5.0.0", ""),
    ("xinfo", "5.0.0", ""),
    ("xack", "5.0.0", "key group id [id ...]"),
    ("xackdel", "8.2.0", "key group [condition: KEEPREF | DELREF | ACKED] <ids: IDS numids id [id ...]>"),
    ("xpending", "5.0.0", "key group [filters: [IDLE min-idle-time:integer] start:string end:string count:integer [consumer]]"),
    (
        "xclaim",
        "5.0.0",
        "key group consumer min-idle-time:string id [id ...] [IDLE ms:integer] [TIME unix-time-milliseconds:unix-time] \
         [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid:string]",
    ),
    ("xautoclaim", "6.2.0", "key group consumer min-idle-time:string start:string [COUNT count] [JUSTID]"),
    // sparse arrays
    ("arset", "8.8.0", "key index value [value ...]"),
    ("armset", "8.8.0", "key index value [index value ...]"),
    ("arget", "8.8.0", "key index"),
    ("armget", "8.8.0", "key index [index ...]"),
    ("arlen", "8.8.0", "key"),
    ("arcount", "8.8.0", "key"),
    ("ardel", "8.8.0", "key index [index ...]"),
    ("ardelrange", "8.8.0", "key start end [start end ...]"),
    ("argetrange", "8.8.0", "key start end"),
    ("arscan", "8.8.0", "key start end [LIMIT limit]"),
    (
        "argrep",
        "8.8.0",
        "key start end <predicate: EXACT value | MATCH value | GLOB pattern | RE regex> \
         [<predicate: EXACT value | MATCH value | GLOB pattern | RE regex> ...] \
         [combine: AND | OR] [LIMIT limit] [WITHVALUES] [NOCASE]",
    ),
    ("arop", "8.8.0", "key start end <operation: SUM | MIN | MAX | AND | OR | XOR | MATCH value | USED>"),
    ("arinsert", "8.8.0", "key value [value ...]"),
    ("arnext", "8.8.0", "key"),
    ("arseek", "8.8.0", "key index"),
    ("arring", "8.8.0", "key size value [value ...]"),
    ("arlastitems", "8.8.0", "key count [REV]"),
    ("arinfo", "8.8.0", "key [FULL]"),
    // vector sets (Redis 8; a module in Redis, whose COMMAND DOCS lists no arguments)
    (
        "vadd",
        "8.0.0",
        "key [REDUCE dim:integer] <format: FP32 | VALUES> vector element [CAS] [quant_type: NOQUANT | BIN | Q8] \
         [EF build-exploration-factor:integer] [SETATTR attributes] [M numlinks:integer]",
    ),
    ("vrem", "8.0.0", "key element"),
    (
        "vsim",
        "8.0.0",
        "key <format: ELE | FP32 | VALUES> vector_or_element [WITHSCORES] [WITHATTRIBS] [COUNT num:integer] \
         [EPSILON delta:double] [EF search-exploration-factor:integer] [FILTER expression] \
         [FILTER-EF max-filtering-effort:integer] [TRUTH] [NOTHREAD]",
    ),
    ("vdim", "8.0.0", "key"),
    ("vcard", "8.0.0", "key"),
    ("vemb", "8.0.0", "key element [RAW]"),
    ("vlinks", "8.0.0", "key element [WITHSCORES]"),
    ("vinfo", "8.0.0", "key"),
    ("vsetattr", "8.0.0", "key element json"),
    ("vgetattr", "8.0.0", "key element"),
    ("vrandmember", "8.0.0", "key [count]"),
    ("vismember", "8.2.0", "key element"),
    ("vrange", "8.4.0", "key start end [count]"),
];

/// `(parent|sub, since, summary, syntax)` for the subcommands of container commands.
pub static SUBCOMMANDS: &[(&str, &str, &str, &str)] = &[
    ("client|id", "5.0.0", "Returns the unique id of this connection.", ""),
    ("client|getname", "2.6.9", "Returns the name of this connection.", ""),
    ("client|setname", "2.6.9", "Names this connection.", "connection-name"),
    ("client|info", "6.2.0", "Returns details about this connection.", ""),
    (
        "client|list",
        "2.4.0",
        "Lists the open connections.",
        "[TYPE <client-type: NORMAL | MASTER | REPLICA | PUBSUB>] [ID client-id:integer [client-id:integer ...]]",
    ),
    (
        "client|kill",
        "2.4.0",
        "Closes connections picked by address or by filters.",
        "<filter: ip:port | [ID client-id:integer] [TYPE <client-type: NORMAL | MASTER | SLAVE | REPLICA | PUBSUB>] \
         [USER username] [ADDR ip:port] [LADDR ip:port] [SKIPME <yes-no: YES | NO>] [MAXAGE maxage:integer]>",
    ),
    ("client|setinfo", "7.2.0", "Records the client library name or version.", "<attr: LIB-NAME libname | LIB-VER libver>"),
    ("client|no-evict", "7.0.0", "Sets the connection's eviction exemption.", "<enabled: ON | OFF>"),
    ("client|no-touch", "7.2.0", "Sets whether this connection's reads touch keys.", "<enabled: ON | OFF>"),
    ("client|reply", "3.2.0", "Turns replies to this connection on, off or off for one command.", "<action: ON | OFF | SKIP>"),
    ("client|unblock", "5.0.0", "Wakes a connection blocked in a command.", "client-id:integer [unblock-type: TIMEOUT | ERROR]"),
    ("client|getredir", "6.0.0", "Returns the tracking redirection id.", ""),
    (
        "client|tracking",
        "6.0.0",
        "Controls server-assisted client-side caching for the connection.",
        "<status: ON | OFF> [REDIRECT client-id:integer] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]",
    ),
    ("client|trackinginfo", "6.2.0", "Returns information about server-assisted client-side caching for the connection.", ""),
    ("client|caching", "6.0.0", "Instructs the server whether to track the keys in the next request.", "<mode: YES | NO>"),
    ("client|pause", "3.0.0", "Suspends commands processing.", "timeout:integer [mode: WRITE | ALL]"),
    ("client|unpause", "6.2.0", "Resumes processing of clients that were paused.", ""),
    ("client|help", "5.0.0", "Lists the CLIENT subcommands.", ""),
    ("config|get", "2.0.0", "Returns the values of configuration parameters.", "parameter [parameter ...]"),
    ("config|set", "2.0.0", "Sets configuration parameters.", "parameter value [parameter value ...]"),
    ("config|resetstat", "2.0.0", "Zeroes the server's statistics.", ""),
    ("config|rewrite", "2.8.0", "Writes the running configuration to the configuration file.", ""),
    ("config|help", "5.0.0", "Lists the CONFIG subcommands.", ""),
    ("command|count", "2.8.13", "Returns the number of commands.", ""),
    ("command|docs", "7.0.0", "Returns documentation about commands.", "[command-name [command-name ...]]"),
    ("command|info", "2.8.13", "Returns details about commands.", "[command-name [command-name ...]]"),
    (
        "command|list",
        "7.0.0",
        "Returns the command names, optionally filtered.",
        "[FILTERBY <filterby: MODULE module-name | ACLCAT category | PATTERN pattern>]",
    ),
    ("command|getkeys", "2.8.13", "Extracts the key names from a full command.", "command [arg [arg ...]]"),
    ("command|getkeysandflags", "7.0.0", "Extracts the key names and access flags from a full command.", "command [arg [arg ...]]"),
    ("command|help", "5.0.0", "Lists the COMMAND subcommands.", ""),
    ("memory|usage", "4.0.0", "Estimates the memory a key uses.", "key [SAMPLES count]"),
    ("memory|stats", "4.0.0", "Returns memory usage details.", ""),
    ("memory|doctor", "4.0.0", "Reports memory problems.", ""),
    ("memory|purge", "4.0.0", "Asks the allocator to release memory.", ""),
    ("memory|malloc-stats", "4.0.0", "Returns allocator statistics.", ""),
    ("memory|help", "4.0.0", "Lists the MEMORY subcommands.", ""),
    ("slowlog|get", "2.2.12", "Returns the slow log's entries.", "[count:integer]"),
    ("module|list", "4.0.0", "Returns all loaded modules.", ""),
    ("module|load", "4.0.0", "Loads a module.", "path [arg [arg ...]]"),
    ("module|unload", "4.0.0", "Unloads a module.", "name"),
    ("module|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
    ("slowlog|len", "2.2.12", "Returns the number of entries in the slow log.", ""),
    ("slowlog|reset", "2.2.12", "Clears all entries from the slow log.", ""),
    ("slowlog|help", "6.2.0", "Show helpful text about the different subcommands.", ""),
    (
        "hotkeys|start",
        "8.6.0",
        "Starts hotkeys tracking.",
        "<metrics: METRICS count:integer [CPU] [NET]> [COUNT k:integer] [DURATION seconds] [SAMPLE ratio:integer] [SLOTS count:integer slot:integer [slot:integer ...]]",
    ),
    ("hotkeys|stop", "8.6.0", "Stops hotkeys tracking.", ""),
    ("hotkeys|get", "8.6.0", "Returns lists of top K hotkeys depending on metrics chosen in HOTKEYS START command.", ""),
    ("hotkeys|reset", "8.6.0", "Release the resources used for hotkey tracking.", ""),
    ("hotkeys|help", "8.6.0", "Show helpful text about the different subcommands.", ""),
    ("latency|latest", "2.8.13", "Returns the latest latency samples for all events.", ""),
    ("latency|history", "2.8.13", "Returns timestamp-latency samples for an event.", "event"),
    ("latency|reset", "2.8.13", "Resets the latency data for one or more events.", "[event [event ...]]"),
    ("latency|graph", "2.8.13", "Returns a latency graph for an event.", "event"),
    ("latency|doctor", "2.8.13", "Returns a human-readable latency analysis report.", ""),
    ("latency|histogram", "7.0.0", "Returns the cumulative distribution of latencies of a subset or all commands.", "[command [command ...]]"),
    ("latency|help", "2.8.13", "Returns helpful text about the different subcommands.", ""),
    ("pubsub|channels", "2.8.0", "Returns the active channels.", "[pattern]"),
    ("pubsub|numsub", "2.8.0", "Returns a count of subscribers to channels.", "[channel [channel ...]]"),
    ("pubsub|numpat", "2.8.0", "Returns a count of unique pattern subscriptions.", ""),
    ("pubsub|shardchannels", "7.0.0", "Returns the active shard channels.", "[pattern]"),
    ("pubsub|shardnumsub", "7.0.0", "Returns the count of subscribers of shard channels.", "[shardchannel [shardchannel ...]]"),
    ("pubsub|help", "6.2.0", "Returns helpful text about the different subcommands.", ""),
    ("acl|whoami", "6.0.0", "Returns the authenticated username of the current connection.", ""),
    ("acl|users", "6.0.0", "Lists all ACL users.", ""),
    ("acl|list", "6.0.0", "Dumps the effective rules in ACL file format.", ""),
    ("acl|setuser", "6.0.0", "Creates and modifies an ACL user and its rules.", "username [rule [rule ...]]"),
    ("acl|deluser", "6.0.0", "Deletes ACL users, and terminates their connections.", "username [username ...]"),
    ("acl|getuser", "6.0.0", "Lists the ACL rules of a user.", "username"),
    ("acl|dryrun", "7.0.0", "Simulates the execution of a command by a user, without executing the command.", "username command [arg [arg ...]]"),
    ("acl|cat", "6.0.0", "Lists the ACL categories, or the commands inside a category.", "[category]"),
    ("acl|genpass", "6.0.0", "Generates a pseudorandom, secure password that can be used to identify ACL users.", "[bits:integer]"),
    ("acl|log", "6.0.0", "Lists recent security events generated due to ACL rules.", "[operation: count:integer | RESET]"),
    ("acl|help", "6.0.0", "Returns helpful text about the different subcommands.", ""),
    ("script|load", "2.6.0", "Loads a server-side Lua script to the script cache.", "script"),
    ("script|exists", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache.", "sha1 [sha1 ...]"),
    ("script|flush", "2.6.0", "Removes all server-side Lua scripts from the script cache.", "[flush-type: ASYNC | SYNC]"),
    ("script|kill", "2.6.0", "Terminates a server-side Lua script during execution.", ""),
    ("script|debug", "3.2.0", "Sets the debug mode of server-side Lua scripts.", "<mode: YES | SYNC | NO>"),
    ("script|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
    ("function|load", "7.0.0", "Creates a library.", "[REPLACE] function-code"),
    ("function|delete", "7.0.0", "Deletes a library and its functions.", "library-name"),
    ("function|flush", "7.0.0", "Deletes all libraries and functions.", "[flush-type: ASYNC | SYNC]"),
    ("function|list", "7.0.0", "Returns information about all libraries.", "[LIBRARYNAME library-name-pattern] [WITHCODE]"),
    ("function|dump", "7.0.0", "Dumps all libraries into a serialized binary payload.", ""),
    ("function|restore", "7.0.0", "Restores all libraries from a payload.", "serialized-value [policy: FLUSH | APPEND | REPLACE]"),
    ("function|stats", "7.0.0", "Returns information about a function during execution.", ""),
    ("function|kill", "7.0.0", "Terminates a function during execution.", ""),
    ("function|help", "7.0.0", "Returns helpful text about the different subcommands.", ""),
    ("object|encoding", "2.2.3", "Returns the internal encoding of a value.", "key"),
    ("object|refcount", "2.2.3", "Returns the reference count of a value.", "key"),
    ("object|idletime", "2.2.3", "Returns the seconds since a key was last accessed.", "key"),
    ("object|freq", "4.0.0", "Returns the access frequency counter of a key.", "key"),
    ("object|help", "6.2.0", "Lists the OBJECT subcommands.", ""),
    (
        "xgroup|create",
        "5.0.0",
        "Creates a consumer group.",
        "key group <id-selector: id:string | $> [MKSTREAM] [ENTRIESREAD entries-read:integer]",
    ),
    (
        "xgroup|setid",
        "5.0.0",
        "Sets the last-delivered ID of a consumer group.",
        "key group <id-selector: id:string | $> [ENTRIESREAD entries-read:integer]",
    ),
    ("xgroup|destroy", "5.0.0", "Destroys a consumer group.", "key group"),
    ("xgroup|createconsumer", "6.2.0", "Creates a consumer in a consumer group.", "key group consumer"),
    ("xgroup|delconsumer", "5.0.0", "Deletes a consumer from a consumer group.", "key group consumer"),
    ("xgroup|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
    ("xinfo|stream", "5.0.0", "Returns information about a stream.", "key [FULL [COUNT count]]"),
    ("xinfo|groups", "5.0.0", "Returns a list of the consumer groups of a stream.", "key"),
    ("xinfo|consumers", "5.0.0", "Returns a list of the consumers in a consumer group.", "key group"),
    ("xinfo|help", "5.0.0", "Returns helpful text about the different subcommands.", ""),
];

/// Argument types as `COMMAND DOCS` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    Key,
    String,
    Integer,
    Double,
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl ArgType {
    pub fn as_str(self) -> &'static str {
        match self {
            ArgType::Key => "key",
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::OneOf => "oneof",
            ArgType::Block => "block",
        }
    }

    fn from_name(s: &str) -> Option<ArgType> {
        Some(match s {
            "key" => ArgType::Key,
            "string" => ArgType::String,
            "integer" => ArgType::Integer,
            "double" => ArgType::Double,
            "pattern" => ArgType::Pattern,
            "unix-time" => ArgType::UnixTime,
            _ => return None,
        })
    }
}

/// One node of a command's argument tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: String,
    pub kind: ArgType,
    /// The literal that introduces the argument (`EX` for `EX seconds`; the token itself for a
    /// pure token).
    pub token: Option<String>,
    pub optional: bool,
    pub multiple: bool,
    /// With `multiple`: the token is repeated before every value.
    pub multiple_token: bool,
    /// Members of a `oneof` or `block`; empty otherwise.
    pub args: Vec<Arg>,
}

impl Arg {
    fn new(name: String, kind: ArgType) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            multiple_token: false,
            args: Vec::new(),
        }
    }

    /// Flag names in the order Redis lists them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.optional {
            v.push("optional");
        }
        if self.multiple {
            v.push("multiple");
        }
        if self.multiple_token {
            v.push("multiple_token");
        }
        v
    }
}

/// A command's (or subcommand's) documentation as parsed from the tables above.
#[derive(Debug)]
pub struct Doc {
    pub name: &'static str,
    pub since: &'static str,
    /// Set for subcommands only: plain commands take theirs from the command table.
    pub summary: Option<&'static str>,
    pub args: Vec<Arg>,
}

struct Docs {
    by_name: HashMap<&'static str, Doc>,
}

fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        let mut by_name = HashMap::new();
        // A line that fails to parse is a table bug (the unit tests parse every line); the server
        // then reports the command without arguments rather than failing.
        for &(name, since, line) in SYNTAX {
            let args = parse(line).unwrap_or_default();
            by_name.insert(name, Doc { name, since, summary: None, args });
        }
        for &(name, since, summary, line) in SUBCOMMANDS {
            let args = parse(line).unwrap_or_default();
            by_name.insert(name, Doc { name, since, summary: Some(summary), args });
        }
        Docs { by_name }
    })
}

/// The documentation of `name` (lowercase; `parent|sub` for a subcommand).
pub fn doc(name: &str) -> Option<&'static Doc> {
    docs().by_name.get(name)
}

/// The subcommands of container command `parent` (lowercase), in table order.
pub fn subcommands(parent: &str) -> impl Iterator<Item = &'static Doc> + '_ {
    SUBCOMMANDS.iter().filter_map(move |&(name, ..)| {
        let (p, _) = name.split_once('|')?;
        if p == parent {
            doc(name)
        } else {
            None
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Parsing: text -> nodes (brackets matched) -> arguments (repeats folded, tokens attached).

#[derive(Clone, Debug, PartialEq)]
enum Node<'a> {
    Word(&'a str),
    Ellipsis,
    Group { optional: bool, label: Option<&'a str>, alts: Vec<Vec<Node<'a>>> },
}

fn is_token(w: &str) -> bool {
    // The stream commands' one-symbol tokens (`=`, `~`, `*`, `$`, `>`) are literal too.
    // `""` is MIGRATE's empty-string token (the key argument left empty for KEYS).
    matches!(w, "=" | "~" | "*" | "$" | ">" | "\"\"")
        || w.bytes().any(|b| b.is_ascii_uppercase())
            && w.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// What COMMAND DOCS shows as a token's text: the word, or nothing for `""`.
fn token_text(tok: &str) -> String {
    if tok == "\"\"" {
        String::new()
    } else {
        tok.to_string()
    }
}

/// A pure token's argument name: the word in lowercase (`empty_string` for `""`).
fn token_name(tok: &str) -> String {
    if tok == "\"\"" {
        "empty_string".to_string()
    } else {
        tok.to_ascii_lowercase()
    }
}

/// Splits a line into words and the punctuation `[ ] < > |`.
fn lex(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, ch) in s.char_indices() {
        let punct = matches!(ch, '[' | ']' | '<' | '>' | '|');
        if punct || ch.is_whitespace() {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
            if punct {
                out.push(&s[i..i + 1]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

/// Parses alternatives until `close` (or the end when `close` is None).
fn parse_alts<'a>(
    toks: &[&'a str],
    pos: &mut usize,
    close: Option<&str>,
) -> Result<Vec<Vec<Node<'a>>>, String> {
    let mut alts = vec![Vec::new()];
    while *pos < toks.len() {
        let t = toks[*pos];
        *pos += 1;
        match t {
            "[" | "<" => {
                let label = match toks.get(*pos) {
                    Some(w) if w.len() > 1 && w.ends_with(':') => {
                        *pos += 1;
                        Some(&w[..w.len() - 1])
                    }
                    _ => None,
                };
                let inner = parse_alts(toks, pos, Some(if t == "[" { "]" } else { ">" }))?;
                if inner.iter().any(Vec::is_empty) {
                    return Err(format!("empty alternative in group at token {pos}"));
                }
                alts.last_mut().expect("never empty").push(Node::Group {
                    optional: t == "[",
                    label,
                    alts: inner,
                });
            }
            "]" | ">" => {
                return if close == Some(t) { Ok(alts) } else { Err(format!("unexpected '{t}'")) };
            }
            "|" => alts.push(Vec::new()),
            "..." => alts.last_mut().expect("never empty").push(Node::Ellipsis),
            w => alts.last_mut().expect("never empty").push(Node::Word(w)),
        }
    }
    match close {
        Some(c) => Err(format!("missing '{c}'")),
        None => Ok(alts),
    }
}

/// Parses one syntax line into its argument tree.
pub fn parse(line: &str) -> Result<Vec<Arg>, String> {
    let toks = lex(line);
    let mut pos = 0;
    let alts = parse_alts(&toks, &mut pos, None)?;
    if alts.len() != 1 {
        return Err("'|' outside a group".into());
    }
    build_seq(&alts[0], false)
}

/// A sequence item after repeats are folded.
enum Item<'n, 'a> {
    Node(&'n Node<'a>),
    /// `x [x ...]`: the nodes of `x`, repeated; optional when it stood alone as `[x ...]`.
    Repeat {
        nodes: &'n [Node<'a>],
        optional: bool,
    },
}

impl Item<'_, '_> {
    fn token(&self) -> Option<&str> {
        match self {
            Item::Node(Node::Word(w)) if is_token(w) => Some(w),
            _ => None,
        }
    }

    /// Can follow a token as its value: a value word, a required group or a required repeat.
    fn is_value(&self) -> bool {
        match self {
            Item::Node(Node::Word(w)) => !is_token(w),
            Item::Node(Node::Group { optional, .. }) => !optional,
            Item::Node(Node::Ellipsis) => false,
            Item::Repeat { optional, .. } => !optional,
        }
    }
}

/// `in_group`: the nodes are one alternative of a group, where a leading token with several
/// values takes the optional items after them into its block too (`[TO host port [FORCE]]`
/// is Redis's block TO of host, port and an optional FORCE).
fn build_seq(nodes: &[Node], in_group: bool) -> Result<Vec<Arg>, String> {
    // Fold repeats: `[x ...]` either repeats the identical nodes right before it or stands alone.
    let mut items: Vec<Item> = Vec::new();
    let mut plain_since = 0; // index in `items` from which entries are still unfolded nodes
    for (i, node) in nodes.iter().enumerate() {
        let rep = match node {
            Node::Group { optional: true, label: None, alts } if alts.len() == 1 => {
                match alts[0].split_last() {
                    Some((Node::Ellipsis, body)) if !body.is_empty() => Some(body),
                    _ => None,
                }
            }
            Node::Ellipsis => return Err("'...' outside a repeat group".into()),
            _ => None,
        };
        let Some(body) = rep else {
            items.push(Item::Node(node));
            continue;
        };
        let n = body.len();
        let prev_ok = items.len() >= plain_since + n && i >= n && nodes[i - n..i] == *body;
        if prev_ok {
            items.truncate(items.len() - n);
            let start = i - n;
            items.push(Item::Repeat { nodes: &nodes[start..i], optional: false });
        } else {
            items.push(Item::Repeat { nodes: body, optional: true });
        }
        plain_since = items.len();
    }

    // Attach tokens to the values that follow them.
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        if let Some(tok) = items[i].token() {
            let mut j = i + 1;
            while j < items.len() && items[j].is_value() {
                j += 1;
            }
            if in_group && i == 0 && j - i > 2 {
                j = items.len();
            }
            let values = &items[i + 1..j];
            let mut arg = match values.len() {
                0 => Arg::new(token_name(tok), ArgType::PureToken),
                1 => {
                    let mut a = build_item(&values[0])?;
                    // An unlabelled choice after a token is named by the token (`AGGREGATE
                    // <SUM | MIN | MAX>` is "aggregate").
                    if matches!(values[0], Item::Node(Node::Group { label: None, .. }))
                        && a.kind == ArgType::OneOf
                    {
                        a.name = tok.to_ascii_lowercase();
                    }
                    a
                }
                _ => {
                    let mut members = Vec::new();
                    for v in values {
                        members.push(build_item(v)?);
                    }
                    let name = members.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join("_");
                    let mut b = Arg::new(name, ArgType::Block);
                    b.args = members;
                    b
                }
            };
            if arg.token.is_some() {
                return Err(format!("two tokens in a row before '{}'", arg.name));
            }
            arg.token = Some(token_text(tok));
            out.push(arg);
            i = j;
        } else {
            out.push(build_item(&items[i])?);
            i += 1;
        }
    }
    Ok(out)
}

/// Builds one alternative: a single argument, or a block of several.
fn build_alt(nodes: &[Node], label: Option<&str>) -> Result<Arg, String> {
    let mut args = build_seq(nodes, true)?;
    let mut arg = if args.len() == 1 {
        args.pop().expect("one element")
    } else {
        let name = args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join("_");
        let mut b = Arg::new(name, ArgType::Block);
        b.args = args;
        b
    };
    if let Some(l) = label {
        arg.name = l.to_string();
    }
    Ok(arg)
}

fn build_item(item: &Item) -> Result<Arg, String> {
    match item {
        Item::Node(Node::Word(w)) if is_token(w) => {
            let mut a = Arg::new(token_name(w), ArgType::PureToken);
            a.token = Some(token_text(w));
            Ok(a)
        }
        Item::Node(Node::Word(w)) => Ok(value_arg(w)?),
        Item::Node(Node::Ellipsis) => Err("stray '...'".into()),
        Item::Node(Node::Group { optional, label, alts }) => {
            let mut arg = if alts.len() == 1 {
                build_alt(&alts[0], *label)?
            } else {
                let mut members = Vec::new();
                for alt in alts {
                    members.push(build_alt(alt, None)?);
                }
                let name = match label {
                    Some(l) => l.to_string(),
                    None => members.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join("_"),
                };
                let mut o = Arg::new(name, ArgType::OneOf);
                o.args = members;
                o
            };
            // `[[x]]` or `[x [y]]` stay one optional level: Redis has no "doubly optional".
            arg.optional |= *optional;
            Ok(arg)
        }
        Item::Repeat { nodes, optional } => {
            let mut arg = build_alt(nodes, None)?;
            if arg.multiple {
                return Err(format!("nested repeat of '{}'", arg.name));
            }
            arg.multiple = true;
            arg.multiple_token = arg.token.is_some();
            arg.optional |= *optional;
            Ok(arg)
        }
    }
}

/// A value word, `name` or `name:type`.
fn value_arg(w: &str) -> Result<Arg, String> {
    let (name, kind) = match w.rsplit_once(':') {
        // `ip:port` is a name, not a type annotation.
        Some((n, t)) if ArgType::from_name(t).is_some() => (n, ArgType::from_name(t).expect("checked")),
        _ => (w, infer_type(w)),
    };
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_:".contains(&b))
    {
        return Err(format!("bad argument name '{w}'"));
    }
    Ok(Arg::new(name.to_string(), kind))
}

/// The type a value argument has by its name, following Redis's documentation habits; a line
/// overrides it with `name:type` where a command differs (`min:double`, `increment:double`).
fn infer_type(name: &str) -> ArgType {
    match name {
        "key" | "newkey" | "source" | "destination" => ArgType::Key,
        "pattern" => ArgType::Pattern,
        "unix-time-seconds" | "unix-time-milliseconds" => ArgType::UnixTime,
        "score" | "timeout" => ArgType::Double,
        "count" | "start" | "stop" | "end" | "index" | "offset" | "numkeys" | "increment" | "decrement"
        | "seconds" | "milliseconds" | "cursor" | "limit" | "rank" | "num-matches" | "len" | "weight"
        | "size" | "maxage" => ArgType::Integer,
        _ => ArgType::String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::all;

    fn find<'a>(args: &'a [Arg], name: &str) -> &'a Arg {
        args.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("no argument {name} in {args:#?}"))
    }

    #[test]
    fn every_command_has_a_syntax_line_that_parses() {
        for &(name, _, line) in SYNTAX {
            parse(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
        }
        for &(name, _, _, line) in SUBCOMMANDS {
            parse(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
        }
        for s in all() {
            let d = doc(s.name).unwrap_or_else(|| panic!("{} has no syntax line", s.name));
            assert!(d.since.split('.').count() == 3, "{}: since {}", s.name, d.since);
            // A container documents its arguments per subcommand.
            if subcommands(s.name).next().is_some() {
                assert!(d.args.is_empty(), "{}: container with arguments", s.name);
            }
        }
        for &(name, ..) in SUBCOMMANDS {
            let (parent, _) = name.split_once('|').expect("parent|sub");
            assert!(crate::command::lookup(parent.as_bytes()).is_some(), "{name}: no such container");
        }
    }

    #[test]
    fn table_names_are_unique_and_lowercase() {
        let mut seen = std::collections::HashSet::new();
        for name in SYNTAX.iter().map(|e| e.0).chain(SUBCOMMANDS.iter().map(|e| e.0)) {
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(name, name.to_ascii_lowercase());
        }
    }

    #[test]
    fn hset_folds_the_repeated_pair_into_a_multiple_block() {
        let args = parse("key field value [field value ...]").unwrap();
        assert_eq!(args.len(), 2);
        assert_eq!(args[0].kind, ArgType::Key);
        let b = &args[1];
        assert_eq!(
            (b.name.as_str(), b.kind, b.multiple, b.optional),
            ("field_value", ArgType::Block, true, false)
        );
        assert_eq!(b.args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["field", "value"]);
    }

    #[test]
    fn set_has_labelled_optional_oneofs_with_tokens() {
        let args = &doc("set").unwrap().args;
        let cond = find(args, "condition");
        assert_eq!((cond.kind, cond.optional), (ArgType::OneOf, true));
        let nx = find(&cond.args, "nx");
        assert_eq!((nx.kind, nx.token.as_deref()), (ArgType::PureToken, Some("NX")));
        let ifeq = find(&cond.args, "ifeq-value");
        assert_eq!((ifeq.kind, ifeq.token.as_deref()), (ArgType::String, Some("IFEQ")));
        let get = find(args, "get");
        assert_eq!((get.kind, get.optional), (ArgType::PureToken, true));
        let exp = find(args, "expiration");
        let px = find(&exp.args, "milliseconds");
        assert_eq!((px.kind, px.token.as_deref(), px.optional), (ArgType::Integer, Some("PX"), false));
        assert_eq!(find(&exp.args, "unix-time-seconds").kind, ArgType::UnixTime);
    }

    #[test]
    fn tokens_take_blocks_repeats_and_oneofs() {
        let args = parse("numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>] [LIMIT offset count]").unwrap();
        let key = find(&args, "key");
        assert!(key.multiple && !key.optional);
        let w = find(&args, "weight");
        assert_eq!(
            (w.token.as_deref(), w.multiple, w.optional, w.multiple_token),
            (Some("WEIGHTS"), true, true, false)
        );
        let agg = find(&args, "aggregate");
        assert_eq!((agg.kind, agg.token.as_deref(), agg.optional), (ArgType::OneOf, Some("AGGREGATE"), true));
        let lim = find(&args, "offset_count");
        assert_eq!((lim.kind, lim.token.as_deref(), lim.args.len()), (ArgType::Block, Some("LIMIT"), 2));
    }

    #[test]
    fn repeated_token_pairs_are_multiple_token() {
        let args = parse("key [GET pattern [GET pattern ...]]").unwrap();
        let g = &args[1];
        assert_eq!((g.name.as_str(), g.kind, g.token.as_deref()), ("pattern", ArgType::Pattern, Some("GET")));
        assert!(g.optional && g.multiple && g.multiple_token);
    }

    #[test]
    fn lone_repeat_is_optional_multiple() {
        let args = parse("[section [section ...]]").unwrap();
        assert_eq!(args.len(), 1);
        assert!(args[0].optional && args[0].multiple);
    }

    #[test]
    fn malformed_lines_are_errors() {
        for bad in ["key [value", "key value]", "a | b", "key ...", "[NX | ]", "Key"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
