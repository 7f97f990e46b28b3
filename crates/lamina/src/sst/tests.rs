//! Table-level tests: round trips against a `BTreeMap` oracle, filters,
//! corruption and truncation, and the cache interplay.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::compression::Compression;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, seek_key, InternalKey, ValueKind};
use crate::sst::cache::BlockCache;
use crate::stats::IoStats;
use crate::vfs::{OsFs, RandomAccessFile, Vfs};

/// An in-memory file, so corruption tests can mutate bytes cheaply.
#[derive(Debug)]
struct VecFile(Vec<u8>);

impl RandomAccessFile for VecFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.checked_add(buf.len());
        match end.and_then(|e| self.0.get(start..e)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(crate::Error::io(
                "read",
                "vecfile",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
        }
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

type Oracle = BTreeMap<InternalKey, Vec<u8>>;

fn write_table(dir: &Path, name: &str, opts: TableOptions, data: &Oracle) -> TableProperties {
    let file = OsFs.create(&dir.join(name)).unwrap();
    let mut b = TableBuilder::new(file, opts, name.to_string());
    for (k, v) in data {
        b.add(k.as_bytes(), v).unwrap();
    }
    assert_eq!(b.num_entries(), data.len() as u64);
    b.finish(1_000, Some(500)).unwrap().0
}

fn open(dir: &Path, name: &str, cache: Option<Arc<BlockCache>>, stats: Arc<IoStats>) -> Arc<Table> {
    let f = OsFs.open_read(&dir.join(name)).unwrap();
    Table::open(f, 1, name.to_string(), cache, stats).unwrap()
}

/// Random keys with several versions each and some tombstones.
fn random_data(rng: &mut StdRng, n_keys: usize) -> Oracle {
    let mut data = Oracle::new();
    let mut seq = 1u64;
    for _ in 0..n_keys {
        let klen = rng.gen_range(1..24);
        let key: Vec<u8> = (0..klen).map(|_| rng.gen_range(b'a'..=b'h')).collect();
        for _ in 0..rng.gen_range(1..4) {
            seq += rng.gen_range(1..5);
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value: Vec<u8> = if kind == ValueKind::Put {
                (0..rng.gen_range(0..100)).map(|_| rng.gen()).collect()
            } else {
                Vec::new()
            };
            data.insert(InternalKey::new(make_internal_key(&key, seq, kind)), value);
        }
    }
    data
}

/// What `get` must return according to the oracle.
fn oracle_get(data: &Oracle, user_key: &[u8], snap: u64) -> Option<(ValueKind, u64, Vec<u8>)> {
    let target = InternalKey::new(seek_key(user_key, snap));
    let (k, v) = data.range(target..).next()?;
    let p = parse_internal_key(k.as_bytes())?;
    (p.user_key == user_key).then(|| (p.kind, p.seq, v.clone()))
}

fn collect(it: &mut TableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// [`random_data`] with values that compress: runs of 16 equal letters
/// (the random values' bytes pick the letters).
fn compressible_data(rng: &mut StdRng, n_keys: usize) -> Oracle {
    random_data(rng, n_keys)
        .into_iter()
        .map(|(k, v)| {
            let text = (0..v.len()).map(|i| b'a' + v[i / 16] % 4).collect();
            (k, text)
        })
        .collect()
}

#[test]
fn round_trip_against_oracle() {
    let mut rng = StdRng::seed_from_u64(42);
    let data = random_data(&mut rng, 3000);
    round_trip(false, Compression::None, &data, &mut rng);
}

/// The same through a mapping of the file: blocks are slices of it.
#[test]
fn round_trip_against_oracle_mapped() {
    let mut rng = StdRng::seed_from_u64(42);
    let data = random_data(&mut rng, 3000);
    round_trip(true, Compression::None, &data, &mut rng);
}

/// Compressed tables, read both ways, against the oracle; the data
/// blocks' uncompressed size is what the same table takes uncompressed.
#[test]
fn compressed_tables_round_trip() {
    let mut rng = StdRng::seed_from_u64(43);
    let data = compressible_data(&mut rng, 3000);
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        block_size: 512,
        ..TableOptions::default()
    };
    let raw = write_table(dir.path(), "raw.sst", opts, &data);
    for compression in [Compression::Lz4, Compression::Zstd(3)] {
        for mapped in [false, true] {
            let props = round_trip(mapped, compression, &data, &mut rng);
            assert_eq!(props.compression, compression);
            assert_eq!(props.uncompressed_data_bytes, raw.data_bytes);
            assert!(
                props.data_bytes * 2 < raw.data_bytes,
                "{compression}: {} of {}",
                props.data_bytes,
                raw.data_bytes
            );
            assert!(props.compressed_blocks > 10, "{compression}");
            assert!(props.index_bytes < raw.index_bytes, "index compressed too");
            assert_eq!(props.filter_bytes, raw.filter_bytes, "filter kept raw");
        }
    }
}

/// Returns the table's properties after checking it against `data`.
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
fn round_trip(
    mapped: bool,
    compression: Compression,
    data: &Oracle,
    rng: &mut StdRng,
) -> TableProperties {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        block_size: 512,
        compression,
        ..TableOptions::default()
    };
    let props = write_table(dir.path(), "t.sst", opts, data);
    let stats = Arc::new(IoStats::default());
    let cache = BlockCache::new(1 << 20);
    let table = if mapped {
        let f = OsFs.open_read(&dir.path().join("t.sst")).unwrap();
        let map = f.map().unwrap();
        assert!(map.is_some());
        Table::open_mapped(
            f,
            map,
            1,
            "t.sst".into(),
            Some(cache.clone()),
            stats.clone(),
            true,
            0,
            false,
        )
        .unwrap()
    } else {
        open(dir.path(), "t.sst", Some(cache.clone()), stats.clone())
    };
    assert_eq!(table.properties(), &props);
    assert_eq!(props.entries, data.len() as u64);
    let tomb = data
        .keys()
        .filter(|k| k.as_bytes()[k.as_bytes().len() - 8] == 0)
        .count() as u64;
    assert_eq!(props.tombstones, tomb);
    assert_eq!(props.oldest_tombstone_time, Some(500));
    assert_eq!(props.creation_time, 1_000);
    let first = parse_internal_key(data.keys().next().unwrap().as_bytes()).unwrap();
    let last = parse_internal_key(data.keys().last().unwrap().as_bytes()).unwrap();
    assert_eq!(props.smallest_key, first.user_key);
    assert_eq!(props.largest_key, last.user_key);
    assert!(table.num_data_blocks() > 10, "want many blocks");
    table.verify().unwrap();

    // Full iteration.
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    let all = collect(&mut it);
    let expect: Vec<_> = data
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
        .collect();
    assert_eq!(all, expect);

    // Point lookups at various snapshots, present and absent keys.
    let max_seq = props.largest_seq;
    for (k, _) in data.iter().step_by(3) {
        let p = parse_internal_key(k.as_bytes()).unwrap();
        for snap in [
            p.seq,
            p.seq.saturating_sub(1),
            p.seq + 1,
            max_seq,
            u64::MAX,
            0,
        ] {
            assert_eq!(
                table.get(p.user_key, snap).unwrap(),
                oracle_get(data, p.user_key, snap),
                "key {:?} snap {snap}",
                p.user_key
            );
        }
    }
    for _ in 0..2000 {
        let key: Vec<u8> = (0..rng.gen_range(0..6))
            .map(|_| rng.gen_range(b'a'..=b'i'))
            .collect();
        let snap = rng.gen_range(0..max_seq + 2);
        assert_eq!(table.get(&key, snap).unwrap(), oracle_get(data, &key, snap));
    }

    // Seeks to random targets, then a few steps.
    for _ in 0..2000 {
        let key: Vec<u8> = (0..rng.gen_range(0..6))
            .map(|_| rng.gen_range(b'a'..=b'i'))
            .collect();
        let target = seek_key(&key, rng.gen_range(0..max_seq + 2));
        it.seek(&target).unwrap();
        let mut exp = data.range(InternalKey::new(target.clone())..);
        for _ in 0..3 {
            match exp.next() {
                Some((k, v)) => {
                    assert!(it.valid());
                    assert_eq!(it.key(), k.as_bytes());
                    assert_eq!(it.value(), &v[..]);
                    it.next().unwrap();
                }
                None => {
                    assert!(!it.valid());
                    break;
                }
            }
        }
    }
    assert!(stats.cache_hits[0].get() > 0);
    assert!(cache.usage() > 0);

    // A compaction's sequential read (readahead, decompressing from its
    // own buffer) yields the same entries.
    let mut it = table.iter_with(TableIterOptions {
        compaction_readahead: Some(4096),
        ..TableIterOptions::default()
    });
    it.seek_to_first().unwrap();
    assert_eq!(collect(&mut it), expect);

    // The cache holds the first block decompressed, charged by its
    // contents: what decompressing its stored bytes with the codec's own
    // decoder gives.
    let cache = BlockCache::new(1 << 20);
    let f = OsFs.open_read(&dir.path().join("t.sst")).unwrap();
    let table = Table::open(f, 2, "t.sst".into(), Some(cache.clone()), stats).unwrap();
    let first = parse_internal_key(data.keys().next().unwrap().as_bytes()).unwrap();
    table.get(first.user_key, u64::MAX).unwrap();
    let block0 = &table.block_reports().unwrap()[0];
    let bytes = std::fs::read(dir.path().join("t.sst")).unwrap();
    let stored = &bytes[block0.offset as usize..(block0.offset + block0.size) as usize];
    let contents = match compression {
        Compression::None => stored.len(),
        Compression::Lz4 => lz4_flex::block::decompress_size_prepended(stored)
            .unwrap()
            .len(),
        Compression::Zstd(_) => zstd::bulk::decompress(&stored[4..], 1 << 20).unwrap().len(),
    };
    assert_eq!(block0.stored_type, Some(compression.type_byte()));
    assert_eq!(cache.usage(), contents);
    if compression != Compression::None {
        assert!(contents > stored.len() * 2, "{contents} {}", stored.len());
    }
    props
}

/// Values of random bytes do not shrink by an eighth: every data block is
/// stored raw, byte for byte as without compression.
#[test]
fn incompressible_blocks_are_stored_raw() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(44);
    let mut data = Oracle::new();
    for i in 0..2000u32 {
        let key = make_internal_key(&i.to_be_bytes(), 1, ValueKind::Put);
        let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
        data.insert(InternalKey::new(key), value);
    }
    let raw = write_table(dir.path(), "raw.sst", TableOptions::default(), &data);
    let raw_bytes = std::fs::read(dir.path().join("raw.sst")).unwrap();
    for compression in [Compression::Lz4, Compression::Zstd(3)] {
        let opts = TableOptions {
            compression,
            ..TableOptions::default()
        };
        let props = write_table(dir.path(), "c.sst", opts, &data);
        assert_eq!(props.compressed_blocks, 0, "{compression}");
        assert_eq!(props.data_bytes, raw.data_bytes);
        assert_eq!(props.uncompressed_data_bytes, raw.data_bytes);
        let bytes = std::fs::read(dir.path().join("c.sst")).unwrap();
        let n = raw.data_bytes as usize;
        assert_eq!(bytes[..n], raw_bytes[..n], "{compression}");
        let table = open(dir.path(), "c.sst", None, Arc::new(IoStats::default()));
        table.verify().unwrap();
        assert!(table
            .block_reports()
            .unwrap()
            .iter()
            .all(|b| b.stored_type == Some(0)));
    }
}

