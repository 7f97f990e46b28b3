//! Running integer-key workloads on a database: db_bench's key layout, the
//! value pool, the [`Store`] operations a benchmark needs (lamina's [`Db`],
//! or a peer engine), and [`apply`], which executes one [`KvOp`] (YCSB or
//! seed 001 streams) for `lamina bench` and `lamina experiment`.

use std::ops::Bound;

use anyhow::Result;
use lamina::{Db, DbIterator, DbRevIterator};
use lamina_workload::KvOp;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

/// Size of the shared buffer values are sliced from (db_bench uses 1 MiB).
const VALUE_POOL_BYTES: usize = 1 << 20;

/// Writes the db_bench key for `v` into `key`, whose bytes past the first
/// eight are already `'0'`.
#[inline]
pub fn encode_key(key: &mut [u8], v: u64) {
    let n = key.len().min(8);
    for (i, b) in key[..n].iter_mut().enumerate() {
        *b = (v >> ((n - i - 1) * 8)) as u8;
    }
}

/// A key buffer of `size` bytes, padded like db_bench's.
pub fn key_buffer(size: usize) -> Vec<u8> {
    vec![b'0'; size]
}

/// The random buffer values are sliced from, `value_size` bytes at least.
pub fn value_pool(seed: u64, value_size: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut pool = vec![0u8; VALUE_POOL_BYTES.max(value_size)];
    rng.fill_bytes(&mut pool);
    pool
}

/// Bytes of each compressible piece of [`compressible_value_pool`]
/// (db_bench's `RandomGenerator` builds its buffer of 100-byte pieces).
const COMPRESSIBLE_PIECE: usize = 100;

/// The buffer values are sliced from, made as db_bench makes it for
/// `--compression_ratio=ratio` (its `CompressibleString`): 100-byte
/// pieces, each `100 * ratio` random printable characters repeated to
/// fill the piece, so a compressor can shrink it to about `ratio` of its
/// size. A ratio of 1 or more is [`value_pool`]'s random bytes.
pub fn compressible_value_pool(seed: u64, value_size: usize, ratio: f64) -> Vec<u8> {
    if ratio.is_nan() || ratio >= 1.0 {
        return value_pool(seed, value_size);
    }
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let unique = ((COMPRESSIBLE_PIECE as f64 * ratio) as usize).max(1);
    let total = VALUE_POOL_BYTES.max(value_size);
    let mut pool = Vec::with_capacity(total + COMPRESSIBLE_PIECE);
    while pool.len() < total {
        let raw: Vec<u8> = (0..unique).map(|_| rng.gen_range(b' '..=b'~')).collect();
        pool.extend(raw.iter().cycle().take(COMPRESSIBLE_PIECE));
    }
    pool.truncate(total);
    pool
}

/// Hands out values as consecutive slices of one random buffer.
pub struct ValueGen<'a> {
    pool: &'a [u8],
    pos: usize,
    len: usize,
}

impl<'a> ValueGen<'a> {
    /// Values of `len` bytes from `pool` (at least `len` long), starting at
    /// offset `start`.
    pub fn new(pool: &'a [u8], len: usize, start: usize) -> ValueGen<'a> {
        ValueGen {
            pool,
            pos: start % pool.len().max(1),
            len,
        }
    }

    /// The next value.
    #[inline]
    pub fn next_value(&mut self) -> &'a [u8] {
        if self.pos + self.len > self.pool.len() {
            self.pos = 0;
        }
        let v = &self.pool[self.pos..self.pos + self.len];
        self.pos += self.len;
        v
    }
}

