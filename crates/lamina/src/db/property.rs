//! `Db::property`: RocksDB-style introspection by name (`GetProperty`).

use super::*;
use crate::stats::compaction_stats_table;

impl Db {
    /// The value of a named property of the database (RocksDB's
    /// `GetProperty`), or `None` for a name it does not know:
    ///
    /// | name | value |
    /// |---|---|
    /// | `lamina.num-files-at-levelN` | files in level `N` (0 beyond the deepest level) |
    /// | `lamina.num-runs-at-levelN` | sorted runs in level `N` |
    /// | `lamina.total-sst-size` | bytes of every table the tree uses (compaction buffers included) |
    /// | `lamina.estimate-num-keys` | entries in memtables and tables minus tombstones: exact after a full compaction of puts, an overestimate while overwritten keys have several copies |
    /// | `lamina.num-immutable-memtables` | memtables waiting for their flush |
    /// | `lamina.cur-size-active-mem-table` | bytes of the active memtable |
    /// | `lamina.compaction-spec` | the compaction strategy in force, every parameter spelled out |
    /// | `lamina.block-cache-usage` | bytes the block cache holds, pinned blocks included (0 without a cache) |
    /// | `lamina.block-cache-pinned-usage` | bytes of index and filter blocks level-0 tables pin in it (`Options::pin_l0_filter_and_index_blocks_in_cache`) |
    /// | `lamina.stats` | the "Compaction Stats" table of `lamina bench` |
    /// | `lamina.levelstats` | files and size per level, as RocksDB prints them |
    ///
    /// ```
    /// use lamina::{Compaction, Db, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let opts = Options::builder().compaction(Compaction::leveling(4)).build()?;
    /// let db = Db::open(dir.path(), opts)?;
    /// db.put(b"k", b"v")?;
    /// db.flush()?;
    /// assert_eq!(db.property("lamina.num-files-at-level0").as_deref(), Some("1"));
    /// assert_eq!(db.property("lamina.compaction-spec").as_deref(), Some("leveling:T=4,l0=4"));
    /// assert_eq!(db.property("lamina.no-such-property"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn property(&self, name: &str) -> Option<String> {
        let sv = Arc::clone(&self.inner.sv.read());
        let level = |prefix: &str| -> Option<usize> {
            name.strip_prefix(prefix)
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?
                .parse()
                .ok()
        };
        if let Some(l) = level("lamina.num-files-at-level") {
            let files = sv.version.levels.get(l).map_or(0, |l| l.file_count());
            return Some(files.to_string());
        }
        if let Some(l) = level("lamina.num-runs-at-level") {
            let runs = sv.version.levels.get(l).map_or(0, |l| l.runs.len());
            return Some(runs.to_string());
        }
        Some(match name {
            "lamina.total-sst-size" => unique_files(&sv.version)
                .map(|f| f.size)
                .sum::<u64>()
                .to_string(),
            "lamina.estimate-num-keys" => {
                let mems = std::iter::once(&sv.mem).chain(&sv.imms);
                let mem_entries: u64 = mems.map(|m| m.len() as u64).sum();
                let (entries, tombstones) =
                    sv.version.files().fold((0u64, 0u64), |(e, t), (_, _, f)| {
                        (e + f.entries, t + f.tombstones)
                    });
                // A tombstone hides at least itself and, usually, one put.
                (mem_entries + entries)
                    .saturating_sub(2 * tombstones)
                    .to_string()
            }
            "lamina.num-immutable-memtables" => sv.imms.len().to_string(),
            "lamina.cur-size-active-mem-table" => sv.mem.approximate_bytes().to_string(),
            "lamina.compaction-spec" => self.compaction_spec(),
            "lamina.block-cache-usage" => self
                .inner
                .table_cache
                .cache
                .as_ref()
                .map_or(0, |c| c.usage())
                .to_string(),
            "lamina.block-cache-pinned-usage" => self
                .inner
                .table_cache
                .cache
                .as_ref()
                .map_or(0, |c| c.pinned_usage())
                .to_string(),
            "lamina.stats" => compaction_stats_table(&self.stats().levels),
            "lamina.levelstats" => {
                let mut out = String::from("Level Files Size(MB)\n--------------------\n");
                for (i, l) in sv.version.levels.iter().enumerate() {
                    out.push_str(&format!(
                        "{i:>3} {:>8} {:>8.0}\n",
                        l.file_count(),
                        l.bytes() as f64 / 1_048_576.0
                    ));
                }
                out
            }
            _ => return None,
        })
    }
}

/// The version's files, each once (a compaction buffer may share a file
/// with a run).
fn unique_files(version: &Version) -> impl Iterator<Item = &Arc<FileMeta>> {
    let mut seen = HashSet::new();
    version.live_files().filter(move |f| seen.insert(f.id))
}