#[test]
fn empty_table() {
    let dir = tempfile::tempdir().unwrap();
    let props = write_table(dir.path(), "e.sst", TableOptions::default(), &Oracle::new());
    assert_eq!(props.entries, 0);
    let table = open(dir.path(), "e.sst", None, Arc::new(IoStats::default()));
    assert_eq!(table.properties(), &props);
    assert_eq!(table.get(b"x", u64::MAX).unwrap(), None);
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek(&seek_key(b"", 0)).unwrap();
    assert!(!it.valid());
    table.verify().unwrap();
}

#[test]
fn builder_rejects_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = OsFs.create(&dir.path().join("x.sst")).unwrap();
    let mut b = TableBuilder::new(file, TableOptions::default(), "x.sst".into());
    b.add(&make_internal_key(b"b", 5, ValueKind::Put), b"v")
        .unwrap();
    let dup = make_internal_key(b"b", 5, ValueKind::Put);
    assert!(matches!(
        b.add(&dup, b"v"),
        Err(crate::Error::InvalidArgument(_))
    ));
    let older_first = make_internal_key(b"a", 1, ValueKind::Put);
    assert!(matches!(
        b.add(&older_first, b"v"),
        Err(crate::Error::InvalidArgument(_))
    ));
    let newer_same = make_internal_key(b"b", 6, ValueKind::Put);
    assert!(b.add(&newer_same, b"v").is_err());
    assert!(b.add(b"short", b"v").is_err());
    b.add(&make_internal_key(b"b", 4, ValueKind::Delete), b"")
        .unwrap();
    assert!(b.estimated_size() > 0);
    let props = b.finish(1, None).unwrap().0;
    assert_eq!((props.entries, props.tombstones), (2, 1));
}

