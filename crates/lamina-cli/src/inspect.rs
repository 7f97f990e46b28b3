//! `lamina inspect`: sst_dump, manifest_dump and dump_wal in one tool, over
//! `lamina::inspect`. Text by default, keys shown escaped as `lamina kv`
//! shows them ([`crate::bytefmt`]; `--hex` for hex); `--json` prints JSON Lines: the report as one object, then (with
//! `--scan`) one object per entry or record.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use lamina::inspect::{self, to_hex, Entry, Tree, TreeFile};

use crate::bytefmt::ByteFormat;
use lamina::vfs::{OsFs, Vfs};
use serde_json::json;

/// Flags of `lamina inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(subcommand)]
    what: What,
    /// Show keys and values as hex instead of escaped text.
    #[arg(long, global = true)]
    hex: bool,
    /// Print JSON Lines (keys and values as hex) instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum What {
    /// An SST: properties, filter, index, every data block with its offset,
    /// size and checksum (re-read and checked); `--scan` lists the entries.
    /// Fails if a block does not check out.
    Sst {
        /// The `.sst` file.
        file: PathBuf,
        /// Also list every entry (key, sequence number, put or delete, value).
        #[arg(long)]
        scan: bool,
    },
    /// The live manifest of a database: every edit, then the tree.
    Manifest {
        /// Database directory.
        dir: PathBuf,
    },
    /// A WAL: its records (offset, sequence numbers, entries) and whether it
    /// ends in a torn record; `--scan` lists each record's entries.
    Wal {
        /// The `.log` file.
        file: PathBuf,
        /// Also list every entry of every record.
        #[arg(long)]
        scan: bool,
    },
    /// The tree of a database: levels, runs newest first, files in key order.
    Tree {
        /// Database directory.
        dir: PathBuf,
    },
    /// The options a database was last opened with (its newest readable
    /// OPTIONS file), one `name = value` per line.
    Options {
        /// Database directory.
        dir: PathBuf,
    },
}

struct Printer {
    hex: bool,
    json: bool,
    out: BufWriter<io::StdoutLock<'static>>,
}

impl Printer {
    fn key(&self, b: &[u8]) -> String {
        ByteFormat::new(self.hex).show(b)
    }

    fn json(&mut self, v: &impl serde::Serialize) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, v)?;
        writeln!(self.out)
    }

    fn entry(&mut self, e: Entry<'_>, indent: &str) -> io::Result<()> {
        if self.json {
            return self.json(&json!({
                "key": to_hex(e.key),
                "seq": e.seq,
                "kind": match (e.put, e.range_end) {
                    (true, _) => "put",
                    (false, None) => "delete",
                    (false, Some(_)) => "delete_range",
                },
                "value": to_hex(e.value),
            }));
        }
        let key = self.key(e.key);
        if let Some(end) = e.range_end {
            let end = self.key(end);
            writeln!(self.out, "{indent}{key} @{} delete_range to {end}", e.seq)?;
        } else if e.put {
            let value = self.key(e.value);
            writeln!(self.out, "{indent}{key} @{} put {value}", e.seq)?;
        } else {
            writeln!(self.out, "{indent}{key} @{} delete", e.seq)?;
        }
        Ok(())
    }

    fn file(&mut self, f: &TreeFile) -> io::Result<()> {
        let (lo, hi) = (self.key(&f.smallest), self.key(&f.largest));
        write!(
            self.out,
            "{:06}.sst {} B, {} entries ({} tombstones), seq {}..{}, {lo} .. {hi}",
            f.id, f.size, f.entries, f.tombstones, f.smallest_seq, f.largest_seq
        )?;
        if let Some([x0, y0, x1, y1]) = f.mbr {
            write!(self.out, ", MBR [{x0}, {y0}, {x1}, {y1}]")?;
        }
        writeln!(self.out)
    }

    fn tree(&mut self, tree: &Tree) -> io::Result<()> {
        for level in &tree.levels {
            let bytes: u64 = level
                .runs
                .iter()
                .flat_map(|r| &r.files)
                .map(|f| f.size)
                .sum();
            writeln!(
                self.out,
                "L{}: {} runs, {bytes} B",
                level.level,
                level.runs.len()
            )?;
            for run in &level.runs {
                writeln!(
                    self.out,
                    "  run {} (order {}): {} files",
                    run.id,
                    run.order,
                    run.files.len()
                )?;
                for f in &run.files {
                    write!(self.out, "    ")?;
                    self.file(f)?;
                }
            }
        }
        if !tree.buffer_files.is_empty() {
            writeln!(
                self.out,
                "compaction buffer: {} files",
                tree.buffer_files.len()
            )?;
            for f in &tree.buffer_files {
                write!(self.out, "    ")?;
                self.file(f)?;
            }
        }
        Ok(())
    }
}

