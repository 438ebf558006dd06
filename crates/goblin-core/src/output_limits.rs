//! `client-output-buffer-limit`: how much unsent output a client may hold, per class, as in
//! Redis. Each class has a hard limit (past it the client is closed at once) and a soft limit
//! with a number of seconds (a client that stays past the soft limit longer than that is
//! closed); 0 turns a limit off. The classes: `normal` clients, `pubsub` clients (subscribed
//! to anything: a subscriber that stops reading is the usual way a server's memory runs away),
//! and `replica`, the redis-server replicas fed through SYNC/PSYNC (firehose subscribers have
//! fixed queues of their own; the replica class's hard limit bounds only the frames too large
//! for such a queue that wait for one subscriber, `replication::upstream::Spill`).
//!
//! Defaults are Redis's but for `normal`, whose hard limit is `--client-output-limit`
//! (256 MiB): Redis leaves normal clients unlimited; one client that never reads should not
//! grow this server without bound.

/// One class's limits, in bytes and seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Normal,
    Replica,
    Pubsub,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    pub replica: ClassLimit,
    pub pubsub: ClassLimit,
}

impl OutputLimits {
    /// Redis's defaults, with `normal_hard` for normal clients.
    pub fn with_normal_hard(normal_hard: u64) -> OutputLimits {
        OutputLimits {
            normal: ClassLimit { hard: normal_hard, soft: 0, soft_secs: 0 },
            replica: ClassLimit { hard: 256 << 20, soft: 64 << 20, soft_secs: 60 },
            pubsub: ClassLimit { hard: 32 << 20, soft: 8 << 20, soft_secs: 60 },
        }
    }

    pub fn class(&self, class: Class) -> &ClassLimit {
        match class {
            Class::Normal => &self.normal,
            Class::Replica => &self.replica,
            Class::Pubsub => &self.pubsub,
        }
    }

    /// CONFIG GET's value, as Redis prints it (`slave` for the replica class).
    pub fn text(&self) -> String {
        let g = |name: &str, l: &ClassLimit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_secs);
        format!("{} {} {}", g("normal", &self.normal), g("slave", &self.replica), g("pubsub", &self.pubsub))
    }

    /// `<class> <hard> <soft> <soft seconds>` groups applied over these limits (the classes
    /// not named keep theirs), with Redis's errors for a malformed value.
    pub fn parse_over(&self, val: &str) -> Result<OutputLimits, String> {
        let words: Vec<&str> = val.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut out = *self;
        for g in words.chunks(4) {
            let slot = match g[0].to_ascii_lowercase().as_str() {
                "normal" => &mut out.normal,
                "replica" | "slave" => &mut out.replica,
                "pubsub" => &mut out.pubsub,
                _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
            };
            let parsed =
                (crate::config::parse_bytes(g[1]), crate::config::parse_bytes(g[2]), g[3].parse::<i64>());
            let (Ok(hard), Ok(soft), Ok(secs)) = parsed else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()
                );
            };
            if secs < 0 {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()
                );
            }
            *slot = ClassLimit { hard, soft, soft_secs: secs as u64 };
        }
        Ok(out)
    }
}

/// Whether a client holding `pending` bytes of output (its exempt first bytes already taken
/// off) must be closed under `limit`, as Redis decides it: past the hard limit at once; past
/// the soft limit when it has been past it for more than `soft_secs` seconds. `soft_since`
/// is when it went past the soft limit (unix seconds), kept between calls and cleared when it
/// is back under.
pub fn over(limit: &ClassLimit, pending: u64, soft_since: &mut Option<u64>, now_secs: u64) -> bool {
    if limit.hard > 0 && pending >= limit.hard {
        return true;
    }
    if limit.soft > 0 && pending >= limit.soft {
        match *soft_since {
            None => *soft_since = Some(now_secs),
            Some(since) => return now_secs.saturating_sub(since) > limit.soft_secs,
        }
    } else {
        *soft_since = None;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_apply_over_the_current_limits_with_redis_errors() {
        let base = OutputLimits::with_normal_hard(0);
        assert_eq!(base.text(), "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60");
        let l = base.parse_over("pubsub 1mb 512kb 5 normal 10 0 0").unwrap();
        assert_eq!(l.pubsub, ClassLimit { hard: 1 << 20, soft: 512 << 10, soft_secs: 5 });
        assert_eq!(l.normal.hard, 10);
        assert_eq!(l.replica, base.replica);
        assert!(base.parse_over("normal 1mb 0").unwrap_err().starts_with("Wrong number"));
        assert!(base.parse_over("master 0 0 0").unwrap_err().starts_with("Invalid client class"));
        assert!(base.parse_over("normal x 0 0").unwrap_err().starts_with("Error in hard"));
        assert!(base.parse_over("normal 0 0 -1").unwrap_err().starts_with("Error in hard"));
    }

    #[test]
    fn the_soft_limit_closes_only_after_its_seconds() {
        let l = ClassLimit { hard: 100, soft: 10, soft_secs: 2 };
        let mut since = None;
        assert!(!over(&l, 5, &mut since, 1000));
        assert!(!over(&l, 20, &mut since, 1000));
        assert_eq!(since, Some(1000));
        assert!(!over(&l, 20, &mut since, 1002), "2 s past the soft limit is not more than 2");
        assert!(over(&l, 20, &mut since, 1003));
        // Back under the soft limit: the clock starts again.
        assert!(!over(&l, 5, &mut since, 1003));
        assert_eq!(since, None);
        assert!(over(&l, 100, &mut since, 1003), "the hard limit at once");
        let off = ClassLimit { hard: 0, soft: 0, soft_secs: 0 };
        assert!(!over(&off, u64::MAX, &mut since, 5000));
    }
}
