//! What making a merge's output files durable costs on this machine, by
//! strategy: each file synced as it is finished (the engine before
//! `vfs::sync_all`), all written then synced one after the other, all
//! written then synced from K threads at once, each file's write-back
//! started as it is finished (`sync_file_range(SYNC_FILE_RANGE_WRITE)`)
//! then all synced one after the other or from 8 threads, or all written
//! then one `syncfs` of the file system.
//!
//! `cargo run --release -p lamina-lsm --example sync_batch -- DIR [FILES] [BYTES] [ROUNDS]`
//! (defaults 300 files of 512 KiB, 3 rounds) creates `DIR` (which must not
//! exist), writes its files there through `lamina::vfs::OsFs`, and removes
//! only `DIR`. Prints milliseconds per file for each strategy and round.

#![expect(
    unsafe_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark: any failure ends it; `sync_file_range` has no safe wrapper in rustix"
)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use std::os::fd::AsRawFd;

use lamina::vfs::{OsFs, Vfs, WritableFile};

fn write(path: &Path, data: &[u8]) -> Box<dyn WritableFile> {
    let mut f = OsFs.create(path).unwrap();
    f.append(data).unwrap();
    f.flush().unwrap();
    f
}

/// Writes `path` directly and starts its write-back without waiting.
fn write_started(path: &Path, data: &[u8]) -> std::fs::File {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(data).unwrap();
    // SAFETY: a plain syscall on an open descriptor; no memory is shared.
    let rc = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    assert_eq!(
        rc,
        0,
        "sync_file_range: {}",
        std::io::Error::last_os_error()
    );
    f
}

/// Syncs `files` from `threads` threads, each taking the next unsynced one.
fn sync_from(files: &mut [Box<dyn WritableFile>], threads: usize) {
    let next = std::sync::Mutex::new(files.iter_mut());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some(f) = next.lock().unwrap().next() else {
                    break;
                };
                f.sync().unwrap();
            });
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .expect("usage: sync_batch DIR [FILES] [BYTES] [ROUNDS]"),
    );
    let n: usize = args.get(1).map_or(300, |a| a.parse().unwrap());
    let bytes: usize = args.get(2).map_or(512 << 10, |a| a.parse().unwrap());
    let rounds: usize = args.get(3).map_or(3, |a| a.parse().unwrap());
    assert!(!dir.exists(), "{} exists; not touching it", dir.display());
    std::fs::create_dir(&dir).unwrap();
    let data: Vec<u8> = (0..bytes).map(|i| (i * 7_919 % 251) as u8).collect();
    let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("{i}.sst"))).collect();
    let strategies = [
        "unsynced",
        "each",
        "after",
        "threads4",
        "threads8",
        "threads16",
        "sfr",
        "sfr8",
        "syncfs",
    ];
    println!("{n} files of {bytes} bytes in {}", dir.display());
    for round in 0..rounds {
        for strategy in strategies {
            // Start clean: nothing of the previous strategy left dirty.
            rustix::fs::syncfs(std::fs::File::open(&dir).unwrap()).unwrap();
            let start = Instant::now();
            match strategy {
                "unsynced" => paths.iter().for_each(|p| drop(write(p, &data))),
                "each" => paths.iter().for_each(|p| write(p, &data).sync().unwrap()),
                "sfr" | "sfr8" => {
                    let files: Vec<_> = paths.iter().map(|p| write_started(p, &data)).collect();
                    let threads = if strategy == "sfr8" { 8 } else { 1 };
                    let next = std::sync::Mutex::new(files.iter());
                    std::thread::scope(|s| {
                        for _ in 0..threads {
                            s.spawn(|| loop {
                                let Some(f) = next.lock().unwrap().next() else {
                                    break;
                                };
                                f.sync_data().unwrap();
                            });
                        }
                    });
                }
                "syncfs" => {
                    paths.iter().for_each(|p| drop(write(p, &data)));
                    rustix::fs::syncfs(std::fs::File::open(&dir).unwrap()).unwrap();
                }
                _ => {
                    let mut files: Vec<_> = paths.iter().map(|p| write(p, &data)).collect();
                    let threads = strategy.trim_start_matches("threads").parse().unwrap_or(1);
                    sync_from(&mut files, threads);
                }
            }
            let ms = start.elapsed().as_secs_f64() * 1e3;
            println!(
                "round {round} {strategy:>9}: {:7.3} ms per file ({ms:.0} ms)",
                ms / n as f64
            );
            paths.iter().for_each(|p| OsFs.remove(p).unwrap());
        }
    }
    std::fs::remove_dir(&dir).unwrap();
}
