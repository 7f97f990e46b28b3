//! Entry points for the criterion micro-benchmarks of the engine's hot
//! paths (`crates/lamina/benches/`, described in `bench/micro.md`). Each is
//! a thin handle on the engine's own code, the path a read or write takes,
//! built from user keys so a benchmark needs none of the internal types.
//! Not part of the engine's API.
//!
//! Internal keys are made here: every entry is a `Put`, and seek targets
//! ([`seek_key`]) sort before every version of their user key, as a read at
//! the newest snapshot builds them.

use std::sync::Arc;

use crate::batch::BatchOp;
use crate::compression::COMPRESSION_NONE;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator, VecIter};
use crate::key::{make_internal_key, user_key, ValueKind, MAX_SEQ};
use crate::key_filter::key_hash;
use crate::memtable::MemTable;
use crate::sst::{
    block_trailer, build_filter, check_block, decode_index, encode_index, monkey, Block,
    BlockBuilder, BlockHandle, BlockIter, BloomFilter, FenceIndex, IndexEntry, BLOCK_TRAILER_LEN,
};

/// What a decoder said about bytes made here from the caller's input: the
/// input was not what the structure allows (e.g. keys out of order).
fn refused(reason: &str) -> Error {
    Error::InvalidArgument(format!("micro-benchmark input refused: {reason}"))
}

/// Refuses user keys that are not strictly increasing: the structures
/// below hold sorted, distinct keys and would silently misbehave otherwise.
fn check_increasing<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Result<()> {
    let mut prev: Option<&[u8]> = None;
    for key in keys {
        if prev.is_some_and(|p| p >= key) {
            return Err(refused("user keys must be strictly increasing"));
        }
        prev = Some(key);
    }
    Ok(())
}

/// The seek target of a point read of `user_key` at the newest snapshot.
pub fn seek_key(user_key: &[u8]) -> Vec<u8> {
    crate::key::seek_key(user_key, MAX_SEQ)
}

/// One data block, decoded as the block cache holds it.
#[derive(Debug)]
pub struct DataBlock {
    block: Arc<Block>,
}

impl DataBlock {
    /// A block of `entries` (strictly increasing user keys, each a `Put`
    /// with sequence number 1) with a restart point every
    /// `restart_interval` entries (the engine's default is 16).
    pub fn build(entries: &[(&[u8], &[u8])], restart_interval: usize) -> Result<DataBlock> {
        check_increasing(entries.iter().map(|(k, _)| *k))?;
        let mut builder = BlockBuilder::new(restart_interval);
        for (key, value) in entries {
            builder.add(&make_internal_key(key, 1, ValueKind::Put), value)?;
        }
        let block = Block::new(builder.finish()).map_err(refused)?;
        Ok(DataBlock {
            block: Arc::new(block),
        })
    }

    /// Bytes of the block's contents (entries and restart array).
    pub fn size(&self) -> usize {
        self.block.size()
    }

    /// A point read's step inside the block, as `Table::get` takes it: a
    /// fresh cursor sought to `target` (a [`seek_key`]); `found` gets the
    /// user key and value of the first entry at or after it, if any.
    pub fn seek<R>(
        &self,
        target: &[u8],
        found: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        let mut it = BlockIter::new(Arc::clone(&self.block));
        it.seek(target).map_err(refused)?;
        Ok(it.valid().then(|| found(user_key(it.key()), it.value())))
    }
}

/// A table's decoded index (fence pointers), as `Table::find_block` searches it.
#[derive(Debug)]
pub struct Fences {
    index: FenceIndex,
}

impl Fences {
    /// Bytes of each data block with its trailer that the fences' handles
    /// describe (only their tiling is checked; no block is read).
    const BLOCK_BYTES: u64 = 4096;

    /// The index of a table whose data blocks hold `blocks[i]` = (first,
    /// last) user keys, strictly increasing across all blocks, encoded and
    /// decoded as the table writer and reader do.
    pub fn build(blocks: &[(&[u8], &[u8])]) -> Result<Fences> {
        check_increasing(blocks.iter().flat_map(|(first, last)| {
            // A one-entry block has first == last: compare once.
            let last = (first != last).then_some(*last);
            std::iter::once(*first).chain(last)
        }))?;
        let entries: Vec<IndexEntry> = (0u64..)
            .zip(blocks)
            .map(|(i, (first, last))| IndexEntry {
                first_key: make_internal_key(first, 1, ValueKind::Put),
                last_key: make_internal_key(last, 1, ValueKind::Put),
                handle: BlockHandle {
                    offset: i * Self::BLOCK_BYTES,
                    size: Self::BLOCK_BYTES - BLOCK_TRAILER_LEN as u64,
                },
                mbr: None,
            })
            .collect();
        let data_end = entries.len() as u64 * Self::BLOCK_BYTES;
        let index = decode_index(&encode_index(&entries), data_end).map_err(refused)?;
        Ok(Fences { index })
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True if the table has no blocks.
    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    /// The block a seek to `target` (a [`seek_key`]) reads: the first whose
    /// last key is at or after it, `len()` if none.
    pub fn find(&self, target: &[u8]) -> usize {
        self.index.find(target)
    }
}

/// A table's Bloom filter, built and decoded as the table writer and reader do.
#[derive(Debug)]
pub struct Bloom {
    filter: BloomFilter,
}

impl Bloom {
    /// A filter over `user_keys` (distinct) at `bits_per_key`.
    pub fn build<K: AsRef<[u8]>>(user_keys: &[K], bits_per_key: f64) -> Result<Bloom> {
        let hashes: Vec<u64> = user_keys.iter().map(|k| key_hash(k.as_ref())).collect();
        let filter = BloomFilter::decode(&build_filter(&hashes, bits_per_key)).map_err(refused)?;
        Ok(Bloom { filter })
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.may_contain(user_key)
    }

