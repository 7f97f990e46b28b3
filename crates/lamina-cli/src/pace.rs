//! One writer's pace: `bench readwhilewriting --benchmark_write_rate_limit`
//! and `mixedhot --write-rate` both write at a fixed rate beside their
//! readers, so that engines are compared at the same write load.

use std::time::{Duration, Instant};

/// Paces a loop to `per_second` operations: it runs while it is behind
/// schedule and sleeps a millisecond at a time while it is ahead, so a
/// stop flag checked between operations is seen within a millisecond.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    began: Instant,
    per_second: f64,
}

impl Pacer {
    /// A schedule of `per_second` operations starting now.
    pub fn start(per_second: f64) -> Pacer {
        Pacer {
            began: Instant::now(),
            per_second,
        }
    }

    /// True if operation number `done` (from 0) is due; else sleeps a
    /// millisecond and returns false, for the caller to check its stop
    /// flag and ask again.
    pub fn ready(&self, done: u64) -> bool {
        if due(self.began.elapsed().as_secs_f64(), self.per_second, done) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
        false
    }
}

/// Whether operation `done` (from 0) is due `elapsed` seconds into a
/// schedule of `per_second` operations a second: the schedule's completed
/// operations by then, rounded down, exceed `done`.
fn due(elapsed: f64, per_second: f64, done: u64) -> bool {
    ((elapsed * per_second) as u64) > done
}

#[cfg(test)]
mod tests {
    use super::due;

    /// At 128 operations a second, operation n is due from (n + 1) / 128
    /// seconds on, and never before: counted over a schedule of 10 s in
    /// steps of 1/1024 s (exact in binary), exactly 128 per second are due.
    #[test]
    fn operations_are_due_on_schedule() {
        assert!(!due(0.0, 128.0, 0));
        assert!(!due(0.0078, 128.0, 0));
        assert!(due(0.0079, 128.0, 0));
        assert!(!due(0.0079, 128.0, 1));
        let mut done = 0u64;
        for step in 0..=10_240u64 {
            while due(step as f64 / 1024.0, 128.0, done) {
                done += 1;
            }
            // Never ahead of the schedule, never a whole operation behind.
            assert_eq!(done, step / 8, "at step {step}");
        }
    }
}
