//! Compaction specs: the typed form of `name[:key=value,...]` and the one
//! registry of strategies that builds them, lists them in `--help` and writes
//! `docs/compaction.md`'s table.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::policy::design::{self, presets};
use crate::policy::stack;
use crate::{CompactionPolicy, Leveling, PolicyDefaults};

/// Parameters as written in a spec, in order.
type Params<'a> = [(&'a str, &'a str)];
/// Builds a strategy from its parameters; `spec` is the whole spec text.
type Build = fn(&Params<'_>, &str, PolicyDefaults) -> Result<Box<dyn CompactionPolicy>>;

/// The kind of tree a strategy keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Leveled trees: seed 004's leveling, bLSM.
    Leveling,
    /// One stack of runs (seed 003, seed 000 ch. 3), or no merging at all.
    Stack,
    /// A composition of the design-space primitives (seed 001, seed 004's
    /// CS265 policies), `design/presets.rs`.
    DesignSpace,
}

/// One compaction strategy lamina knows.
#[derive(Clone, Copy)]
pub struct Strategy {
    /// The name a spec starts with.
    pub name: &'static str,
    /// The kind of tree it keeps.
    pub family: Family,
    /// Its parameters with their defaults, as a reader writes them.
    pub params: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
    /// Where it comes from (a seed, an engine).
    pub source: &'static str,
    /// Whether this entry takes a spec with these parameters: two families
    /// share the names `tiered` and `leveled`, told apart by their keys.
    accepts: fn(&Params<'_>) -> bool,
    build: Build,
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Strategy")
            .field("name", &self.name)
            .finish()
    }
}

fn any(_: &Params<'_>) -> bool {
    true
}

fn has_key(params: &Params<'_>, keys: &[&str]) -> bool {
    params.iter().any(|(k, _)| keys.contains(k))
}

/// A design-space preset (`design/presets.rs`) as a registry entry.
macro_rules! preset {
    ($name:literal, $params:literal, $summary:literal, $source:literal) => {
        preset!($name, $params, $summary, $source, any)
    };
    ($name:literal, $params:literal, $summary:literal, $source:literal, $accepts:expr) => {
        Strategy {
            name: $name,
            family: Family::DesignSpace,
            params: $params,
            summary: $summary,
            source: $source,
            accepts: $accepts,
            build: |p, spec, d| Ok(Box::new(presets::preset($name, p, spec, d)?)),
        }
    };
}

/// A policy built by `Type::from_params(params, defaults)`.
macro_rules! policy {
    ($ty:ty) => {
        |p, _, d| Ok(Box::new(<$ty>::from_params(p, d)?))
    };
}

