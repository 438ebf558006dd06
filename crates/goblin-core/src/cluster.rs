//! Cluster mode (`--cluster-enabled yes`): this server presents itself as a Redis Cluster of
//! one node that owns all 16384 hash slots, so that cluster clients (redis-py's RedisCluster,
//! ioredis's Cluster, go-redis's ClusterClient, `redis-cli -c`) connect to it unchanged.
//!
//! What a client of a cluster relies on, and nothing more:
//! - the topology: CLUSTER SLOTS, SHARDS, NODES, INFO, MYID, MYSHARDID, LINKS; the node's
//!   address is the one the asking client connected to (there is no bus, no peer that would
//!   announce it), and its ID is drawn at startup;
//! - the slot rules: a command's keys (by the command table's key specifications) must hash
//!   to one slot (`CROSSSLOT` otherwise), a transaction's commands together too (checked at
//!   EXEC, which then discards it, as Redis does), and only database 0 exists;
//! - READONLY, READWRITE and ASKING answer OK; no key is ever elsewhere, so no MOVED or ASK.
//!
//! Slot membership is not indexed: COUNTKEYSINSLOT and GETKEYSINSLOT walk the keyspace (they
//! are administration commands, used when resharding, which one node never does).

use crate::conn::Conn;
use crate::server::Server;
use engine::CommandSpec;
use resp::reply;

pub const SLOTS: u16 = 16384;
const CROSSSLOT: &[u8] = b"CROSSSLOT Keys in request don't hash to the same slot";
const DISABLED: &[u8] = b"ERR This instance has cluster support disabled";

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), Redis Cluster's key hash.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize])
}

/// The hash slot of `key`: of the part between the first `{` and the next `}` when that part
/// is not empty (a hash tag), else of the whole key.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let close = key[open + 1..].iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &key[open + 1..open + 1 + close])
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS - 1)
}

/// The one slot every key of a request hashes to: Ok(None) without keys, Err when they differ.
fn request_slot(spec: &'static CommandSpec, args: &[&[u8]]) -> Result<Option<u16>, ()> {
    let mut slot = None;
    for key in crate::hotkeys::command_keys(spec, args) {
        let s = key_slot(key);
        if slot.is_some_and(|first| first != s) {
            return Err(());
        }
        slot = Some(s);
    }
    Ok(slot)
}

/// This node's identity, drawn at startup.
pub struct Cluster {
    pub node_id: String,
}

impl Cluster {
    pub fn new() -> Cluster {
        Cluster { node_id: engine::ReplId::random().to_string() }
    }
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::new()
    }
}

