//! `DIR/OPTIONS-NNNNNN`: the options a database was last opened with
//! (RocksDB's OPTIONS file), TOML with a checksum line (docs/format.md).
//!
//! Every open that writes stores its options in a new file, written
//! atomically (temporary name, sync, rename, directory sync); the newest
//! two are kept. An open reads the newest file that decodes, falling back to
//! older ones, so a torn or damaged file never stops a database from
//! opening. The stored values serve two purposes: options the caller left
//! to them ([`crate::OptionsBuilder::from_stored_options`]), and refusing a
//! change that would misread the data (the spatial comparator).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::options::{Options, SyncMode};
use crate::spatial::Comparator;
use crate::vfs::Vfs;
use lamina_compaction::CompactionSpec;

/// Version of the file's layout (`format = 1`).
const FORMAT: u32 = 1;
const CRC_PREFIX: &str = "# crc32c = 0x";

/// How an option's value is written in the file.
trait Stored: Sized {
    type Repr;
    fn save(&self) -> Self::Repr;
    fn load(repr: &Self::Repr) -> std::result::Result<Self, String>;
}

macro_rules! stored_as_itself {
    ($($ty:ty),*) => {$(
        impl Stored for $ty {
            type Repr = $ty;
            fn save(&self) -> $ty {
                self.clone()
            }
            fn load(repr: &$ty) -> std::result::Result<$ty, String> {
                Ok(repr.clone())
            }
        }
    )*};
}

stored_as_itself!(u64, f64, bool, Vec<f64>);

impl Stored for usize {
    type Repr = u64;
    fn save(&self) -> u64 {
        *self as u64
    }
    fn load(repr: &u64) -> std::result::Result<usize, String> {
        usize::try_from(*repr).map_err(|e| e.to_string())
    }
}

impl Stored for CompactionSpec {
    type Repr = String;
    fn save(&self) -> String {
        self.to_string()
    }
    fn load(repr: &String) -> std::result::Result<Self, String> {
        repr.parse()
            .map_err(|e: lamina_compaction::Error| e.to_string())
    }
}

impl Stored for SyncMode {
    type Repr = String;
    fn save(&self) -> String {
        self.to_string()
    }
    fn load(repr: &String) -> std::result::Result<Self, String> {
        repr.parse()
    }
}

impl Stored for Compression {
    type Repr = String;
    fn save(&self) -> String {
        self.to_string()
    }
    fn load(repr: &String) -> std::result::Result<Self, String> {
        repr.parse()
    }
}

impl Stored for Vec<Compression> {
    type Repr = Vec<String>;
    fn save(&self) -> Vec<String> {
        self.iter().map(Compression::to_string).collect()
    }
    fn load(repr: &Vec<String>) -> std::result::Result<Self, String> {
        repr.iter().map(|s| s.parse()).collect()
    }
}

impl Stored for Option<Comparator> {
    type Repr = String;
    fn save(&self) -> String {
        self.map_or("none", Comparator::name).to_string()
    }
    fn load(repr: &String) -> std::result::Result<Self, String> {
        match repr.as_str() {
            "none" => Ok(None),
            name => Comparator::parse(name)
                .map(Some)
                .ok_or_else(|| format!("unknown comparator {name:?}")),
        }
    }
}

macro_rules! persisted {
    ($($field:ident: $ty:ty),* $(,)?) => {
        /// The stored options, each `None` when the file leaves it out
        /// (written by an older engine).
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        struct Persisted {
            $(
                #[serde(default, skip_serializing_if = "Option::is_none")]
                $field: Option<<$ty as Stored>::Repr>,
            )*
        }

        impl Persisted {
            fn of(o: &Options) -> Self {
                Persisted { $($field: Some(o.$field.save()),)* }
            }

            /// Sets every stored field of `o` not named in `explicit`; a
            /// stored value that no longer parses is skipped and noted.
            fn apply(&self, o: &mut Options, explicit: &[&str], notes: &mut Vec<String>) {
                $(
                    if let Some(v) = &self.$field {
                        if !explicit.contains(&stringify!($field)) {
                            match <$ty as Stored>::load(v) {
                                Ok(v) => o.$field = v,
                                Err(e) => notes.push(format!(
                                    "stored {} ignored: {e}", stringify!($field)
                                )),
                            }
                        }
                    }
                )*
            }
        }
    };
}

// Every option but the per-open ones (`vfs`, `create_if_missing`,
// `read_only`, `mmap_reads`, `scan_resistant_cache`, `verify_checksums`,
// `seek_compaction`, `max_scan_readahead_bytes`, `recycle_table_files`),
// which describe how this process opens and reads the database rather than
// the database.
crate::options::with_database_options!(persisted);

#[derive(Serialize, Deserialize)]
struct FileBody {
    format: u32,
    options: Persisted,
}