#[test]
fn bloom_filter_behaviour() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = Oracle::new();
    for i in 0..10_000u32 {
        data.insert(
            InternalKey::new(make_internal_key(
                format!("key{i:06}").as_bytes(),
                1,
                ValueKind::Put,
            )),
            b"v".to_vec(),
        );
    }
    write_table(dir.path(), "b.sst", TableOptions::default(), &data);
    let stats = Arc::new(IoStats::default());
    let table = open(dir.path(), "b.sst", None, stats.clone());
    for i in 0..10_000u32 {
        let k = format!("key{i:06}");
        assert!(table.may_contain(k.as_bytes()).unwrap());
    }
    let theory = table.bloom_fpr_theoretical();
    assert!((0.005..0.012).contains(&theory), "theory {theory}");
    let trials = 50_000u32;
    let mut fp = 0;
    for i in 0..trials {
        // Interleaved absent keys, inside the table's key range.
        let k = format!("key{:06}x", i % 10_000);
        if table.get(k.as_bytes(), u64::MAX).unwrap().is_some() {
            panic!("absent key found");
        }
        if table.may_contain(k.as_bytes()).unwrap() {
            fp += 1;
        }
    }
    let measured = fp as f64 / f64::from(trials);
    assert!(
        measured < theory * 1.6 && measured > theory * 0.4,
        "measured {measured} theory {theory}"
    );
    assert_eq!(stats.bloom_probes.get(), u64::from(trials));
    assert_eq!(stats.bloom_false_positives.get(), fp as u64);
    assert_eq!(stats.bloom_negatives.get(), u64::from(trials) - fp as u64);

    // A key present only in versions newer than the snapshot is not a false positive.
    let before = stats.bloom_false_positives.get();
    let mut d2 = Oracle::new();
    d2.insert(
        InternalKey::new(make_internal_key(b"k", 10, ValueKind::Put)),
        b"v".to_vec(),
    );
    write_table(dir.path(), "c.sst", TableOptions::default(), &d2);
    let t2 = open(dir.path(), "c.sst", None, stats.clone());
    assert_eq!(t2.get(b"k", 5).unwrap(), None);
    assert_eq!(stats.bloom_false_positives.get(), before);

    // bits_per_key = 0: no filter.
    write_table(
        dir.path(),
        "n.sst",
        TableOptions {
            bloom_bits_per_key: 0.0,
            ..TableOptions::default()
        },
        &d2,
    );
    let t3 = open(dir.path(), "n.sst", None, stats.clone());
    assert!(t3.may_contain(b"anything").unwrap());
    assert_eq!(t3.bloom_fpr_theoretical(), 1.0);
    let probes = stats.bloom_probes.get();
    assert_eq!(
        t3.get(b"k", 20).unwrap(),
        Some((ValueKind::Put, 10, b"v".to_vec()))
    );
    assert_eq!(stats.bloom_probes.get(), probes);
}

/// Checks that a table opened from `bytes` never yields a wrong answer:
/// every operation gives the right result or `Corruption`, and `verify`
/// reports `Corruption` whenever `must_fail`.
/// Both ways of reading: copies (`read_exact_at`) and a mapping of the
/// file ([`Table::open_mapped`]).
fn check_damaged(bytes: Vec<u8>, data: &Oracle, must_fail: bool, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dmg.sst");
    std::fs::write(&path, &bytes).unwrap();
    let file = OsFs.open_read(&path).unwrap();
    let map = file.map().unwrap();
    assert_eq!(map.is_some(), !bytes.is_empty());
    let mapped = Table::open_mapped(
        file,
        map,
        9,
        "dmg.sst".into(),
        None,
        Arc::new(IoStats::default()),
        true,
        0,
        false,
    );
    check_damaged_table(mapped, data, must_fail, &format!("{what} (mapped)"));
    let file: Arc<dyn RandomAccessFile> = Arc::new(VecFile(bytes));
    let copied = Table::open(
        file,
        9,
        "dmg.sst".into(),
        None,
        Arc::new(IoStats::default()),
    );
    check_damaged_table(copied, data, must_fail, what);
}

fn check_damaged_table(table: Result<Arc<Table>>, data: &Oracle, must_fail: bool, what: &str) {
    let table = match table {
        Ok(t) => t,
        Err(e) => {
            assert!(e.is_corruption(), "{what}: open gave {e}");
            return;
        }
    };
    match table.verify() {
        Ok(()) => assert!(!must_fail, "{what}: verify missed the damage"),
        Err(e) => assert!(e.is_corruption(), "{what}: verify gave {e}"),
    }
    for k in data.keys() {
        let p = parse_internal_key(k.as_bytes()).unwrap();
        match table.get(p.user_key, u64::MAX) {
            Ok(got) => assert_eq!(got, oracle_get(data, p.user_key, u64::MAX), "{what}"),
            Err(e) => assert!(e.is_corruption(), "{what}: get gave {e}"),
        }
    }
    let mut it = table.iter();
    let mut expect = data.iter();
    let mut res = it.seek_to_first();
    loop {
        match res {
            Err(e) => {
                assert!(e.is_corruption(), "{what}: iter gave {e}");
                break;
            }
            Ok(()) => match expect.next() {
                Some((k, v)) => {
                    assert!(it.valid(), "{what}: iterator ended early without error");
                    assert_eq!((it.key(), it.value()), (k.as_bytes(), &v[..]), "{what}");
                    res = it.next();
                }
                None => {
                    assert!(!it.valid(), "{what}: extra entries");
                    break;
                }
            },
        }
    }
}

fn small_table() -> (Vec<u8>, Oracle) {
    let mut rng = StdRng::seed_from_u64(7);
    small_table_of(random_data(&mut rng, 25), Compression::None)
}

fn small_table_of(data: Oracle, compression: Compression) -> (Vec<u8>, Oracle) {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        block_size: 128,
        restart_interval: 4,
        compression,
        ..TableOptions::default()
    };
    let props = write_table(dir.path(), "s.sst", opts, &data);
    if compression != Compression::None {
        assert!(props.compressed_blocks > 3, "{compression}: {props:?}");
    }
    (std::fs::read(dir.path().join("s.sst")).unwrap(), data)
}

/// Damage to a compressed table (its compressed data and index blocks,
/// their type bytes and lengths) is always detected: a wrong answer never,
/// a panic never.
#[test]
fn every_byte_flip_of_a_compressed_table_is_detected() {
    for compression in [Compression::Lz4, Compression::Zstd(3)] {
        let mut rng = StdRng::seed_from_u64(8);
        let (bytes, data) = small_table_of(compressible_data(&mut rng, 25), compression);
        check_damaged(bytes.clone(), &data, false, "pristine");
        for pos in 0..bytes.len() {
            for mask in [0x01u8, 0xff] {
                let mut bad = bytes.clone();
                bad[pos] ^= mask;
                let what = format!("{compression}: flip {mask:#x} at {pos}");
                check_damaged(bad, &data, true, &what);
            }
        }
        for len in 0..bytes.len() {
            let what = format!("{compression}: truncated to {len}");
            check_damaged(bytes[..len].to_vec(), &data, true, &what);
        }
    }
}

#[test]
fn every_byte_flip_is_detected() {
    let (bytes, data) = small_table();
    assert!(bytes.len() > 500);
    check_damaged(bytes.clone(), &data, false, "pristine");
    for pos in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[pos] ^= mask;
            check_damaged(bad, &data, true, &format!("flip {mask:#x} at {pos}"));
        }
    }
}

#[test]
fn truncated_and_extended_files_are_corrupt() {
    let (bytes, data) = small_table();
    for len in 0..bytes.len() {
        check_damaged(
            bytes[..len].to_vec(),
            &data,
            true,
            &format!("truncated to {len}"),
        );
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0u8; 10]);
    check_damaged(longer, &data, true, "extended");
}

#[test]
fn garbage_and_absurd_lengths_are_corrupt() {
    let mut rng = StdRng::seed_from_u64(3);
    for len in [0usize, 10, 63, 64, 65, 200, 5000] {
        let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        check_damaged(bytes, &Oracle::new(), true, &format!("garbage {len}"));
    }
    // A footer with a valid checksum whose handles claim gigabytes.
    let footer = format::Footer {
        filter: format::BlockHandle {
            offset: 0,
            size: 1 << 40,
        },
        index: format::BlockHandle {
            offset: (1 << 40) + 5,
            size: 1 << 41,
        },
        properties: format::BlockHandle {
            offset: 3 << 40,
            size: 10,
        },
        version: format::FORMAT_VERSION,
    };
    check_damaged(footer.encode(), &Oracle::new(), true, "huge handles");
}

