//! The dataset's directory: the names in it and its descriptor `DATASET`,
//! which records the choices fixed at creation and the checkpoint.

use std::path::Path;

use lamina::spatial::Comparator;
use lamina::{Options, Result};

use crate::options::{valid_field_name, Maintenance};

pub(crate) const DESCRIPTOR: &str = "DATASET";
const DESCRIPTOR_TMP: &str = "DATASET.tmp";
pub(crate) const LOCK: &str = "LOCK";
pub(crate) const PRIMARY_DIR: &str = "primary";
pub(crate) const INDEX_DIR: &str = "spatial";
pub(crate) const FIELD_DIR_PREFIX: &str = "field-";
/// The descriptor of a dataset without field indexes (readable by the
/// versions before field indexes).
const FORMAT_LINE: &str = "lamina-dataset 1";
/// The descriptor of a dataset with field indexes: version 1 plus a
/// `fields` line.
const FORMAT_LINE_FIELDS: &str = "lamina-dataset 2";

/// What `DATASET` records: the fixed choices and the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Descriptor {
    pub(crate) comparator: Comparator,
    pub(crate) maintenance: Maintenance,
    /// Logs numbered below this are no longer needed.
    pub(crate) checkpoint: u64,
    /// The field indexes' names, in order.
    pub(crate) fields: Vec<String>,
}

impl Descriptor {
    pub(crate) fn encode(&self) -> String {
        let head = format!(
            "comparator {}\nmaintenance {}\ncheckpoint {}\n",
            self.comparator.name(),
            self.maintenance.name(),
            self.checkpoint
        );
        if self.fields.is_empty() {
            format!("{FORMAT_LINE}\n{head}")
        } else {
            format!(
                "{FORMAT_LINE_FIELDS}\n{head}fields {}\n",
                self.fields.join(" ")
            )
        }
    }

    pub(crate) fn decode(text: &str) -> Option<Descriptor> {
        let mut lines = text.lines();
        let with_fields = match lines.next()? {
            FORMAT_LINE => false,
            FORMAT_LINE_FIELDS => true,
            _ => return None,
        };
        let mut field = |name: &str| {
            lines
                .next()?
                .strip_prefix(name)?
                .strip_prefix(' ')
                .map(str::to_string)
        };
        let comparator = Comparator::parse(&field("comparator")?)?;
        let maintenance = Maintenance::parse(&field("maintenance")?)?;
        let checkpoint = field("checkpoint")?.parse().ok()?;
        let fields = if with_fields {
            let names: Vec<String> = field("fields")?.split(' ').map(str::to_string).collect();
            if names.iter().any(|n| !valid_field_name(n)) {
                return None;
            }
            names
        } else {
            Vec::new()
        };
        if lines.next().is_some() {
            return None;
        }
        Some(Descriptor {
            comparator,
            maintenance,
            checkpoint,
            fields,
        })
    }
}

/// Writes `DATASET` durably: a temporary file, synced, renamed over it.
pub(crate) fn write_descriptor(base: &Options, dir: &Path, d: &Descriptor) -> Result<()> {
    let vfs = &base.vfs;
    let tmp = dir.join(DESCRIPTOR_TMP);
    let mut f = vfs.create(&tmp)?;
    f.append(d.encode().as_bytes())?;
    f.sync()?;
    drop(f);
    vfs.rename(&tmp, &dir.join(DESCRIPTOR))?;
    vfs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_roundtrips() {
        let d = Descriptor {
            comparator: Comparator::Simple,
            maintenance: Maintenance::Lazy,
            checkpoint: 42,
            fields: Vec::new(),
        };
        assert_eq!(Descriptor::decode(&d.encode()), Some(d.clone()));
        assert_eq!(
            d.encode(),
            "lamina-dataset 1\ncomparator simple\nmaintenance lazy\ncheckpoint 42\n"
        );
        let with_fields = Descriptor {
            fields: vec!["city".into(), "kind_2".into()],
            ..d
        };
        assert_eq!(
            with_fields.encode(),
            "lamina-dataset 2\ncomparator simple\nmaintenance lazy\ncheckpoint 42\nfields city kind_2\n"
        );
        assert_eq!(Descriptor::decode(&with_fields.encode()), Some(with_fields));
        for bad in [
            "lamina-dataset 2\n",
            "lamina-dataset 2\ncomparator simple\nmaintenance lazy\ncheckpoint 42\n",
            "lamina-dataset 2\ncomparator simple\nmaintenance lazy\ncheckpoint 42\nfields Bad\n",
            "lamina-dataset 1\ncomparator simple\nmaintenance lazy\ncheckpoint 42\nfields a\n",
            "lamina-dataset 3\n",
        ] {
            assert!(Descriptor::decode(bad).is_none(), "{bad}");
        }
    }
}
