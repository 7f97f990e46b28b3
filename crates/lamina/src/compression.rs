//! Block compression: the [`Compression`] option and the stored form of a
//! compressed SST block (docs/format.md, "Block compression").
//!
//! A compressed block is stored as its uncompressed length (u32 LE) followed
//! by the compressed payload: an LZ4 block (the raw block format, no frame)
//! or a zstd frame. The length comes first so the reader can refuse an
//! absurd size before allocating anything, and allocates exactly what the
//! block needs. Which of the forms a block has is the type byte of its
//! trailer; raw blocks keep type 0 and are stored as they always were.

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;

/// Trailer type byte of a block stored as it is (the only type before
/// compression existed). The values are RocksDB's `CompressionType`.
pub const COMPRESSION_NONE: u8 = 0;
/// Trailer type byte of an LZ4-compressed block (RocksDB's `kLZ4Compression`).
pub const COMPRESSION_LZ4: u8 = 4;
/// Trailer type byte of a zstd-compressed block (RocksDB's `kZSTD`).
pub const COMPRESSION_ZSTD: u8 = 7;

/// The largest block contents stored compressed, and so the largest
/// uncompressed length a reader accepts: a hostile length field can make
/// the reader allocate at most this much. Larger blocks (a `block_size`
/// above it, or one entry with a huge value) are stored raw, which costs
/// nothing but their compression.
pub const MAX_COMPRESSED_BLOCK_LEN: usize = 16 << 20;

/// Bytes of the uncompressed-length prefix of a compressed block.
const LEN_PREFIX: usize = 4;

/// zstd's default level (the `zstd` command's and RocksDB's).
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

/// How new SST blocks are compressed ([`crate::Options::compression`]).
///
/// Parsed from and printed as `none`, `lz4`, `zstd` (level 3) or `zstd:N`
/// (N in 1..=22), the form the OPTIONS file and the CLI use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Blocks are stored as they are.
    #[default]
    None,
    /// LZ4 (the block format, by `lz4_flex`): fast to compress and very
    /// fast to decompress.
    Lz4,
    /// zstd at the given level (1..=22): smaller than LZ4, slower.
    Zstd(i32),
}

impl Compression {
    /// The trailer type byte of a block compressed this way.
    pub fn type_byte(self) -> u8 {
        match self {
            Compression::None => COMPRESSION_NONE,
            Compression::Lz4 => COMPRESSION_LZ4,
            Compression::Zstd(_) => COMPRESSION_ZSTD,
        }
    }
}

/// The name of a trailer type byte, for inspection: `none`, `lz4`, `zstd`,
/// or `unknown N`.
pub(crate) fn type_name(kind: u8) -> String {
    match kind {
        COMPRESSION_NONE => "none".into(),
        COMPRESSION_LZ4 => "lz4".into(),
        COMPRESSION_ZSTD => "zstd".into(),
        _ => format!("unknown {kind}"),
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::None => write!(f, "none"),
            Compression::Lz4 => write!(f, "lz4"),
            Compression::Zstd(level) => write!(f, "zstd:{level}"),
        }
    }
}

impl FromStr for Compression {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd(ZSTD_DEFAULT_LEVEL)),
            _ => s
                .strip_prefix("zstd:")
                .and_then(|n| n.parse::<i32>().ok())
                .filter(|n| (1..=22).contains(n))
                .map(Compression::Zstd)
                .ok_or_else(|| {
                    format!("compression must be none, lz4, zstd or zstd:LEVEL (1..=22), not {s:?}")
                }),
        }
    }
}

impl serde::Serialize for Compression {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Compression {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Compresses blocks for one table writer, keeping its zstd context (and
/// output buffer) from block to block: a fresh context per 4 KiB block
/// would cost more than the compression.
pub(crate) struct BlockCompressor {
    compression: Compression,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    out: Vec<u8>,
}

impl fmt::Debug for BlockCompressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCompressor")
            .field("compression", &self.compression)
            .finish()
    }
}

impl BlockCompressor {
    pub(crate) fn new(compression: Compression) -> Self {
        BlockCompressor {
            compression,
            zstd: None,
            out: Vec::new(),
        }
    }

