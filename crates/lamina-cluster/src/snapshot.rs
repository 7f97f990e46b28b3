//! The snapshot archive: the files of a [`lamina::Db::checkpoint`] packed
//! into one file that openraft sends to a lagging follower in chunks, and
//! [`SnapshotFile`], the handle openraft reads chunks from and writes
//! received chunks to.
//!
//! Nothing holds a whole snapshot in memory: packing and unpacking copy
//! each file through a 64 KiB buffer; openraft reads one chunk of
//! `snapshot_chunk_bytes` (1 MiB by default, see [`crate::config`]) at a time from
//! the archive file on the sender and writes each received chunk straight
//! to a file on the receiver. A transfer in flight costs one chunk plus
//! its JSON frame (at most 4 bytes per byte) on each side: about 5 MiB.
//!
//! Format: the magic `LAMSNAP1`, `u32` file count, then per file `u32` name length, the name
//! (a plain file name: no `/`, not `.` or `..`), `u64` length, the bytes;
//! all integers big-endian. Unpacking checks every length against what is
//! there, so a truncated or hostile archive is an error, never a panic.

use std::collections::HashSet;
use std::fs;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::error::{ClusterError, Result};

const MAGIC: &[u8; 8] = b"LAMSNAP1";
/// Longest file name accepted in an archive.
const MAX_NAME: usize = 255;
/// Copy buffer of packing and unpacking.
const BUF: usize = 64 << 10;

fn corrupt(why: impl Into<String>) -> ClusterError {
    ClusterError::Corrupt {
        what: "snapshot archive",
        why: why.into(),
    }
}

fn io_err(what: String) -> impl FnOnce(io::Error) -> ClusterError {
    move |e| ClusterError::io(what, e)
}

/// Packs the regular files of `dir` (not its subdirectories), in name
/// order, into the new file `out`, fsynced.
pub fn pack_dir(dir: &Path, out: &Path) -> Result<()> {
    let mut names = Vec::new();
    let rd = fs::read_dir(dir).map_err(io_err(format!("read {}", dir.display())))?;
    for ent in rd {
        let ent = ent.map_err(io_err(format!("read {}", dir.display())))?;
        let ft = ent
            .file_type()
            .map_err(io_err(format!("stat {}", ent.path().display())))?;
        if ft.is_file() {
            let name = ent
                .file_name()
                .into_string()
                .map_err(|n| corrupt(format!("non-UTF-8 file name {n:?}")))?;
            names.push(name);
        }
    }
    names.sort();
    let what = format!("write {}", out.display());
    let file = fs::File::create_new(out).map_err(io_err(what.clone()))?;
    let mut w = BufWriter::with_capacity(BUF, file);
    let count = u32::try_from(names.len()).map_err(|_| corrupt("too many files"))?;
    let write =
        |w: &mut BufWriter<fs::File>, b: &[u8]| w.write_all(b).map_err(io_err(what.clone()));
    write(&mut w, MAGIC)?;
    write(&mut w, &count.to_be_bytes())?;
    for name in names {
        let path = dir.join(&name);
        let mut f = fs::File::open(&path).map_err(io_err(format!("open {}", path.display())))?;
        let len = f
            .metadata()
            .map_err(io_err(format!("stat {}", path.display())))?
            .len();
        let name_len = u32::try_from(name.len()).map_err(|_| corrupt("file name too long"))?;
        write(&mut w, &name_len.to_be_bytes())?;
        write(&mut w, name.as_bytes())?;
        write(&mut w, &len.to_be_bytes())?;
        let copied = io::copy(&mut (&mut f).take(len), &mut w)
            .map_err(io_err(format!("copy {}", path.display())))?;
        if copied != len {
            return Err(corrupt(format!("{} shrank while packed", path.display())));
        }
    }
    let file = w
        .into_inner()
        .map_err(|e| ClusterError::io(what.clone(), e.into_error()))?;
    file.sync_all().map_err(io_err(what))?;
    Ok(())
}

fn read_exact(r: &mut impl Read, buf: &mut [u8]) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            corrupt(format!("truncated: need {} more bytes", buf.len()))
        } else {
            ClusterError::io("read a snapshot archive", e)
        }
    })
}

