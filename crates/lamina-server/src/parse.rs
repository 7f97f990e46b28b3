//! The CS265 DSL parser.
//!
//! One command per line; tokens are separated by spaces or tabs; a trailing
//! `\r` is ignored. Keys and values are decimal `i32` (an optional `+` or `-`
//! sign, then digits). Blank lines and lines starting with `#` are ignored.
//!
//! | line | command |
//! | --- | --- |
//! | `p K V` | put |
//! | `d K` | delete |
//! | `g K` | get |
//! | `r LO HI` | range `[LO, HI)` |
//! | `l "PATH"` (or `l PATH` without spaces) | load a binary file of puts |
//! | `s [N]` | stats, at most `N` entries per level (default 100) |
//! | `info`, `bloom`, `misses`, `io`, `stats-json` | inspection |
//! | `flush`, `compact` | maintenance |
//! | `quit` | end this session |
//! | `@end`, `@sync` | framing markers used by the client (see the crate docs) |

use std::fmt;

/// Entries shown per level by `s` without an argument.
pub const DEFAULT_STATS_ENTRIES: usize = 100;

/// A parsed command; borrows the load path from the input line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// Blank or comment line: no effect, no reply.
    Nothing,
    /// `p K V`
    Put(i32, i32),
    /// `d K`
    Delete(i32),
    /// `g K`
    Get(i32),
    /// `r LO HI`
    Range(i32, i32),
    /// `l "PATH"`
    Load(&'a str),
    /// `s [N]`
    Stats(usize),
    /// `info`
    Info,
    /// `bloom`
    Bloom,
    /// `misses`
    Misses,
    /// `io`
    Io,
    /// `stats-json`
    StatsJson,
    /// `flush`
    Flush,
    /// `compact`
    Compact,
    /// `quit`
    Quit,
    /// `@end`: the client's end-of-input marker.
    End,
    /// `@sync`: asks for a `@sync` reply line (used for interactive prompts).
    Sync,
}

/// Why a line was rejected. `Display` gives the text after `ERROR `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The first token is not a command.
    UnknownCommand(String),
    /// A command got the wrong number of arguments.
    WrongArity {
        /// The command.
        command: &'static str,
        /// What it takes.
        expected: &'static str,
        /// How many it got.
        got: usize,
    },
    /// A token that should be an `i32` is not a decimal integer.
    BadInteger(String),
    /// A decimal integer outside the `i32` range.
    OutOfRange(String),
    /// A count (for `s`) that is not a non-negative integer.
    BadCount(String),
    /// A malformed or non-UTF-8 load path.
    BadPath(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::UnknownCommand(c) => write!(f, "unknown command \"{c}\""),
            ParseError::WrongArity {
                command,
                expected,
                got,
            } => write!(f, "{command}: expected {expected}, got {got}"),
            ParseError::BadInteger(t) => write!(f, "not an integer: \"{t}\""),
            ParseError::OutOfRange(t) => write!(f, "integer out of i32 range: \"{t}\""),
            ParseError::BadCount(t) => write!(f, "not a count: \"{t}\""),
            ParseError::BadPath(why) => write!(f, "bad load path: {why}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Renders untrusted bytes for an error message: printable ASCII as is,
/// everything else escaped, at most 40 input bytes.
pub fn show(bytes: &[u8]) -> String {
    const MAX: usize = 40;
    let mut s: String = bytes
        .iter()
        .take(MAX)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    if bytes.len() > MAX {
        s.push_str("...");
    }
    s
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Splits on runs of spaces/tabs; at most `N` tokens are kept, the count
/// of all tokens is returned.
fn tokens<const N: usize>(line: &[u8]) -> ([&[u8]; N], usize) {
    let mut out: [&[u8]; N] = [&[]; N];
    let mut n = 0;
    for t in line.split(|b| is_space(*b)).filter(|t| !t.is_empty()) {
        if n < N {
            out[n] = t;
        }
        n += 1;
    }
    (out, n)
}

/// Parses a decimal `i32`.
pub fn parse_i32(tok: &[u8]) -> Result<i32, ParseError> {
    let (neg, digits) = match tok.first() {
        Some(b'-') => (true, &tok[1..]),
        Some(b'+') => (false, &tok[1..]),
        _ => (false, tok),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadInteger(show(tok)));
    }
    let mut v: i64 = 0;
    for d in digits {
        v = v * 10 + i64::from(d - b'0');
        if v > 1 << 31 {
            return Err(ParseError::OutOfRange(show(tok)));
        }
    }
    let v = if neg { -v } else { v };
    i32::try_from(v).map_err(|_| ParseError::OutOfRange(show(tok)))
}

fn parse_count(tok: &[u8]) -> Result<usize, ParseError> {
    if tok.is_empty() || tok.len() > 18 || !tok.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadCount(show(tok)));
    }
    std::str::from_utf8(tok)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ParseError::BadCount(show(tok)))
}