#[test]
fn data_block_corruption_names_the_block() {
    let (mut bytes, _) = small_table();
    bytes[3] ^= 0x40;
    let file: Arc<dyn RandomAccessFile> = Arc::new(VecFile(bytes));
    let table = Table::open(
        file,
        1,
        "named.sst".into(),
        None,
        Arc::new(IoStats::default()),
    )
    .unwrap();
    match table.verify() {
        Err(crate::Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, "named.sst");
            assert_eq!(offset, 0);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn cache_serves_repeat_reads_and_evict_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let data = random_data(&mut rng, 500);
    let opts = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    write_table(dir.path(), "c.sst", opts, &data);
    let stats = Arc::new(IoStats::default());
    let cache = BlockCache::new(8 << 20);
    let table = open(dir.path(), "c.sst", Some(cache.clone()), stats.clone());
    assert_eq!(stats.cache_misses[1].get(), 1, "index miss at open");
    assert_eq!(stats.cache_misses[2].get(), 1, "filter miss at open");
    let nblocks = table.num_data_blocks() as u64;

    let mut it = table.iter_with(TableIterOptions {
        fill_cache: false,
        ..TableIterOptions::default()
    });
    it.seek_to_first().unwrap();
    collect(&mut it);
    assert_eq!(cache.usage(), 0, "no-fill scan leaves the cache alone");

    let mut it = table.iter();
    it.seek_to_first().unwrap();
    collect(&mut it);
    let reads = stats.blocks_read.get();
    assert_eq!(cache.evict_file(2), 0);
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    collect(&mut it);
    assert_eq!(
        stats.blocks_read.get(),
        reads,
        "second scan served from cache"
    );
    assert_eq!(stats.cache_hits[0].get(), nblocks);
    assert_eq!(cache.evict_file(1), nblocks);
    assert_eq!(cache.usage(), 0);
}

#[test]
fn table_is_send_sync_and_iterator_static() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_static_iter<T: InternalIterator + 'static>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    assert_static_iter::<TableIterator>();
}

#[test]
fn versions_spanning_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = Oracle::new();
    for seq in 1..=200u64 {
        let kind = if seq % 7 == 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        data.insert(
            InternalKey::new(make_internal_key(b"hot", seq, kind)),
            seq.to_le_bytes().to_vec(),
        );
    }
    data.insert(
        InternalKey::new(make_internal_key(b"a", 3, ValueKind::Put)),
        b"a".to_vec(),
    );
    data.insert(
        InternalKey::new(make_internal_key(b"z", 300, ValueKind::Put)),
        b"z".to_vec(),
    );
    let opts = TableOptions {
        block_size: 64,
        restart_interval: 2,
        ..TableOptions::default()
    };
    write_table(dir.path(), "v.sst", opts, &data);
    let table = open(dir.path(), "v.sst", None, Arc::new(IoStats::default()));
    assert!(table.num_data_blocks() > 20);
    for snap in 0..=305u64 {
        for key in [&b"hot"[..], b"a", b"z", b"ho", b"hotx"] {
            assert_eq!(
                table.get(key, snap).unwrap(),
                oracle_get(&data, key, snap),
                "snap {snap}"
            );
        }
    }
    table.verify().unwrap();
}

#[test]
fn iterate_backward_and_turn_across_blocks() {
    use crate::iter::tests::{backward_walk, check_moves, random_moves};
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(77);
    for (i, (block_size, restart_interval)) in [(64, 1), (256, 3), (512, 16), (4096, 4)]
        .into_iter()
        .enumerate()
    {
        let data = random_data(&mut rng, 300);
        let opts = TableOptions {
            block_size,
            restart_interval,
            ..TableOptions::default()
        };
        let name = format!("r{i}.sst");
        write_table(dir.path(), &name, opts, &data);
        let table = open(dir.path(), &name, None, Arc::new(IoStats::default()));
        let entries: Vec<(Vec<u8>, Vec<u8>)> = data
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
            .collect();
        let mut it = table.iter();
        check_moves(&mut it, &entries, &backward_walk(entries.len()));
        let moves = random_moves(&mut rng, &entries, 2000);
        check_moves(&mut it, &entries, &moves);
    }
}

#[test]
fn backward_over_a_damaged_block_is_an_error_not_a_panic() {
    let (bytes, _) = small_table();
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x40;
        let Ok(t) = Table::open(
            Arc::new(VecFile(bad)),
            1,
            "bad.sst".into(),
            None,
            Arc::new(IoStats::default()),
        ) else {
            continue;
        };
        let mut it = t.iter();
        if it.seek_to_last().is_ok() {
            for _ in 0..1000 {
                if it.prev().is_err() || !it.valid() {
                    break;
                }
            }
        }
    }
}

/// A file that counts its reads.
#[derive(Debug)]
struct CountingFile(VecFile, std::sync::atomic::AtomicU64);

impl RandomAccessFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.read_exact_at(buf, offset)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
}

#[test]
fn readahead_reads_chunks_of_blocks_and_yields_the_same_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let data = random_data(&mut rng, 2000);
    let opts = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    write_table(dir.path(), "r.sst", opts, &data);
    let bytes = std::fs::read(dir.path().join("r.sst")).unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = data
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
        .collect();
    for (readahead, bad) in [
        (0usize, false),
        (1, false),
        (4096, false),
        (1 << 30, false),
        (4096, true),
    ] {
        let mut bytes = bytes.clone();
        if bad {
            bytes[7_000] ^= 0x10; // inside some data block past the first chunk
        }
        let file = Arc::new(CountingFile(VecFile(bytes), Default::default()));
        let stats = Arc::new(IoStats::default());
        let cache = BlockCache::new(1 << 20);
        let table = Table::open(
            file.clone(),
            1,
            "r.sst".into(),
            Some(cache.clone()),
            stats.clone(),
        )
        .unwrap();
        let blocks = table.num_data_blocks() as u64;
        assert!(blocks > 100);
        let at_open = file.1.load(std::sync::atomic::Ordering::Relaxed);
        let blocks_at_open = stats.blocks_read.get();
        let mut it = table.iter_with(TableIterOptions {
            compaction_readahead: Some(readahead),
            ..TableIterOptions::default()
        });
        let mut got = Vec::new();
        let mut failed = None;
        match it.seek_to_first() {
            Ok(()) => {
                while it.valid() {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    if let Err(e) = it.next() {
                        failed = Some(e);
                        break;
                    }
                }
            }
            Err(e) => failed = Some(e),
        }
        if bad {
            assert!(
                matches!(failed, Some(crate::Error::Corruption { ref file, .. }) if file == "r.sst"),
                "{failed:?}"
            );
            continue;
        }
        assert!(failed.is_none(), "{failed:?}");
        assert_eq!(got, expected, "readahead {readahead}");
        let reads = file.1.load(std::sync::atomic::Ordering::Relaxed) - at_open;
        // Every block is read once either way; with readahead, in chunks.
        assert_eq!(
            stats.blocks_read.get() - blocks_at_open,
            blocks,
            "readahead {readahead}"
        );
        let data_bytes: u64 = (blocks as f64 * 256.0) as u64;
        let most = match readahead {
            0 | 1 => blocks,
            n => blocks.min(data_bytes.div_ceil(n as u64) * 2 + 1),
        };
        assert!(
            reads <= most,
            "readahead {readahead}: {reads} reads of {blocks} blocks"
        );
        if readahead >= 1 << 30 {
            assert_eq!(reads, 1, "the whole data section in one read");
        }
        assert_eq!(
            cache.usage(),
            0,
            "a compaction's reads stay out of the cache"
        );
    }
}

