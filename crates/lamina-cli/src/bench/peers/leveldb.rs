//! LevelDB as a `lamina bench` peer: `lamina bench --engine leveldb`, built
//! with the `peer-leveldb` feature (LevelDB 1.22 compiled from source by
//! `leveldb-sys` with cmake, build type `Release`, with Snappy).
//!
//! LevelDB is C++; this module drives it through its C API, the only
//! binding that exposes the Bloom filter policy. That takes `unsafe`
//! (denied elsewhere in the workspace): every call is confined to this
//! module, behind [`LevelStore`]'s safe methods, with its contract stated
//! where it is made.
#![expect(
    unsafe_code,
    reason = "memory-mapped reads need `unsafe` (see the SAFETY comments)"
)]

use std::ffi::{c_char, c_uchar, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use anyhow::{anyhow, bail, Context, Result};
use leveldb_sys as ffi;

use super::{OptionMap, PeerSettings};
use lamina::Compression;
use lamina_experiment::kvops::Store;

/// LevelDB's level-0 compaction trigger (`config::kL0_CompactionTrigger`,
/// a compile-time constant).
const L0_TRIGGER: usize = 4;
/// LevelDB's level-0 slowdown and stop (`kL0_SlowdownWritesTrigger`,
/// `kL0_StopWritesTrigger`).
const L0_SLOWDOWN: usize = 8;
const L0_STOP: usize = 12;
/// LevelDB's level size ratio (`MaxBytesForLevel`: 10 MiB for level 1,
/// ten times more per level).
const SIZE_RATIO: u64 = 10;

/// A LevelDB database in `--db`, with the objects its options point to
/// (they must outlive it).
pub struct LevelStore {
    db: *mut ffi::leveldb_t,
    options: *mut ffi::leveldb_options_t,
    cache: *mut ffi::leveldb_cache_t,
    filter: *mut ffi::leveldb_filterpolicy_t,
    read: *mut ffi::leveldb_readoptions_t,
    write: *mut ffi::leveldb_writeoptions_t,
}

// SAFETY: LevelDB documents a `DB` as safe to use from many threads
// without synchronisation; the option, cache and filter objects are only
// read after `open` has set them up, and freed once, in `Drop`.
unsafe impl Send for LevelStore {}
// SAFETY: as above.
unsafe impl Sync for LevelStore {}

/// Turns a LevelDB error string (malloc'd by LevelDB, or null) into a
/// result, freeing it.
fn check(err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB sets an error pointer to a NUL-terminated string it
    // allocated; `leveldb_free` releases it, once, after it was copied.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above.
    unsafe { ffi::leveldb_free(err.cast::<c_void>()) };
    Err(anyhow!("LevelDB: {msg}"))
}

fn flag(b: bool) -> c_uchar {
    c_uchar::from(b)
}

/// The LevelDB options [`plan`] chose that are not copied from the
/// settings as they are.
pub struct LevelConfig {
    /// Bloom filter bits per key (whole bits), or no filter.
    bloom_bits: Option<i32>,
    /// Block compression.
    compression: ffi::Compression,
}

/// What LevelDB gets for `s` (the values [`LevelStore::open`] sets), and
/// the mapping that explains them; refuses what LevelDB cannot do.
pub fn plan(s: &PeerSettings) -> Result<(LevelConfig, OptionMap)> {
    if s.disable_wal {
        bail!("--disable_wal: LevelDB always writes its log");
    }
    if s.cache_index_and_filter_blocks {
        bail!("--cache_index_and_filter_blocks: LevelDB's open tables hold their index and filter");
    }
    let mut m = OptionMap::default();
    m.row(
        format!("--write_buffer_size={}", s.write_buffer_size),
        format!("write_buffer_size={}", s.write_buffer_size),
        "",
    );
    m.row(
        format!(
            "max_immutable_memtables={} (lamina default)",
            s.max_immutable_memtables
        ),
        "one immutable memtable",
        "differs: LevelDB has no setting; writes wait while one is flushed",
    );
    let bits = (s.bloom_bits > 0.0).then(|| s.bloom_bits.round().clamp(1.0, 1000.0) as i32);
    match bits {
        Some(b) => {
            let note = if f64::from(b) == s.bloom_bits {
                ""
            } else {
                "LevelDB takes whole bits per key"
            };
            m.row(
                format!("--bloom_bits={}", s.bloom_bits),
                format!("filter_policy=NewBloomFilterPolicy({b})"),
                note,
            );
        }
        None => m.row("--bloom_bits=0", "no filter_policy", ""),
    }
    let memtable_note = format!(
        "differs: LevelDB has no memtable filter (lamina's: {} bytes)",
        s.memtable_filter_bytes
    );
    m.row(
        format!("--memtable_bloom_bits={}", s.memtable_bloom_bits),
        "none",
        if s.memtable_filter_bytes > 0 {
            &memtable_note
        } else {
            ""
        },
    );
    m.row(
        format!("--cache_size={}", s.cache_size),
        format!("block_cache=NewLRUCache({})", s.cache_size),
        "",
    );
    m.row(
        "index and filters held by open tables",
        "table cache, max_open_files=1000 (default)",
        "as lamina while every table fits in it",
    );
    m.row(
        format!("--block_size={}", s.block_size),
        format!("block_size={}", s.block_size),
        "",
    );
    let compression = match s.compression {
        Compression::None => {
            m.row(
                format!("--compression_type={}", s.compression),
                "compression=kNoCompression",
                "",
            );
            ffi::Compression::No
        }
        Compression::Lz4 => {
            m.row(
                format!("--compression_type={}", s.compression),
                "compression=kSnappyCompression",
                "differs: LevelDB has only Snappy; raw unless it saves 1/8, as lamina",
            );
            ffi::Compression::Snappy
        }
        Compression::Zstd(_) => bail!(
            "--compression_type={}: LevelDB 1.22 has no zstd (only Snappy, which --compression_type=lz4 maps to)",
            s.compression
        ),
    };
    m.row(
        format!("--mmap_read={}", s.mmap_read),
        "tables read through mmap (up to 1000 on 64-bit, fixed)",
        if s.mmap_read {
            ""
        } else {
            "differs: LevelDB always maps its tables"
        },
    );
    m.row(
        format!("--sync={}", s.sync),
        format!("WriteOptions::sync={} (fdatasync)", s.sync),
        "",
    );
    m.row("--disable_wal=false", "log always written", "");
    m.row(
        format!(
            "--compaction_threads={} (+1 flush thread)",
            s.compaction_threads
        ),
        "one background thread for flushes and compactions",
        "differs: LevelDB's is fixed",
    );
    let same = |ours: u64, theirs: u64| {
        if ours == theirs {
            ""
        } else {
            "differs: fixed in LevelDB"
        }
    };
    m.row(
        format!("--compaction=leveling l0={}", s.l0_trigger),
        format!("leveled, kL0_CompactionTrigger={L0_TRIGGER}"),
        same(s.l0_trigger as u64, L0_TRIGGER as u64),
    );
    m.row(
        format!("leveling T={} (L1 = write_buffer_size x T)", s.size_ratio),
        format!("level sizes 10 MiB x {SIZE_RATIO}^(L-1)"),
        "differs: LevelDB's level 1 is 10 MiB",
    );
    m.row(
        format!("target_file_size={} (lamina default)", s.target_file_size),
        "max_file_size=2097152 (default)",
        "differs: LevelDB's default kept, its level sizes are fixed for it",
    );
    m.row(
        format!("level0_stop_runs={} (lamina default)", s.level0_stop_runs),
        format!("kL0_StopWritesTrigger={L0_STOP}, kL0_SlowdownWritesTrigger={L0_SLOWDOWN}"),
        "differs: LevelDB delays each write 1 ms from 8 files",
    );
    m.row(
        format!("--verify_checksums={}", s.verify_checksums),
        format!("ReadOptions::verify_checksums={}", s.verify_checksums),
        "",
    );
    m.row(
        "scans do not fill the block cache",
        "ReadOptions::fill_cache=true (default)",
        "differs: LevelDB iterators cache the blocks they read",
    );
    Ok((
        LevelConfig {
            bloom_bits: bits,
            compression,
        },
        m,
    ))
}

impl LevelStore {
    /// Opens (or creates) the database in `dir` with `s`'s settings and
    /// returns it with the option mapping.
    pub fn open(dir: &Path, s: &PeerSettings) -> Result<(LevelStore, OptionMap)> {
        let (config, map) = plan(s)?;
        let name = CString::new(dir.as_os_str().as_bytes())
            .with_context(|| format!("{} holds a NUL byte", dir.display()))?;
        // SAFETY: each constructor returns a fresh object that `Drop` frees
        // once; the setters only store values (or, for the cache and the
        // filter, pointers that live as long as the store) in `options`.
        let mut store = unsafe {
            let options = ffi::leveldb_options_create();
            let cache = ffi::leveldb_cache_create_lru(s.cache_size);
            let filter = config.bloom_bits.map_or(ptr::null_mut(), |b| {
                ffi::leveldb_filterpolicy_create_bloom(b)
            });
            ffi::leveldb_options_set_create_if_missing(options, 1);
            ffi::leveldb_options_set_write_buffer_size(options, s.write_buffer_size);
            ffi::leveldb_options_set_cache(options, cache);
            if !filter.is_null() {
                ffi::leveldb_options_set_filter_policy(options, filter);
            }
            ffi::leveldb_options_set_block_size(options, s.block_size);
            ffi::leveldb_options_set_compression(options, config.compression);
            let read = ffi::leveldb_readoptions_create();
            ffi::leveldb_readoptions_set_verify_checksums(read, flag(s.verify_checksums));
            let write = ffi::leveldb_writeoptions_create();
            ffi::leveldb_writeoptions_set_sync(write, flag(s.sync));
            LevelStore {
                db: ptr::null_mut(),
                options,
                cache,
                filter,
                read,
                write,
            }
        };
        let mut err = ptr::null_mut();
        // SAFETY: `options` is valid, `name` NUL-terminated; on failure
        // LevelDB returns null and sets `err`.
        store.db = unsafe { ffi::leveldb_open(store.options, name.as_ptr(), &mut err) };
        check(err).with_context(|| format!("opening LevelDB in {}", dir.display()))?;
        if store.db.is_null() {
            bail!("opening LevelDB in {}: no database", dir.display());
        }
        Ok((store, map))
    }

    /// LevelDB's statistics (the `leveldb.stats` property).
    pub fn stats_text(&self) -> String {
        // SAFETY: the name is NUL-terminated; LevelDB returns a malloc'd
        // NUL-terminated copy (or null), freed here after it is copied.
        unsafe {
            let v = ffi::leveldb_property_value(self.db, c"leveldb.stats".as_ptr());
            if v.is_null() {
                return "(no leveldb.stats)".into();
            }
            let text = CStr::from_ptr(v).to_string_lossy().into_owned();
            ffi::leveldb_free(v.cast::<c_void>());
            text
        }
    }
}

impl Drop for LevelStore {
    fn drop(&mut self) {
        // SAFETY: every pointer came from its constructor in `open` and is
        // freed once; the database first, since it uses the others.
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_options_destroy(self.options);
            ffi::leveldb_readoptions_destroy(self.read);
            ffi::leveldb_writeoptions_destroy(self.write);
            if !self.filter.is_null() {
                ffi::leveldb_filterpolicy_destroy(self.filter);
            }
            ffi::leveldb_cache_destroy(self.cache);
        }
    }
}

