//! Compaction specs: the typed form of `name[:key=value,...]` and the one
//! registry of strategies that builds them, lists them in `--help` and writes
//! `docs/compaction.md`'s table.
//!
//! Every strategy has one canonical name that says which family it is. Two
//! families once shared two names, told apart only by their keys: seed
//! 000's one-stack policies (`tiered:b=`, `leveled:b0=,b=`) and seed 004's
//! whole-level presets (`tiered`, `leveled`). The stacks are now
//! `stack-tiered` and `stack-leveled` (they keep one stack of runs, the
//! family [`Family::Stack`] and `policy/stack/` name), and seed 004's are
//! `cs265-tiered` and `cs265-leveled` (its source, the CS265 project, as
//! in the registry's source column; `lazy-leveled` and `partial`, its other
//! presets, were never ambiguous). The old spellings stay as [`ALIASES`]
//! that parse exactly as before: `tiered` with `b`, `low` or `high` is
//! `stack-tiered`, else `cs265-tiered`; `leveled` with `b`, `b0` or
//! `partition` is `stack-leveled`, else `cs265-leveled`. A policy built
//! from an alias prints its spec with the alias, as written.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::policy::design::{self, presets};
use crate::policy::stack;
use crate::{CompactionPolicy, Leveling, PolicyDefaults};

/// Parameters as written in a spec, in order.
type Params<'a> = [(&'a str, &'a str)];
/// Builds a strategy from its parameters; `spec` is the whole spec text,
/// `spelling` the name it was written with (the strategy's or an alias).
type Build =
    fn(&Params<'_>, &str, &'static str, PolicyDefaults) -> Result<Box<dyn CompactionPolicy>>;

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
    build: Build,
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Strategy")
            .field("name", &self.name)
            .finish()
    }
}

fn has_key(params: &Params<'_>, keys: &[&str]) -> bool {
    params.iter().any(|(k, _)| keys.contains(k))
}

/// A design-space preset (`design/presets.rs`) as a registry entry.
macro_rules! preset {
    ($name:literal, $params:literal, $summary:literal, $source:literal) => {
        Strategy {
            name: $name,
            family: Family::DesignSpace,
            params: $params,
            summary: $summary,
            source: $source,
            build: |p, spec, _, d| Ok(Box::new(presets::preset($name, p, spec, d)?)),
        }
    };
}

/// A policy built by `Type::from_params(params, defaults)`.
macro_rules! policy {
    ($ty:ty) => {
        |p, _, _, d| Ok(Box::new(<$ty>::from_params(p, d)?))
    };
}

/// An old spelling kept for specs written before the canonical names: it
/// stands for one of two strategies, told apart by the spec's keys.
#[derive(Clone, Copy)]
pub struct Alias {
    /// The spelling.
    pub name: &'static str,
    /// Which strategy it stands for, as a reader writes it.
    pub rule: &'static str,
    /// The canonical name it stands for with these parameters.
    resolve: fn(&Params<'_>) -> &'static str,
}

impl fmt::Debug for Alias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Alias").field("name", &self.name).finish()
    }
}

/// The old spellings, in the order `--help` and the docs list them.
pub static ALIASES: &[Alias] = &[
    Alias {
        name: "tiered",
        rule: "`stack-tiered` if given `b`, `low` or `high`, else `cs265-tiered`",
        resolve: |p| match has_key(p, &["b", "low", "high"]) {
            true => "stack-tiered",
            false => "cs265-tiered",
        },
    },
    Alias {
        name: "leveled",
        rule: "`stack-leveled` if given `b`, `b0` or `partition`, else `cs265-leveled`",
        resolve: |p| match has_key(p, &["b", "b0", "partition"]) {
            true => "stack-leveled",
            false => "cs265-leveled",
        },
    },
];