/// `small_table`'s entries plus range tombstones, some reaching beyond
/// the points on both sides.
fn table_with_range_tombstones() -> (Vec<u8>, Oracle, Vec<crate::range_del::RangeTombstone>) {
    use crate::range_del::RangeTombstone;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let data = random_data(&mut rng, 25);
    let opts = TableOptions {
        block_size: 128,
        restart_interval: 4,
        ..TableOptions::default()
    };
    let t = |s: &[u8], e: &[u8], seq| RangeTombstone {
        start: s.to_vec(),
        end: e.to_vec(),
        seq,
    };
    let tombs = vec![
        t(b"c", b"e", 40),
        t(b"A", b"b", 7),
        t(b"c", b"d", 3),
        t(b"g", b"zz", 900),
    ];
    let file = OsFs.create(&dir.path().join("r.sst")).unwrap();
    let mut b = TableBuilder::new(file, opts, "r.sst".into());
    for tomb in &tombs {
        b.add_range_tombstone(tomb.clone()).unwrap();
    }
    assert!(b.add_range_tombstone(t(b"b", b"b", 1)).is_err());
    for (k, v) in &data {
        b.add(k.as_bytes(), v).unwrap();
    }
    let props = b.finish(1_000, Some(500)).unwrap().0;
    assert_eq!(props.range_tombstones, 4);
    assert_eq!(props.smallest_key, b"A");
    assert_eq!(props.largest_key, b"zz");
    assert_eq!(props.largest_seq, 900);
    let mut sorted = tombs;
    crate::range_del::sort(&mut sorted);
    (
        std::fs::read(dir.path().join("r.sst")).unwrap(),
        data,
        sorted,
    )
}

#[test]
fn range_tombstones_round_trip_and_every_flip_is_detected() {
    let (bytes, data, tombs) = table_with_range_tombstones();
    let open_bytes = |b: Vec<u8>| {
        Table::open(
            Arc::new(VecFile(b)),
            9,
            "r.sst".into(),
            None,
            Arc::new(IoStats::default()),
        )
    };
    let table = open_bytes(bytes.clone()).unwrap();
    assert_eq!(table.range_tombstones(), &tombs[..]);
    assert_eq!(table.range_del_seq(b"cc", u64::MAX), 40);
    assert_eq!(table.range_del_seq(b"cc", 39), 3);
    assert_eq!(table.range_del_seq(b"e", u64::MAX), 0);
    table.verify().unwrap();
    check_damaged(bytes.clone(), &data, false, "pristine");
    for pos in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x01;
        if let Ok(t) = open_bytes(bad.clone()) {
            assert_eq!(t.range_tombstones(), &tombs[..], "flip at {pos}");
        }
        check_damaged(bad, &data, true, &format!("flip at {pos}"));
    }
}

/// Rewrites a table's footer with format version `version` (checksum
/// recomputed), as an older or newer writer would have left it.
fn with_footer_version(mut bytes: Vec<u8>, version: u32) -> Vec<u8> {
    let at = bytes.len() - FOOTER_LEN;
    let footer = Footer {
        version,
        ..super::format::Footer::decode(&bytes[at..]).unwrap()
    };
    bytes[at..].copy_from_slice(&footer.encode());
    bytes
}

#[test]
fn version_1_tables_still_read_and_cannot_hold_range_tombstones() {
    let (bytes, data) = small_table();
    let v1 = with_footer_version(bytes, 1);
    check_damaged(v1.clone(), &data, false, "version 1");
    let t = Table::open(
        Arc::new(VecFile(v1)),
        9,
        "v1.sst".into(),
        None,
        Arc::new(IoStats::default()),
    )
    .unwrap();
    t.verify().unwrap();
    assert!(t.range_tombstones().is_empty());
    let (bytes, _, _) = table_with_range_tombstones();
    let err = Table::open(
        Arc::new(VecFile(with_footer_version(bytes, 1))),
        9,
        "v1r.sst".into(),
        None,
        Arc::new(IoStats::default()),
    )
    .unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

/// A file whose bytes a test can change after the table opened it.
#[derive(Debug)]
struct MutableFile(parking_lot::Mutex<Vec<u8>>);

impl RandomAccessFile for MutableFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        VecFile(self.0.lock().clone()).read_exact_at(buf, offset)
    }
    fn len(&self) -> u64 {
        self.0.lock().len() as u64
    }
}

