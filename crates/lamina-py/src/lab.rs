//! `lamina.sim` (the model simulator of `lamina sim`) and
//! `lamina.experiment` (the specs of `lamina experiment`).

use std::path::PathBuf;

use lamina_experiment::{Cell, Experiment};
use lamina_sim::{
    simulate, AsyncMerges, FlushRecord, FlushSizes, KeyModel, ModelOptions, SimError, WaDefinition,
    DEFAULT_FLUSH_BYTES,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::to_py;
use crate::errors::{invalid, Error};

/// A named choice (`wa`, `keys`) parsed by the enum's serde names, the
/// names the CLI and the JSON summaries use.
fn choice<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| invalid(format!("{what}: {e}")))
}

fn sim_error(e: SimError) -> PyErr {
    // The message names the cause too: a bad spec says why it is bad.
    let msg = match std::error::Error::source(&e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    };
    match e {
        SimError::Spec { .. } | SimError::Config(_) => invalid(msg),
        _ => Error::new_err(msg),
    }
}

/// Simulates `flushes` flushes of compaction policy `policy` on the model
/// tree; one dict per flush, as the rows of `lamina sim`.
#[pyfunction]
#[pyo3(signature = (
    policy, flushes, *, flush_size=None, flush_sizes=None, flush_uniform=None, seed=0,
    buffer_bytes=None, size_ratio=10, dup_ratio=0.0, file_overhead=0, wa="engine",
    keys="uniform", merge_cost=None, merge_threads=1, stall_runs=0,
))]
#[expect(
    clippy::too_many_arguments,
    reason = "a Python keyword-argument constructor: one argument per option"
)]
pub fn sim<'py>(
    py: Python<'py>,
    policy: &str,
    flushes: u64,
    flush_size: Option<u64>,
    flush_sizes: Option<Vec<u64>>,
    flush_uniform: Option<(u64, u64)>,
    seed: u64,
    buffer_bytes: Option<u64>,
    size_ratio: usize,
    dup_ratio: f64,
    file_overhead: u64,
    wa: &str,
    keys: &str,
    merge_cost: Option<f64>,
    merge_threads: usize,
    stall_runs: usize,
) -> PyResult<Bound<'py, PyList>> {
    let sizes = match (flush_size, flush_sizes, flush_uniform) {
        (size, None, None) => FlushSizes::Constant(size.unwrap_or(DEFAULT_FLUSH_BYTES)),
        (None, Some(list), None) => FlushSizes::List(list),
        (None, None, Some((min, max))) => FlushSizes::Uniform { min, max, seed },
        _ => {
            return Err(invalid(
                "give at most one of flush_size, flush_sizes, flush_uniform",
            ))
        }
    };
    let opts = ModelOptions {
        buffer_bytes: buffer_bytes.unwrap_or_else(|| sizes.default_buffer()),
        size_ratio,
        dup_ratio,
        file_overhead,
        wa: choice::<WaDefinition>("wa", wa)?,
        keys: choice::<KeyModel>("keys", keys)?,
        merges: merge_cost.map(|cost| AsyncMerges {
            cost,
            threads: merge_threads,
            stall_runs,
        }),
        ..ModelOptions::default()
    };
    let mut records: Vec<FlushRecord> = Vec::new();
    let summary = py
        .detach(|| simulate(policy, &sizes, flushes, opts, |r| records.push(*r)))
        .map_err(sim_error)?;
    let rows = PyList::empty(py);
    for r in &records {
        let row = to_py(py, r)?;
        row.set_item("policy", &summary.policy)?;
        rows.append(row)?;
    }
    Ok(rows)
}

/// Runs an experiment spec (TOML text, or the path of a TOML file) and
/// returns one dict per run: run_id, strategy, workload, rep, the grid
/// parameters, the metrics and the full `stats`. Databases live in
/// scratch directories under `work_dir` (default: the system's temporary
/// directory), deleted after each run. Nothing else is written.
#[pyfunction]
#[pyo3(signature = (spec, *, work_dir=None))]
pub fn experiment<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyAny>,
    work_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyList>> {
    let text = spec_text(spec)?;
    let exp = Experiment::parse(&text).map_err(|e| invalid(format!("{e:#}")))?;
    let header = exp.header();
    let work = work_dir.unwrap_or_else(std::env::temp_dir);
    let rows = PyList::empty(py);
    for run in &exp.runs {
        let measured = py
            .detach(|| run.execute_scratch(&work, &mut |_| {}))
            .map_err(|e| match e.downcast::<lamina::Error>() {
                Ok(e) => crate::errors::engine(e),
                Err(e) => Error::new_err(format!("{e:#}")),
            })?;
        let row = PyDict::new(py);
        for (name, cell) in header.iter().zip(run.row(&measured)) {
            let value = match cell {
                Cell::Text(s) => s.into_pyobject(py)?.into_any(),
                Cell::Count(n) => n.into_pyobject(py)?.into_any(),
                Cell::Real(x) => x.into_pyobject(py)?.into_any(),
                Cell::Param(v) => to_py(py, &v)?,
            };
            row.set_item(name, value)?;
        }
        row.set_item("stats", to_py(py, &measured.stats)?)?;
        rows.append(row)?;
        // A long sweep stays interruptible with Ctrl-C between runs.
        py.check_signals()?;
    }
    Ok(rows)
}

/// The spec's text: a path-like object or a string naming a file is read,
/// any other string is the TOML itself.
fn spec_text(spec: &Bound<'_, PyAny>) -> PyResult<String> {
    let path: PathBuf = match spec.extract::<String>() {
        Ok(s) if s.contains('\n') || !std::path::Path::new(&s).is_file() => return Ok(s),
        Ok(s) => PathBuf::from(s),
        Err(_) => spec.extract()?,
    };
    std::fs::read_to_string(&path).map_err(|e| {
        crate::errors::storage_io(e.raw_os_error(), format!("reading {}: {e}", path.display()))
    })
}