/// Every strategy, in the order `--help` and the docs list them. The first
/// entry whose name matches and that accepts the parameters builds a spec.
pub static STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "leveling",
        family: Family::Leveling,
        params: "T=size_ratio, l0=4",
        summary: "level 0 tiered (l0 flushes), one run per deeper level, whole-level merges",
        source: "seed 004 (CS265)",
        accepts: any,
        build: policy!(Leveling),
    },
    Strategy {
        name: "blsm",
        family: Family::Leveling,
        params: "T=size_ratio, l0=4, file, unit=1",
        summary: "bLSM split levels: C_i receives, C'_i drains unit files at a time in key order into C_i+1",
        source: "seed 002 §4.1 (bLSM)",
        accepts: any,
        build: policy!(crate::policy::blsm::Blsm),
    },
    Strategy {
        name: "lsbm",
        family: Family::Leveling,
        params: "T=size_ratio, l0=4, file, unit=1, trim=30000, keep=0.8, freeze=0.9",
        summary: "bLSM plus the LSbM compaction buffer: units moved down stay readable (cached) until trimmed",
        source: "seed 002 §4 (LSbM)",
        accepts: any,
        build: |p, _, d| Ok(Box::new(crate::policy::blsm::Blsm::lsbm_from_params(p, d)?)),
    },
    Strategy {
        name: "tiered",
        family: Family::Stack,
        params: "b=size_ratio, low=0.5, high=1.5, file",
        summary: "one stack; b runs of similar size (within [low, high] × their mean) merge",
        source: "seed 000 §3.2, seed 003",
        accepts: |p| has_key(p, &["b", "low", "high"]),
        build: policy!(stack::Tiered),
    },
    Strategy {
        name: "leveled",
        family: Family::Stack,
        params: "b0=2, b=size_ratio, file, partition=size (or str, rstar-grove)",
        summary: "one stack of b0 + levels; level i holds b0 · b^i flushes; str and rstar-grove cut spatial levels into tiles",
        source: "seed 000 §3.2, §4.3",
        accepts: |p| {
            has_key(p, &["b", "b0"])
                || p.iter()
                    .any(|&(k, v)| k == "partition" && matches!(v, "str" | "rstar-grove"))
        },
        build: policy!(stack::Leveled),
    },
    Strategy {
        name: "binomial",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, the binomial schedule (optimal for few flushes)",
        source: "seed 003 §III-D, seed 000 §3.3",
        accepts: any,
        build: policy!(stack::Binomial),
    },
    Strategy {
        name: "minlatency",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, minimal worst-case merge latency",
        source: "seed 003 §III-C",
        accepts: any,
        build: policy!(stack::MinLatency),
    },
    Strategy {
        name: "bigtable",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, merge until each run outweighs the newer ones",
        source: "seed 003 §II (Bigtable)",
        accepts: any,
        build: policy!(stack::Bigtable),
    },
    Strategy {
        name: "exploring",
        family: Family::Stack,
        params: "k (required), lambda=1.2, c=2, d=10, file",
        summary: "bounded depth k, HBase's window of c..d runs within lambda × the rest",
        source: "seed 003 §II (HBase)",
        accepts: any,
        build: policy!(stack::Exploring),
    },
    Strategy {
        name: "constant",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, merge every run when k is exceeded",
        source: "seed 003 §II",
        accepts: any,
        build: policy!(stack::Constant),
    },
    Strategy {
        name: "concurrent",
        family: Family::Stack,
        params: "k=30, lambda=1.2, c=3, d=10, rule=code (or text), file",
        summary: "AsterixDB's policy: merges the newest idle runs beside a running merge",
        source: "seed 000 §3.2",
        accepts: any,
        build: policy!(stack::Concurrent),
    },
    Strategy {
        name: "nomerge",
        family: Family::Stack,
        params: "",
        summary: "never compacts (a baseline; reads slow down with every flush)",
        source: "lamina",
        accepts: any,
        build: |p, _, _| Ok(Box::new(stack::NoMerge::from_params(p)?)),
    },
    preset!(
        "full",
        "T, file, block=true, mode=level (or files)",
        "saturation; leveling; the whole level (mode=files: every file marked, merged one by one); blocks writes while it merges",
        "seed 001 (Full)"
    ),
    preset!(
        "lo1",
        "T, file",
        "saturation; leveling; one file, least overlap with the next level",
        "seed 001 (LO+1)"
    ),
    preset!(
        "lo2",
        "T, file",
        "saturation; leveling; one file, least overlap with the level after next",
        "seed 001 (LO+2)"
    ),
    preset!(
        "rr",
        "T, file",
        "saturation; leveling; one file, round-robin cursor per level",
        "seed 001 (RR)"
    ),
    preset!(
        "cold",
        "T, file",
        "saturation; leveling; one file, least recently read",
        "seed 001 (Cold)"
    ),
    preset!(
        "old",
        "T, file",
        "saturation; leveling; one file, oldest data",
        "seed 001 (Old)"
    ),
    preset!(
        "tsd",
        "threshold=0.2, T, file",
        "tombstone density above threshold first, then lo1",
        "seed 001 (TSD)"
    ),
    preset!(
        "tsa",
        "threshold=60000 (ms), T, file",
        "expired tombstone age first (Lethe), then lo1",
        "seed 001 (TSA)"
    ),
    preset!(
        "tier",
        "sa, T, file",
        "tiering: T runs per level merge down as a new run",
        "seed 001 (Tier)"
    ),
    preset!(
        "smtree",
        "T, file",
        "SM-tree (stepped merge): T runs per level merge whole into one run below",
        "seed 002 (SM-tree baseline)"
    ),
    preset!(
        "1-leveling",
        "l0=4, T, file",
        "level 0 tiered, leveled below, one file at a time",
        "seed 001 (1-Lvl, RocksDB)"
    ),
    preset!(
        "lazy-leveling",
        "T, file",
        "tiered levels, the deepest leveled",
        "seed 001 (Dostoevsky)"
    ),
    preset!(
        "tiered",
        "T, file",
        "tiering, whole levels merge down (seed 004's tiered)",
        "seed 004 (CS265)"
    ),
    preset!(
        "leveled",
        "T, file",
        "leveling, whole levels merge with the next (seed 004's leveled)",
        "seed 004 (CS265)"
    ),
    preset!(
        "lazy-leveled",
        "T, file",
        "tiered levels, the deepest leveled, whole levels",
        "seed 004 (CS265)"
    ),
    preset!(
        "partial",
        "c=0.2, T, file",
        "tiering; a segment of max(2, ⌈c·runs⌉) runs of smallest key span",
        "seed 004 (CS265)"
    ),
];