/// The options stored in one OPTIONS file.
#[derive(Debug, Clone)]
pub struct StoredOptions {
    /// The file's name (`OPTIONS-NNNNNN`).
    pub file: String,
    /// Its number.
    pub number: u64,
    /// Newer OPTIONS files that could not be read, with why (a torn write).
    pub skipped: Vec<String>,
    values: Persisted,
}

impl StoredOptions {
    /// Every stored option as `(name, value)`, in the order of
    /// [`crate::Options`]' fields: strings as they are, other values as the
    /// file writes them (TOML).
    pub fn entries(&self) -> Vec<(String, String)> {
        let Ok(toml::Value::Table(t)) = toml::Value::try_from(&self.values) else {
            return Vec::new();
        };
        // `toml::Table` sorts its keys; list them in the struct's order.
        let order = field_order();
        let mut entries: Vec<(String, String)> = t
            .into_iter()
            .map(|(k, v)| match v {
                toml::Value::String(s) => (k, s),
                v => (k, v.to_string()),
            })
            .collect();
        entries.sort_by_key(|(k, _)| order.iter().position(|f| f == k));
        entries
    }

    /// The stored spatial comparator, if the file records one.
    fn spatial(&self) -> Option<std::result::Result<Option<Comparator>, String>> {
        self.values.spatial.as_ref().map(Stored::load)
    }
}

/// The persisted fields, in declaration order.
fn field_order() -> Vec<String> {
    toml::to_string(&Persisted::of(&Options::default()))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim().to_string()))
        .collect()
}

/// The bytes of an OPTIONS file holding `opts`.
fn encode(opts: &Options) -> Result<Vec<u8>> {
    let body = toml::to_string(&FileBody {
        format: FORMAT,
        options: Persisted::of(opts),
    })
    .map_err(|e| Error::InvalidArgument(format!("options cannot be stored: {e}")))?;
    let mut text = format!(
        "# lamina OPTIONS file: the options this database was opened with (docs/format.md).\n\
         # Written at every open; the newest two are kept. Do not edit: a checksum guards it.\n{body}"
    );
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let crc = crc32c::crc32c(text.as_bytes());
    text.push_str(&format!("{CRC_PREFIX}{crc:08x}\n"));
    Ok(text.into_bytes())
}

/// Decodes an OPTIONS file; `Err` says why it cannot be used.
fn decode(data: &[u8]) -> std::result::Result<Persisted, String> {
    let text = std::str::from_utf8(data).map_err(|_| "not UTF-8".to_string())?;
    if !text.ends_with('\n') {
        return Err("does not end with a newline (torn write?)".into());
    }
    let body_end = text
        .trim_end_matches('\n')
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or("no checksum line")?;
    let (body, last) = text.split_at(body_end);
    let crc = last
        .trim_end()
        .strip_prefix(CRC_PREFIX)
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("no checksum line (torn write?)")?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err("checksum mismatch".into());
    }
    let file: FileBody = toml::from_str(body).map_err(|e| e.to_string())?;
    if file.format != FORMAT {
        return Err(format!(
            "format {} (this engine reads {FORMAT})",
            file.format
        ));
    }
    Ok(file.options)
}

/// OPTIONS file numbers in `names`, newest first.
fn numbers(names: &[String]) -> Vec<u64> {
    let mut n: Vec<u64> = names
        .iter()
        .filter_map(|name| match filename::parse(name) {
            Some((FileKind::Options, n)) => Some(n),
            _ => None,
        })
        .collect();
    n.sort_unstable_by(|a, b| b.cmp(a));
    n
}

/// The newest OPTIONS file of `dir` that decodes, with the newer ones that
/// did not (in its `skipped`); `None` if none decodes (a new database, one
/// created before OPTIONS files, or every file damaged). Only listing the
/// directory can fail.
pub fn load(vfs: &dyn Vfs, dir: &Path) -> Result<Option<StoredOptions>> {
    Ok(load_with_failures(vfs, dir)?.0)
}

/// [`load`], and every file that did not decode with why.
pub(crate) fn load_with_failures(
    vfs: &dyn Vfs,
    dir: &Path,
) -> Result<(Option<StoredOptions>, Vec<String>)> {
    if !vfs.exists(dir) {
        return Ok((None, Vec::new()));
    }
    let mut skipped = Vec::new();
    for n in numbers(&vfs.list(dir)?) {
        let file = filename::options_name(n);
        let decoded = vfs
            .read_all(&dir.join(&file))
            .map_err(|e| e.to_string())
            .and_then(|data| decode(&data));
        match decoded {
            Ok(values) => {
                let stored = StoredOptions {
                    file,
                    number: n,
                    skipped: skipped.clone(),
                    values,
                };
                return Ok((Some(stored), skipped));
            }
            Err(why) => skipped.push(format!("{file}: {why}")),
        }
    }
    Ok((None, skipped))
}

