//! maxmemory eviction: which keys go when used memory is above the limit.
//!
//! Approximated as Redis does: no global order is kept; each eviction samples
//! `maxmemory-samples` keys (all keys, or only keys with a deadline for the volatile-*
//! policies) and removes the best candidate of the sample: the longest idle (LRU), the lowest
//! decayed counter (LFU), the nearest deadline (TTL), or the first sampled (random). Redis
//! also keeps a pool of 16 good candidates across rounds; goblin samples afresh each round,
//! which is a little less precise and needs no state besides each key's 24-bit access field.
//!
//! Each eviction removes the key and emits `DEL key` into the pending batch; the server
//! commits the round as one batch of origin [`crate::Origin::Eviction`] before the command
//! that triggered it, so replicas and the journal see the DELs as they see expiries. A replica
//! never evicts (its data is its upstream's).

use crate::engine::Engine;
use store::keyspace::access::{self, AccessMode};
use store::Millis;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    #[default]
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub const ALL: [Policy; 8] = [
        Policy::NoEviction,
        Policy::AllKeysLru,
        Policy::AllKeysLfu,
        Policy::AllKeysRandom,
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// Parses a policy name, case-insensitively.
    pub fn parse(s: &[u8]) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name().as_bytes().eq_ignore_ascii_case(s))
    }

    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl
        )
    }
}

/// The eviction settings (`maxmemory-*`, `lfu-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictConfig {
    /// Bytes; 0 means no limit.
    pub maxmemory: u64,
    pub policy: Policy,
    pub samples: usize,
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
}

impl Default for EvictConfig {
    fn default() -> Self {
        EvictConfig {
            maxmemory: 0,
            policy: Policy::NoEviction,
            samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
        }
    }
}

impl EvictConfig {
    /// What the keyspace's access fields track under this configuration.
    pub fn access_mode(&self) -> AccessMode {
        if self.policy.is_lfu() {
            AccessMode::Lfu { log_factor: self.lfu_log_factor, decay_minutes: self.lfu_decay_time }
        } else {
            AccessMode::Lru
        }
    }
}

impl Engine {
    /// Applies eviction settings: the access fields follow the policy from now on.
    pub fn set_evict_config(&mut self, cfg: EvictConfig) {
        self.evict = cfg;
        let mode = cfg.access_mode();
        for db in 0..self.databases() {
            let ks = self.keyspace_mut(db);
            ks.set_access_mode(mode);
            // Without a limit the tables grow freely again (the server sets the room before
            // each command while there is one).
            if cfg.maxmemory == 0 {
                ks.set_growth_room(None);
            }
        }
    }

    /// Evicts keys until about `to_free` bytes (each key's `MEMORY USAGE` figure) are gone or
    /// nothing is evictable. Emits one `DEL` per key into the pending batch (the caller commits
    /// it as [`crate::Origin::Eviction`]). Returns true when enough was freed.
    pub fn evict(&mut self, now: Millis, to_free: u64) -> bool {
        let policy = self.evict.policy;
        if policy == Policy::NoEviction || self.replica || self.replaying {
            return false;
        }
        // Databases in turn, the largest first, each giving what its samples find; the DELs
        // carry their database as every mutation does.
        let was = self.db();
        let mut order: Vec<(usize, u32)> =
            self.nonempty_dbs().map(|(db, ks)| (usize::MAX - ks.len(), db)).collect();
        order.sort_unstable();
        let mut freed = 0u64;
        for (_, db) in order {
            self.select(db);
            freed += self.evict_selected(now, to_free - freed);
            if freed >= to_free {
                break;
            }
        }
        self.select(was);
        freed >= to_free
    }