/// The registry entry for `name` with `params`, if any.
pub fn strategy(name: &str, params: &Params<'_>) -> Option<&'static Strategy> {
    STRATEGIES
        .iter()
        .find(|s| s.name == name && (s.accepts)(params))
}

/// The strategy names, each once, in registry order.
pub fn strategy_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = Vec::new();
    for s in STRATEGIES {
        if !names.contains(&s.name) {
            names.push(s.name);
        }
    }
    names
}

/// The design-space presets' names.
pub fn preset_names() -> impl Iterator<Item = &'static str> {
    STRATEGIES
        .iter()
        .filter(|s| s.family == Family::DesignSpace)
        .map(|s| s.name)
}

/// `--help`'s list of strategies, one per line.
pub fn help_text() -> String {
    let mut out = String::from(
        "Compaction strategy, `name[:key=value,...]` or `toml:FILE` (docs/compaction.md).\n\
         T and b default to --size-ratio, file to --target-file-size.\n\
         The stack policies (tiered:b=, binomial .. concurrent) also take partitioned merges\n\
         (seed 000 ch. 5): partition=none|size|local|global, theta=BYTES [file],\n\
         subcompactions=N [1], image=lambda|be [lambda].\n",
    );
    for s in STRATEGIES {
        let params = if s.params.is_empty() {
            String::new()
        } else {
            format!(" [{}]", s.params)
        };
        out.push_str(&format!("  {}{params}: {}\n", s.name, s.summary));
    }
    out.truncate(out.trim_end().len());
    out
}

/// The Markdown table of strategies in `docs/compaction.md`.
pub fn markdown_table() -> String {
    let mut out = String::from("| spec | parameters (defaults) | what it does | source |\n");
    out.push_str("|---|---|---|---|\n");
    for s in STRATEGIES {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.name,
            if s.params.is_empty() { "—" } else { s.params },
            s.summary,
            s.source
        ));
    }
    out
}