/// A LevelDB iterator, destroyed when dropped.
struct Iter<'a> {
    it: *mut ffi::leveldb_iterator_t,
    _db: &'a LevelStore,
}

impl<'a> Iter<'a> {
    fn new(db: &'a LevelStore) -> Iter<'a> {
        // SAFETY: the database and read options live as long as `'a`.
        let it = unsafe { ffi::leveldb_create_iterator(db.db, db.read) };
        Iter { it, _db: db }
    }

    /// The current entry, if the iterator is valid. The slices point into
    /// the iterator and are copied by the caller before it moves.
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        // SAFETY: a valid iterator's key and value stay valid until it
        // moves, which needs `&mut self`, so not while they are borrowed.
        unsafe {
            if ffi::leveldb_iter_valid(self.it) == 0 {
                return None;
            }
            let (mut klen, mut vlen) = (0usize, 0usize);
            let k = ffi::leveldb_iter_key(self.it, ptr::addr_of_mut!(klen).cast_const());
            let v = ffi::leveldb_iter_value(self.it, ptr::addr_of_mut!(vlen).cast_const());
            Some((
                std::slice::from_raw_parts(k.cast::<u8>(), klen),
                std::slice::from_raw_parts(v.cast::<u8>(), vlen),
            ))
        }
    }