/// The operations benchmarks run, so that `lamina bench` can drive a peer
/// engine with the same code.
pub trait Store: Sync {
    /// Writes `key` -> `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// The length of `key`'s value, if present.
    fn get(&self, key: &[u8]) -> Result<Option<usize>>;
    /// Deletes `key`.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Calls `visit` on up to `limit` entries in key order from the first
    /// key `>= start` (from the first key with `None`) and below `end` (no
    /// bound with `None`); returns how many. A bounded range lets lamina
    /// read it from a compaction buffer (seed 002 Alg. 4).
    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;
    /// Calls `visit` on up to `limit` entries in descending key order from
    /// the last key `<= end` (from the last key with `None`); returns how
    /// many.
    fn scan_rev(
        &self,
        end: Option<&[u8]>,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;
    /// The engine's statistics, if it is lamina (peers have none), taken
    /// without opening a table (`Db::sample_stats`), for samplers.
    fn stats(&self) -> Option<lamina::DbStats> {
        None
    }
    /// Writes `key` -> `value` and makes it durable before returning
    /// (db_bench's `fillsync`: `WriteOptions::sync`).
    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (key, value);
        anyhow::bail!("this engine has no synced write in this bench")
    }
    /// Compacts the whole key range (db_bench's `compact`: `CompactRange`
    /// over everything).
    fn compact_all(&self) -> Result<()> {
        anyhow::bail!("this engine has no full compaction in this bench")
    }
    /// Files and megabytes per level as RocksDB's `rocksdb.levelstats`
    /// prints them (db_bench's `levelstats`), if the engine keeps levels.
    fn level_stats(&self) -> Option<String> {
        None
    }
}

/// Calls `visit` on the first `limit` pairs of `entries`; returns how many.
pub fn visit_first<K, V, E>(
    entries: impl Iterator<Item = std::result::Result<(K, V), E>>,
    limit: u64,
    visit: &mut dyn FnMut(&[u8], &[u8]),
) -> Result<u64>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut n = 0;
    for entry in entries.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
        let (k, v) = entry?;
        visit(k.as_ref(), v.as_ref());
        n += 1;
    }
    Ok(n)
}

impl Store for Db {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(Db::put(self, key, value)?)
    }

    fn stats(&self) -> Option<lamina::DbStats> {
        Some(Db::sample_stats(self))
    }

    fn put_sync(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Db::put(self, key, value)?;
        Ok(Db::sync_wal(self)?)
    }

    fn compact_all(&self) -> Result<()> {
        Ok(Db::compact_range(self, None, None)?)
    }

    fn level_stats(&self) -> Option<String> {
        Db::property(self, "lamina.levelstats")
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(Db::get(self, key)?.map(|v| v.len()))
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(Db::delete(self, key)?)
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
        let lo = start.map_or(Bound::Unbounded, Bound::Included);
        let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
        let mut walk = Db::scan(self, lo, hi)?;
        visit_borrowed(&mut walk, limit, visit)
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
        let hi = end.map_or(Bound::Unbounded, Bound::Included);
        let mut walk = Db::scan_rev(self, Bound::Unbounded, hi)?;
        visit_borrowed(&mut walk, limit, visit)
    }
}

/// lamina's scans, which lend each pair until the next call.
trait LendPairs {
    fn next_ref(&mut self) -> Option<lamina::Result<(&[u8], &[u8])>>;
}

impl LendPairs for DbIterator {
    fn next_ref(&mut self) -> Option<lamina::Result<(&[u8], &[u8])>> {
        DbIterator::next_ref(self)
    }
}

impl LendPairs for DbRevIterator {
    fn next_ref(&mut self) -> Option<lamina::Result<(&[u8], &[u8])>> {
        DbRevIterator::next_ref(self)
    }
}

/// Calls `visit` on the first `limit` pairs of `walk`, borrowed (no copy,
/// no allocation per entry); returns how many. It then takes one more
/// pair, unvisited: the peers' loops (and db_bench's) step past the last
/// entry they visit, and a lamina walk steps lazily, on the call after a
/// pair, so this keeps the engines' work equal (a seekrandom of N
/// entries: one seek and N steps).
fn visit_borrowed(
    walk: &mut impl LendPairs,
    limit: u64,
    visit: &mut dyn FnMut(&[u8], &[u8]),
) -> Result<u64> {
    let mut n = 0;
    while let Some(pair) = walk.next_ref() {
        let (k, v) = pair?;
        if n == limit {
            break;
        }
        visit(k, v);
        n += 1;
    }
    Ok(n)
}

/// What one operation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// A read found its key (reads, read-modify-writes), or a scan returned
    /// at least one entry.
    pub found: bool,
    /// Key and value bytes read or written.
    pub bytes: u64,
    /// Whether the operation reads (counts towards "found of reads").
    pub is_read: bool,
}