/// Parses `name[:key=value,...]` into a name and parameters.
pub fn parse_spec(spec: &str) -> Result<(&str, Vec<(&str, &str)>)> {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let params = params
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| Error::InvalidArgument(format!("bad parameter {p:?} in {spec:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((name.trim(), params))
}

/// Builds the policy described by `spec`.
pub fn policy_from_spec(spec: &str, defaults: PolicyDefaults) -> Result<Box<dyn CompactionPolicy>> {
    if let Some(path) = design::config::toml_path(spec) {
        return Ok(Box::new(design::config::from_file(path, spec, defaults)?));
    }
    let (name, params) = parse_spec(spec)?;
    match strategy(name, &params) {
        Some(s) => (s.build)(&params, spec, defaults),
        None => Err(Error::InvalidArgument(format!(
            "unknown compaction strategy {name:?} (known: {}, toml:PATH)",
            strategy_names().join(", ")
        ))),
    }
}

/// A compaction strategy as a value: a registry name with parameters, or a
/// TOML design file. Parsing checks the name and the parameters (by building
/// the policy with default engine settings), so a bad spec is refused where
/// it is written (a flag, a file), not when a database opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionSpec {
    /// `name[:key=value,...]`, parameters in the order written.
    Named {
        /// The strategy's registry name.
        name: String,
        /// Its parameters.
        params: Vec<(String, String)>,
    },
    /// `toml:FILE`, a design-space policy described in a file.
    Toml(PathBuf),
}

impl CompactionSpec {
    /// Parses `name[:key=value,...]` or `toml:FILE` (the registry's
    /// syntax, [`help_text`]), checking the name and parameters.
    ///
    /// ```
    /// use lamina_compaction::CompactionSpec;
    ///
    /// let lo1 = CompactionSpec::parse("lo1:T=4")?;
    /// assert_eq!(lo1.name(), "lo1");
    /// assert!(CompactionSpec::parse("nosuch").is_err());
    /// # Ok::<(), lamina_compaction::Error>(())
    /// ```
    pub fn parse(spec: &str) -> Result<Self> {
        spec.parse()
    }

    /// A registry strategy by name, with its parameters in order. Checked
    /// when the policy is built (`Options::validate`, `Db::open`).
    pub fn named(name: &str, params: &[(&str, &str)]) -> Self {
        CompactionSpec::Named {
            name: name.to_string(),
            params: params
                .iter()
                .map(|&(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// `leveling:T=t`: level 0 tiered, one run per deeper level, levels
    /// `t` times apart (seed 004).
    pub fn leveling(t: usize) -> Self {
        Self::named("leveling", &[("T", &t.to_string())])
    }

    /// `tiered:T=t`: up to `t` runs per level, merged down whole into one
    /// run of the next level (seed 004's tiered).
    pub fn tiered(t: usize) -> Self {
        Self::named("tiered", &[("T", &t.to_string())])
    }

    /// `lazy-leveling:T=t`: tiered levels, the deepest leveled (Dostoevsky).
    pub fn lazy_leveling(t: usize) -> Self {
        Self::named("lazy-leveling", &[("T", &t.to_string())])
    }

    /// `tiered:b=b`: one stack of runs where `b` runs of similar size merge
    /// (size-tiered, seed 003).
    pub fn size_tiered(b: usize) -> Self {
        Self::named("tiered", &[("b", &b.to_string())])
    }

    /// `binomial:k=k`: at most `k` runs, on the binomial schedule.
    pub fn binomial(k: usize) -> Self {
        Self::named("binomial", &[("k", &k.to_string())])
    }

    /// `nomerge`: never compacts (a baseline).
    pub fn nomerge() -> Self {
        Self::named("nomerge", &[])
    }

    /// This spec with `key=value` added (or replaced), e.g. a target file
    /// size: `CompactionSpec::tiered(10).with("file", 8 << 20)`.
    pub fn with(self, key: &str, value: impl fmt::Display) -> Self {
        match self {
            CompactionSpec::Named { name, mut params } => {
                let value = value.to_string();
                match params.iter_mut().find(|(k, _)| k == key) {
                    Some(p) => p.1 = value,
                    None => params.push((key.to_string(), value)),
                }
                CompactionSpec::Named { name, params }
            }
            toml => toml,
        }
    }

    /// Builds the policy, taking unset sizes from `defaults`.
    pub fn build(&self, defaults: PolicyDefaults) -> Result<Box<dyn CompactionPolicy>> {
        policy_from_spec(&self.to_string(), defaults)
    }

    /// The strategy's name (`toml` for a design file).
    pub fn name(&self) -> &str {
        match self {
            CompactionSpec::Named { name, .. } => name,
            CompactionSpec::Toml(_) => "toml",
        }
    }
}

impl Default for CompactionSpec {
    /// `leveling`, seed 004's default.
    fn default() -> Self {
        CompactionSpec::Named {
            name: "leveling".into(),
            params: Vec::new(),
        }
    }
}

impl FromStr for CompactionSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let spec = if let Some(path) = design::config::toml_path(s) {
            CompactionSpec::Toml(PathBuf::from(path))
        } else {
            let (name, params) = parse_spec(s)?;
            CompactionSpec::Named {
                name: name.to_string(),
                params: params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            }
        };
        spec.build(PolicyDefaults::default())?;
        Ok(spec)
    }
}

impl fmt::Display for CompactionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompactionSpec::Named { name, params } => {
                f.write_str(name)?;
                for (i, (k, v)) in params.iter().enumerate() {
                    write!(f, "{}{k}={v}", if i == 0 { ':' } else { ',' })?;
                }
                Ok(())
            }
            CompactionSpec::Toml(path) => write!(f, "toml:{}", path.display()),
        }
    }
}