/// A failed write to stdout, inside a callback of `lamina::inspect`.
fn stdout_error(source: io::Error) -> lamina::Error {
    lamina::Error::Io {
        op: "write",
        path: PathBuf::from("<stdout>"),
        source,
    }
}

fn sst(p: &mut Printer, vfs: &Arc<dyn Vfs>, file: &Path, scan: bool) -> Result<()> {
    let r = inspect::sst(vfs, file)?;
    if p.json {
        p.json(&r)?;
    } else {
        let (lo, hi) = (p.key(&r.smallest_key), p.key(&r.largest_key));
        let o = &mut p.out;
        writeln!(o, "{}: {} B", r.file, r.file_size)?;
        writeln!(
            o,
            "entries {} ({} tombstones), seq {}..{}, keys {lo} .. {hi}",
            r.entries, r.tombstones, r.smallest_seq, r.largest_seq
        )?;
        writeln!(
            o,
            "raw key bytes {}, raw value bytes {}, created {} ms, oldest tombstone {}",
            r.raw_key_bytes,
            r.raw_value_bytes,
            r.created_ms,
            r.oldest_tombstone_ms
                .map_or_else(|| "none".to_string(), |t| format!("{t} ms"))
        )?;
        writeln!(
            o,
            "data {} B in {} blocks; filter {} B at {} ({:.2} bits/entry, written for {} bits/key); index {} B at {}; properties {} B at {}",
            r.data_bytes,
            r.blocks.len(),
            r.filter.size,
            r.filter.offset,
            r.filter_bits_per_entry,
            r.bloom_bits_per_key,
            r.index.size,
            r.index.offset,
            r.properties_block.size,
            r.properties_block.offset
        )?;
        if r.compression != lamina::Compression::None {
            writeln!(
                o,
                "compression {}: data {} B stored of {} B uncompressed ({:.3}), {} of {} blocks compressed",
                r.compression,
                r.data_bytes,
                r.uncompressed_data_bytes,
                r.data_bytes as f64 / r.uncompressed_data_bytes.max(1) as f64,
                r.compressed_blocks,
                r.blocks.len()
            )?;
        }
        if let Some(h) = &r.range_deletions {
            writeln!(
                o,
                "range deletions: {} tombstones, {} B at {}",
                r.range_tombstones, h.size, h.offset
            )?;
        }
        if let Some([x0, y0, x1, y1]) = r.mbr {
            writeln!(o, "MBR [{x0}, {y0}, {x1}, {y1}]")?;
        }
        for b in &r.blocks {
            let (lo, hi) = (p.key(&b.first_key), p.key(&b.last_key));
            let status = b.problem.as_deref().unwrap_or("ok");
            let crc = b
                .checksum
                .map_or_else(|| "none".to_string(), |c| format!("{c:#010x}"));
            let stored = b.stored_as.as_deref().unwrap_or("none");
            writeln!(
                p.out,
                "block {} at {} size {} {stored} crc {crc} {status}: {lo}@{} .. {hi}@{}",
                b.block, b.extent.offset, b.extent.size, b.first_seq, b.last_seq
            )?;
        }
    }
    let bad: Vec<String> = r
        .bad_blocks()
        .map(|b| format!("block {} at {}", b.block, b.extent.offset))
        .collect();
    if scan && bad.is_empty() {
        inspect::sst_entries(vfs, file, |e| p.entry(e, "").map_err(stdout_error))?;
    }
    p.out.flush()?;
    if !bad.is_empty() {
        bail!(
            "{} data blocks do not check out: {}",
            bad.len(),
            bad.join(", ")
        );
    }
    Ok(())
}

