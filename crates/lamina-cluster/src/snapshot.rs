//! The snapshot archive: the files of a [`lamina::Db::checkpoint`] packed
//! into one byte string that openraft sends to a lagging follower in
//! chunks.
//!
//! Format: the magic `LAMSNAP1`, `u32` file count, then per file `u32` name length, the name
//! (a plain file name: no `/`, not `.` or `..`), `u64` length, the bytes;
//! all integers big-endian. Unpacking checks every length against what is
//! left, so a truncated or hostile archive is an error, never a panic.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{ClusterError, Result};

const MAGIC: &[u8; 8] = b"LAMSNAP1";
/// Longest file name accepted in an archive.
const MAX_NAME: usize = 255;

fn corrupt(why: impl Into<String>) -> ClusterError {
    ClusterError::Corrupt {
        what: "snapshot archive",
        why: why.into(),
    }
}

/// Packs the regular files of `dir` (not its subdirectories) into an
/// archive, in name order.
pub fn pack_dir(dir: &Path) -> Result<Vec<u8>> {
    let mut names = Vec::new();
    let rd =
        fs::read_dir(dir).map_err(|e| ClusterError::io(format!("read {}", dir.display()), e))?;
    for ent in rd {
        let ent = ent.map_err(|e| ClusterError::io(format!("read {}", dir.display()), e))?;
        let ft = ent
            .file_type()
            .map_err(|e| ClusterError::io(format!("stat {}", ent.path().display()), e))?;
        if ft.is_file() {
            let name = ent
                .file_name()
                .into_string()
                .map_err(|n| corrupt(format!("non-UTF-8 file name {n:?}")))?;
            names.push(name);
        }
    }
    names.sort();
    let mut out = MAGIC.to_vec();
    let count = u32::try_from(names.len()).map_err(|_| corrupt("too many files"))?;
    out.extend_from_slice(&count.to_be_bytes());
    for name in names {
        let path = dir.join(&name);
        let bytes =
            fs::read(&path).map_err(|e| ClusterError::io(format!("read {}", path.display()), e))?;
        let len = u32::try_from(name.len()).map_err(|_| corrupt("file name too long"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// The files of an archive, checked, without writing anything.
pub fn parse(archive: &[u8]) -> Result<Vec<(&str, &[u8])>> {
    let mut rest = archive
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| corrupt("bad magic"))?;
    let (count, r) = take(rest, 4)?;
    let count = u32::from_be_bytes([count[0], count[1], count[2], count[3]]);
    rest = r;
    let mut files = Vec::new();
    for _ in 0..count {
        let (len, r) = take(rest, 4)?;
        let name_len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if name_len == 0 || name_len > MAX_NAME {
            return Err(corrupt(format!("file name length {name_len}")));
        }
        let (name, r) = take(r, name_len)?;
        let name = std::str::from_utf8(name).map_err(|_| corrupt("non-UTF-8 file name"))?;
        if name.contains('/') || name.contains('\0') || name == "." || name == ".." {
            return Err(corrupt(format!("file name {name:?}")));
        }
        let (len, r) = take(r, 8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(len);
        let data_len =
            usize::try_from(u64::from_be_bytes(b)).map_err(|_| corrupt("file length overflows"))?;
        let (data, r) = take(r, data_len)?;
        if files.iter().any(|(n, _)| *n == name) {
            return Err(corrupt(format!("file {name:?} twice")));
        }
        files.push((name, data));
        rest = r;
    }
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes after the last file", rest.len())));
    }
    Ok(files)
}

fn take(b: &[u8], n: usize) -> Result<(&[u8], &[u8])> {
    if b.len() < n {
        return Err(corrupt(format!(
            "truncated: need {n} bytes, {} left",
            b.len()
        )));
    }
    Ok(b.split_at(n))
}

/// Unpacks an archive into the new directory `dir`, every file and the
/// directory fsynced.
pub fn unpack_into(archive: &[u8], dir: &Path) -> Result<()> {
    let files = parse(archive)?;
    fs::create_dir_all(dir).map_err(|e| ClusterError::io(format!("mkdir {}", dir.display()), e))?;
    for (name, data) in files {
        let path = dir.join(name);
        let mut f = fs::File::create(&path)
            .map_err(|e| ClusterError::io(format!("create {}", path.display()), e))?;
        f.write_all(data)
            .and_then(|_| f.sync_all())
            .map_err(|e| ClusterError::io(format!("write {}", path.display()), e))?;
    }
    sync_dir(dir)
}

/// fsyncs a directory so the entries in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ClusterError::io(format!("fsync {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_hostile_archives() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("a"), b"hello").unwrap();
        fs::write(src.join("b.sst"), vec![7u8; 10_000]).unwrap();
        fs::create_dir(src.join("sub")).unwrap();
        let archive = pack_dir(&src).unwrap();
        let dst = tmp.path().join("dst");
        unpack_into(&archive, &dst).unwrap();
        assert_eq!(fs::read(dst.join("a")).unwrap(), b"hello");
        assert_eq!(fs::read(dst.join("b.sst")).unwrap(), vec![7u8; 10_000]);
        assert!(!dst.join("sub").exists());
        let mut longer = archive.clone();
        longer.push(0);
        assert!(parse(&longer).is_err());

        // Every truncation is refused, none panics.
        for cut in 0..archive.len() {
            assert!(parse(&archive[..cut]).is_err(), "cut {cut}");
        }
        // Path escapes and absurd lengths are refused.
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(&2u32.to_be_bytes());
        evil.extend_from_slice(b"..");
        evil.extend_from_slice(&0u64.to_be_bytes());
        assert!(parse(&evil).is_err());
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(&3u32.to_be_bytes());
        evil.extend_from_slice(b"a/b");
        evil.extend_from_slice(&0u64.to_be_bytes());
        assert!(parse(&evil).is_err());
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(b"x");
        evil.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(parse(&evil).is_err());
    }
}