fn arity(command: &'static str, expected: &'static str, got: usize) -> ParseError {
    ParseError::WrongArity {
        command,
        expected,
        got,
    }
}

/// The argument of `l`: a double-quoted path (may contain spaces, no
/// escapes), or a single unquoted token.
fn parse_path(rest: &[u8]) -> Result<&str, ParseError> {
    let rest = trim(rest);
    let raw = if let Some(inner) = rest.strip_prefix(b"\"") {
        let close = memchr::memchr(b'"', inner)
            .ok_or_else(|| ParseError::BadPath("missing closing quote".into()))?;
        if !trim(&inner[close + 1..]).is_empty() {
            return Err(ParseError::BadPath("text after the closing quote".into()));
        }
        &inner[..close]
    } else {
        let (_, n) = tokens::<1>(rest);
        if n != 1 {
            return Err(arity("l", "1 path", n));
        }
        rest
    };
    if raw.is_empty() {
        return Err(ParseError::BadPath("empty path".into()));
    }
    std::str::from_utf8(raw)
        .map_err(|_| ParseError::BadPath(format!("not UTF-8: \"{}\"", show(raw))))
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !is_space(*c)).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !is_space(*c))
        .map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

/// Parses one line (without its `\n`).
pub fn parse_line(line: &[u8]) -> Result<Command<'_>, ParseError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // Fast paths for the hot commands: "p K V", "g K", "d K".
    let (toks, n) = tokens::<4>(line);
    if n == 0 {
        return Ok(Command::Nothing);
    }
    let cmd = toks[0];
    if cmd.first() == Some(&b'#') {
        return Ok(Command::Nothing);
    }
    let args = n - 1;
    let no_args = |name: &'static str, c: Command<'static>| {
        if args == 0 {
            Ok(c)
        } else {
            Err(arity(name, "no arguments", args))
        }
    };
    match cmd {
        b"p" => {
            if args != 2 {
                return Err(arity("p", "2 arguments (key value)", args));
            }
            Ok(Command::Put(parse_i32(toks[1])?, parse_i32(toks[2])?))
        }
        b"g" => {
            if args != 1 {
                return Err(arity("g", "1 argument (key)", args));
            }
            Ok(Command::Get(parse_i32(toks[1])?))
        }
        b"d" => {
            if args != 1 {
                return Err(arity("d", "1 argument (key)", args));
            }
            Ok(Command::Delete(parse_i32(toks[1])?))
        }
        b"r" => {
            if args != 2 {
                return Err(arity("r", "2 arguments (low high)", args));
            }
            Ok(Command::Range(parse_i32(toks[1])?, parse_i32(toks[2])?))
        }
        b"l" => {
            if args == 0 {
                return Err(arity("l", "1 path", 0));
            }
            // Everything after the command token.
            let after = &trim(line)[1..];
            Ok(Command::Load(parse_path(after)?))
        }
        b"s" => match args {
            0 => Ok(Command::Stats(DEFAULT_STATS_ENTRIES)),
            1 => Ok(Command::Stats(parse_count(toks[1])?)),
            _ => Err(arity("s", "at most 1 argument (entries per level)", args)),
        },
        b"info" => no_args("info", Command::Info),
        b"bloom" => no_args("bloom", Command::Bloom),
        b"misses" => no_args("misses", Command::Misses),
        b"io" => no_args("io", Command::Io),
        b"stats-json" => no_args("stats-json", Command::StatsJson),
        b"flush" => no_args("flush", Command::Flush),
        b"compact" => no_args("compact", Command::Compact),
        b"quit" => no_args("quit", Command::Quit),
        b"@end" => no_args("@end", Command::End),
        b"@sync" => no_args("@sync", Command::Sync),
        other => Err(ParseError::UnknownCommand(show(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Command<'_> {
        parse_line(s.as_bytes()).unwrap()
    }

    fn err(s: &[u8]) -> ParseError {
        parse_line(s).unwrap_err()
    }

    #[test]
    fn good_lines() {
        assert_eq!(ok("p 1 2"), Command::Put(1, 2));
        assert_eq!(ok("  p\t-5   +7  \r"), Command::Put(-5, 7));
        assert_eq!(
            ok("p -2147483648 2147483647"),
            Command::Put(i32::MIN, i32::MAX)
        );
        assert_eq!(ok("g 0042"), Command::Get(42));
        assert_eq!(ok("d -0"), Command::Delete(0));
        assert_eq!(ok("r 10 20"), Command::Range(10, 20));
        assert_eq!(ok("r 20 10"), Command::Range(20, 10));
        assert_eq!(ok("l \"/tmp/a b.dat\""), Command::Load("/tmp/a b.dat"));
        assert_eq!(ok("l  \"x\"  "), Command::Load("x"));
        assert_eq!(ok("l rel/path.dat"), Command::Load("rel/path.dat"));
        assert_eq!(ok("s"), Command::Stats(DEFAULT_STATS_ENTRIES));
        assert_eq!(ok("s 5"), Command::Stats(5));
        assert_eq!(ok("s 0"), Command::Stats(0));
        assert_eq!(ok("info"), Command::Info);
        assert_eq!(ok("bloom"), Command::Bloom);
        assert_eq!(ok("misses"), Command::Misses);
        assert_eq!(ok("io"), Command::Io);
        assert_eq!(ok("stats-json"), Command::StatsJson);
        assert_eq!(ok("flush"), Command::Flush);
        assert_eq!(ok("compact"), Command::Compact);
        assert_eq!(ok("quit"), Command::Quit);
        assert_eq!(ok("@end"), Command::End);
        assert_eq!(ok("@sync"), Command::Sync);
        assert_eq!(ok(""), Command::Nothing);
        assert_eq!(ok("   \t \r"), Command::Nothing);
        assert_eq!(ok("# a comment p 1 2"), Command::Nothing);
    }

    #[test]
    fn unknown_commands() {
        for line in [
            &b"x 1"[..],
            b"P 1 2",
            b"put 1 2",
            b"get",
            b"gg 1",
            b"-1",
            b"\"p\" 1 2",
        ] {
            assert!(
                matches!(err(line), ParseError::UnknownCommand(_)),
                "{line:?}"
            );
        }
    }

    #[test]
    fn wrong_arity() {
        for line in [
            &b"p"[..],
            b"p 1",
            b"p 1 2 3",
            b"g",
            b"g 1 2",
            b"d",
            b"d 1 2",
            b"r 1",
            b"r 1 2 3",
            b"r",
            b"l",
            b"l a b",
            b"s 1 2",
            b"info x",
            b"flush now",
            b"quit 1",
            b"stats-json 1",
        ] {
            assert!(
                matches!(err(line), ParseError::WrongArity { .. }),
                "{line:?}"
            );
        }
    }

    #[test]
    fn bad_integers() {
        for line in [
            &b"p x 1"[..],
            b"p 1 x",
            b"g 1.5",
            b"g 0x10",
            b"g -",
            b"g +",
            b"g --1",
            b"g 1e3",
            b"r a 1",
            b"d 12a",
            b"g \xff\xfe",
            b"p 1 \xc3\xa9",
        ] {
            assert!(matches!(err(line), ParseError::BadInteger(_)), "{line:?}");
        }
    }

    #[test]
    fn out_of_range() {
        for line in [
            &b"p 2147483648 1"[..],
            b"p 1 -2147483649",
            b"g 99999999999999999999999999999",
            b"r -3000000000 0",
            b"d 4294967296",
        ] {
            assert!(matches!(err(line), ParseError::OutOfRange(_)), "{line:?}");
        }
    }

    #[test]
    fn bad_counts_and_paths() {
        assert!(matches!(err(b"s -1"), ParseError::BadCount(_)));
        assert!(matches!(err(b"s x"), ParseError::BadCount(_)));
        assert!(matches!(
            err(b"s 99999999999999999999999"),
            ParseError::BadCount(_)
        ));
        assert!(matches!(err(b"l \"abc"), ParseError::BadPath(_)));
        assert!(matches!(err(b"l \"\""), ParseError::BadPath(_)));
        assert!(matches!(err(b"l \"a\" b"), ParseError::BadPath(_)));
        assert!(matches!(err(b"l \"\xff.dat\""), ParseError::BadPath(_)));
        assert!(matches!(err(b"l \xff.dat"), ParseError::BadPath(_)));
    }

    #[test]
    fn non_utf8_garbage() {
        for line in [
            &b"\xff\xfe\xfd"[..],
            b"\x00\x01",
            b"p\x00 1 2",
            b"\xc3\xa9 1",
        ] {
            let e = err(line);
            let msg = e.to_string();
            assert!(msg.is_ascii(), "{msg}");
            assert!(!msg.contains('\n'));
        }
    }

    #[test]
    fn error_messages_are_short_single_lines() {
        let long = vec![b'z'; 5000];
        let msg = err(&long).to_string();
        assert!(msg.len() < 100, "{msg}");
        let msg = err(b"g \r\n\r").to_string();
        assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg}");
    }
}
