//! Refusal lines logged at most once a minute per kind: an attacker who
//! sends thousands of refused requests (HTTP requests from a web page,
//! failed handshakes, connections over a cap) must not fill the log or
//! the disk it is on. A line that is let through says how many like it
//! were held back since the last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds between two lines of one kind.
pub const INTERVAL_SECS: u64 = 60;

/// One kind of refusal line; a `static` per kind.
#[derive(Debug)]
pub struct LogLimit {
    /// Seconds since the epoch of the last line let through (0: never).
    last: AtomicU64,
    /// Lines held back since then.
    held_back: AtomicU64,
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit::new()
    }
}

impl LogLimit {
    /// A kind of line never logged yet.
    pub const fn new() -> LogLimit {
        LogLimit {
            last: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when a line may be logged now, `n` the lines held back
    /// since the last one; `None` (and one more held back) otherwise.
    pub fn allow(&self) -> Option<u64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.allow_at(now)
    }

    fn allow_at(&self, now: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Relaxed);
        if (last == 0 || now >= last.saturating_add(INTERVAL_SECS))
            && self
                .last
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.held_back.swap(0, Ordering::Relaxed));
        }
        self.held_back.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// The suffix naming the lines held back (empty for none).
pub fn held_back(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} more like it in the last {INTERVAL_SECS} s not logged)")
    }
}

#[cfg(test)]
mod tests {
    use super::{held_back, LogLimit, INTERVAL_SECS};

    #[test]
    fn one_line_a_minute_with_the_count_of_the_rest() {
        let limit = LogLimit::new();
        assert_eq!(limit.allow_at(1_000), Some(0));
        for t in 1_000..1_000 + INTERVAL_SECS {
            assert_eq!(limit.allow_at(t), None);
        }
        assert_eq!(limit.allow_at(1_000 + INTERVAL_SECS), Some(INTERVAL_SECS));
        assert_eq!(limit.allow_at(1_000 + INTERVAL_SECS + 1), None);
        assert_eq!(held_back(0), "");
        assert!(held_back(7).contains("7 more"));
    }
}