fn wal(p: &mut Printer, vfs: &Arc<dyn Vfs>, file: &Path, scan: bool) -> Result<()> {
    let end = inspect::wal(vfs, file, |rec| {
        if p.json {
            p.json(&json!({
                "offset": rec.offset,
                "first_seq": rec.first_seq,
                "entries": rec.count,
            }))
        } else {
            writeln!(
                p.out,
                "record at {}: seq {}, {} entries",
                rec.offset, rec.first_seq, rec.count
            )
        }
        .map_err(stdout_error)?;
        if scan {
            inspect::wal_record_entries(rec, |e| p.entry(e, "  ").map_err(stdout_error))?;
        }
        Ok(())
    })?;
    if p.json {
        p.json(&end)?;
    } else {
        writeln!(
            p.out,
            "{}: {} B, {} records, {} entries, valid to byte {}{}",
            file.display(),
            end.bytes,
            end.records,
            end.entries,
            end.valid_len,
            if end.torn {
                " (then a torn record: a crash during an append, which recovery drops)"
            } else {
                ""
            }
        )?;
    }
    p.out.flush()?;
    Ok(())
}

/// Runs `lamina inspect`.
pub fn run(args: InspectArgs) -> Result<()> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsFs);
    let mut p = Printer {
        hex: args.hex,
        json: args.json,
        out: BufWriter::new(io::stdout().lock()),
    };
    match &args.what {
        What::Sst { file, scan } => sst(&mut p, &vfs, file, *scan)?,
        What::Wal { file, scan } => wal(&mut p, &vfs, file, *scan)?,
        What::Manifest { dir } => {
            let m = inspect::manifest(&vfs, dir)?;
            if p.json {
                p.json(&m)?;
            } else {
                writeln!(
                    p.out,
                    "{}: {} B, {} edits, valid to byte {}{}",
                    m.manifest,
                    m.bytes,
                    m.edits.len(),
                    m.valid_len,
                    if m.torn { " (then a torn record)" } else { "" }
                )?;
                for e in &m.edits {
                    let counters = [
                        ("log", e.log_number),
                        ("next_file", e.next_file_number),
                        ("last_seq", e.last_seq),
                    ]
                    .iter()
                    .filter_map(|(n, v)| v.map(|v| format!(" {n} {v}")))
                    .collect::<String>();
                    writeln!(p.out, "edit at {}:{counters}", e.offset)?;
                    for r in &e.new_runs {
                        writeln!(
                            p.out,
                            "  + run {} in L{} (order {})",
                            r.run, r.level, r.order
                        )?;
                    }
                    for r in &e.removed {
                        writeln!(
                            p.out,
                            "  - {:06}.sst from run {} in L{}",
                            r.file, r.run, r.level
                        )?;
                    }
                    for a in &e.added {
                        write!(p.out, "  + L{} run {}: ", a.level, a.run)?;
                        p.file(&a.file)?;
                    }
                    if e.buffer_changes > 0 {
                        writeln!(p.out, "  {} compaction-buffer changes", e.buffer_changes)?;
                    }
                }
                writeln!(p.out, "tree:")?;
                p.tree(&m.tree)?;
            }
        }
        What::Tree { dir } => {
            let m = inspect::manifest(&vfs, dir)?;
            if p.json {
                p.json(&m.tree)?;
            } else {
                p.tree(&m.tree)?;
            }
        }
        What::Options { dir } => {
            let r = inspect::options(&vfs, dir)?;
            if p.json {
                let options: serde_json::Map<String, serde_json::Value> = r
                    .options
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()))
                    .collect();
                p.json(&json!({ "file": r.file, "skipped": r.skipped, "options": options }))?;
            } else {
                writeln!(p.out, "file: {}", r.file)?;
                for s in &r.skipped {
                    writeln!(p.out, "skipped: {s}")?;
                }
                for (k, v) in &r.options {
                    writeln!(p.out, "{k} = {v}")?;
                }
            }
        }
    }
    p.out.flush()?;
    Ok(())
}
