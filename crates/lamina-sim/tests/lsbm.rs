//! LSbM's compaction buffer in the simulator (seed 002): the simulator
//! applies the planner's buffer changes as the engine does. Keeping the
//! merged-down files costs no compaction I/O, so `lsbm` writes exactly what
//! `blsm` writes, while its buffers hold the files moved down; and the
//! buffers follow their invariants: tables key-disjoint, each kept file once
//! a file the tree held, every buffer on a run of the tree.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::collections::HashSet;

use lamina_compaction::lsbm::Slot;
use lamina_sim::{ModelOptions, Simulator};

#[test]
fn lsbm_writes_what_blsm_writes_and_keeps_what_moved_down() {
    // unit=3: merge steps of three files (the paper's super-file), kept as
    // three buffer files.
    for params in ["file=262144", "file=87382,unit=3"] {
        lsbm_against_blsm(params);
    }
}

fn lsbm_against_blsm(params: &str) {
    let opts = || ModelOptions {
        buffer_bytes: 1 << 20,
        ..ModelOptions::default()
    };
    let mut blsm = Simulator::from_spec(&format!("blsm:T=3,l0=2,{params}"), opts()).unwrap();
    let mut lsbm = Simulator::from_spec(&format!("lsbm:T=3,l0=2,{params}"), opts()).unwrap();
    let mut ever_in_tree: HashSet<u64> = HashSet::new();
    let mut kept_max = 0;
    for _ in 0..400 {
        blsm.flush(1 << 20).unwrap();
        lsbm.flush(1 << 20).unwrap();
        let view = lsbm.view();
        let runs: Vec<_> = view.levels.iter().flat_map(|l| &l.runs).collect();
        ever_in_tree.extend(runs.iter().flat_map(|r| r.files.iter().map(|f| f.id)));
        let mut kept = 0;
        for (host, buffer) in &view.compaction_buffers {
            assert!(
                runs.iter().any(|r| r.id == *host),
                "buffer on a missing run {host}"
            );
            for table in buffer.tables() {
                for pair in table.slots().windows(2) {
                    assert!(
                        pair[0].largest() < pair[1].smallest(),
                        "table overlaps itself"
                    );
                }
                for slot in table.slots() {
                    if let Slot::Live(f) = slot {
                        assert!(
                            ever_in_tree.contains(&f.id),
                            "file {} never in the tree",
                            f.id
                        );
                        kept += 1;
                    }
                }
            }
        }
        kept_max = kept_max.max(kept);
    }
    assert_eq!(lsbm.write_amplification(), blsm.write_amplification());
    assert_eq!(lsbm.run_sizes(), blsm.run_sizes());
    assert!(kept_max > 0, "{params}: the buffers never kept a file");
}
