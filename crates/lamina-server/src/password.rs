//! The password of the Redis port (Redis's `requirepass`): read from a
//! file (`lamina serve --requirepass-file PATH`) or the environment
//! (`LAMINA_REQUIREPASS`), never from a flag, whose value anyone can read
//! in `ps`; compared in time independent of where the first differing
//! byte is. The port's `AUTH` is [`crate::resp`]'s.

use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable a password may come from.
pub const REQUIREPASS_ENV: &str = "LAMINA_REQUIREPASS";

/// The password Redis clients must give (`AUTH` or `HELLO ... AUTH`)
/// before any other command. Never printed (its `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct Password(Vec<u8>);

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(hidden)")
    }
}

/// Why no password could be had.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The file could not be read.
    #[error("cannot read the password file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The password is empty (which would let anyone in).
    #[error("the password from {0} is empty")]
    Empty(String),
}

impl Password {
    /// `bytes` as a password; an empty one is refused.
    pub fn new(bytes: impl Into<Vec<u8>>, from: &str) -> Result<Password, PasswordError> {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Err(PasswordError::Empty(from.to_string()));
        }
        Ok(Password(bytes))
    }

    /// The password in the file at `path`: its bytes without one trailing
    /// line break (`\n` or `\r\n`), as an editor or `echo` leaves it.
    pub fn from_file(path: &Path) -> Result<Password, PasswordError> {
        let mut bytes = std::fs::read(path).map_err(|source| PasswordError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        Password::new(bytes, &path.display().to_string())
    }

    /// The password a server is configured with: the file's when `file`
    /// is given, else [`REQUIREPASS_ENV`]'s when it is set (to anything
    /// but the empty string), else none.
    pub fn configured(file: Option<&Path>) -> Result<Option<Password>, PasswordError> {
        if let Some(path) = file {
            return Password::from_file(path).map(Some);
        }
        match std::env::var_os(REQUIREPASS_ENV) {
            Some(v) if !v.is_empty() => {
                Password::new(v.into_encoded_bytes(), REQUIREPASS_ENV).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Whether `given` is the password, in time that depends on the two
    /// lengths only, not on where they first differ.
    pub fn matches(&self, given: &[u8]) -> bool {
        let (a, b) = (&self.0, given);
        let mut diff = a.len() ^ b.len();
        for i in 0..a.len().max(b.len()) {
            let x = a.get(i).copied().unwrap_or(0);
            let y = b.get(i).copied().unwrap_or(0);
            diff |= usize::from(x ^ y);
        }
        std::hint::black_box(diff) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_same_bytes() {
        let p = Password::new(b"s3cret".to_vec(), "test").unwrap();
        assert!(p.matches(b"s3cret"));
        for wrong in [
            &b""[..],
            b"s3cre",
            b"s3cret!",
            b"S3cret",
            b"s3cret\0",
            b"x3cret",
        ] {
            assert!(!p.matches(wrong), "{wrong:?}");
        }
        assert!(Password::new(Vec::new(), "test").is_err());
        assert_eq!(format!("{p:?}"), "Password(hidden)");
    }

    #[test]
    fn a_file_loses_one_trailing_line_break() {
        let dir = tempfile::tempdir().unwrap();
        for (text, want) in [
            (&b"pw\n"[..], &b"pw"[..]),
            (b"pw\r\n", b"pw"),
            (b"pw", b"pw"),
            (b"p w\n\n", b"p w\n"),
        ] {
            let path = dir.path().join("pass");
            std::fs::write(&path, text).unwrap();
            assert_eq!(Password::from_file(&path).unwrap().0, want);
        }
        std::fs::write(dir.path().join("empty"), b"\n").unwrap();
        assert!(Password::from_file(&dir.path().join("empty")).is_err());
        assert!(Password::from_file(&dir.path().join("missing")).is_err());
    }
}