    /// The iterator's error, if it failed.
    fn status(&self) -> Result<()> {
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: LevelDB writes a malloc'd message (or nothing) to `err`,
        // whose C type is `char**` despite the binding's `const`.
        unsafe {
            ffi::leveldb_iter_get_error(
                self.it,
                ptr::addr_of_mut!(err).cast::<*const c_char>().cast_const(),
            )
        };
        check(err)
    }

    /// Visits up to `limit` entries, moving with `step`, stopping at the
    /// first key `>= below` if given (LevelDB has no iterator bounds).
    fn visit(
        &mut self,
        limit: u64,
        step: unsafe extern "C" fn(*mut ffi::leveldb_iterator_t),
        below: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let mut n = 0;
        while n < limit {
            let Some((k, v)) = self.entry() else { break };
            if below.is_some_and(|b| k >= b) {
                break;
            }
            visit(k, v);
            n += 1;
            // SAFETY: the iterator is valid (`entry` returned one).
            unsafe { step(self.it) };
        }
        self.status()?;
        Ok(n)
    }
}

impl Drop for Iter<'_> {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe { ffi::leveldb_iter_destroy(self.it) };
    }
}

impl Store for LevelStore {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: the pointers and lengths describe live slices; LevelDB
        // copies them.
        unsafe {
            ffi::leveldb_put(
                self.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            )
        };
        check(err)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        let mut err = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: as in `put`; a found value is a malloc'd copy, freed here.
        let v = unsafe {
            ffi::leveldb_get(
                self.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            )
        };
        check(err)?;
        if v.is_null() {
            return Ok(None);
        }
        // SAFETY: as above.
        unsafe { ffi::leveldb_free(v.cast::<c_void>()) };
        Ok(Some(len))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: as in `put`.
        unsafe {
            ffi::leveldb_delete(
                self.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            )
        };
        check(err)
    }

    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        if limit == 0 {
            return Ok(0);
        }
        let mut it = Iter::new(self);
        // SAFETY: the iterator is fresh; the key slice lives across the call.
        unsafe {
            match start {
                Some(s) => ffi::leveldb_iter_seek(it.it, s.as_ptr().cast(), s.len()),
                None => ffi::leveldb_iter_seek_to_first(it.it),
            }
        }
        it.visit(limit, ffi::leveldb_iter_next, end, visit)
    }

    fn scan_rev(
        &self,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        if limit == 0 {
            return Ok(0);
        }
        let mut it = Iter::new(self);
        // SAFETY: the iterator is fresh; the key slice lives across the
        // calls. Seeking to the first key >= end and stepping back past a
        // key > end lands on the last key <= end (LevelDB has no
        // SeekForPrev).
        unsafe {
            match end {
                Some(e) => {
                    ffi::leveldb_iter_seek(it.it, e.as_ptr().cast(), e.len());
                    match it.entry() {
                        Some((k, _)) if k > e => ffi::leveldb_iter_prev(it.it),
                        Some(_) => {}
                        None => ffi::leveldb_iter_seek_to_last(it.it),
                    }
                }
                None => ffi::leveldb_iter_seek_to_last(it.it),
            }
        }
        it.visit(limit, ffi::leveldb_iter_prev, None, visit)
    }
}