    /// The stored form of `raw` and its type byte: compressed if that saves
    /// at least 1/8 of the block (LevelDB's and RocksDB's rule: less is not
    /// worth a decompression on every read), else `raw` itself with type
    /// [`COMPRESSION_NONE`]. A compressor that fails (zstd out of memory;
    /// LZ4 cannot, given its bound) leaves the block raw: a raw block is
    /// always a correct encoding, so nothing is lost but the saving.
    pub(crate) fn compress<'a>(&'a mut self, raw: &'a [u8]) -> (&'a [u8], u8) {
        let kind = self.compression.type_byte();
        let Ok(len) = u32::try_from(raw.len()) else {
            return (raw, COMPRESSION_NONE);
        };
        if kind == COMPRESSION_NONE || raw.len() > MAX_COMPRESSED_BLOCK_LEN {
            return (raw, COMPRESSION_NONE);
        }
        self.out.clear();
        self.out.extend_from_slice(&len.to_le_bytes());
        let written = match self.compression {
            Compression::None => None,
            Compression::Lz4 => {
                let bound = lz4_flex::block::get_maximum_output_size(raw.len());
                self.out.resize(LEN_PREFIX + bound, 0);
                self.out
                    .get_mut(LEN_PREFIX..)
                    .and_then(|dst| lz4_flex::block::compress_into(raw, dst).ok())
            }
            Compression::Zstd(level) => {
                if self.zstd.is_none() {
                    self.zstd = zstd::bulk::Compressor::new(level).ok();
                }
                let bound = zstd::zstd_safe::compress_bound(raw.len());
                self.out.resize(LEN_PREFIX + bound, 0);
                match (self.zstd.as_mut(), self.out.get_mut(LEN_PREFIX..)) {
                    (Some(z), Some(dst)) => z.compress_to_buffer(raw, dst).ok(),
                    _ => None,
                }
            }
        };
        let Some(written) = written else {
            return (raw, COMPRESSION_NONE);
        };
        self.out.truncate(LEN_PREFIX + written);
        if self.out.len() > raw.len() - raw.len() / 8 {
            return (raw, COMPRESSION_NONE);
        }
        (&self.out, kind)
    }
}

