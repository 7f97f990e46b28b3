//! Read-only memory maps of whole files, for [`crate::Options::mmap_reads`],
//! and [`BlockBytes`], a block's bytes whether owned or mapped: the one
//! place the engine uses `unsafe` code.
//!
//! A data block read through `pread` is copied by the kernel from the page
//! cache into a user buffer; a profile of random seeks spent a fifth of its
//! time in that copy. With a mapping, a block-cache miss hands out a slice
//! of the page cache itself (no system call, no copy), which the block
//! cache then keeps by reference count ([`Mapping`] is held in an `Arc`).
//!
//! # Safety argument
//!
//! [`Mapping::bytes`] hands out `&[u8]` over the mapped pages. That is sound
//! only if (1) the bytes do not change while borrowed, and (2) every page
//! of the mapping can be read without a fault.
//!
//! 1. Only SSTs are mapped ([`crate::tables::TableCache`] is the only caller
//!    of [`super::RandomAccessFile::map`]). An SST is immutable: it is
//!    written, synced and closed by its builder before it is installed in the
//!    tree, and only then opened for reading; the engine never writes to it
//!    again. Deleting it (unlink) while mapped is safe: the mapping keeps the
//!    inode alive.
//! 2. A read of a mapped page past the end of the file raises `SIGBUS`,
//!    which would kill the process. Pages are mapped only up to the length
//!    the file had when mapped, and the engine never truncates an SST (the
//!    only file it truncates is a write-ahead log, which it never maps).
//!    What the engine cannot rule out is another process truncating or
//!    rewriting the file behind its back (the directory lock excludes only
//!    other lamina instances), and an I/O error while the kernel reads a
//!    page in: both raise `SIGBUS` instead of returning
//!    [`crate::Error::Io`]. That is why mapping is an option (off by
//!    default, as RocksDB's `allow_mmap_reads`) and `pread` the default.
#![expect(
    unsafe_code,
    reason = "memory-mapped reads need `unsafe` (see the SAFETY comments)"
)]

use std::ffi::c_void;
use std::fs::File;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

/// A whole file mapped read-only (`PROT_READ`, `MAP_SHARED`), unmapped on
/// drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<c_void>,
    len: usize,
}

// SAFETY: the mapping is read-only memory owned by this value alone (no
// other code holds the pointer); sharing `&[u8]` views of it between
// threads is as safe as sharing a `Box<[u8]>`.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: `&Mapping` only gives out shared reads.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `file` (its length when opened);
    /// `None` for an empty file, which `mmap` refuses.
    pub(super) fn new(file: &File, len: u64) -> std::io::Result<Option<Mapping>> {
        let len =
            usize::try_from(len).map_err(|_| std::io::Error::other("file too large to map"))?;
        if len == 0 {
            return Ok(None);
        }
        // SAFETY: a fresh mapping (null hint, no MAP_FIXED) replaces no
        // existing memory; the file descriptor is valid for the call, and the
        // mapping outlives it by design (POSIX keeps the file referenced).
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::SHARED,
                file,
                0,
            )
        }?;
        let ptr = NonNull::new(ptr).ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Some(Mapping { ptr, len }))
    }

    /// The mapped bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is the start of a live read-only mapping of `len`
        // bytes (it is unmapped only on drop, which the borrow of `self`
        // excludes); the module's safety argument covers immutability and
        // the absence of faults.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>(), self.len) }
    }
}

/// The bytes of a data block: a buffer it owns (read with `pread`) or a range
/// of a [`Mapping`] it shares, read through one pointer and length either
/// way. An enum matched on every access cost a point read 2.7% more
/// instructions (measured with callgrind); this costs none.
#[derive(Debug)]
pub struct BlockBytes {
    /// Start of the bytes: inside `owner`'s heap buffer or mapping.
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
}

#[derive(Debug)]
enum Owner {
    Vec(Vec<u8>),
    /// Held only to keep the mapping alive while `ptr` points into it.
    Map {
        _alive: Arc<Mapping>,
    },
}

// SAFETY: the pointer refers into the owner (a `Vec<u8>` or an
// `Arc<Mapping>`, both `Send + Sync`), which is never mutated while this
// value exists; sharing the bytes is as safe as sharing the owner.
unsafe impl Send for BlockBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for BlockBytes {}

impl BlockBytes {
    /// Takes ownership of a buffer.
    pub fn from_vec(v: Vec<u8>) -> BlockBytes {
        // A `Vec`'s pointer is never null (dangling when empty), and moving
        // the `Vec` into `owner` does not move its heap buffer.
        let ptr = NonNull::new(v.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
        BlockBytes {
            ptr,
            len: v.len(),
            owner: Owner::Vec(v),
        }
    }

    /// Shares `range` of `map`; `None` if the range is not inside it.
    pub fn from_mapping(map: Arc<Mapping>, range: Range<usize>) -> Option<BlockBytes> {
        let slice = map.bytes().get(range)?;
        let ptr = NonNull::new(slice.as_ptr().cast_mut())?;
        let len = slice.len();
        Some(BlockBytes {
            ptr,
            len,
            owner: Owner::Map { _alive: map },
        })
    }

    /// The bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` lies inside the owner's buffer or
        // mapping (checked in the constructors), which `self` keeps alive
        // and unmodified for as long as the borrow lasts.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The owned buffer back (for reuse); `None` for mapped bytes.
    pub fn into_vec(self) -> Option<Vec<u8>> {
        match self.owner {
            Owner::Vec(v) => Some(v),
            Owner::Map { .. } => None,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe exactly the mapping made in `new`,
        // and no borrow of it outlives `self`. An error cannot leave the
        // memory mapped any more than it already is, so it is ignored.
        let _ = unsafe { munmap(self.ptr.as_ptr(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_the_file_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let file = File::open(&path).unwrap();
        let map = Mapping::new(&file, data.len() as u64).unwrap().unwrap();
        drop(file);
        assert_eq!(map.bytes(), data.as_slice());
        // Unlinking keeps the mapped inode readable.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(map.bytes(), data.as_slice());
        let b = BlockBytes::from_mapping(Arc::new(map), 100..300).unwrap();
        assert_eq!(b.bytes(), &data[100..300]);
        assert!(b.into_vec().is_none());
        let short = dir.path().join("g");
        File::create(&short)
            .unwrap()
            .write_all(&data[..10])
            .unwrap();
        let map = Arc::new(
            Mapping::new(&File::open(&short).unwrap(), 10)
                .unwrap()
                .unwrap(),
        );
        assert!(BlockBytes::from_mapping(map.clone(), 5..11).is_none());
        assert_eq!(BlockBytes::from_mapping(map, 10..10).unwrap().bytes(), b"");
        let v = BlockBytes::from_vec(vec![1, 2, 3]);
        assert_eq!(v.bytes(), &[1, 2, 3]);
        assert_eq!(v.into_vec(), Some(vec![1, 2, 3]));
        assert_eq!(BlockBytes::from_vec(Vec::new()).bytes(), b"");
        let empty = dir.path().join("e");
        File::create(&empty).unwrap();
        assert!(Mapping::new(&File::open(&empty).unwrap(), 0)
            .unwrap()
            .is_none());
    }
}