impl Server {
    /// In cluster mode, the refusal of a request whose keys hash to more than one slot, or that
    /// names a database other than 0 (None: it may run).
    pub(crate) fn cluster_refusal(
        &self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
    ) -> Option<&'static [u8]> {
        if !self.cfg.cluster_enabled {
            return None;
        }
        // The slot first, then what the command itself refuses (Redis's order).
        if request_slot(spec, args).is_err() {
            return Some(CROSSSLOT);
        }
        match spec.name {
            "select" if args.get(1).and_then(|a| engine::util::parse_i64(a)).is_some_and(|n| n != 0) => {
                return Some(b"ERR SELECT is not allowed in cluster mode")
            }
            "move" => return Some(b"ERR MOVE is not allowed in cluster mode"),
            "swapdb" => return Some(b"ERR SWAPDB is not allowed in cluster mode"),
            "copy" if args.iter().any(|a| a.eq_ignore_ascii_case(b"db")) => {
                return Some(b"ERR Copying to another database is not allowed in cluster mode")
            }
            _ => {}
        }
        None
    }

    /// At EXEC in cluster mode: the refusal of a transaction whose commands' keys do not all
    /// hash to one slot.
    pub(crate) fn cluster_transaction_refusal(&self, queued: &[Vec<Vec<u8>>]) -> Option<&'static [u8]> {
        if !self.cfg.cluster_enabled {
            return None;
        }
        let mut slot = None;
        for cmd in queued {
            let argv: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
            let Some(spec) = argv.first().and_then(|n| engine::lookup(n)) else { continue };
            match request_slot(spec, &argv) {
                Err(()) => return Some(CROSSSLOT),
                Ok(Some(s)) if slot.is_some_and(|first| first != s) => return Some(CROSSSLOT),
                Ok(Some(s)) => slot = Some(s),
                Ok(None) => {}
            }
        }
        None
    }

    /// In cluster mode, the refusal of a script's command: its keys in more than one slot, or
    /// (unless the script may cross slots) in another slot than the script's first. The
    /// script's slot is set by its declared keys, else by the first command with keys.
    pub(crate) fn script_cluster_refusal(
        &self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        cross_slot_ok: bool,
    ) -> Option<&'static [u8]> {
        if !self.cfg.cluster_enabled {
            return None;
        }
        match request_slot(spec, args) {
            Err(()) => Some(b"ERR Script attempted to access a non local key in a cluster node"),
            Ok(Some(s)) if !cross_slot_ok => crate::scripting::SCRIPT_SLOT.with(|slot| match slot.get() {
                None => {
                    slot.set(Some(s));
                    None
                }
                Some(first) if first != s => {
                    Some(&b"ERR Script attempted to access keys that do not hash to the same slot"[..])
                }
                Some(_) => None,
            }),
            _ => None,
        }
    }

    /// CLUSTER, READONLY, READWRITE, ASKING.
    pub(crate) fn cluster_command(&mut self, c: &mut Conn, args: &[&[u8]]) {
        if !self.cfg.cluster_enabled {
            return reply::error(&mut c.out, DISABLED);
        }
        let name = args[0].to_ascii_lowercase();
        if name != b"cluster" {
            // One node owns every slot: nothing to redirect, nothing to read elsewhere.
            return reply::ok(&mut c.out);
        }
        let sub = args[1].to_ascii_lowercase();
        let (ip, port) = self.cluster_endpoint(c);
        let id = self.cluster.node_id.clone();
        let out = &mut c.out;
        let arity = |n: usize| args.len() == n;
        match sub.as_slice() {
            b"info" if arity(2) => {
                let keys = [
                    ("cluster_state", "ok".to_string()),
                    ("cluster_slots_assigned", SLOTS.to_string()),
                    ("cluster_slots_ok", SLOTS.to_string()),
                    ("cluster_slots_pfail", "0".into()),
                    ("cluster_slots_fail", "0".into()),
                    ("cluster_known_nodes", "1".into()),
                    ("cluster_size", "1".into()),
                    ("cluster_current_epoch", "1".into()),
                    ("cluster_my_epoch", "1".into()),
                    ("cluster_stats_messages_sent", "0".into()),
                    ("cluster_stats_messages_received", "0".into()),
                    ("total_cluster_links_buffer_limit_exceeded", "0".into()),
                ];
                let text: String = keys.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect();
                reply::verbatim(out, c.proto, b"txt", text.as_bytes());
            }
            b"myid" | b"myshardid" if arity(2) => reply::bulk(out, id.as_bytes()),
            b"slots" if arity(2) => {
                reply::array_len(out, 1);
                reply::array_len(out, 3);
                reply::integer(out, 0);
                reply::integer(out, (SLOTS - 1) as i64);
                reply::array_len(out, 4);
                reply::bulk(out, ip.as_bytes());
                reply::integer(out, port as i64);
                reply::bulk(out, id.as_bytes());
                reply::map_len(out, c.proto, 0);
            }
            b"shards" if arity(2) => {
                reply::array_len(out, 1);
                reply::map_len(out, c.proto, 2);
                reply::bulk(out, b"slots");
                reply::array_len(out, 2);
                reply::integer(out, 0);
                reply::integer(out, (SLOTS - 1) as i64);
                reply::bulk(out, b"nodes");
                reply::array_len(out, 1);
                reply::map_len(out, c.proto, 7);
                reply::bulk(out, b"id");
                reply::bulk(out, id.as_bytes());
                reply::bulk(out, b"port");
                reply::integer(out, port as i64);
                reply::bulk(out, b"ip");
                reply::bulk(out, ip.as_bytes());
                reply::bulk(out, b"endpoint");
                reply::bulk(out, ip.as_bytes());
                reply::bulk(out, b"role");
                reply::bulk(out, b"master");
                reply::bulk(out, b"replication-offset");
                reply::integer(out, self.engine.repl.offset as i64);
                reply::bulk(out, b"health");
                reply::bulk(out, b"online");
            }
            b"nodes" if arity(2) => {
                // The bus port Redis would use (this node has no bus; 0 when it would not fit).
                let bus = u16::try_from(u32::from(port) + 10000).unwrap_or(0);
                let line = format!("{id} {ip}:{port}@{bus} myself,master - 0 0 1 connected 0-{}\n", SLOTS - 1);
                reply::verbatim(out, c.proto, b"txt", line.as_bytes());
            }
            b"links" if arity(2) => reply::array_len(out, 0),
            b"keyslot" if arity(3) => reply::integer(out, key_slot(args[2]) as i64),
            b"countkeysinslot" | b"getkeysinslot" => {
                let wanted = if sub.as_slice() == b"countkeysinslot" { 3 } else { 4 };
                if !arity(wanted) {
                    return crate::commands::wrong_sub_arity(out, args[0], args[1]);
                }
                // Redis's checks and errors: integers first, then their ranges.
                let Some(slot) = engine::util::parse_i64(args[2]) else {
                    return reply::error(out, b"ERR value is not an integer or out of range");
                };
                let limit = match args.get(3).map(|a| engine::util::parse_i64(a)) {
                    None => i64::MAX,
                    Some(Some(n)) => n,
                    Some(None) => return reply::error(out, b"ERR value is not an integer or out of range"),
                };
                if !(0..SLOTS as i64).contains(&slot) || limit < 0 {
                    let msg: &[u8] =
                        if wanted == 3 { b"ERR Invalid slot" } else { b"ERR Invalid slot or number of keys" };
                    return reply::error(out, msg);
                }
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                let now = crate::server::now_ms();
                let mut keys: Vec<Vec<u8>> = Vec::new();
                self.engine.keyspace(0).for_each(|k, _, deadline| {
                    let live = deadline.is_none_or(|t| t >= now);
                    if live && keys.len() < limit && key_slot(k) == slot as u16 {
                        keys.push(k.to_vec());
                    }
                });
                if wanted == 3 {
                    reply::integer(out, keys.len() as i64);
                } else {
                    reply::array_len(out, keys.len());
                    for k in &keys {
                        reply::bulk(out, k);
                    }
                }
            }
            b"help" => {
                let lines: &[&str] = &[
                    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "COUNTKEYSINSLOT <slot>",
                    "GETKEYSINSLOT <slot> <count>",
                    "INFO",
                    "KEYSLOT <key>",
                    "LINKS",
                    "MYID",
                    "MYSHARDID",
                    "NODES",
                    "SHARDS",
                    "SLOTS",
                    "HELP",
                ];
                reply::array_len(out, lines.len());
                for l in lines {
                    reply::simple(out, l.as_bytes());
                }
            }
            // Everything that changes a topology: one node has none to change.
            b"addslots" | b"addslotsrange" | b"delslots" | b"delslotsrange" | b"meet" | b"forget"
            | b"replicate" | b"failover" | b"reset" | b"setslot" | b"flushslots" | b"bumpepoch"
            | b"set-config-epoch" | b"saveconfig" | b"count-failure-reports" | b"replicas" | b"slaves" => {
                reply::error(
                    out,
                    format!(
                        "ERR CLUSTER {} is not supported: goblin-core's cluster mode is one node owning every slot",
                        String::from_utf8_lossy(args[1]).to_uppercase()
                    )
                    .as_bytes(),
                )
            }
            // A subcommand this server answers, with the wrong number of arguments.
            b"info" | b"myid" | b"myshardid" | b"slots" | b"shards" | b"nodes" | b"links" | b"keyslot" => {
                crate::commands::wrong_sub_arity(out, args[0], args[1])
            }
            _ => reply::error(out, &engine::errors::unknown_subcommand_text(args[0], args[1])),
        }
    }

    /// The address a cluster client should use for this node: the one it connected to (a
    /// Unix-socket client gets the first TCP bind address).
    fn cluster_endpoint(&self, c: &Conn) -> (String, u16) {
        match c.laddr.rsplit_once(':') {
            Some((ip, port)) if port != "0" => (
                ip.trim_start_matches('[').trim_end_matches(']').to_string(),
                port.parse().unwrap_or(self.cfg.port),
            ),
            _ => (
                self.cfg
                    .bind
                    .first()
                    .map(|b| b.trim_start_matches('-').to_string())
                    .unwrap_or_else(|| "127.0.0.1".into()),
                self.cfg.port,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT` of redis-server.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"{user1000}.following"));
        // An empty tag hashes the whole key; only the first `{` opens a tag.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }
}