/// A block's checksum is verified when the block comes from the file, and
/// not again on cache hits: damage done after the block was cached goes
/// unseen until the block is read from the file again, and is then found.
#[test]
fn checksums_are_verified_on_reads_from_the_file_not_on_cache_hits() {
    let (bytes, data) = small_table();
    let file = Arc::new(MutableFile(parking_lot::Mutex::new(bytes)));
    let stats = Arc::new(IoStats::default());
    let cache = BlockCache::new(1 << 20);
    let table = Table::open(
        file.clone(),
        3,
        "m.sst".into(),
        Some(cache.clone()),
        stats.clone(),
    )
    .unwrap();
    let (k, _) = data.iter().next().unwrap();
    let p = parse_internal_key(k.as_bytes()).unwrap();
    let want = oracle_get(&data, p.user_key, u64::MAX);
    assert_eq!(table.get(p.user_key, u64::MAX).unwrap(), want);
    let reads = stats.blocks_read.get();
    // Damage the first data block (it holds the first key).
    file.0.lock()[3] ^= 0x40;
    assert_eq!(table.get(p.user_key, u64::MAX).unwrap(), want);
    assert_eq!(stats.blocks_read.get(), reads, "served by the cache");
    assert!(cache.evict_file(3) > 0);
    let err = table.get(p.user_key, u64::MAX).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

/// With [`crate::Options::verify_checksums`] off, a query's read from the
/// file skips the checksum, so a flipped value byte reaches the caller as
/// the flipped value (no panic, no error), and the block enters the cache
/// marked unverified. A verifying reader of the same cached block (a query
/// of a verifying table; a compaction's input, which always verifies)
/// does not take it from the cache: it reads the block again and reports
/// the damage, and the unverifying reader still gets its cached copy.
#[test]
fn blocks_read_unverified_are_cached_as_such_and_checked_again_by_verifying_readers() {
    let (mut bytes, data) = small_table();
    // A newest version with a value of 8 bytes or more (random bytes, found
    // in the uncompressed file by them): its first byte flipped.
    let (idx, (k, v)) = data
        .iter()
        .enumerate()
        .find(|(_, (k, v))| {
            let p = parse_internal_key(k.as_bytes()).unwrap();
            v.len() >= 8
                && oracle_get(&data, p.user_key, u64::MAX).is_some_and(|(_, s, _)| s == p.seq)
        })
        .unwrap();
    let p = parse_internal_key(k.as_bytes()).unwrap();
    let at = bytes
        .windows(v.len())
        .position(|w| w == v.as_slice())
        .unwrap();
    bytes[at] ^= 0x01;
    let mut flipped = v.clone();
    flipped[0] ^= 0x01;
    let file: Arc<dyn RandomAccessFile> = Arc::new(MutableFile(parking_lot::Mutex::new(bytes)));
    let stats = Arc::new(IoStats::default());
    let cache = BlockCache::new(1 << 20);
    let table = |verify: bool| {
        let (file, cache, stats) = (file.clone(), cache.clone(), stats.clone());
        Table::open_mapped(
            file,
            None,
            3,
            "m.sst".into(),
            Some(cache),
            stats,
            verify,
            0,
            false,
        )
        .unwrap()
    };
    let (unverified, verified) = (table(false), table(true));
    let walk = |it: &mut TableIterator| -> Result<usize> {
        it.seek_to_first()?;
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next()?;
        }
        Ok(n)
    };

    let got = unverified.get(p.user_key, u64::MAX).unwrap();
    assert_eq!(
        got,
        Some((p.kind, p.seq, flipped.clone())),
        "read unchecked"
    );
    let reads = stats.blocks_read.get();
    assert_eq!(cache.cached_blocks(3), 1);
    assert_eq!(unverified.get(p.user_key, u64::MAX).unwrap(), got);
    assert_eq!(stats.blocks_read.get(), reads, "served by the cache");

    // The verifying table reads the block again and finds the damage.
    let err = verified.get(p.user_key, u64::MAX).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert_eq!(
        stats.blocks_read.get(),
        reads + 1,
        "read again from the file"
    );
    assert!(walk(&mut verified.iter()).unwrap_err().is_corruption());
    // So does a compaction's input, whichever table it reads through.
    for t in [&unverified, &verified] {
        let err = walk(&mut t.iter_with(TableIterOptions {
            compaction_readahead: Some(4096),
            ..TableIterOptions::default()
        }))
        .unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
    // The unverified copy is still what the unverifying table gets, and
    // its scan yields the oracle's entries with the one flipped value.
    assert_eq!(unverified.get(p.user_key, u64::MAX).unwrap(), got);
    let mut it = unverified.iter();
    it.seek_to_first().unwrap();
    let mut expect: Vec<_> = data
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
        .collect();
    expect[idx].1 = flipped;
    assert_eq!(collect(&mut it), expect);
}

/// A compressed block whose checksum is valid but whose stored bytes are
/// damaged (as a buggy writer or a crafted file would have): reading it is
/// a `Corruption` naming its offset, or the codec decodes other bytes that
/// the block decoder then checks; never a panic or an unbounded
/// allocation.
#[test]
fn damaged_compressed_blocks_behind_valid_checksums_are_errors() {
    for compression in [Compression::Lz4, Compression::Zstd(3)] {
        let mut rng = StdRng::seed_from_u64(9);
        let (bytes, data) = small_table_of(compressible_data(&mut rng, 25), compression);
        let reopen = |bytes: Vec<u8>| {
            let file: Arc<dyn RandomAccessFile> = Arc::new(VecFile(bytes));
            Table::open(file, 1, "c.sst".into(), None, Arc::new(IoStats::default()))
        };
        let table = reopen(bytes.clone()).unwrap();
        let blocks = table.block_reports().unwrap();
        let b = blocks.iter().find(|b| b.stored_type != Some(0)).unwrap();
        let (start, end) = (b.offset as usize, (b.offset + b.size) as usize);
        let with_trailer = |mut bytes: Vec<u8>| {
            let kind = bytes[end];
            let trailer = format::block_trailer(&bytes[start..end], kind);
            bytes[end..end + 5].copy_from_slice(&trailer);
            bytes
        };
        let first_key = |b: &super::check::BlockReport| b.first_key.clone();
        // An uncompressed length over the cap, and lengths one off.
        let len = u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap());
        for claimed in [u32::MAX, len - 1, len + 1] {
            let mut bad = bytes.clone();
            bad[start..start + 4].copy_from_slice(&claimed.to_le_bytes());
            let table = reopen(with_trailer(bad)).unwrap();
            match table.get(&first_key(b), u64::MAX) {
                Err(crate::Error::Corruption { offset, .. }) => assert_eq!(offset, b.offset),
                other => panic!("{compression} length {claimed}: {other:?}"),
            }
            assert!(table.verify().unwrap_err().is_corruption());
        }
        // An unknown type byte with a valid checksum.
        let mut bad = bytes.clone();
        bad[end] = 2;
        let table = reopen(with_trailer(bad)).unwrap();
        assert!(table
            .get(&first_key(b), u64::MAX)
            .unwrap_err()
            .is_corruption());
        // Every byte of the payload changed: an error or other contents,
        // which the block decoder and verify check; never a panic.
        for pos in start..end {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[pos] ^= mask;
                let table = reopen(with_trailer(bad)).unwrap();
                if let Err(e) = table.verify() {
                    assert!(e.is_corruption(), "{compression} flip at {pos}: {e}");
                }
                for k in data.keys() {
                    let p = parse_internal_key(k.as_bytes()).unwrap();
                    if let Err(e) = table.get(p.user_key, u64::MAX) {
                        assert!(e.is_corruption(), "{e}");
                    }
                }
            }
        }
    }
}

