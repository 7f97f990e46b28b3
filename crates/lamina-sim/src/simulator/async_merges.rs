//! Asynchronous merges: time runs in flush intervals, merges take time
//! with their inputs busy, and a flush may stall.

use lamina_compaction::plan::{self, Action};

use super::Simulator;
use crate::{AsyncMerges, FlushRecord, Result, SimError};

/// A merge in progress (asynchronous merges).
#[derive(Debug)]
pub(super) struct Running {
    pub(super) finish: f64,
    pub(super) plan: plan::Plan,
}

impl Simulator {
    pub(super) fn flush_async(&mut self, bytes: u64, a: AsyncMerges) -> Result<FlushRecord> {
        let flush = self.view.flushes + 1;
        let arrival = if flush == 1 { 0.0 } else { self.clock + 1.0 };
        let mut peak = self.total_bytes;
        let mut merges = 0;
        while let Some(i) = self.next_to_finish(Some(arrival)) {
            peak = peak.max(self.finish(i, a, flush)?);
            merges += 1;
        }
        self.clock = arrival;
        let mut stalled = 0.0;
        // The flush waits, as the engine's writer does at a memtable
        // switch, while too many runs exist or the policy holds writes
        // (its compactions have priority over ingestion).
        while (a.stall_runs > 0 && self.sorted_runs() >= a.stall_runs)
            || self.policy.stalls_writes(&self.view)
        {
            let Some(i) = self.next_to_finish(None) else {
                break;
            };
            stalled += self.running[i].finish - self.clock;
            peak = peak.max(self.finish(i, a, flush)?);
            merges += 1;
        }
        self.stalled += stalled;
        self.count_runs_to(self.clock);
        self.add_flush(bytes);
        let runs_at_flush = self.sorted_runs();
        peak = peak.max(self.total_bytes);
        peak = peak.max(self.start_merges(a, flush)?);
        Ok(self.record(bytes, runs_at_flush, peak, merges, stalled))
    }

    /// Adds the runs present since the last change to the time integral.
    fn count_runs_to(&mut self, t: f64) {
        self.runs_time += self.sorted_runs() as f64 * (t - self.counted_to).max(0.0);
        self.counted_to = t;
    }

    /// The running merge that ends first (the first started on ties), if it
    /// ends by `by`.
    fn next_to_finish(&self, by: Option<f64>) -> Option<usize> {
        let (i, r) = self
            .running
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.finish.total_cmp(&b.1.finish))?;
        by.is_none_or(|t| r.finish <= t).then_some(i)
    }

    /// Applies running merge `i` at its end time, then starts what the
    /// policy picks next; returns the largest total size meanwhile.
    fn finish(&mut self, i: usize, a: AsyncMerges, flush: u64) -> Result<u64> {
        let done = self.running.remove(i);
        self.clock = self.clock.max(done.finish);
        self.count_runs_to(self.clock);
        let during = self.execute(&done.plan)?;
        Ok(during.max(self.start_merges(a, flush)?))
    }

    /// Starts the policy's tasks while a thread is free; zero-time tasks
    /// (trivial moves, or every merge at cost 0) are applied at once.
    /// Returns the largest total size while applying them.
    fn start_merges(&mut self, a: AsyncMerges, flush: u64) -> Result<u64> {
        let mut peak = self.total_bytes;
        let mut started = 0;
        while self.running.len() < a.threads {
            let Some(task) = self.policy.pick_first(&self.view) else {
                break;
            };
            if started >= self.opts.max_merges_per_flush {
                return Err(SimError::NotSettling {
                    policy: self.spec.clone(),
                    flush,
                    merges: started,
                });
            }
            started += 1;
            let plan =
                plan::plan(&self.view, &task).map_err(|e| self.invalid(&task, e.to_string()))?;
            let duration = match plan.action {
                Action::Move => 0.0,
                Action::Merge => {
                    a.cost * plan.input_bytes() as f64 / self.opts.buffer_bytes.max(1) as f64
                }
            };
            if duration == 0.0 {
                peak = peak.max(self.execute(&plan)?);
                continue;
            }
            for input in &plan.inputs {
                let Some(run) = self
                    .view
                    .levels
                    .get_mut(input.level)
                    .and_then(|l| l.runs.iter_mut().find(|r| r.id == input.run_id))
                else {
                    continue;
                };
                for f in &input.files {
                    let mut held = false;
                    run.files.update(f.id, |f| {
                        held = f.busy;
                        f.busy = true;
                    });
                    if held {
                        return Err(self.invalid(&task, "it takes a file a running merge holds"));
                    }
                }
            }
            self.running.push(Running {
                finish: self.clock + duration,
                plan,
            });
        }
        Ok(peak)
    }
}
