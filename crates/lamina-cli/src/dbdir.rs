//! How `lamina bench` prepares a database directory without ever
//! destroying what it did not create (docs/reliability.md, "File
//! ownership").
//!
//! The directory's lock is taken before anything else, so a directory a
//! server (or any other lamina process) has open is refused untouched. A
//! directory already holding a lamina database is refused too, unless the
//! caller says to reuse it or to delete it; deleting removes only the files
//! lamina writes (`CURRENT`, `MANIFEST-*`, `*.sst`, `*.log`), never the
//! directory or anything else in it. [`require_database`] is the check of
//! commands that only work on an existing database (`lamina kv`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lamina::filename;
use lamina::vfs::{OsFs, Vfs};

/// What to do with a lamina database already in the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse to run.
    Refuse,
    /// Open it as it is.
    Reuse,
    /// Delete its files first.
    Destroy,
}

/// Prepares `dir` for a run on a fresh (or, with [`Existing::Reuse`], the
/// existing) database. `hint` names the flags that choose the other
/// behaviours, for the refusal's message. The lock is released on return:
/// the caller's `Db::open` takes it again.
pub fn prepare(dir: &Path, existing: Existing, hint: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = match OsFs.lock(&dir.join(filename::LOCK)) {
        Ok(lock) => lock,
        Err(lamina::Error::Locked(_)) => bail!(
            "{} is in use by another lamina process (a running server?); nothing was changed",
            dir.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("locking {}", dir.display())),
    };
    let ours = lamina_files(dir)?;
    if ours.is_empty() {
        return Ok(());
    }
    match existing {
        Existing::Reuse => Ok(()),
        Existing::Refuse => bail!(
            "{} already holds a lamina database ({} files); {hint}",
            dir.display(),
            ours.len()
        ),
        Existing::Destroy => {
            for path in &ours {
                std::fs::remove_file(path)
                    .with_context(|| format!("deleting {}", path.display()))?;
            }
            Ok(())
        }
    }
}

/// Refuses `dir`, touching nothing, unless it holds a lamina database (a
/// `CURRENT` file): for commands that must never create one, since opening
/// would first create the directory and its `LOCK`.
pub fn require_database(dir: &Path) -> Result<()> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("no database in {shown}: it is not a directory"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("no database in {shown}: it does not exist (nothing was created)")
        }
        Err(e) => return Err(e).with_context(|| format!("reading {shown}")),
    }
    if dir.join(filename::CURRENT).is_file() {
        return Ok(());
    }
    let ours = lamina_files(dir)?;
    if ours.is_empty() {
        bail!(
            "no database in {shown}: it has no {} file (nothing was changed)",
            filename::CURRENT
        );
    }
    bail!(
        "no database in {shown}: it has no {} but holds lamina files ({}); if it lost its {0}, `lamina repair {shown}` rebuilds it (nothing was changed)",
        filename::CURRENT,
        ours.len()
    )
}

/// The files of `dir` that lamina writes (`LOCK` aside).
fn lamina_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = filename::parse(name).is_some()
            || name == filename::CURRENT
            || name == filename::CURRENT_TMP;
        if ours && entry.file_type()?.is_file() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}
