//! Server and connection commands. Most need connection or server state and are marked
//! `Handler::Server`: the server crate dispatches them by name. The rest run here.

use crate::command::{spec, CommandSpec, Flags, Handler};
use crate::ctx::Ctx;
use resp::reply;

const STALE_FAST: u32 = Flags::STALE | Flags::FAST;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, STALE_FAST, (0, 0, 0), "connection", "Returns the server's liveliness response.", Handler::Data(ping)),
    spec("echo", 2, STALE_FAST, (0, 0, 0), "connection", "Returns the given string.", Handler::Data(echo)),
    // Redis Cluster's commands, answered as a Redis without cluster support answers them (a
    // client probing for a cluster learns there is none).
    spec("cluster", -2, 0, (0, 0, 0), "cluster", "A container for Redis Cluster commands.", Handler::Server),
    spec("readonly", 1, CONN_FAST, (0, 0, 0), "cluster", "Enables read-only queries for a connection to a Redis Cluster replica node.", Handler::Server),
    spec("readwrite", 1, CONN_FAST, (0, 0, 0), "cluster", "Enables read-write queries for a connection to a Redis Cluster replica node.", Handler::Server),
    spec("asking", 1, Flags::FAST, (0, 0, 0), "cluster", "Signals that a cluster client is following an -ASK redirect.", Handler::Server),
    // Dispatched by the server crate (goblin-core/src/commands/): they need connection or
    // server state. Arity and flags as Redis 7 reports them in COMMAND INFO.
    spec("info", -1, LOADING_STALE, NO_KEYS, "server", "Returns information and statistics about the server.", Handler::Server),
    spec("command", -1, LOADING_STALE, NO_KEYS, "server", "Returns detailed information about all commands.", Handler::Server),
    spec("client", -2, 0, NO_KEYS, "connection", "A container for client connection commands.", Handler::Server),
    spec("config", -2, 0, NO_KEYS, "server", "A container for server configuration commands.", Handler::Server),
    spec("hello", -1, CONN_NO_AUTH, NO_KEYS, "connection", "Handshakes with the server.", Handler::Server),
    spec("auth", -2, CONN_NO_AUTH, NO_KEYS, "connection", "Authenticates the connection.", Handler::Server),
    spec("quit", -1, CONN_NO_AUTH, NO_KEYS, "connection", "Closes the connection.", Handler::Server),
    spec("reset", 1, CONN_NO_AUTH, NO_KEYS, "connection", "Resets the connection.", Handler::Server),
    spec("acl", -2, 0, NO_KEYS, "server", "A container for Access List Control commands.", Handler::Server),
    spec("select", 2, LOADING_STALE | Flags::FAST, NO_KEYS, "connection", "Changes the selected database.", Handler::Server),
    spec("time", 1, LOADING_STALE | Flags::FAST, NO_KEYS, "server", "Returns the server time.", Handler::Server),
    spec("role", 1, CONN_FAST, NO_KEYS, "server", "Returns the replication role.", Handler::Server),
    spec("replicaof", 3, Flags::ADMIN | Flags::NOSCRIPT | LOADING_STALE, NO_KEYS, "server", "Configures a server as replica of another, or promotes it to a master.", Handler::Server),
    spec("failover", -1, Flags::ADMIN | Flags::NOSCRIPT | Flags::STALE, NO_KEYS, "server", "Starts a coordinated failover from a server to one of its replicas.", Handler::Server),
    spec("slaveof", 3, Flags::ADMIN | Flags::NOSCRIPT | LOADING_STALE, NO_KEYS, "server", "Sets a Redis server as a replica of another, or promotes it to being a master.", Handler::Server),
    spec("memory", -2, 0, NO_KEYS, "server", "A container for memory diagnostics commands.", Handler::Server),
    // Moves keys to another server over the network (goblin-core/src/commands/migrate.rs).
    spec("migrate", -6, Flags::WRITE, (3, 3, 1), "generic", "Atomically transfers a key from one Redis instance to another.", Handler::Server),
    // Introspection (goblin-core/src/introspection.rs).
    spec("monitor", 1, Flags::ADMIN | Flags::NOSCRIPT | LOADING_STALE, NO_KEYS, "server", "Listens for all requests received by the server in real-time.", Handler::Server),
    spec("slowlog", -2, 0, NO_KEYS, "server", "A container for slow log commands.", Handler::Server),
    spec("module", -2, 0, NO_KEYS, "server", "A container for module commands.", Handler::Server),
    spec("lolwut", -1, Flags::READONLY | Flags::FAST, NO_KEYS, "server", "Displays computer art and the Redis version", Handler::Server),
    spec("latency", -2, 0, NO_KEYS, "server", "A container for latency diagnostics commands.", Handler::Server),
    spec("hotkeys", -2, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "A container for hotkeys tracking commands.", Handler::Server),
    spec("save", 1, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "Synchronously saves the database(s) to disk.", Handler::Server),
    spec("bgsave", -1, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "Asynchronously saves the database(s) to disk.", Handler::Server),
    spec("bgrewriteaof", 1, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "Asynchronously rewrites the append-only file to disk.", Handler::Server),
    spec("lastsave", 1, LOADING_STALE | Flags::FAST, NO_KEYS, "server", "Returns the Unix timestamp of the last successful save to disk.", Handler::Server),
    spec("goblin.dumpworld", -1, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "Streams a fork-time native snapshot as one bulk reply, or EOF-marked (EOF).", Handler::Server),
    spec("goblin.firehose", 1, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "Turns the connection into a firehose replication subscriber (goblin-core replicas only).", Handler::Server),
    spec("wait", 3, Flags::BLOCKING, NO_KEYS, "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", Handler::Server),
    spec("waitaof", 4, Flags::BLOCKING, NO_KEYS, "generic", "Blocks until the connection's earlier writes are in the durable log (the Kafka journal), and on replicas that can recover them.", Handler::Server),
    spec("replconf", -1, Flags::ADMIN | Flags::NOSCRIPT | LOADING_STALE, NO_KEYS, "server", "Sets what a SYNC or PSYNC on this connection sends (rdb-only, rdb-filter-only).", Handler::Server),
    spec("sync", 1, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "Sends a point-in-time RDB file of the dataset (redis-cli --rdb), then closes the connection.", Handler::Server),
    spec("psync", -3, Flags::ADMIN | Flags::NOSCRIPT, NO_KEYS, "server", "As SYNC, after REPLCONF rdb-only 1: a FULLRESYNC line, then the RDB file.", Handler::Server),
    spec("goblin.load", 2, Flags::ADMIN | Flags::NOSCRIPT | Flags::WRITE, NO_KEYS, "server", "Replaces the dataset with a native snapshot file.", Handler::Server),
    spec("debug", -2, Flags::ADMIN | CONN, NO_KEYS, "server", "A container for debugging commands.", Handler::Server),
    spec("shutdown", -1, Flags::ADMIN | CONN, NO_KEYS, "server", "Shuts down the server.", Handler::Server),
    spec("multi", 1, CONN_FAST, NO_KEYS, "transactions", "Starts a transaction.", Handler::Server),
    spec("exec", 1, CONN, NO_KEYS, "transactions", "Executes all commands in a transaction.", Handler::Server),
    spec("discard", 1, CONN_FAST, NO_KEYS, "transactions", "Discards a transaction.", Handler::Server),
    spec("watch", -2, CONN_FAST, (1, -1, 1), "transactions", "Monitors changes to keys to determine the execution of a transaction.", Handler::Server),
    spec("unwatch", 1, CONN_FAST, NO_KEYS, "transactions", "Forgets about watched keys of a transaction.", Handler::Server),
    // Pub/sub (goblin-core/src/pubsub.rs). Shard channels take key positions, as in Redis
    // (cluster routing); they are not keys and nothing here touches the keyspace.
    spec("subscribe", -2, PUBSUB_CONN, NO_KEYS, "pubsub", "Listens for messages published to channels.", Handler::Server),
    spec("unsubscribe", -1, PUBSUB_CONN, NO_KEYS, "pubsub", "Stops listening to messages posted to channels.", Handler::Server),
    spec("psubscribe", -2, PUBSUB_CONN, NO_KEYS, "pubsub", "Listens for messages published to channels that match one or more patterns.", Handler::Server),
    spec("punsubscribe", -1, PUBSUB_CONN, NO_KEYS, "pubsub", "Stops listening to messages published to channels that match one or more patterns.", Handler::Server),
    spec("ssubscribe", -2, PUBSUB_CONN, (1, -1, 1), "pubsub", "Listens for messages published to shard channels.", Handler::Server),
    spec("sunsubscribe", -1, PUBSUB_CONN, (1, -1, 1), "pubsub", "Stops listening to messages posted to shard channels.", Handler::Server),
    spec("publish", 3, Flags::PUBSUB | LOADING_STALE | Flags::FAST | Flags::MAY_REPLICATE, NO_KEYS, "pubsub", "Posts a message to a channel.", Handler::Server),
    spec("spublish", 3, Flags::PUBSUB | LOADING_STALE | Flags::FAST | Flags::MAY_REPLICATE, (1, 1, 1), "pubsub", "Post a message to a shard channel.", Handler::Server),
    spec("pubsub", -2, 0, NO_KEYS, "pubsub", "A container for Pub/Sub commands.", Handler::Server),
    // Scripting (goblin-core/src/scripting/). Keys are given by numkeys (movable).
    spec("eval", -3, SCRIPT_FLAGS, NO_KEYS, "scripting", "Executes a server-side Lua script.", Handler::Server),
    spec("evalsha", -3, SCRIPT_FLAGS, NO_KEYS, "scripting", "Executes a server-side Lua script by SHA1 digest.", Handler::Server),
    spec("eval_ro", -3, SCRIPT_FLAGS | Flags::READONLY, NO_KEYS, "scripting", "Executes a read-only server-side Lua script.", Handler::Server),
    spec("evalsha_ro", -3, SCRIPT_FLAGS | Flags::READONLY, NO_KEYS, "scripting", "Executes a read-only server-side Lua script by SHA1 digest.", Handler::Server),
    spec("script", -2, Flags::NOSCRIPT, NO_KEYS, "scripting", "A container for Lua scripts management commands.", Handler::Server),
    spec("fcall", -3, SCRIPT_FLAGS, NO_KEYS, "scripting", "Invokes a function.", Handler::Server),
    spec("fcall_ro", -3, SCRIPT_FLAGS | Flags::READONLY, NO_KEYS, "scripting", "Invokes a read-only function.", Handler::Server),
    // FUNCTION's state-changing subcommands are writes, but the container itself is not
    // flagged (as in Redis): a replica refuses them by subcommand (goblin-core).
    spec("function", -2, 0, NO_KEYS, "scripting", "A container for function commands.", Handler::Server),
];

/// Subscription commands: pub/sub, not in scripts, served while loading or stale.
const PUBSUB_CONN: u32 = Flags::PUBSUB | CONN;

const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
/// EVAL and friends: not callable from scripts, served while stale, keys by numkeys.
const SCRIPT_FLAGS: u32 = Flags::NOSCRIPT | Flags::STALE | Flags::MOVABLEKEYS;
const LOADING_STALE: u32 = Flags::LOADING | Flags::STALE;
/// Connection-level commands: not allowed in scripts, served while loading or stale.
const CONN: u32 = Flags::NOSCRIPT | LOADING_STALE;
const CONN_FAST: u32 = CONN | Flags::FAST;
const CONN_NO_AUTH: u32 = CONN_FAST | Flags::NO_AUTH;

/// PING [message]
fn ping(_c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    match args.len() {
        1 => reply::simple(out, b"PONG"),
        2 => reply::bulk(out, args[1]),
        _ => crate::errors::wrong_arity(out, args[0]),
    }
}

/// ECHO message
fn echo(_c: &mut Ctx, out: &mut Vec<u8>, args: &[&[u8]]) {
    reply::bulk(out, args[1]);
}
