//! The dataset options of the spatial commands and of `lamina serve
//! --spatial-dir`, from their flags.

use anyhow::{anyhow, Context, Result};
use lamina::compaction::CompactionSpec;
use lamina::spatial::Comparator;
use lamina_dataset::{DatasetOptions, Maintenance};

/// The spatial index's policy: `spec` with `partition=P` added.
pub fn index_compaction(spec: &CompactionSpec, partition: Option<&str>) -> Result<CompactionSpec> {
    let Some(p) = partition else {
        return Ok(spec.clone());
    };
    let text = spec.to_string();
    let joined = format!(
        "{text}{}partition={p}",
        if text.contains(':') { ',' } else { ':' }
    );
    joined
        .parse()
        .with_context(|| format!("--partition {p} with --compaction {text}"))
}

/// The dataset options of `spatial exec` and `serve --spatial-dir`: the
/// engine options `base` (their write buffer is the shared memory budget,
/// their compaction the spatial index's policy, cut by `partition`), with
/// the comparator and maintenance named on the command line.
pub fn dataset_options(
    base: lamina::Options,
    comparator: &str,
    maintenance: &str,
    primary_compaction: CompactionSpec,
    partition: Option<&str>,
) -> Result<DatasetOptions> {
    let comparator = Comparator::parse(comparator)
        .ok_or_else(|| anyhow!("comparator {comparator:?}: use hilbert, zorder or simple"))?;
    let maintenance = Maintenance::parse(maintenance)
        .ok_or_else(|| anyhow!("maintenance {maintenance:?}: use eager or lazy"))?;
    Ok(DatasetOptions {
        memory_budget: base.write_buffer_size,
        index_compaction: index_compaction(&base.compaction, partition)?,
        primary_compaction,
        comparator,
        maintenance,
        base,
        fields: Vec::new(),
    })
}
