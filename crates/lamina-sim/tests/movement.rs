//! The model keeps the file times that movement policies read: a file that
//! arrives in a level (written or moved there) is stamped with the time,
//! as the engine's executor stamps it, so `rr` walks the key space in the
//! simulator as it does in the engine. Before the stamp every file of the
//! model had arrived at time 0, the cursor sat past the largest key, and
//! `rr` pushed the first file of a level every time (write amplification
//! 974 at 3,000 flushes, against 29.6 now).
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::sync::{Arc, Mutex};

use lamina_compaction::{
    policy_from_spec, CompactionPolicy, CompactionTask, PolicyDefaults, TreeView,
};
use lamina_sim::{ModelOptions, Simulator};

const UNIT: u64 = 1000;

/// One push of one file out of a level: the file the policy took, and the
/// file a brute-force reading of the round-robin rule takes.
#[derive(Debug)]
struct Push {
    level: usize,
    taken: Vec<u8>,
    expected: Vec<u8>,
    first: Vec<u8>,
}

/// Records every one-file push the simulator runs, with the oracle's pick.
#[derive(Debug)]
struct Recording {
    inner: Box<dyn CompactionPolicy>,
    pushes: Arc<Mutex<Vec<Push>>>,
}

/// The round-robin rule read off the view file by file: the cursor is the
/// largest key among the files of `level + 1` that arrived last; the pick
/// is the first file of `level` starting after it, else the first file.
fn round_robin(view: &TreeView, level: usize) -> Option<Vec<u8>> {
    let below: Vec<_> = view
        .level(level + 1)
        .runs
        .iter()
        .flat_map(|r| r.files.iter())
        .collect();
    let newest = below.iter().map(|f| f.arrived_ms).max();
    let cursor = below
        .iter()
        .filter(|f| Some(f.arrived_ms) == newest)
        .map(|f| f.largest.to_vec())
        .max();
    let files: Vec<_> = view.level(level).runs.first()?.files.iter().collect();
    let after = cursor.and_then(|c| files.iter().find(|f| f.smallest.to_vec() > c));
    after.or(files.first()).map(|f| f.smallest.to_vec())
}

impl CompactionPolicy for Recording {
    fn spec(&self) -> String {
        self.inner.spec()
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        self.inner.pick(view)
    }

    fn pick_first(&self, view: &TreeView) -> Option<CompactionTask> {
        let task = self.inner.pick_first(view)?;
        let input = &task.inputs[0];
        if input.level >= 1 && input.file_ids.len() == 1 {
            let run = view.level(input.level).runs.first().unwrap();
            let taken = run.files.get(input.file_ids[0]).unwrap().smallest.to_vec();
            self.pushes.lock().unwrap().push(Push {
                level: input.level,
                taken,
                expected: round_robin(view, input.level).unwrap(),
                first: run.files.first().unwrap().smallest.to_vec(),
            });
        }
        Some(task)
    }
}

#[test]
fn round_robin_walks_the_key_space_in_the_model() {
    let defaults = PolicyDefaults {
        size_ratio: 10,
        target_file_size: UNIT,
    };
    let pushes = Arc::new(Mutex::new(Vec::new()));
    let policy = Recording {
        inner: policy_from_spec("rr", defaults).unwrap(),
        pushes: Arc::clone(&pushes),
    };
    let opts = ModelOptions {
        buffer_bytes: UNIT,
        ..ModelOptions::default()
    };
    let mut sim = Simulator::new(Box::new(policy), opts).unwrap();
    for _ in 0..2000 {
        sim.flush(UNIT).unwrap();
        // Every file arrived at or before now, and the step's files now.
        let now = sim.view().now_ms;
        for level in &sim.view().levels {
            for f in level.runs.iter().flat_map(|r| r.files.iter()) {
                assert!(f.arrived_ms <= now && f.created_ms <= f.arrived_ms);
            }
        }
    }
    let pushes = pushes.lock().unwrap();
    assert!(pushes.len() > 1000, "{} pushes", pushes.len());
    for p in pushes.iter() {
        assert_eq!(p.taken, p.expected, "{p:?}");
    }
    // The cursor moves: most pushes out of a level of many files take a
    // file other than its first (every one did before the stamp).
    let deep: Vec<_> = pushes.iter().filter(|p| p.level >= 2).collect();
    let not_first = deep.iter().filter(|p| p.taken != p.first).count();
    assert!(
        not_first * 2 > deep.len(),
        "{not_first} of {} pushes took a file other than the first",
        deep.len()
    );
    // And the write amplification is a leveled tree's, not the 974 of
    // pushing the first file every time (3,000 flushes; 2,000 here).
    let wa = sim.write_amplification();
    assert!(wa < 60.0, "write amplification {wa}");
}