/// Every strategy by its canonical name, in the order `--help` and the
/// docs list them.
pub static STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "leveling",
        family: Family::Leveling,
        params: "T=size_ratio, l0=4",
        summary: "level 0 tiered (l0 flushes), one run per deeper level, whole-level merges",
        source: "seed 004 (CS265)",
        build: policy!(Leveling),
    },
    Strategy {
        name: "blsm",
        family: Family::Leveling,
        params: "T=size_ratio, l0=4, file, unit=1",
        summary: "bLSM split levels: C_i receives, C'_i drains unit files at a time in key order into C_i+1",
        source: "seed 002 §4.1 (bLSM)",
        build: policy!(crate::policy::blsm::Blsm),
    },
    Strategy {
        name: "lsbm",
        family: Family::Leveling,
        params: "T=size_ratio, l0=4, file, unit=1, trim=30000, keep=0.8, freeze=0.9",
        summary: "bLSM plus the LSbM compaction buffer: units moved down stay readable (cached) until trimmed",
        source: "seed 002 §4 (LSbM)",
        build: |p, _, _, d| Ok(Box::new(crate::policy::blsm::Blsm::lsbm_from_params(p, d)?)),
    },
    Strategy {
        name: "stack-tiered",
        family: Family::Stack,
        params: "b=size_ratio, low=0.5, high=1.5, file",
        summary: "one stack; b runs of similar size (within [low, high] × their mean) merge",
        source: "seed 000 §3.2, seed 003",
        build: |p, _, spelling, d| Ok(Box::new(stack::Tiered::from_params(p, d)?.spelled(spelling))),
    },
    Strategy {
        name: "stack-leveled",
        family: Family::Stack,
        params: "b0=2, b=size_ratio, file, partition=size (or str, rstar-grove)",
        summary: "one stack of b0 + levels; level i holds b0 · b^i flushes; str and rstar-grove cut spatial levels into tiles",
        source: "seed 000 §3.2, §4.3",
        build: |p, _, spelling, d| Ok(Box::new(stack::Leveled::from_params(p, d)?.spelled(spelling))),
    },
    Strategy {
        name: "binomial",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, the binomial schedule (optimal for few flushes)",
        source: "seed 003 §III-D, seed 000 §3.3",
        build: policy!(stack::Binomial),
    },
    Strategy {
        name: "minlatency",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, minimal worst-case merge latency",
        source: "seed 003 §III-C",
        build: policy!(stack::MinLatency),
    },
    Strategy {
        name: "bigtable",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, merge until each run outweighs the newer ones",
        source: "seed 003 §II (Bigtable)",
        build: policy!(stack::Bigtable),
    },
    Strategy {
        name: "exploring",
        family: Family::Stack,
        params: "k (required), lambda=1.2, c=2, d=10, file",
        summary: "bounded depth k, HBase's window of c..d runs within lambda × the rest",
        source: "seed 003 §II (HBase)",
        build: policy!(stack::Exploring),
    },
    Strategy {
        name: "constant",
        family: Family::Stack,
        params: "k (required), file",
        summary: "bounded depth k, merge every run when k is exceeded",
        source: "seed 003 §II",
        build: policy!(stack::Constant),
    },
    Strategy {
        name: "concurrent",
        family: Family::Stack,
        params: "k=30, lambda=1.2, c=3, d=10, rule=code (or text), file",
        summary: "AsterixDB's policy: merges the newest idle runs beside a running merge",
        source: "seed 000 §3.2",
        build: policy!(stack::Concurrent),
    },
    Strategy {
        name: "nomerge",
        family: Family::Stack,
        params: "",
        summary: "never compacts (a baseline; reads slow down with every flush)",
        source: "lamina",
        build: |p, _, _, _| Ok(Box::new(stack::NoMerge::from_params(p)?)),
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
        "cs265-tiered",
        "T, file",
        "tiering, whole levels merge down (the CS265 project's tiering, seed 004)",
        "seed 004 (CS265)"
    ),
    preset!(
        "cs265-leveled",
        "T, file",
        "leveling, whole levels merge with the next (the CS265 project's leveling, seed 004)",
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

/// The registry entry for `name` (canonical or an alias) with `params`,
/// and the spelling it was written with, if any.
fn resolve(name: &str, params: &Params<'_>) -> Option<(&'static Strategy, &'static str)> {
    if let Some(s) = STRATEGIES.iter().find(|s| s.name == name) {
        return Some((s, s.name));
    }
    let alias = ALIASES.iter().find(|a| a.name == name)?;
    let canonical = (alias.resolve)(params);
    let s = STRATEGIES.iter().find(|s| s.name == canonical)?;
    Some((s, alias.name))
}

/// The registry entry for `name` (canonical or an alias) with `params`, if
/// any.
pub fn strategy(name: &str, params: &Params<'_>) -> Option<&'static Strategy> {
    resolve(name, params).map(|(s, _)| s)
}

/// The canonical strategy names, in registry order, then the aliases.
pub fn strategy_names() -> Vec<&'static str> {
    STRATEGIES
        .iter()
        .map(|s| s.name)
        .chain(ALIASES.iter().map(|a| a.name))
        .collect()
}

/// The canonical names of the strategies that take parameter `key` (set to
/// `value`): those whose policy, built from that one parameter, does not
/// refuse the key (it may refuse the spec for another reason, as a
/// bounded-depth policy without its `k`).
pub fn strategies_taking(key: &str, value: &str) -> Vec<&'static str> {
    let params = [(key, value)];
    STRATEGIES
        .iter()
        .filter(|s| {
            let spec = format!("{}:{key}={value}", s.name);
            !matches!(
                (s.build)(&params, &spec, s.name, PolicyDefaults::default()),
                Err(Error::UnknownParameter { key: k, .. }) if k == key
            )
        })
        .map(|s| s.name)
        .collect()
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
         T and b default to --size-ratio, file to the target file size (Options::target_file_size,\n\
          16 MiB; `lamina bench --target_file_size`, `target_file_size` in an experiment spec).\n\
         The stack policies (stack-tiered, binomial .. concurrent) also take partitioned merges\n\
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
    out.push_str(
        "Old spellings, kept as aliases; each names one of two strategies, by its parameters:\n",
    );
    for a in ALIASES {
        out.push_str(&format!("  {}: {}\n", a.name, a.rule.replace('`', "")));
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
    for a in ALIASES {
        out.push_str(&format!("| `{}` | — | alias: {} | — |\n", a.name, a.rule));
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
    let Some((s, spelling)) = resolve(name, &params) else {
        return Err(Error::InvalidArgument(format!(
            "unknown compaction strategy {name:?} (known: {}, toml:PATH)",
            strategy_names().join(", ")
        )));
    };
    (s.build)(&params, spec, spelling, defaults).map_err(|e| match e {
        Error::UnknownParameter { strategy, key } => {
            let value = params.iter().find(|(k, _)| *k == key).map_or("", |p| p.1);
            let takers = strategies_taking(&key, value);
            let hint = match takers.is_empty() {
                true => String::from("no strategy takes it"),
                false => format!("strategies that take {key}: {}", takers.join(", ")),
            };
            Error::InvalidArgument(format!("{strategy} has no parameter {key} ({hint})"))
        }
        e => e,
    })
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
            // Bounded-depth policies need their k.
            let example = match s.name {
                _ if s.params.contains("k (required)") => format!("{}:k=3", s.name),
                "stack-tiered" => "stack-tiered:b=4".into(),
                "stack-leveled" => "stack-leveled:b0=2,b=4".into(),
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
        let stack = STRATEGIES.iter().filter(|s| {
            s.family == Family::Stack && s.name != "nomerge" && s.name != "stack-leveled"
        });
        for s in stack {
            let base = match s.name {
                "stack-tiered" => "stack-tiered:b=4".to_string(),
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
            "cs265-tiered",
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

    /// Each alias builds the strategy its rule names, with the same
    /// parameters, and prints its spec with the alias (as written). The
    /// pairs are the rules of [`ALIASES`] written out by hand.
    #[test]
    fn aliases_build_the_strategy_their_rule_names() {
        let build = |s: &str| policy_from_spec(s, PolicyDefaults::default());
        for (alias, canonical) in [
            ("tiered", "cs265-tiered"),
            ("tiered:T=4", "cs265-tiered:T=4"),
            (
                "tiered:T=4,partition=size",
                "cs265-tiered:T=4,partition=size",
            ),
            ("tiered:b=4", "stack-tiered:b=4"),
            ("tiered:low=0.4,high=2", "stack-tiered:low=0.4,high=2"),
            (
                "tiered:b=3,partition=global",
                "stack-tiered:b=3,partition=global",
            ),
            ("leveled", "cs265-leveled"),
            ("leveled:T=6", "cs265-leveled:T=6"),
            ("leveled:b0=3", "stack-leveled:b0=3"),
            ("leveled:b=4,file=100", "stack-leveled:b=4,file=100"),
            ("leveled:partition=str", "stack-leveled:partition=str"),
            ("leveled:partition=size", "stack-leveled:partition=size"),
        ] {
            let (a, c) = (build(alias).unwrap(), build(canonical).unwrap());
            let name = alias.split(':').next().unwrap();
            let canonical_name = canonical.split(':').next().unwrap();
            assert_eq!(
                a.spec().replacen(name, canonical_name, 1),
                c.spec(),
                "{alias}"
            );
            assert!(a.spec().starts_with(name) && !a.spec().starts_with(canonical_name));
            assert_eq!(
                strategy(name, &parse_spec(alias).unwrap().1).unwrap().name,
                canonical_name
            );
        }
        // Refused under both spellings.
        for bad in [
            "tiered:b=1",
            "leveled:b0=0",
            "leveled:partition=global",
            "leveled:T=4,partition=str",
            "tiered:x=1",
        ] {
            assert!(build(bad).is_err(), "{bad}");
        }
    }

    /// The bug of issue 41: `leveled:partition=size` went to seed 004's
    /// preset (`partition` with `str` or `rstar-grove` alone chose the
    /// stack), which refused it, while `leveled:b=10,partition=size` was
    /// the stack. `partition` now chooses the stack whatever its value.
    #[test]
    fn leveled_with_partition_size_alone_is_the_leveled_stack() {
        let spec: CompactionSpec = "leveled:partition=size".parse().unwrap();
        let p = spec.build(PolicyDefaults::default()).unwrap();
        let with_b =
            policy_from_spec("leveled:b=10,partition=size", PolicyDefaults::default()).unwrap();
        // T = 10 by default, and `size` is the default key-ordered cut.
        assert_eq!(p.spec(), "leveled:b0=2,b=10");
        assert_eq!(p.spec(), with_b.spec());
        assert_eq!(p.size_ratio(), Some(10.0));
    }

    /// An unknown parameter's error names the strategies that take it: for
    /// `partition`, the stack policies (seed 000 ch. 5's partitioned
    /// merges; `stack-leveled`'s own `partition=size|str|rstar-grove`) and
    /// the presets with a tiered level (`design/presets.rs`), written out
    /// here from those definitions; not `nomerge`, the leveled presets or
    /// `leveling`, `blsm` and `lsbm`, which merge one run into the next.
    #[test]
    fn an_unknown_parameter_names_the_spellings_that_take_it() {
        let takers = [
            "stack-tiered",
            "stack-leveled",
            "binomial",
            "minlatency",
            "bigtable",
            "exploring",
            "constant",
            "concurrent",
            "tier",
            "smtree",
            "1-leveling",
            "lazy-leveling",
            "cs265-tiered",
            "lazy-leveled",
            "partial",
        ];
        assert_eq!(strategies_taking("partition", "size"), takers);
        let e = policy_from_spec("leveling:partition=size", PolicyDefaults::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "invalid argument: leveling has no parameter partition \
                 (strategies that take partition: {})",
                takers.join(", ")
            )
        );
        let e = policy_from_spec("lo1:nosuch=1", PolicyDefaults::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("lo1 has no parameter nosuch (no strategy takes it)"),
            "{e}"
        );
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