/// A query's iterator that steps forward through blocks reads ahead by
/// itself (RocksDB's automatic readahead): the scan yields the table's
/// entries, reads every block once and caches each as a block-by-block
/// scan does, in far fewer reads of the file than blocks; the cache's
/// hit/miss counters count one lookup per block as before. A seek followed
/// by a step reads single blocks. With checks on, a flipped byte past the
/// first chunk is reported; with checks off, the scan reads it unnoticed
/// (as without readahead), never panicking.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a scenario test that reads top to bottom"
)]
fn a_long_scan_reads_ahead_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let data = random_data(&mut rng, 4000);
    let opts = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    write_table(dir.path(), "s.sst", opts, &data);
    let bytes = std::fs::read(dir.path().join("s.sst")).unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = data
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
        .collect();
    let open = |bytes: Vec<u8>, verify: bool| {
        let file = Arc::new(CountingFile(VecFile(bytes), Default::default()));
        let stats = Arc::new(IoStats::default());
        let cache = BlockCache::new(8 << 20);
        let table = Table::open_mapped(
            file.clone(),
            None,
            1,
            "s.sst".into(),
            Some(cache.clone()),
            stats.clone(),
            verify,
            256 << 10,
            false,
        )
        .unwrap();
        (file, stats, cache, table)
    };
    let reads = |f: &CountingFile| f.1.load(std::sync::atomic::Ordering::Relaxed);
    let data_block = IoStats::kind_index(crate::stats::BlockKind::Data);

    for cold_steps in [false, true] {
        let (file, stats, cache, table) = open(bytes.clone(), true);
        let blocks = table.num_data_blocks() as u64;
        assert!(blocks > 500, "{blocks}");
        let (at_open, blocks_at_open) = (reads(&file), stats.blocks_read.get());
        let mut it = table.iter_with(TableIterOptions {
            cold_steps,
            ..TableIterOptions::default()
        });
        it.seek_to_first().unwrap();
        assert_eq!(collect(&mut it), expected);
        assert_eq!(stats.blocks_read.get() - blocks_at_open, blocks);
        // Two single blocks, then chunks of 16 KiB doubling to 256 KiB:
        // a dozen reads or so, where block by block took one per block.
        let n = reads(&file) - at_open;
        assert!(n <= 16, "{n} reads for {blocks} blocks");
        assert_eq!(cache.cached_blocks(1), blocks, "every block cached");
        assert_eq!(stats.cache_misses[data_block].get(), blocks);
        // Scanned again, every block comes from the cache.
        let before = reads(&file);
        let mut it = table.iter_with(TableIterOptions {
            cold_steps,
            ..TableIterOptions::default()
        });
        it.seek_to_first().unwrap();
        assert_eq!(collect(&mut it), expected);
        assert_eq!(reads(&file), before);
        assert_eq!(stats.cache_hits[data_block].get(), blocks);
    }

    // After a seek, the block sought and the first block stepped into are
    // read alone; the second block stepped into starts the readahead,
    // which holds the blocks after it.
    let (file, stats, _, table) = open(bytes.clone(), true);
    let (r0, b0) = (reads(&file), stats.blocks_read.get());
    let mut it = table.iter();
    it.seek(&expected[expected.len() / 2].0).unwrap();
    let mut seen = vec![(1, 1)];
    while it.valid() && stats.blocks_read.get() - b0 < 5 {
        it.next().unwrap();
        let now = (stats.blocks_read.get() - b0, reads(&file) - r0);
        if now.0 > seen.last().unwrap().0 {
            seen.push(now);
        }
    }
    assert_eq!(
        seen,
        [(1, 1), (2, 2), (3, 3), (4, 3), (5, 3)],
        "(blocks, reads)"
    );

    // A flipped byte well past the first chunk, inside a value.
    let (k, v) = expected[3 * expected.len() / 4..]
        .iter()
        .find(|(_, v)| v.len() >= 8)
        .unwrap();
    let at = bytes
        .windows(v.len())
        .position(|w| w == v.as_slice())
        .unwrap();
    assert!(at > 64 << 10);
    let mut bad = bytes.clone();
    bad[at] ^= 0x01;
    let (_, _, _, table) = open(bad.clone(), true);
    let mut it = table.iter();
    let mut failed = it.seek_to_first().err();
    while failed.is_none() && it.valid() {
        failed = it.next().err();
    }
    assert!(
        matches!(failed, Some(crate::Error::Corruption { ref file, .. }) if file == "s.sst"),
        "{failed:?}"
    );
    let (_, _, _, table) = open(bad, false);
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    let got = collect(&mut it);
    assert_eq!(got.len(), expected.len());
    let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != expected[i]).collect();
    assert_eq!(differ.len(), 1, "only the flipped value differs");
    assert_eq!(&got[differ[0]].0, k);
}

/// Opens `name` with its index and filter read through `cache`
/// ([`crate::Options::cache_index_and_filter_blocks`]), as file `id`.
fn open_cached_meta(
    file: Arc<dyn RandomAccessFile>,
    id: u64,
    cache: &Arc<BlockCache>,
    stats: &Arc<IoStats>,
) -> Arc<Table> {
    let name = format!("{id}.sst");
    Table::open_mapped(
        file,
        None,
        id,
        name,
        Some(Arc::clone(cache)),
        Arc::clone(stats),
        true,
        0,
        true,
    )
    .unwrap()
}

/// Hits plus misses of index (1) or filter (2) lookups so far.
fn meta_lookups(stats: &IoStats, kind: usize) -> u64 {
    stats.cache_hits[kind].get() + stats.cache_misses[kind].get()
}

/// Three tables share a cache that holds about one index, one filter
/// and a few data blocks, so every lookup evicts: gets at random
/// snapshots and seeks return what a `BTreeMap` says, and every index
/// and filter lookup is a hit or a miss: one filter lookup per get, one
/// index lookup per get the filter lets through (told by the same
/// table opened with its filter held) and per seek.
#[test]
fn cached_index_and_filter_reads_match_an_oracle_under_a_tiny_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(77);
    let opts = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    let datas: Vec<Oracle> = (0..3).map(|_| random_data(&mut rng, 1500)).collect();
    for (i, d) in datas.iter().enumerate() {
        write_table(dir.path(), &format!("{}.sst", i + 1), opts.clone(), d);
    }
    let probe = Arc::new(IoStats::default());
    let held: Vec<Arc<Table>> = (1..=3)
        .map(|i| open(dir.path(), &format!("{i}.sst"), None, probe.clone()))
        .collect();
    let footer = held[0].footer();
    // Room for one table's decoded index and filter (as charged when it
    // opens) and half as much again: each table's evicts the others'.
    let one = BlockCache::new(64 << 20);
    let f = OsFs.open_read(&dir.path().join("1.sst")).unwrap();
    open_cached_meta(f, 1, &one, &Arc::new(IoStats::default()));
    let capacity = one.usage() * 3 / 2;
    let cache = BlockCache::new(capacity);
    let stats = Arc::new(IoStats::default());
    let tables: Vec<Arc<Table>> = (1..=3)
        .map(|i| {
            let f = OsFs
                .open_read(&dir.path().join(format!("{i}.sst")))
                .unwrap();
            open_cached_meta(f, i, &cache, &stats)
        })
        .collect();
    assert_eq!(stats.cache_misses[1].get(), 3, "one index miss per open");
    assert_eq!(stats.cache_misses[2].get(), 3, "one filter miss per open");
    let (index_at_open, filter_at_open) = (meta_lookups(&stats, 1), meta_lookups(&stats, 2));
    let (mut gets, mut passed, mut seeks) = (0u64, 0u64, 0u64);
    for round in 0..3000 {
        let t = rng.gen_range(0..3);
        let data = &datas[t];
        let key: Vec<u8> = if rng.gen_bool(0.5) {
            let n = rng.gen_range(0..data.len());
            let k = data.keys().nth(n).unwrap();
            parse_internal_key(k.as_bytes()).unwrap().user_key.to_vec()
        } else {
            (0..rng.gen_range(1..24))
                .map(|_| rng.gen_range(b'a'..=b'h'))
                .collect()
        };
        if round % 4 == 3 {
            let target = make_internal_key(&key, u64::MAX >> 8, ValueKind::Put);
            let mut it = tables[t].iter();
            it.seek(&target).unwrap();
            let expect = data
                .range(InternalKey::new(target.clone())..)
                .next()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()));
            let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
            assert_eq!(got, expect, "seek {key:?}");
            seeks += 1;
        } else {
            let snap = rng.gen_range(0..u64::MAX >> 8);
            assert_eq!(
                tables[t].get(&key, snap).unwrap(),
                oracle_get(data, &key, snap),
                "get {key:?} at {snap}"
            );
            gets += 1;
            passed += u64::from(held[t].may_contain(&key).unwrap());
        }
    }
    assert_eq!(meta_lookups(&stats, 2) - filter_at_open, gets);
    assert_eq!(meta_lookups(&stats, 1) - index_at_open, passed + seeks);
    let (index_misses, filter_misses) = (stats.cache_misses[1].get(), stats.cache_misses[2].get());
    assert!(
        index_misses > 300 && filter_misses > 300,
        "{index_misses} / {filter_misses}"
    );
    // Every miss read its block back: the three tables' blocks are the same
    // size to within a few bytes, so the bytes are close to misses × size.
    let per_index = stats.meta_bytes_read[0].get() as f64 / index_misses as f64;
    let per_filter = stats.meta_bytes_read[1].get() as f64 / filter_misses as f64;
    assert!(
        (per_index / footer.index.size as f64 - 1.0).abs() < 0.1,
        "{per_index}"
    );
    assert!(
        (per_filter / footer.filter.size as f64 - 1.0).abs() < 0.1,
        "{per_filter}"
    );
    assert!(cache.usage() <= capacity);
}