impl TryFrom<&str> for CompactionSpec {
    type Error = Error;

    fn try_from(s: &str) -> Result<Self> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registry_entry_builds_from_an_example() {
        for s in STRATEGIES {
            // Bounded-depth policies need their k; a `tiered`/`leveled` of
            // the stack family needs one of its own keys to be chosen.
            let example = match s.name {
                _ if s.params.contains("k (required)") => format!("{}:k=3", s.name),
                "tiered" if s.family == Family::Stack => "tiered:b=4".into(),
                "leveled" if s.family == Family::Stack => "leveled:b0=2,b=4".into(),
                _ => s.name.to_string(),
            };
            let parsed: CompactionSpec = example.parse().unwrap();
            assert!(std::ptr::eq(
                strategy(parsed.name(), &parse_spec(&example).unwrap().1).unwrap(),
                s
            ));
            // Display round-trips, and the policy's own spec parses again.
            assert_eq!(parsed.to_string(), example);
            let policy = parsed.build(PolicyDefaults::default()).unwrap();
            let again: CompactionSpec = policy.spec().parse().unwrap();
            assert_eq!(
                again.build(PolicyDefaults::default()).unwrap().spec(),
                policy.spec()
            );
        }
    }

    #[test]
    fn typed_constructors_are_the_registry_specs() {
        for (spec, text) in [
            (CompactionSpec::leveling(10), "leveling:T=10"),
            (CompactionSpec::tiered(4), "tiered:T=4"),
            (CompactionSpec::lazy_leveling(5), "lazy-leveling:T=5"),
            (CompactionSpec::size_tiered(3), "tiered:b=3"),
            (CompactionSpec::binomial(3), "binomial:k=3"),
            (CompactionSpec::nomerge(), "nomerge"),
            (
                CompactionSpec::tiered(4).with("file", 1024).with("T", 6),
                "tiered:T=6,file=1024",
            ),
        ] {
            assert_eq!(spec.to_string(), text);
            assert_eq!(CompactionSpec::parse(text).unwrap(), spec);
            spec.build(PolicyDefaults::default()).unwrap();
        }
        // The two `tiered` families: T picks seed 004's, b the stack.
        assert_eq!(
            strategy("tiered", &[("T", "4")]).unwrap().family,
            Family::DesignSpace
        );
        assert_eq!(
            strategy("tiered", &[("b", "4")]).unwrap().family,
            Family::Stack
        );
    }

    #[test]
    fn bad_specs_are_refused_when_parsed() {
        for bad in [
            "nosuch",
            "binomial",
            "binomial:k=0",
            "leveling:T=1",
            "leveling:x=1",
            "lo1:T",
            "tiered:b=1",
            "toml:/nonexistent/policy.toml",
            "tiered:b=4,partition=diagonal",
            "tiered:b=4,theta=100",
            "binomial:k=3,partition=global,subcompactions=0",
            "leveled:b0=2,partition=global",
            "lo1:partition=global",
            "tier:T=4,theta=5",
        ] {
            assert!(bad.parse::<CompactionSpec>().is_err(), "{bad}");
        }
        let e = "nosuch".parse::<CompactionSpec>().unwrap_err().to_string();
        for name in strategy_names() {
            assert!(e.contains(name), "{e} lacks {name}");
        }
    }

