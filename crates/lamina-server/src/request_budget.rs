//! A bound on the memory of unfinished requests across connections.
//!
//! One connection's unfinished request is bounded by its protocol (a DSL
//! line by 1 MiB, a Redis request by [`crate::resp::MAX_REQUEST`]), but a
//! thousand connections each sending most of one would hold gigabytes.
//! Every connection of the DSL, spatial and Redis ports given the same
//! [`RequestBudget`] holds a [`Share`] of it: after each read, the bytes
//! it keeps for requests not yet complete, or on the Redis port the room
//! it makes for a bulk string's announced length if that is more (counted
//! before the room is made). A connection whose share would take the
//! total past the limit gets an error reply and is closed, its bytes
//! released, without allocating that room; a share is given back when its
//! connection ends, however it ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The budget when physical memory is unknown: 1 GiB.
const FALLBACK_LIMIT: usize = 1 << 30;

/// The default budget: a quarter of physical memory (`MemTotal` of
/// `/proc/meminfo`), or 1 GiB where that is unknown.
pub fn default_limit() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| mem_total(&info))
        .map_or(FALLBACK_LIMIT, |bytes| bytes / 4)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let kib: usize = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The bytes all connections may hold for unfinished requests, and what
/// they hold now.
#[derive(Debug)]
pub struct RequestBudget {
    limit: usize,
    held: AtomicUsize,
}

impl RequestBudget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: usize) -> Self {
        RequestBudget {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// The limit, bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// What the connections hold now, bytes.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// A new connection's share, holding nothing yet.
    pub fn share(self: &Arc<Self>) -> Share {
        Share {
            budget: Arc::clone(self),
            bytes: 0,
        }
    }
}

impl Default for RequestBudget {
    /// A budget of [`default_limit`] bytes.
    fn default() -> Self {
        RequestBudget::new(default_limit())
    }
}

/// A connection's part of a [`RequestBudget`], given back when dropped.
#[derive(Debug)]
pub struct Share {
    budget: Arc<RequestBudget>,
    bytes: usize,
}

/// A connection's unfinished request would take the budget past its limit.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "unfinished request of {bytes} bytes: this server holds at most {limit} bytes of unfinished requests across its connections; closing the connection"
)]
pub struct OverBudget {
    /// What the connection would have held.
    pub bytes: usize,
    /// The budget's limit.
    pub limit: usize,
}

impl Share {
    /// Sets what this connection holds to `bytes`. Growing it fails, and
    /// changes nothing, if the total would pass the limit; shrinking it
    /// always succeeds.
    pub fn hold(&mut self, bytes: usize) -> Result<(), OverBudget> {
        let held = &self.budget.held;
        if bytes == self.bytes {
            // The common case (a read of whole requests): no shared write.
            return Ok(());
        }
        if bytes < self.bytes {
            held.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
        } else {
            let more = bytes - self.bytes;
            let limit = self.budget.limit;
            held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |total| {
                total.checked_add(more).filter(|&t| t <= limit)
            })
            .map_err(|_| OverBudget { bytes, limit })?;
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_stop_at_the_limit() {
        let budget = Arc::new(RequestBudget::new(100));
        let mut a = budget.share();
        let mut b = budget.share();
        assert_eq!(a.hold(60), Ok(()));
        assert_eq!(b.hold(40), Ok(()));
        assert_eq!(budget.held(), 100);
        // Over the limit: refused, nothing changes.
        assert_eq!(
            b.hold(41),
            Err(OverBudget {
                bytes: 41,
                limit: 100
            })
        );
        assert_eq!(budget.held(), 100);
        assert_eq!(a.hold(10), Ok(()));
        assert_eq!(b.hold(90), Ok(()));
        assert_eq!(budget.held(), 100);
        drop(b);
        assert_eq!(budget.held(), 10);
        assert_eq!(
            a.hold(usize::MAX),
            Err(OverBudget {
                bytes: usize::MAX,
                limit: 100
            })
        );
        drop(a);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn the_default_is_a_quarter_of_memory() {
        let info = "MemTotal:        8048576 kB\nMemFree:          123 kB\n";
        assert_eq!(mem_total(info), Some(8_048_576 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        let limit = default_limit();
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|i| mem_total(&i));
        assert_eq!(limit, total.map_or(FALLBACK_LIMIT, |t| t / 4));
    }
}
