//! Free per-level compositions read from TOML, for strategies the presets
//! do not cover. A spec `toml:PATH` (or any spec ending in `.toml`) names
//! the file:
//!
//! ```toml
//! T = 10                 # size ratio (default: Options::size_ratio)
//! file = 8388608         # output file size (default: Options::target_file_size)
//! block_writes = false   # writes wait for pending compactions
//! partition = "global"   # optional, partitioned merges of new runs
//! theta = 8388608        #   (seed 000 ch. 5; with subcompactions, image)
//!
//! [[level]]              # level 0
//! layout = "tiering"     # or "leveling"
//! triggers = ["runs:4"]
//! granularity = "level"
//!
//! [[level]]              # level 1, and every deeper level
//! layout = "leveling"
//! triggers = ["tombstone-density:0.3", "saturation"]
//! granularity = "file"
//! movement = ["tsd:0.3", "lo1"]
//!
//! [last]                 # optional: the deepest level holding data
//! layout = "leveling"
//! triggers = ["saturation"]
//! granularity = "level"
//! ```
//!
//! Trigger, granularity and movement strings are those of the
//! `FromStr` implementations of [`Trigger`], [`Granularity`] and
//! [`Movement`].

use serde::Deserialize;

use super::{Composed, Granularity, Layout, LevelPlan, Movement, Trigger};
use crate::error::{Error, Result};
use crate::partition::PartitionParams;
use crate::PolicyDefaults;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanConfig {
    layout: String,
    #[serde(default)]
    triggers: Vec<String>,
    granularity: String,
    #[serde(default)]
    movement: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StrategyConfig {
    #[serde(rename = "T")]
    size_ratio: Option<u64>,
    file: Option<u64>,
    #[serde(default)]
    block_writes: bool,
    partition: Option<String>,
    theta: Option<u64>,
    subcompactions: Option<usize>,
    image: Option<String>,
    level: Vec<PlanConfig>,
    last: Option<PlanConfig>,
}

fn plan(c: &PlanConfig) -> Result<LevelPlan> {
    Ok(LevelPlan {
        layout: c.layout.parse::<Layout>()?,
        triggers: c
            .triggers
            .iter()
            .map(|t| t.parse::<Trigger>())
            .collect::<Result<_>>()?,
        granularity: c.granularity.parse::<Granularity>()?,
        movement: c
            .movement
            .iter()
            .map(|m| m.parse::<Movement>())
            .collect::<Result<_>>()?,
    })
}

/// The path of a TOML spec (`toml:PATH` or `PATH.toml`), if it is one.
pub fn toml_path(spec: &str) -> Option<&str> {
    let spec = spec.trim();
    spec.strip_prefix("toml:")
        .or_else(|| spec.ends_with(".toml").then_some(spec))
}

/// Parses a TOML composition; `spec` is what `spec()` will return.
pub fn from_toml(text: &str, spec: &str, defaults: PolicyDefaults) -> Result<Composed> {
    let c: StrategyConfig =
        toml::from_str(text).map_err(|e| Error::InvalidArgument(format!("{spec}: {e}")))?;
    if c.level.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{spec}: at least one [[level]] is needed"
        )));
    }
    let size_ratio = c.size_ratio.unwrap_or(defaults.size_ratio as u64);
    let file_size = c.file.unwrap_or(defaults.target_file_size);
    if size_ratio < 2 || file_size == 0 {
        return Err(Error::InvalidArgument(format!(
            "{spec}: needs T >= 2 and file >= 1"
        )));
    }
    let mut partitioning = PartitionParams::default();
    let theta = c.theta.map(|t| t.to_string());
    let subcompactions = c.subcompactions.map(|n| n.to_string());
    for (key, value) in [
        ("partition", c.partition.as_deref()),
        ("theta", theta.as_deref()),
        ("subcompactions", subcompactions.as_deref()),
        ("image", c.image.as_deref()),
    ] {
        if let Some(v) = value {
            partitioning.parse(spec, key, v)?;
        }
    }
    Ok(Composed {
        spec: spec.trim().to_string(),
        size_ratio,
        file_size,
        partitioning: partitioning.finish(spec, file_size)?,
        block_writes: c.block_writes,
        levels: c.level.iter().map(plan).collect::<Result<_>>()?,
        last: c.last.as_ref().map(plan).transpose()?,
    })
}

/// Reads the TOML composition at `path`.
pub fn from_file(path: &str, spec: &str, defaults: PolicyDefaults) -> Result<Composed> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::InvalidArgument(format!("{spec}: cannot read {path}: {e}")))?;
    from_toml(&text, spec, defaults)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: PolicyDefaults = PolicyDefaults {
        size_ratio: 10,
        target_file_size: 1000,
    };

    #[test]
    fn a_hybrid_composition_parses() {
        let text = r#"
            T = 4
            block_writes = true
            [[level]]
            layout = "tiering"
            triggers = ["runs:3"]
            granularity = "level"
            [[level]]
            layout = "leveling"
            triggers = ["tombstone-density:0.3", "saturation"]
            granularity = "files:2"
            movement = ["tsd:0.3", "lo1"]
            [last]
            layout = "leveling"
            triggers = ["saturation"]
            granularity = "level"
        "#;
        let c = from_toml(text, "toml:x.toml", DEFAULTS).unwrap();
        assert_eq!((c.size_ratio, c.file_size, c.block_writes), (4, 1000, true));
        assert_eq!(c.levels.len(), 2);
        assert_eq!(c.partitioning, None);
        // Partitioned merges for the tiered level's new runs.
        let partitioned =
            format!("partition = \"global\"\ntheta = 500\nsubcompactions = 2\n{text}");
        let p = from_toml(&partitioned, "toml:x.toml", DEFAULTS)
            .unwrap()
            .partitioning
            .unwrap();
        assert_eq!((p.theta, p.subcompactions), (500, 2));
        let bad = format!("theta = 500\n{text}");
        assert!(from_toml(&bad, "toml:x.toml", DEFAULTS).is_err());
        assert_eq!(c.levels[0].triggers, [Trigger::Runs(3)]);
        assert_eq!(c.levels[1].granularity, Granularity::Files(2));
        assert_eq!(
            c.levels[1].movement,
            [
                Movement::TombstoneDensity(0.3),
                Movement::LeastOverlapParent
            ]
        );
        assert!(c.last.is_some());
        // The same plan covers every level below the listed ones.
        assert_eq!(c.plan(7, 9), &c.levels[1]);
        assert_eq!(c.plan(9, 9), c.last.as_ref().unwrap());
    }

    #[test]
    fn bad_compositions_are_errors() {
        for text in [
            "",
            "T = 1\n[[level]]\nlayout = \"leveling\"\ngranularity = \"file\"",
            "[[level]]\nlayout = \"sideways\"\ngranularity = \"file\"",
            "[[level]]\nlayout = \"leveling\"\ngranularity = \"file\"\ntriggers = [\"often\"]",
            "[[level]]\nlayout = \"leveling\"\ngranularity = \"file\"\nextra = 1",
        ] {
            assert!(from_toml(text, "t", DEFAULTS).is_err(), "{text}");
        }
        assert_eq!(toml_path("toml:/a/b"), Some("/a/b"));
        assert_eq!(toml_path("/a/b.toml"), Some("/a/b.toml"));
        assert_eq!(toml_path("lo1"), None);
    }
}