/// What an open does with the stored options: fills in the fields the
/// caller left to them (`opts.explicit`), then refuses a spatial comparator
/// other than the stored one. `skipped` are the OPTIONS files that did not
/// decode. Returns lines for the info log.
pub(crate) fn reconcile(
    stored: Option<&StoredOptions>,
    skipped: &[String],
    opts: &mut Options,
) -> Result<Vec<String>> {
    let fallback = match stored {
        Some(s) => format!("using the older {}", s.file),
        None => "using the caller's options".to_string(),
    };
    let mut notes: Vec<String> = skipped
        .iter()
        .map(|s| format!("unreadable {s}; {fallback}"))
        .collect();
    let explicit = opts.explicit.take();
    let Some(stored) = stored else {
        return Ok(notes);
    };
    if let Some(explicit) = explicit {
        stored.values.apply(opts, &explicit, &mut notes);
        notes.push(format!(
            "options the caller did not set taken from {}",
            stored.file
        ));
        opts.validate().map_err(|e| {
            Error::InvalidArgument(format!(
                "the caller's options with the rest from {}: {e}",
                stored.file
            ))
        })?;
    }
    if let Some(Ok(spatial)) = stored.spatial() {
        if spatial != opts.spatial {
            return Err(Error::IncompatibleOption {
                option: "spatial",
                stored: spatial.save(),
                requested: opts.spatial.save(),
            });
        }
    }
    Ok(notes)
}

/// Writes OPTIONS file `number` atomically: a temporary file, synced, then
/// renamed and the directory synced, so the name only ever holds a whole
/// file.
pub(crate) fn write(vfs: &dyn Vfs, dir: &Path, number: u64, opts: &Options) -> Result<()> {
    let data = encode(opts)?;
    let tmp = dir.join(filename::options_temp_name(number));
    let mut f = vfs.create(&tmp)?;
    f.append(&data)?;
    f.sync()?;
    drop(f);
    vfs.rename(&tmp, &dir.join(filename::options_name(number)))?;
    vfs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_round_trips_and_any_damage_is_detected() {
        let o = Options::builder()
            .write_buffer_size(12345)
            .compaction(CompactionSpec::tiered(3))
            .sync(SyncMode::Interval(std::time::Duration::from_millis(250)))
            .spatial(Some(Comparator::ZOrder))
            .bloom_bits_per_level(vec![8.0, 4.5])
            .compression(Compression::Zstd(5))
            .compression_per_level(vec![Compression::None, Compression::Lz4])
            .build()
            .unwrap();
        let data = encode(&o).unwrap();
        let decoded = decode(&data).unwrap();
        assert_eq!(decoded, Persisted::of(&o));
        let mut back = Options::default();
        let mut notes = Vec::new();
        decoded.apply(&mut back, &[], &mut notes);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(back.write_buffer_size, 12345);
        assert_eq!(back.compaction.to_string(), "tiered:T=3");
        assert_eq!(back.sync, o.sync);
        assert_eq!(back.spatial, Some(Comparator::ZOrder));
        assert_eq!(back.bloom_bits_per_level, vec![8.0, 4.5]);
        assert_eq!(back.compression, Compression::Zstd(5));
        assert_eq!(
            back.compression_per_level,
            vec![Compression::None, Compression::Lz4]
        );
        let text = String::from_utf8_lossy(&data);
        assert!(text.contains("compression = \"zstd:5\""), "{text}");
        assert!(
            text.contains("compression_per_level = [\"none\", \"lz4\"]"),
            "{text}"
        );
        // Explicit fields are left alone.
        let mut mine = Options::default();
        decoded.apply(&mut mine, &["write_buffer_size"], &mut notes);
        assert_eq!(mine.write_buffer_size, Options::default().write_buffer_size);
        assert_eq!(mine.compaction.to_string(), "tiered:T=3");
        // Every truncation (a torn write) and every flipped byte is refused.
        for len in 0..data.len() {
            assert!(decode(&data[..len]).is_err(), "prefix of {len} bytes");
        }
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad).is_err(), "byte {i} flipped");
        }
    }

    #[test]
    fn entries_follow_the_options_order() {
        let stored = StoredOptions {
            file: "OPTIONS-000001".into(),
            number: 1,
            skipped: Vec::new(),
            values: Persisted::of(&Options::default()),
        };
        let names: Vec<String> = stored.entries().into_iter().map(|(k, _)| k).collect();
        assert_eq!(names.first().map(String::as_str), Some("write_buffer_size"));
        assert_eq!(names.last().map(String::as_str), Some("spatial"));
        assert_eq!(names.len(), 27);
    }
}