/// Reads an archive from `r`, checking it; with `dir`, writes its files
/// into that new directory, every file and the directory fsynced. The
/// file names, in archive order.
pub fn unpack(r: impl Read, dir: Option<&Path>) -> Result<Vec<String>> {
    let mut r = BufReader::with_capacity(BUF, r);
    let mut magic = [0u8; 8];
    read_exact(&mut r, &mut magic)?;
    if &magic != MAGIC {
        return Err(corrupt("bad magic"));
    }
    let mut b4 = [0u8; 4];
    read_exact(&mut r, &mut b4)?;
    let count = u32::from_be_bytes(b4);
    if let Some(d) = dir {
        fs::create_dir_all(d).map_err(io_err(format!("mkdir {}", d.display())))?;
    }
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    for _ in 0..count {
        read_exact(&mut r, &mut b4)?;
        let name_len = u32::from_be_bytes(b4) as usize;
        if name_len == 0 || name_len > MAX_NAME {
            return Err(corrupt(format!("file name length {name_len}")));
        }
        let mut name = vec![0u8; name_len];
        read_exact(&mut r, &mut name)?;
        let name = String::from_utf8(name).map_err(|_| corrupt("non-UTF-8 file name"))?;
        if name.contains('/') || name.contains('\0') || name == "." || name == ".." {
            return Err(corrupt(format!("file name {name:?}")));
        }
        if !seen.insert(name.clone()) {
            return Err(corrupt(format!("file {name:?} twice")));
        }
        let mut b8 = [0u8; 8];
        read_exact(&mut r, &mut b8)?;
        let len = u64::from_be_bytes(b8);
        let mut data = (&mut r).take(len);
        let copied = match dir {
            Some(d) => {
                let path = d.join(&name);
                let what = format!("write {}", path.display());
                let mut f = fs::File::create_new(&path).map_err(io_err(what.clone()))?;
                let n = io::copy(&mut data, &mut f).map_err(io_err(what.clone()))?;
                f.sync_all().map_err(io_err(what))?;
                n
            }
            None => io::copy(&mut data, &mut io::sink())
                .map_err(|e| ClusterError::io("read a snapshot archive", e))?,
        };
        if copied != len {
            return Err(corrupt(format!(
                "truncated: file {name:?} has {copied} of {len} bytes"
            )));
        }
        names.push(name);
    }
    let mut extra = [0u8; 1];
    match r.read(&mut extra) {
        Ok(0) => {}
        Ok(_) => return Err(corrupt("bytes after the last file")),
        Err(e) => return Err(ClusterError::io("read a snapshot archive", e)),
    }
    if let Some(d) = dir {
        sync_dir(d)?;
    }
    Ok(names)
}

/// A snapshot archive on disk as openraft's snapshot data: openraft reads
/// chunks from it to send, or writes received chunks into it.
#[derive(Debug)]
pub struct SnapshotFile {
    /// Where it is.
    pub path: PathBuf,
    /// The open file.
    pub file: tokio::fs::File,
}

impl SnapshotFile {
    /// Opens `path` for reading.
    pub async fn open(path: PathBuf) -> io::Result<SnapshotFile> {
        let file = tokio::fs::File::open(&path).await?;
        Ok(SnapshotFile { path, file })
    }

    /// Creates the new file `path` for writing.
    pub async fn create(path: PathBuf) -> io::Result<SnapshotFile> {
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        Ok(SnapshotFile { path, file })
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().file).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().file).poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, position: io::SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.get_mut().file).start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.get_mut().file).poll_complete(cx)
    }
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

    fn check(b: &[u8]) -> Result<Vec<String>> {
        unpack(b, None)
    }

    #[test]
    fn round_trip_and_hostile_archives() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("a"), b"hello").unwrap();
        // Larger than the copy buffer, so it takes several copies.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(src.join("b.sst"), &big).unwrap();
        fs::create_dir(src.join("sub")).unwrap();
        let packed = tmp.path().join("snap");
        pack_dir(&src, &packed).unwrap();
        let archive = fs::read(&packed).unwrap();
        let dst = tmp.path().join("dst");
        let names = unpack(fs::File::open(&packed).unwrap(), Some(&dst)).unwrap();
        assert_eq!(names, ["a", "b.sst"]);
        assert_eq!(fs::read(dst.join("a")).unwrap(), b"hello");
        assert_eq!(fs::read(dst.join("b.sst")).unwrap(), big);
        assert!(!dst.join("sub").exists());
        let mut longer = archive.clone();
        longer.push(0);
        assert!(check(&longer).is_err());
        // Packing never overwrites.
        assert!(pack_dir(&src, &packed).is_err());

        // Every truncation is refused, none panics (cuts inside the big
        // file: every 997th byte).
        for cut in (0..archive.len()).filter(|c| *c < 100 || c % 997 == 0) {
            assert!(check(&archive[..cut]).is_err(), "cut {cut}");
        }
        // Path escapes and absurd lengths are refused.
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(&2u32.to_be_bytes());
        evil.extend_from_slice(b"..");
        evil.extend_from_slice(&0u64.to_be_bytes());
        assert!(check(&evil).is_err());
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(&3u32.to_be_bytes());
        evil.extend_from_slice(b"a/b");
        evil.extend_from_slice(&0u64.to_be_bytes());
        assert!(check(&evil).is_err());
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(&1u32.to_be_bytes());
        evil.extend_from_slice(b"x");
        evil.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(check(&evil).is_err());
        let mut evil = MAGIC.to_vec();
        evil.extend_from_slice(&2u32.to_be_bytes());
        for _ in 0..2 {
            evil.extend_from_slice(&1u32.to_be_bytes());
            evil.extend_from_slice(b"x");
            evil.extend_from_slice(&0u64.to_be_bytes());
        }
        assert!(check(&evil).is_err());
    }
}