/// Runs `op` on `db`, encoding keys into `key` (a [`key_buffer`]).
pub fn apply(
    db: &dyn Store,
    op: KvOp,
    key: &mut [u8],
    values: &mut ValueGen<'_>,
) -> Result<Outcome> {
    let put = |key: &mut [u8], k: u64, values: &mut ValueGen<'_>| -> Result<u64> {
        encode_key(key, k);
        let v = values.next_value();
        db.put(key, v)?;
        Ok((key.len() + v.len()) as u64)
    };
    Ok(match op {
        KvOp::Insert(k) | KvOp::Update(k) => Outcome {
            bytes: put(key, k, values)?,
            ..Outcome::default()
        },
        KvOp::Delete(k) => {
            encode_key(key, k);
            db.delete(key)?;
            Outcome::default()
        }
        KvOp::Read(k) => {
            encode_key(key, k);
            let v = db.get(key)?;
            Outcome {
                found: v.is_some(),
                bytes: v.map_or(0, |v| (key.len() + v) as u64),
                is_read: true,
            }
        }
        KvOp::ReadModifyWrite(k) => {
            encode_key(key, k);
            let read = db.get(key)?.map_or(0, |v| (key.len() + v) as u64);
            Outcome {
                found: read > 0,
                bytes: read + put(key, k, values)?,
                is_read: true,
            }
        }
        KvOp::Scan { start, len } => {
            encode_key(key, start);
            let mut bytes = 0;
            let n = db.scan(Some(key), None, len, &mut |k, v| {
                bytes += (k.len() + v.len()) as u64
            })?;
            Outcome {
                found: n > 0,
                bytes,
                is_read: true,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_db_bench_layout() {
        let mut k = key_buffer(16);
        encode_key(&mut k, 0x0102);
        assert_eq!(&k, b"\0\0\0\0\0\0\x01\x020000\x30\x30\x30\x30");
        let mut short = key_buffer(4);
        encode_key(&mut short, 0x0a0b0c0d);
        assert_eq!(&short, &[0x0a, 0x0b, 0x0c, 0x0d]);
    }

    /// db_bench's layout: 100-byte pieces of `100 * ratio` printable
    /// characters repeated; LZ4 shrinks the pool to about the ratio.
    #[test]
    fn compressible_pool_is_db_bench_s() {
        let pool = compressible_value_pool(5, 100, 0.5);
        assert_eq!(pool.len(), VALUE_POOL_BYTES);
        for piece in pool.chunks_exact(100) {
            assert_eq!(piece[..50], piece[50..]);
            assert!(piece.iter().all(|b| (b' '..=b'~').contains(b)));
        }
        assert_ne!(pool[..100], pool[100..200]);
        let lz4 = lz4_flex::block::compress(&pool).len() as f64 / pool.len() as f64;
        assert!((0.45..0.6).contains(&lz4), "{lz4}");
        assert_eq!(compressible_value_pool(5, 100, 1.0), value_pool(5, 100));
    }

    #[test]
    fn ops_behave_like_a_map() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), lamina::Options::default()).unwrap();
        let pool = value_pool(1, 8);
        let mut values = ValueGen::new(&pool, 8, 0);
        let mut key = key_buffer(4);
        let mut run = |op| apply(&db, op, &mut key, &mut values).unwrap();
        for k in [10u64, 20, 30, 40] {
            assert_eq!(run(KvOp::Insert(k)).bytes, 12);
        }
        run(KvOp::Delete(20));
        assert!(run(KvOp::Read(10)).found);
        assert!(!run(KvOp::Read(20)).found);
        assert!(run(KvOp::ReadModifyWrite(30)).found);
        // From 15: 30 and 40 (20 is deleted), at most 5 entries.
        let scan = run(KvOp::Scan { start: 15, len: 5 });
        assert_eq!(scan.bytes, 2 * 12);
        let one = run(KvOp::Scan { start: 0, len: 1 });
        assert_eq!(one.bytes, 12);
        assert!(!run(KvOp::Scan { start: 41, len: 3 }).found);
        let k = |v| {
            let mut k = key_buffer(4);
            encode_key(&mut k, v);
            k
        };
        // From 35 down: 30 and 10 (20 is deleted), at most 5 entries.
        let mut keys = Vec::new();
        let n =
            Store::scan_rev(&db, Some(&k(35)), 5, &mut |key, _| keys.push(key.to_vec())).unwrap();
        assert_eq!((n, keys), (2, vec![k(30), k(10)]));
        assert_eq!(Store::scan_rev(&db, None, 1, &mut |_, _| {}).unwrap(), 1);
    }
}