#[cfg(test)]
#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test may panic on a failed setup"
)]
mod tests {
    use super::super::check_store_against_a_model;
    use super::*;

    #[test]
    fn leveldb_meets_the_model() {
        let dir = tempfile::tempdir().unwrap();
        // Small buffers, so that the scans cross flushed tables too.
        let args = crate::bench::args::parse(&["--write_buffer_size=4096"])
            .peer_settings()
            .unwrap();
        let (store, _) = LevelStore::open(dir.path(), &args).unwrap();
        check_store_against_a_model(&store);
    }

    #[test]
    fn lz4_maps_to_snappy_zstd_is_refused_and_tables_are_always_mapped() {
        let plan_for = |flags: &[&str]| {
            plan(&crate::bench::args::parse(flags).peer_settings().unwrap())
                .map(|(config, map)| (config.compression as i32, map.render("leveldb")))
        };
        let (kind, text) = plan_for(&[]).unwrap();
        assert_eq!(kind, ffi::Compression::No as i32);
        assert!(text.contains("compression=kNoCompression\n"), "{text}");
        assert!(
            text.contains("differs: LevelDB always maps its tables"),
            "{text}"
        );
        let (kind, text) = plan_for(&["--compression_type=lz4", "--mmap_read"]).unwrap();
        assert_eq!(kind, ffi::Compression::Snappy as i32);
        let line = text.lines().find(|l| l.contains("--compression_type=lz4"));
        assert!(
            line.is_some_and(|l| l.contains("kSnappyCompression")
                && l.contains("differs: LevelDB has only Snappy")),
            "{text}"
        );
        assert!(!text.contains("always maps"), "{text}");
        let err = plan_for(&["--compression_type=zstd:5"]).unwrap_err();
        assert!(err.to_string().contains("no zstd"), "{err}");
    }

    /// `--verify_checksums` reaches LevelDB's read options both ways (true
    /// by default, as lamina's and RocksDB's; LevelDB's own default is
    /// false), and a store reading without checksums still meets the model.
    #[test]
    fn verify_checksums_maps_to_the_read_options() {
        for (flags, verify) in [(&[][..], true), (&["--verify_checksums=false"][..], false)] {
            let s = crate::bench::args::parse(flags).peer_settings().unwrap();
            assert_eq!(s.verify_checksums, verify);
            let text = plan(&s).unwrap().1.render("leveldb");
            let row = format!("--verify_checksums={verify}");
            let line = text.lines().find(|l| l.contains(&row));
            let option = format!("ReadOptions::verify_checksums={verify}");
            assert!(line.is_some_and(|l| l.contains(&option)), "{text}");
        }
        let dir = tempfile::tempdir().unwrap();
        let flags = ["--write_buffer_size=4096", "--verify_checksums=false"];
        let args = crate::bench::args::parse(&flags).peer_settings().unwrap();
        let (store, _) = LevelStore::open(dir.path(), &args).unwrap();
        check_store_against_a_model(&store);
    }
}