    #[test]
    fn every_stack_policy_takes_the_partitioning_parameters() {
        let stack = STRATEGIES
            .iter()
            .filter(|s| s.family == Family::Stack && s.name != "nomerge" && s.name != "leveled");
        for s in stack {
            let base = match s.name {
                "tiered" => "tiered:b=4".to_string(),
                name => format!("{name}:k=3"),
            };
            let spec = format!("{base},partition=global,theta=4096,subcompactions=2");
            let policy = spec
                .parse::<CompactionSpec>()
                .unwrap()
                .build(PolicyDefaults::default())
                .unwrap();
            // The policy's spec keeps them, and asks tables for histograms.
            assert!(
                policy
                    .spec()
                    .ends_with("partition=global,theta=4096,subcompactions=2"),
                "{}",
                policy.spec()
            );
            let p = policy.partitioning().unwrap();
            assert_eq!(
                (p.partition, p.theta, p.subcompactions, p.image),
                (
                    crate::partition::Partition::Global,
                    4096,
                    2,
                    crate::partition::KeyImage::Lambda
                )
            );
            let sized = format!("{base},partition=size")
                .parse::<CompactionSpec>()
                .unwrap();
            let p = sized
                .build(PolicyDefaults::default())
                .unwrap()
                .partitioning();
            // theta defaults to the output file size.
            assert_eq!(
                p.map(|p| p.theta),
                Some(PolicyDefaults::default().target_file_size)
            );
        }
    }

    #[test]
    fn presets_with_a_tiered_level_take_the_partitioning_parameters() {
        for name in [
            "tier",
            "1-leveling",
            "lazy-leveling",
            "tiered",
            "lazy-leveled",
            "partial",
        ] {
            let spec = format!("{name}:T=4,partition=local,theta=100,subcompactions=3,image=be");
            let p = spec
                .parse::<CompactionSpec>()
                .unwrap()
                .build(PolicyDefaults::default())
                .unwrap()
                .partitioning()
                .unwrap();
            assert_eq!(
                (p.partition, p.theta, p.subcompactions, p.image),
                (
                    crate::partition::Partition::Local,
                    100,
                    3,
                    crate::partition::KeyImage::BigEndian
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn names_shared_by_two_families_are_told_apart_by_their_keys() {
        let spec = |s: &str| s.parse::<CompactionSpec>().unwrap();
        let build = |s: &str| spec(s).build(PolicyDefaults::default()).unwrap();
        assert_eq!(build("tiered:b=4").run_bound(), None);
        assert!(build("tiered:b=4").spec().starts_with("tiered:b=4"));
        // The seed-004 preset keeps the spec as written.
        assert_eq!(build("tiered:T=4").spec(), "tiered:T=4");
        assert!(build("leveled:b0=3").spec().starts_with("leveled:b0=3"));
        assert_eq!(build("leveled").spec(), "leveled");
    }

    /// `docs/compaction.md` holds the registry's table between its markers;
    /// `LAMINA_REWRITE=1` rewrites it.
    #[test]
    fn docs_table_is_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/compaction.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- strategies:begin -->\n", "<!-- strategies:end -->");
        let start = doc.find(begin).expect("begin marker") + begin.len();
        let stop = doc.find(end).expect("end marker");
        let table = markdown_table();
        if std::env::var_os("LAMINA_REWRITE").is_some() {
            let new = format!("{}{table}{}", &doc[..start], &doc[stop..]);
            std::fs::write(path, new).unwrap();
        } else {
            assert_eq!(
                &doc[start..stop],
                table,
                "docs/compaction.md's table differs from the registry (LAMINA_REWRITE=1 rewrites it)"
            );
        }
    }
}
