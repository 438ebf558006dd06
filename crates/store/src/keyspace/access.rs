//! A key's access field: Redis's 24-bit `lru`, read by OBJECT IDLETIME / OBJECT FREQ and by
//! eviction.
//!
//! - LRU (every policy but the LFU ones): the LRU clock, unix seconds modulo 2^24 (it wraps
//!   every 194 days; an idle time is measured assuming at most one wrap, as Redis does).
//! - LFU (`allkeys-lfu`, `volatile-lfu`): bits 8..24 the last decrement time in minutes modulo
//!   2^16, bits 0..8 a logarithmic access counter. A new key starts at 5 ([`LFU_INIT_VAL`]) so
//!   it is not evicted before it had a chance to be read; each access first decays the counter
//!   by one per `lfu-decay-time` minutes elapsed, then increments it with probability
//!   `1 / ((counter - 5) * lfu-log-factor + 1)`, so that 255 means about a million accesses
//!   with the default factor 10.
//!
//! Pure functions of the field, the time and a random number: the keyspace stores the field
//! (in spare bits of its entries, see `entry.rs`), the engine decides the mode.

use crate::Millis;

/// The mask of the 24-bit field.
pub const ACCESS_MAX: u32 = (1 << 24) - 1;
/// Where a new key's LFU counter starts.
pub const LFU_INIT_VAL: u32 = 5;

/// How lookups update the access field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AccessMode {
    #[default]
    Lru,
    Lfu {
        /// `lfu-log-factor`.
        log_factor: u32,
        /// `lfu-decay-time`, minutes per decrement (0: never decays).
        decay_minutes: u32,
    },
}

/// The LRU clock at `now`: seconds modulo 2^24.
pub fn lru_clock(now: Millis) -> u32 {
    ((now.max(0) / 1000) as u64 & ACCESS_MAX as u64) as u32
}

/// Milliseconds since the access recorded in `field` (LRU mode), assuming at most one wrap.
pub fn lru_idle_ms(field: u32, now: Millis) -> u64 {
    let clock = lru_clock(now);
    let secs = if clock >= field { clock - field } else { clock + (ACCESS_MAX - field) + 1 };
    secs as u64 * 1000
}

/// The field that makes a key look idle for `idle_secs` at `now` (RESTORE .. IDLETIME).
pub fn lru_with_idle(idle_secs: i64, now: Millis) -> u32 {
    let clock = lru_clock(now) as i64;
    let idle = idle_secs.clamp(0, ACCESS_MAX as i64);
    ((clock - idle).rem_euclid(ACCESS_MAX as i64 + 1)) as u32
}

fn minutes(now: Millis) -> u32 {
    ((now.max(0) / 60_000) as u64 & 0xFFFF) as u32
}

/// The field of a new key under LFU.
pub fn lfu_new(now: Millis) -> u32 {
    (minutes(now) << 8) | LFU_INIT_VAL
}

/// The field holding counter `freq` (RESTORE .. FREQ), decay time now.
pub fn lfu_with_freq(freq: u32, now: Millis) -> u32 {
    (minutes(now) << 8) | freq.min(255)
}

/// The counter after decay (what OBJECT FREQ reports and LFU eviction compares).
pub fn lfu_decayed(field: u32, now: Millis, decay_minutes: u32) -> u32 {
    let ldt = field >> 8;
    let counter = field & 0xFF;
    let now_min = minutes(now);
    let elapsed = if now_min >= ldt { now_min - ldt } else { 65535 - ldt + now_min };
    let periods = elapsed.checked_div(decay_minutes).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// One access under LFU: decay, then the logarithmic increment (`r` uniform in [0, 1)).
pub fn lfu_touch(field: u32, now: Millis, log_factor: u32, decay_minutes: u32, r: f64) -> u32 {
    let mut counter = lfu_decayed(field, now, decay_minutes);
    if counter < 255 {
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        let p = 1.0 / (base * log_factor as f64 + 1.0);
        if r < p {
            counter += 1;
        }
    }
    (minutes(now) << 8) | counter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_idle_survives_one_wrap() {
        let t = 1_700_000_000_000;
        let f = lru_clock(t);
        assert_eq!(lru_idle_ms(f, t + 5_000), 5_000);
        assert_eq!(lru_idle_ms(lru_with_idle(100, t), t), 100_000);
        // Written just before the clock wraps, read just after.
        let before = (ACCESS_MAX as i64) * 1000;
        assert_eq!(lru_idle_ms(lru_clock(before), before + 3_000), 3_000);
    }

    #[test]
    fn lfu_counts_logarithmically_and_decays() {
        let t = 1_700_000_000_000;
        let mut f = lfu_new(t);
        assert_eq!(lfu_decayed(f, t, 1), 5);
        // r = 0 always increments: from 5 up to the 255 cap.
        for _ in 0..300 {
            f = lfu_touch(f, t, 10, 1, 0.0);
        }
        assert_eq!(f & 0xFF, 255);
        // r close to 1 increments only while the probability is 1 (counter <= 5).
        let g = lfu_touch(lfu_with_freq(100, t), t, 10, 1, 0.99);
        assert_eq!(g & 0xFF, 100);
        // Ten minutes later with one decrement per minute: 255 - 10.
        assert_eq!(lfu_decayed(f, t + 600_000, 1), 245);
        assert_eq!(lfu_decayed(f, t + 600_000, 0), 255);
    }
}
