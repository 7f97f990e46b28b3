//! How a dataset is opened: its indexes, their merge policies, the
//! maintenance strategy and the shared memory budget.

use lamina::compaction::CompactionSpec;
use lamina::spatial::Comparator;
use lamina::Options;

/// How the secondary index is kept consistent with the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    /// Anti-matter on every upsert and delete; queries trust the index.
    Eager,
    /// No cleanup on writes; queries validate against the primary index.
    Lazy,
}

impl Maintenance {
    /// `eager` or `lazy`.
    pub fn name(self) -> &'static str {
        match self {
            Maintenance::Eager => "eager",
            Maintenance::Lazy => "lazy",
        }
    }

    /// Inverse of [`Maintenance::name`].
    pub fn parse(s: &str) -> Option<Maintenance> {
        [Maintenance::Eager, Maintenance::Lazy]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// A secondary index on one field of the records: [`Record::fields`](crate::Record::fields)`[i]`
/// is the value of the dataset's `i`-th field index.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldIndex {
    /// 1 to 32 characters of `a-z`, `0-9` and `_`; the index lives in
    /// directory `field-NAME`.
    pub name: String,
    /// The index's merge policy.
    pub compaction: CompactionSpec,
}

/// How a dataset is opened.
#[derive(Debug, Clone)]
pub struct DatasetOptions {
    /// Options shared by both indexes (file system, block size, caches,
    /// sync mode, `create_if_missing`); their `compaction`,
    /// `write_buffer_size`, `spatial` and `write_ahead_log` are set per
    /// index from the fields below.
    pub base: Options,
    /// Bytes the indexes' memtables may hold together before all of them
    /// are flushed (AsterixDB's global budget).
    pub memory_budget: usize,
    /// The secondary index's key order; fixed when the dataset is created.
    pub comparator: Comparator,
    /// Fixed when the dataset is created.
    pub maintenance: Maintenance,
    /// The primary index's merge policy (the seed uses `binomial:k=8`).
    pub primary_compaction: CompactionSpec,
    /// The spatial index's merge policy.
    pub index_compaction: CompactionSpec,
    /// Secondary indexes on fields, in the order of [`Record::fields`](crate::Record::fields);
    /// fixed when the dataset is created.
    pub fields: Vec<FieldIndex>,
}

impl Default for DatasetOptions {
    fn default() -> Self {
        DatasetOptions {
            base: Options::default(),
            memory_budget: 4 << 20,
            comparator: Comparator::Hilbert,
            maintenance: Maintenance::Eager,
            primary_compaction: CompactionSpec::default(),
            index_compaction: CompactionSpec::default(),
            fields: Vec::new(),
        }
    }
}

/// The longest field index name.
pub(crate) const MAX_FIELD_NAME: usize = 32;

/// Whether `name` may name a field index (see [`FieldIndex::name`]).
pub(crate) fn valid_field_name(name: &str) -> bool {
    (1..=MAX_FIELD_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}