    /// The filter's false-positive rate by the textbook formula.
    pub fn fpr_theoretical(&self) -> f64 {
        self.filter.fpr_theoretical()
    }
}

/// Monkey's bits per key for levels of `entries[i]` entries at an average
/// of `avg_bits` (what `Options::bloom_monkey` gives each level).
pub fn monkey_bits_per_key(avg_bits: f64, entries: &[f64]) -> Vec<f64> {
    monkey::allocate(avg_bits, entries)
}

/// A memtable with the engine's key filter, written as a group commit of
/// one `Put` writes it.
#[derive(Debug)]
pub struct Memtable {
    mem: MemTable,
}

impl Memtable {
    /// An empty memtable whose key filter is sized for a write buffer of
    /// `buffer_bytes` at `bits_per_key` (0: no filter).
    pub fn new(buffer_bytes: usize, bits_per_key: f64) -> Memtable {
        Memtable {
            mem: MemTable::with_filter(1, buffer_bytes, bits_per_key),
        }
    }

    /// Inserts `user_key` → `value` at sequence number `seq`.
    pub fn put(&self, seq: u64, user_key: &[u8], value: &[u8]) {
        self.mem.add_all(
            std::iter::once((seq, BatchOp::Point(ValueKind::Put), user_key, value)),
            0,
        );
    }

    /// The newest value of `user_key` (a copy, as `Db::get` returns it).
    pub fn get(&self, user_key: &[u8]) -> Option<Vec<u8>> {
        match self.mem.get(user_key, MAX_SEQ)? {
            (ValueKind::Put, _, value) => Some(value),
            _ => None,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }
}

/// The engine's merging iterator over in-memory sorted children, so that
/// stepping it costs the merge itself and next to nothing below it.
pub struct Merge {
    merged: MergingIterator,
}

impl Merge {
    /// Merges `children`, each a list of (user key, value) with strictly
    /// increasing user keys; every entry is a `Put` with its own sequence
    /// number, so equal user keys in two children are two versions.
    pub fn new(children: Vec<Vec<(Vec<u8>, Vec<u8>)>>) -> Result<Merge> {
        let mut seq = 0u64;
        let mut iters: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(children.len());
        for child in children {
            check_increasing(child.iter().map(|(k, _)| k.as_slice()))?;
            let items = child
                .into_iter()
                .map(|(key, value)| {
                    seq += 1;
                    (make_internal_key(&key, seq, ValueKind::Put), value)
                })
                .collect();
            iters.push(Box::new(VecIter::new(items)));
        }
        Ok(Merge {
            merged: MergingIterator::new(iters),
        })
    }

    /// Positions at the smallest entry of all children.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.merged.seek_to_first()
    }

    /// Advances to the next entry in merged order (the engine's `next`).
    pub fn advance(&mut self) -> Result<()> {
        self.merged.next()
    }

    /// True while positioned at an entry.
    pub fn valid(&self) -> bool {
        self.merged.valid()
    }

    /// The current entry's user key.
    pub fn user_key(&self) -> &[u8] {
        user_key(self.merged.key())
    }

    /// The current entry's value.
    pub fn value(&self) -> &[u8] {
        self.merged.value()
    }
}

/// `contents` followed by the trailer the table writer puts after an
/// uncompressed block: type byte and masked CRC32C.
pub fn seal_block(contents: &[u8]) -> Vec<u8> {
    let mut raw = contents.to_vec();
    raw.extend_from_slice(&block_trailer(contents, COMPRESSION_NONE));
    raw
}

/// The check every block read from a file gets (CRC32C of the stored bytes
/// and type byte against the trailer): the stored bytes' length, or a
/// corruption error.
pub fn check_sealed_block(raw: &[u8]) -> Result<usize> {
    check_block(raw)
        .map(|(stored, _)| stored.len())
        .map_err(|reason| Error::corruption("micro-benchmark block", 0, reason))
}
