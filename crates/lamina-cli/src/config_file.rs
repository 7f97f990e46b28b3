//! `lamina serve --config FILE`: the flags of `serve` from a TOML file.
//!
//! Every key is a flag of `lamina serve` without its leading `--`, written
//! with `_` or `-` (`max_connections = 64`, `buffer-bytes = "64M"`); a
//! string or number is the flag's value, `true` turns a switch on (`false`
//! leaves it off), and an array is a list flag's values
//! (`bloom_bits_per_level = [12, 8]`). A flag given on the command line
//! wins over the file's value for it, and over the file's value for any
//! flag it conflicts with (`--buffer-pages` over the file's
//! `buffer_bytes`). An unknown key, or a value of the wrong kind, is an
//! error naming the key.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// The name of the flag that names the file.
const CONFIG: &str = "config";

/// The command line with the file's settings put in: `argv` itself when
/// `serve` has no `--config`, else `lamina serve`, the file's flags the
/// command line does not override, then the command line's own arguments.
/// `matches` is `argv` parsed, `cmd` the command it was parsed with.
pub fn with_config_file(
    cmd: &Command,
    matches: &ArgMatches,
    argv: Vec<OsString>,
) -> Result<Vec<OsString>> {
    let Some(("serve", serve)) = matches.subcommand() else {
        return Ok(argv);
    };
    let Some(path) = serve.get_one::<std::path::PathBuf>(CONFIG) else {
        return Ok(argv);
    };
    let serve_cmd = cmd
        .find_subcommand("serve")
        .context("the serve command is missing")?;
    let from_file = file_flags(serve_cmd, serve, path)
        .with_context(|| format!("--config {}", path.display()))?;
    // `lamina serve` is always argv[0..2]: the top level has no flags of its
    // own besides --help and --version, which exit before this.
    let mut out: Vec<OsString> = argv.iter().take(2).cloned().collect();
    out.extend(from_file);
    out.extend(argv.into_iter().skip(2));
    Ok(out)
}

/// The file's settings as `--flag=value` arguments, leaving out those the
/// command line (`given`) sets or overrides.
fn file_flags(serve: &Command, given: &ArgMatches, path: &Path) -> Result<Vec<OsString>> {
    let text = std::fs::read_to_string(path).context("cannot read it")?;
    let table: toml::Table = text.parse().context("not a TOML table of flags")?;
    let on_command_line = |id: &str| given.value_source(id) == Some(ValueSource::CommandLine);
    let mut out = Vec::new();
    for (key, value) in &table {
        let id = key.replace('-', "_");
        let Some(arg) = serve
            .get_arguments()
            .find(|a| a.get_id() == id.as_str() && a.get_long().is_some())
        else {
            bail!("{key:?} is not a flag of lamina serve (see lamina serve --help)");
        };
        if id == CONFIG {
            bail!("a config file cannot name another config file");
        }
        let overridden = on_command_line(&id)
            || serve
                .get_arg_conflicts_with(arg)
                .iter()
                .any(|other| on_command_line(other.get_id().as_str()));
        if overridden {
            continue;
        }
        let long = arg.get_long().unwrap_or(key.as_str());
        let switch = !arg.get_action().takes_values();
        match (value, switch) {
            (toml::Value::Boolean(on), true) => {
                if *on {
                    out.push(format!("--{long}").into());
                }
            }
            (_, true) => bail!("{key}: a switch takes true or false"),
            (toml::Value::Array(items), false) => {
                for item in items {
                    out.push(format!("--{long}={}", scalar(key, item)?).into());
                }
            }
            (value, false) => out.push(format!("--{long}={}", scalar(key, value)?).into()),
        }
    }
    Ok(out)
}

/// A string, number or boolean as a flag's value.
fn scalar(key: &str, value: &toml::Value) -> Result<String> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        _ => bail!(
            "{key}: a string, number or boolean, not {}",
            value.type_str()
        ),
    })
}
