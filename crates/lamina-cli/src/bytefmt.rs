//! How `lamina kv` shows and reads byte strings (keys and values).
//!
//! **Escaped** (the default): a printable ASCII byte (0x20 ..= 0x7E) stands
//! for itself, except the backslash, shown `\\`; every other byte is shown
//! `\xNN` with two lower-case hex digits. A shown string is printable ASCII
//! without tab or newline, so an entry fits on one line and a tab can
//! separate key from value. Reading is the inverse and, for what one types
//! in a shell, also takes upper-case hex digits and any other character as
//! its UTF-8 bytes; a backslash not starting `\\` or `\xNN` is refused.
//!
//! **Hex** (`--hex`): two lower-case hex digits per byte; reading also
//! takes upper case and a leading `0x`.

use anyhow::{bail, Result};

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A way of writing bytes as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteFormat {
    /// Printable ASCII as is, `\\`, `\xNN` (see the module docs).
    Escaped,
    /// Two hex digits per byte.
    Hex,
}

impl ByteFormat {
    /// `Hex` if `hex`, else `Escaped`.
    pub fn new(hex: bool) -> ByteFormat {
        if hex {
            ByteFormat::Hex
        } else {
            ByteFormat::Escaped
        }
    }

    /// Appends the text of `bytes` to `out` (a buffer reused across
    /// entries, so a scan does not allocate per entry).
    pub fn push(self, out: &mut Vec<u8>, bytes: &[u8]) {
        let hex = |out: &mut Vec<u8>, b: u8| {
            out.push(DIGITS[usize::from(b >> 4)]);
            out.push(DIGITS[usize::from(b & 0xF)]);
        };
        for &b in bytes {
            match self {
                ByteFormat::Hex => hex(out, b),
                ByteFormat::Escaped => match b {
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    0x20..=0x7E => out.push(b),
                    _ => {
                        out.extend_from_slice(b"\\x");
                        hex(out, b);
                    }
                },
            }
        }
    }

    /// The text of `bytes`.
    pub fn show(self, bytes: &[u8]) -> String {
        let mut out = Vec::with_capacity(bytes.len());
        self.push(&mut out, bytes);
        // Both forms are ASCII by construction.
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The bytes `text` stands for.
    pub fn parse(self, text: &str) -> Result<Vec<u8>> {
        match self {
            ByteFormat::Hex => parse_hex(text),
            ByteFormat::Escaped => parse_escaped(text),
        }
    }
}

fn digit(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

fn parse_hex(text: &str) -> Result<Vec<u8>> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text)
        .as_bytes();
    if !digits.len().is_multiple_of(2) {
        bail!("{text:?} is not hex: an odd number of digits");
    }
    digits
        .chunks_exact(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            _ => bail!("{text:?} is not hex: {:?}", String::from_utf8_lossy(pair)),
        })
        .collect()
}

fn parse_escaped(text: &str) -> Result<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => match (
                b.get(i + 2).and_then(|&c| digit(c)),
                b.get(i + 3).and_then(|&c| digit(c)),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => bail!("{text:?}: `\\x` at byte {i} needs two hex digits"),
            },
            _ => bail!(
                "{text:?}: bad escape at byte {i} (use `\\\\` for a backslash, `\\xNN` for a byte)"
            ),
        }
        i += 2;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shows_and_reads_the_documented_forms() {
        let bytes = b"a b\\\x00\xff\n~";
        assert_eq!(ByteFormat::Escaped.show(bytes), r"a b\\\x00\xff\x0a~");
        assert_eq!(ByteFormat::Hex.show(bytes), "6120625c00ff0a7e");
        assert_eq!(ByteFormat::Escaped.parse(r"\xFF\x0a").unwrap(), b"\xff\n");
        assert_eq!(ByteFormat::Escaped.parse("é\t").unwrap(), "é\t".as_bytes());
        assert_eq!(ByteFormat::Hex.parse("0xFF00").unwrap(), b"\xff\x00");
        assert_eq!(ByteFormat::Hex.parse("").unwrap(), b"");
        for bad in [r"\", r"\x", r"\x4", r"\xg0", r"\n", r"a\"] {
            assert!(ByteFormat::Escaped.parse(bad).is_err(), "{bad:?}");
        }
        for bad in ["abc", "0xzz", "é0"] {
            assert!(ByteFormat::Hex.parse(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn parse_inverts_show(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            for f in [ByteFormat::Escaped, ByteFormat::Hex] {
                let shown = f.show(&bytes);
                prop_assert!(shown.bytes().all(|c| (0x20..=0x7E).contains(&c)), "{shown:?}");
                prop_assert_eq!(f.parse(&shown).unwrap(), bytes.clone());
            }
        }

        #[test]
        fn parse_never_panics(text in ".*") {
            let _ = ByteFormat::Escaped.parse(&text);
            let _ = ByteFormat::Hex.parse(&text);
        }
    }
}