    /// [`Engine::evict`] within the selected database: the bytes it freed, up to about
    /// `to_free`.
    fn evict_selected(&mut self, now: Millis, to_free: u64) -> u64 {
        let policy = self.evict.policy;
        let mut freed = 0u64;
        let mut sample = Vec::with_capacity(self.evict.samples.min(64));
        while freed < to_free {
            sample.clear();
            self.ks.sample_for_eviction(
                &mut self.rng,
                self.evict.samples.max(1),
                policy.volatile_only(),
                &mut sample,
            );
            let decay = self.evict.lfu_decay_time;
            // Higher score: better to evict.
            let score = |(_, deadline, field): &(Vec<u8>, Option<Millis>, u32)| -> u64 {
                match policy {
                    Policy::AllKeysLru | Policy::VolatileLru => access::lru_idle_ms(*field, now),
                    Policy::AllKeysLfu | Policy::VolatileLfu => {
                        255 - access::lfu_decayed(*field, now, decay) as u64
                    }
                    Policy::VolatileTtl => u64::MAX - deadline.map_or(u64::MAX, |d| d.max(0) as u64),
                    _ => 0,
                }
            };
            // max_by_key keeps the last of equal scores; the random policies take the first.
            let best = if matches!(policy, Policy::AllKeysRandom | Policy::VolatileRandom) {
                sample.first()
            } else {
                sample.iter().rev().max_by_key(|c| score(c))
            };
            let Some((key, _, _)) = best else { return freed };
            let key = key.clone();
            freed += self.ks.mem_usage(&key).unwrap_or(0) as u64 + 8;
            self.ks.delete(&key);
            self.stats.evicted_keys += 1;
            self.push_pending(&[b"DEL", &key]);
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{reply as run, take_muts};

    fn engine_with(policy: Policy) -> Engine {
        let mut e = Engine::default();
        e.set_evict_config(EvictConfig { maxmemory: 1, policy, samples: 5, ..Default::default() });
        e
    }

    #[test]
    fn evictions_emit_dels_and_respect_the_policy_family() {
        let mut e = engine_with(Policy::VolatileLru);
        run(&mut e, 1000, &["SET", "p", "v"]);
        run(&mut e, 1000, &["SET", "v1", "v", "PX", "100000"]);
        run(&mut e, 1000, &["SET", "v2", "v", "PX", "100000"]);
        take_muts(&mut e);
        // Asked for more than exists: takes both volatile keys, then stops short.
        assert!(!e.evict(2000, u64::MAX));
        let mut muts = take_muts(&mut e);
        muts.sort();
        assert_eq!(muts, ["DEL v1", "DEL v2"]);
        assert_eq!(e.stats.evicted_keys, 2);
        assert_eq!(run(&mut e, 2000, &["EXISTS", "p"]), ":1\r\n");
        // allkeys: a small amount frees one key.
        let mut e = engine_with(Policy::AllKeysRandom);
        run(&mut e, 1000, &["SET", "a", "v"]);
        run(&mut e, 1000, &["SET", "b", "v"]);
        take_muts(&mut e);
        assert!(e.evict(2000, 1));
        assert_eq!(take_muts(&mut e).len(), 1);
        assert_eq!(e.ks.len(), 1);
    }

    #[test]
    fn noeviction_and_replicas_never_evict() {
        let mut e = engine_with(Policy::NoEviction);
        run(&mut e, 1000, &["SET", "a", "v"]);
        assert!(!e.evict(2000, 1));
        let mut e = engine_with(Policy::AllKeysLru);
        run(&mut e, 1000, &["SET", "a", "v"]);
        e.replica = true;
        assert!(!e.evict(2000, 1));
        assert_eq!(e.ks.len(), 1);
    }

    #[test]
    fn lru_and_ttl_pick_the_best_sampled_candidate() {
        // With more samples than keys every key is in the sample: the choice is exact.
        let mut e = engine_with(Policy::AllKeysLru);
        e.evict.samples = 64;
        run(&mut e, 1_000, &["SET", "old", "v"]);
        run(&mut e, 50_000, &["SET", "new", "v"]);
        run(&mut e, 60_000, &["GET", "new"]);
        take_muts(&mut e);
        assert!(e.evict(60_000, 1));
        assert_eq!(take_muts(&mut e), ["DEL old"]);
        assert_eq!(run(&mut e, 60_000, &["OBJECT", "IDLETIME", "new"]), ":0\r\n");
        let mut e = engine_with(Policy::VolatileTtl);
        e.evict.samples = 64;
        run(&mut e, 1_000, &["SET", "late", "v", "PX", "90000"]);
        run(&mut e, 1_000, &["SET", "soon", "v", "PX", "5000"]);
        take_muts(&mut e);
        assert!(e.evict(2_000, 1));
        assert_eq!(take_muts(&mut e), ["DEL soon"]);
    }
}
