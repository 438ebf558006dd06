//! `oom-score-adj` and `oom-score-adj-values`, as Redis has them: the kernel's OOM killer is
//! told which of the server's processes to sacrifice first. The three values are for a
//! primary, a replica and a forked snapshot child (default `0 200 800`: under memory pressure
//! the child dies before the replica, the replica before the primary).
//!
//! With `relative` (or `yes`) each value is added to the score the process had before the
//! server first changed it; with `absolute` it is written as it is; with `no` the server
//! leaves the score alone, and puts back the one it found if it had changed it. Scores are
//! clamped to the kernel's range, -1000..=1000. Only a privileged process may lower its score.

use std::io;

const PROC_FILE: &str = "/proc/self/oom_score_adj";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    No,
    Relative,
    Absolute,
}

impl Mode {
    /// `yes` is `relative`, as in Redis (CONFIG GET shows it as `yes`).
    pub fn parse(text: &[u8]) -> Option<Mode> {
        match text.to_ascii_lowercase().as_slice() {
            b"no" => Some(Mode::No),
            b"yes" | b"relative" => Some(Mode::Relative),
            b"absolute" => Some(Mode::Absolute),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::No => "no",
            Mode::Relative => "yes",
            Mode::Absolute => "absolute",
        }
    }
}

/// Which of the three values applies to a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Primary = 0,
    Replica = 1,
    Child = 2,
}

#[derive(Clone, Debug)]
pub struct OomScore {
    pub mode: Mode,
    pub values: [i32; 3],
    /// The score the process had when the server first changed it (None: unchanged).
    base: Option<i32>,
}

impl Default for OomScore {
    fn default() -> Self {
        OomScore { mode: Mode::No, values: [0, 200, 800], base: None }
    }
}

/// `oom-score-adj-values`: three integers in -2000..=2000, with Redis's errors.
pub fn parse_values(text: &[u8]) -> Result<[i32; 3], String> {
    let words: Vec<&[u8]> = text.split(|&b| b == b' ').filter(|w| !w.is_empty()).collect();
    if words.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    let mut values = [0i32; 3];
    for (v, w) in values.iter_mut().zip(&words) {
        match std::str::from_utf8(w).ok().and_then(|w| w.parse::<i64>().ok()) {
            Some(n) if (-2000..=2000).contains(&n) => *v = n as i32,
            _ => return Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into()),
        }
    }
    if values[1] < values[0] || values[2] < values[1] {
        tracing::warn!(
            "oom-score-adj-values {} {} {}: a replica's value below the primary's, or the child's below the replica's, may not work for an unprivileged process",
            values[0],
            values[1],
            values[2]
        );
    }
    Ok(values)
}

impl OomScore {
    /// Sets this process's score for `class` as the settings say (or restores the score it
    /// found, with `no`). Err: the file could not be read or written; nothing changed then.
    pub fn apply(&mut self, class: Class) -> io::Result<()> {
        if self.mode == Mode::No {
            return match self.base {
                Some(base) => {
                    write(base)?;
                    self.base = None;
                    Ok(())
                }
                None => Ok(()),
            };
        }
        let base = match self.base {
            Some(b) => b,
            None => read()?,
        };
        write(self.score(class, base))?;
        self.base = Some(base);
        Ok(())
    }

    /// The score a forked child sets for itself (None: `no`).
    pub fn child_score(&self) -> Option<i32> {
        if self.mode == Mode::No {
            return None;
        }
        // The child inherits the server's score: with `relative` its base is the server's.
        let base = self.base.unwrap_or(0);
        Some(self.score(Class::Child, base))
    }

    fn score(&self, class: Class, base: i32) -> i32 {
        let v = self.values[class as usize];
        let v = if self.mode == Mode::Relative { v + base } else { v };
        v.clamp(-1000, 1000)
    }

    /// CONFIG GET's `oom-score-adj-values`.
    pub fn values_text(&self) -> String {
        format!("{} {} {}", self.values[0], self.values[1], self.values[2])
    }
}

fn read() -> io::Result<i32> {
    let text = std::fs::read_to_string(PROC_FILE)?;
    text.trim().parse().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{PROC_FILE}: {e}")))
}

/// Writes `score` to this process's file (also used by a forked child for itself).
pub fn write(score: i32) -> io::Result<()> {
    std::fs::write(PROC_FILE, format!("{score}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_redis_checks_them() {
        assert_eq!(parse_values(b"0 200 800"), Ok([0, 200, 800]));
        assert_eq!(parse_values(b"-2000 0 2000"), Ok([-2000, 0, 2000]));
        assert!(parse_values(b"-2001 0 0").unwrap_err().contains("between -2000 and 2000"));
        assert!(parse_values(b"1 2 x").unwrap_err().contains("between -2000 and 2000"));
        assert_eq!(parse_values(b"1 2"), Err("wrong number of arguments".into()));
    }

    #[test]
    fn scores_are_relative_or_absolute_and_clamped() {
        let mut o = OomScore { mode: Mode::Relative, values: [10, 20, 900], base: None };
        assert_eq!(o.score(Class::Replica, 300), 320);
        assert_eq!(o.score(Class::Child, 300), 1000);
        o.mode = Mode::Absolute;
        assert_eq!(o.score(Class::Replica, 300), 20);
        o.values = [-1500, 0, 0];
        assert_eq!(o.score(Class::Primary, 0), -1000);
        assert_eq!(OomScore::default().child_score(), None);
        assert_eq!(Mode::parse(b"RELATIVE").map(Mode::name), Some("yes"));
    }
}
