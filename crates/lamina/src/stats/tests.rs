use super::*;
use std::time::Duration;

#[test]
fn compaction_stats_sum_the_levels() {
    let mib = 1_048_576;
    let levels = [
        LevelStats {
            level: 0,
            runs: 2,
            files: 2,
            bytes: 2 * mib,
            bytes_read: 10 * mib,
            bytes_written: 10 * mib,
            write_amplification: 1.0,
            ..Default::default()
        },
        LevelStats {
            level: 1,
            runs: 1,
            files: 3,
            bytes: 8 * mib,
            bytes_read: 8 * mib,
            bytes_read_level: 4 * mib,
            bytes_written: 12 * mib,
            compactions: 4,
            compaction_seconds: 0.5,
            write_amplification: 1.5,
            ..Default::default()
        },
    ];
    let table = compaction_stats_table(&levels);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert_eq!(rows[1][..4], ["L1", "1", "3", "8.0"]);
    // Sum: 22 MB written for the 10 MB that came in: WA 2.20.
    assert_eq!(
        rows[2],
        ["Sum", "3", "5", "10.0", "10.0", "4.0", "22.0", "0.0", "2.20", "4", "0.50", "0", "0"]
    );
}

#[test]
fn thread_cpu_time_advances_with_work_and_not_with_sleep() {
    let start = thread_cpu_time();
    std::thread::sleep(Duration::from_millis(30));
    let slept = thread_cpu_time() - start;
    let mut x = 0u64;
    let busy = thread_cpu_time();
    while thread_cpu_time() - busy < Duration::from_millis(5) {
        x = x.wrapping_mul(31).wrapping_add(7);
    }
    assert!(slept < Duration::from_millis(30), "{slept:?} {x}");
}