thread_local! {
    /// Each reading thread's zstd context, kept for the same reason as the
    /// writer's.
    static ZSTD_READER: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// The contents of a block stored as `stored` with trailer type `kind`,
/// decompressed into `buf` (reusing its allocation); `Ok(false)` leaves
/// `buf` untouched for a raw block, whose contents are `stored` itself.
/// Every failure is a reason for a `Corruption` error: an unknown type, a
/// length above [`MAX_COMPRESSED_BLOCK_LEN`] (refused before allocating),
/// a payload that does not decode, or one that decodes to another length.
pub(crate) fn decompress_into(
    kind: u8,
    stored: &[u8],
    buf: &mut Vec<u8>,
) -> std::result::Result<bool, &'static str> {
    if kind == COMPRESSION_NONE {
        return Ok(false);
    }
    if kind != COMPRESSION_LZ4 && kind != COMPRESSION_ZSTD {
        return Err("unknown block compression type");
    }
    let (len, payload) = stored
        .split_first_chunk::<LEN_PREFIX>()
        .ok_or("compressed block shorter than its length")?;
    let len = u32::from_le_bytes(*len) as usize;
    if len > MAX_COMPRESSED_BLOCK_LEN {
        return Err("compressed block claims an oversized length");
    }
    buf.clear();
    buf.resize(len, 0);
    let produced = if kind == COMPRESSION_LZ4 {
        lz4_flex::block::decompress_into(payload, buf).map_err(|_| "lz4 block does not decode")?
    } else {
        ZSTD_READER
            .with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.is_none() {
                    *slot = zstd::bulk::Decompressor::new().ok();
                }
                let z = slot.as_mut()?;
                z.decompress_to_buffer(payload, buf.as_mut_slice()).ok()
            })
            .ok_or("zstd block does not decode")?
    };
    if produced != len {
        return Err("compressed block decodes to another length");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(c: Compression, raw: &[u8]) -> u8 {
        let mut w = BlockCompressor::new(c);
        let (stored, kind) = w.compress(raw);
        let stored = stored.to_vec();
        let mut buf = vec![7u8; 3];
        let contents = if decompress_into(kind, &stored, &mut buf).unwrap() {
            buf
        } else {
            stored
        };
        assert_eq!(contents, raw, "{c}");
        kind
    }

    #[test]
    fn names_parse_and_print() {
        for s in ["none", "lz4", "zstd:3", "zstd:19"] {
            assert_eq!(s.parse::<Compression>().unwrap().to_string(), s);
        }
        assert_eq!("zstd".parse(), Ok(Compression::Zstd(3)));
        for bad in ["zstd:0", "zstd:23", "snappy", "LZ4", ""] {
            assert!(bad.parse::<Compression>().is_err(), "{bad}");
        }
    }

    #[test]
    fn compressible_blocks_are_compressed_and_others_kept_raw() {
        let text: Vec<u8> = b"key000123 value value value ".repeat(150);
        // xorshift bytes: nothing to find.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for c in [
            Compression::Lz4,
            Compression::Zstd(3),
            Compression::Zstd(19),
        ] {
            assert_eq!(round_trip(c, &text), c.type_byte());
            assert_eq!(round_trip(c, &noise), COMPRESSION_NONE, "{c}");
            assert_eq!(round_trip(c, b""), COMPRESSION_NONE, "{c}");
        }
        assert_eq!(round_trip(Compression::None, &text), COMPRESSION_NONE);
    }

    /// Blocks from all-noise to all-text: each is stored compressed exactly
    /// when lz4_flex's own size-prepended form (the same layout) saves at
    /// least an eighth, and is then byte for byte that form.
    #[test]
    fn the_eighth_rule_against_lz4_flex() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let (mut compressed, mut raw) = (0, 0);
        for text_per_16 in 0..=16u64 {
            let block: Vec<u8> = (0..4096u64)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if (i / 64) % 16 < text_per_16 {
                        b'a' + (i % 7) as u8
                    } else {
                        x as u8
                    }
                })
                .collect();
            let oracle = lz4_flex::block::compress_prepend_size(&block);
            let mut w = BlockCompressor::new(Compression::Lz4);
            let (stored, kind) = w.compress(&block);
            if oracle.len() <= block.len() - block.len() / 8 {
                assert_eq!((stored, kind), (&oracle[..], COMPRESSION_LZ4));
                compressed += 1;
            } else {
                assert_eq!((stored, kind), (&block[..], COMPRESSION_NONE));
                raw += 1;
            }
        }
        assert!(compressed > 0 && raw > 0, "{compressed} {raw}");
    }

    #[test]
    fn hostile_stored_bytes_are_errors_not_panics() {
        let text: Vec<u8> = b"0123456789abcdef".repeat(100);
        for c in [Compression::Lz4, Compression::Zstd(3)] {
            let mut w = BlockCompressor::new(c);
            let (stored, kind) = w.compress(&text);
            let stored = stored.to_vec();
            let mut buf = Vec::new();
            // Every truncation and every single-byte change decodes to the
            // right contents or is an error; none panics.
            for cut in 0..stored.len() {
                let _ = decompress_into(kind, &stored[..cut], &mut buf);
            }
            for i in 0..stored.len() {
                for flip in [1u8, 0x80, 0xff] {
                    let mut bad = stored.clone();
                    bad[i] ^= flip;
                    if let Ok(true) = decompress_into(kind, &bad, &mut buf) {
                        assert_eq!(buf.len(), text.len());
                    }
                }
            }
            // A length over the cap is refused before any allocation.
            let mut huge = stored.clone();
            huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
            let mut buf = Vec::new();
            assert!(decompress_into(kind, &huge, &mut buf).is_err());
            assert_eq!(buf.capacity(), 0);
            // A length that is not the payload's is refused.
            let mut short = stored.clone();
            short[..4].copy_from_slice(&((text.len() - 1) as u32).to_le_bytes());
            assert!(decompress_into(kind, &short, &mut buf).is_err());
            let mut long = stored;
            long[..4].copy_from_slice(&((text.len() + 1) as u32).to_le_bytes());
            assert!(decompress_into(kind, &long, &mut buf).is_err());
        }
        assert!(decompress_into(9, b"whatever", &mut Vec::new()).is_err());
    }
}