/// With a cache large enough for everything, the only index and filter
/// misses are the reads at open: one each per table.
#[test]
fn a_large_enough_cache_misses_index_and_filter_once_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(78);
    let data = random_data(&mut rng, 1000);
    for i in 1..=4 {
        write_table(
            dir.path(),
            &format!("{i}.sst"),
            TableOptions::default(),
            &data,
        );
    }
    let cache = BlockCache::new(64 << 20);
    let stats = Arc::new(IoStats::default());
    let tables: Vec<Arc<Table>> = (1..=4)
        .map(|i| {
            let f = OsFs
                .open_read(&dir.path().join(format!("{i}.sst")))
                .unwrap();
            open_cached_meta(f, i, &cache, &stats)
        })
        .collect();
    let bytes_at_open = (
        stats.meta_bytes_read[0].get(),
        stats.meta_bytes_read[1].get(),
    );
    for (i, k) in data.keys().enumerate() {
        let p = parse_internal_key(k.as_bytes()).unwrap();
        let t = &tables[i % 4];
        assert_eq!(
            t.get(p.user_key, p.seq).unwrap(),
            oracle_get(&data, p.user_key, p.seq)
        );
        let mut it = t.iter();
        it.seek(k.as_bytes()).unwrap();
        assert_eq!(it.key(), k.as_bytes());
    }
    assert_eq!(stats.cache_misses[1].get(), 4);
    assert_eq!(stats.cache_misses[2].get(), 4);
    assert!(stats.cache_hits[1].get() >= 2 * data.len() as u64);
    assert_eq!(
        (
            stats.meta_bytes_read[0].get(),
            stats.meta_bytes_read[1].get()
        ),
        bytes_at_open
    );
}

/// A pinned table's index and filter leave the LRU lists but stay
/// charged: a tiny cache that evicts everything else never misses them;
/// unpinning puts them back, closing the table releases the charge.
#[test]
fn pinned_index_and_filter_stay_charged_and_never_miss() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(79);
    let data = random_data(&mut rng, 1500);
    let opts = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    write_table(dir.path(), "1.sst", opts.clone(), &data);
    write_table(dir.path(), "2.sst", opts, &data);
    let probe = open(dir.path(), "1.sst", None, Arc::new(IoStats::default()));
    let footer = probe.footer();
    let cache = BlockCache::new((footer.index.size + footer.filter.size) as usize * 2);
    let stats = Arc::new(IoStats::default());
    let open_id = |i: u64| {
        let f = OsFs
            .open_read(&dir.path().join(format!("{i}.sst")))
            .unwrap();
        open_cached_meta(f, i, &cache, &stats)
    };
    let (pinned, other) = (open_id(1), open_id(2));
    pinned.set_pinned(true);
    assert_eq!(cache.pinned_usage(), 0, "pinned on the next lookup");
    let keys: Vec<Vec<u8>> = data
        .keys()
        .map(|k| parse_internal_key(k.as_bytes()).unwrap().user_key.to_vec())
        .collect();
    pinned.get(&keys[0], u64::MAX >> 8).unwrap();
    let charge = cache.pinned_usage();
    assert!(
        charge >= (footer.index.size + footer.filter.size) as usize,
        "{charge}"
    );
    let misses = (stats.cache_misses[1].get(), stats.cache_misses[2].get());
    for k in &keys {
        assert_eq!(
            pinned.get(k, u64::MAX >> 8).unwrap(),
            oracle_get(&data, k, u64::MAX >> 8)
        );
        other.get(k, u64::MAX >> 8).unwrap();
    }
    let after = (stats.cache_misses[1].get(), stats.cache_misses[2].get());
    // Only the unpinned table missed (its index and filter are evicted by
    // its own data blocks).
    assert!(after.0 > misses.0 && after.1 > misses.1, "{after:?}");
    assert!(cache.usage() >= charge);
    pinned.set_pinned(false);
    assert_eq!(cache.pinned_usage(), 0);
    pinned.set_pinned(true);
    pinned.get(&keys[0], u64::MAX >> 8).unwrap();
    assert_eq!(cache.pinned_usage(), charge);
    drop(pinned);
    assert_eq!(
        cache.pinned_usage(),
        0,
        "closing the table releases the pin"
    );
}

/// An index or filter block damaged (or unreadable) after open, read back
/// through the cache after its eviction, is an error naming the block,
/// for gets and for seeks, not a panic.
#[test]
fn a_damaged_index_or_filter_read_back_through_the_cache_is_an_error() {
    let (bytes, data) = small_table();
    let (key, _) = data.iter().next().unwrap();
    let user = parse_internal_key(key.as_bytes())
        .unwrap()
        .user_key
        .to_vec();
    for target in ["index", "filter", "io"] {
        let file = Arc::new(MutableFile(parking_lot::Mutex::new(bytes.clone())));
        let cache = BlockCache::new(1 << 20);
        let stats = Arc::new(IoStats::default());
        let table = open_cached_meta(file.clone(), 1, &cache, &stats);
        assert_eq!(
            table.get(&user, u64::MAX >> 8).unwrap(),
            oracle_get(&data, &user, u64::MAX >> 8)
        );
        let footer = table.footer();
        let at = match target {
            "index" => footer.index.offset,
            "filter" => footer.filter.offset,
            _ => u64::MAX,
        };
        match at {
            // The file cut short before its filter: reads of it fail.
            u64::MAX => file.0.lock().truncate(footer.filter.offset as usize),
            at => file.0.lock()[at as usize + 1] ^= 0x10,
        }
        cache.evict_file(1);
        let got = table.get(&user, u64::MAX >> 8);
        let mut it = table.iter();
        let seek = it.seek(key.as_bytes());
        if seek.is_err() {
            assert!(!it.valid(), "{target}");
        }
        for (what, r) in [("get", got.map(|_| ())), ("seek", seek)] {
            match (target, r) {
                ("io", Err(crate::Error::Io { .. })) => {}
                (_, Err(crate::Error::Corruption { file, offset, .. })) if target != "io" => {
                    assert_eq!(file, "1.sst");
                    // A seek reads only the index.
                    let expect = if what == "seek" {
                        footer.index.offset
                    } else {
                        at
                    };
                    if target == "index" || what == "get" {
                        assert_eq!(offset, expect, "{target} {what}");
                    }
                }
                (_, Ok(())) if target == "filter" && what == "seek" => {}
                (_, other) => panic!("{target} {what}: {other:?}"),
            }
        }
    }
}
