//! The spatial command language of `lamina spatial exec`: point records
//! with ids in a [`Dataset`] (a primary index and an LSM R-tree).
//!
//! | line | effect | reply |
//! |---|---|---|
//! | `i ID X Y` | insert or move record `ID` to (X, Y) | none |
//! | `x ID` | delete record `ID` | none |
//! | `w X1 Y1 X2 Y2` | window query, closed: X1 ≤ x ≤ X2, Y1 ≤ y ≤ Y2 | `N ID ID ...` (count, then the ids ascending, one line) |
//! | `c X1 Y1 X2 Y2` | count only | `N` |
//! | `stats-json` | the dataset's and both indexes' statistics | one JSON line |
//! | `quit` or `@end` | stop (over the network: reply `@bye`, close) | none |
//! | `@sync` | nothing | `@sync` |
//! | anything bad | nothing changes | one `ERROR ...` line |
//!
//! IDs are `u64`; coordinates are finite decimal numbers (longitude,
//! latitude in the experiments). Blank lines are ignored. Lines are read
//! with the DSL's bound (1 MiB); a longer one is an `ERROR`.
//!
//! `lamina serve --spatial-dir D` serves these commands on a second port
//! ([`crate::Server::bind_spatial`]), framed like the DSL's wire protocol
//! (see the crate docs), so `lamina client` works with it. Over the network
//! a window answer holds at most [`MAX_NETWORK_WINDOW_IDS`] ids (a larger
//! one is an `ERROR`: count it with `c` or split the window), which bounds
//! a reply's memory. The port closes a connection as the DSL port does: at
//! a line of an HTTP request, without executing it or anything after it,
//! after the idle time-out, and when a line stays unfinished past the
//! request time-out.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};

use lamina::spatial::{Point, Rect};
use lamina_dataset::{Dataset, Record};

use crate::exec::{push_error, STREAM_CHUNK};
use crate::lines::{Line, LineReader, MAX_LINE, READ_CHUNK};
use crate::protocol::{first_word, Protocol};
use crate::sniff::is_http;
use crate::stream::{
    hold_unfinished_line, linger, refuse_http, ConnectionConfig, ReadClock, Reading,
};

/// The most ids a window answer sent over the network may hold (about
/// 2 MiB of reply).
pub const MAX_NETWORK_WINDOW_IDS: usize = 100_000;

/// One parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum SpatialCommand {
    /// `i ID X Y`
    Insert(u64, Point),
    /// `x ID`
    Delete(u64),
    /// `w X1 Y1 X2 Y2`
    Window(Rect),
    /// `c X1 Y1 X2 Y2`
    Count(Rect),
    /// `stats-json`
    Stats,
    /// `quit` or `@end`
    Quit,
    /// `@sync`
    Sync,
    /// A blank line.
    Nothing,
}

fn coord(tok: Option<&str>, what: &str) -> Result<f64, String> {
    let t = tok.ok_or_else(|| format!("missing {what}"))?;
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{what} {t:?} is not a finite number")),
    }
}

fn id(tok: Option<&str>) -> Result<u64, String> {
    let t = tok.ok_or("missing ID")?;
    t.parse::<u64>()
        .map_err(|_| format!("ID {t:?} is not an unsigned 64-bit integer"))
}

fn rect<'a>(toks: &mut impl Iterator<Item = &'a str>) -> Result<Rect, String> {
    let x1 = coord(toks.next(), "X1")?;
    let y1 = coord(toks.next(), "Y1")?;
    let x2 = coord(toks.next(), "X2")?;
    let y2 = coord(toks.next(), "Y2")?;
    if x1 > x2 || y1 > y2 {
        return Err("the window needs X1 <= X2 and Y1 <= Y2".into());
    }
    Ok(Rect::new(x1, y1, x2, y2))
}

/// Parses one line (without its newline).
pub fn parse_spatial(line: &[u8]) -> Result<SpatialCommand, String> {
    let text = std::str::from_utf8(line).map_err(|_| "line is not UTF-8".to_string())?;
    let mut toks = text.split_ascii_whitespace();
    let Some(op) = toks.next() else {
        return Ok(SpatialCommand::Nothing);
    };
    let cmd = match op {
        "i" => {
            let i = id(toks.next())?;
            let x = coord(toks.next(), "X")?;
            let y = coord(toks.next(), "Y")?;
            SpatialCommand::Insert(i, Point::new(x, y))
        }
        "x" => SpatialCommand::Delete(id(toks.next())?),
        "w" => SpatialCommand::Window(rect(&mut toks)?),
        "c" => SpatialCommand::Count(rect(&mut toks)?),
        "stats-json" => SpatialCommand::Stats,
        "quit" | "@end" => SpatialCommand::Quit,
        "@sync" => SpatialCommand::Sync,
        other => {
            return Err(format!(
                "unknown command {other:?} (i, x, w, c, stats-json, quit)"
            ))
        }
    };
    match toks.next() {
        Some(extra) => Err(format!("unexpected {extra:?} after the command")),
        None => Ok(cmd),
    }
}

/// The statistics line of `stats-json`.
pub fn stats_json(ds: &Dataset) -> String {
    serde_json::json!({
        "dataset": ds.stats(),
        "primary": ds.primary().stats(),
        "index": ds.index().stats(),
    })
    .to_string()
}

/// Executes one line, appending its reply to `out`; returns false on
/// `quit`. A window matching more than `max_ids` records is an `ERROR`.
pub fn execute_spatial(ds: &Dataset, line: &[u8], out: &mut Vec<u8>, max_ids: usize) -> bool {
    execute_parsed(ds, parse_spatial(line), out, max_ids)
}

/// [`execute_spatial`] of a line already parsed.
fn execute_parsed(
    ds: &Dataset,
    parsed: Result<SpatialCommand, String>,
    out: &mut Vec<u8>,
    max_ids: usize,
) -> bool {
    let result = parsed.and_then(|cmd| {
        let fail = |e: lamina::Error| e.to_string();
        match cmd {
            SpatialCommand::Insert(i, p) => ds
                .upsert(&Record {
                    id: i,
                    point: p,
                    fields: Vec::new(),
                    payload: Vec::new(),
                })
                .map_err(fail),
            SpatialCommand::Delete(i) => ds.delete(i).map(|_| ()).map_err(fail),
            SpatialCommand::Window(r) => {
                let answer = ds.window_at_most(r, max_ids).map_err(fail)?.ok_or_else(|| {
                    format!(
                        "the window holds more than {max_ids} records; count them with c or split the window"
                    )
                })?;
                out.extend_from_slice(answer.ids.len().to_string().as_bytes());
                for i in &answer.ids {
                    out.push(b' ');
                    out.extend_from_slice(i.to_string().as_bytes());
                }
                out.push(b'\n');
                Ok(())
            }
            SpatialCommand::Count(r) => {
                let (n, _) = ds.count(r).map_err(fail)?;
                out.extend_from_slice(format!("{n}\n").as_bytes());
                Ok(())
            }
            SpatialCommand::Stats => {
                out.extend_from_slice(stats_json(ds).as_bytes());
                out.push(b'\n');
                Ok(())
            }
            SpatialCommand::Sync => {
                out.extend_from_slice(crate::SYNC_REPLY);
                Ok(())
            }
            SpatialCommand::Quit => Err(String::new()),
            SpatialCommand::Nothing => Ok(()),
        }
    });
    match result {
        Ok(()) => true,
        Err(e) if e.is_empty() => false,
        Err(e) => {
            push_error(out, &e);
            true
        }
    }
}

/// One line of input, complete or over the bound.
fn handle(ds: &Dataset, line: Line<'_>, out: &mut Vec<u8>, max_ids: usize) -> bool {
    match line {
        Line::Complete(b) => execute_spatial(ds, b, out, max_ids),
        Line::TooLong => {
            push_error(out, &format!("line longer than {MAX_LINE} bytes"));
            true
        }
    }
}

/// Serves one network connection (see the module docs) until `quit` /
/// `@end` (answered with `@bye`), a disconnect, a time-out or a line of an
/// HTTP request (closed without a reply). Every complete line is executed
/// up to that; the unterminated last line of a dropped connection is not.
/// Replies go out at the end of each read chunk, or sooner once
/// [`STREAM_CHUNK`] bytes are pending.
pub fn serve_spatial_connection(
    ds: &Dataset,
    stream: &TcpStream,
    config: &ConnectionConfig,
) -> io::Result<()> {
    let mut lines = LineReader::new(MAX_LINE, READ_CHUNK);
    let mut share = config.request_budget.share();
    let mut out = Vec::new();
    let mut reader = stream;
    let mut writer = stream;
    let mut clock = ReadClock::new(stream, config)?;
    loop {
        let n = match clock.read(&mut lines, &mut reader, &mut out)? {
            Reading::Bytes(n) => n,
            Reading::TimedOut(why) => {
                push_error(&mut out, &why.message(config));
                let _ = writer.write_all(&out);
                let _ = stream.shutdown(Shutdown::Both);
                return Ok(());
            }
        };
        if n == 0 {
            return Ok(());
        }
        let mut go_on = true;
        while go_on {
            let Some(line) = lines.next_line() else {
                break;
            };
            let mark = out.len();
            // The command's first word, if counted (a blank line is none).
            let name = config.counters.as_ref().and_then(|_| match &line {
                Line::Complete(b) => Some(first_word(b).to_vec()).filter(|w| !w.is_empty()),
                Line::TooLong => Some(Vec::new()),
            });
            go_on = match line {
                Line::Complete(b) => {
                    let parsed = parse_spatial(b);
                    // No HTTP line is a spatial command: only a bad line
                    // needs the test.
                    if parsed.is_err() && is_http(b) {
                        refuse_http(stream, &out);
                        return Ok(());
                    }
                    execute_parsed(ds, parsed, &mut out, MAX_NETWORK_WINDOW_IDS)
                }
                too_long => handle(ds, too_long, &mut out, MAX_NETWORK_WINDOW_IDS),
            };
            if let (Some(c), Some(name)) = (&config.counters, name) {
                let error = out.get(mark..).is_some_and(|r| r.starts_with(b"ERROR"));
                c.command(Protocol::Spatial, &name, error);
            }
            if out.len() >= STREAM_CHUNK {
                writer.write_all(&out)?;
                out.clear();
            }
        }
        if !go_on {
            out.extend_from_slice(crate::BYE_REPLY);
            writer.write_all(&out)?;
            writer.flush()?;
            let _ = stream.shutdown(Shutdown::Write);
            linger(stream);
            return Ok(());
        }
        if !hold_unfinished_line(&mut share, &mut lines, stream, &mut out) {
            return Ok(());
        }
        if !out.is_empty() {
            writer.write_all(&out)?;
            out.clear();
        }
    }
}

/// Runs the lines of `input` until its end or `quit`, writing the replies.
pub fn run_spatial<R: Read, W: Write>(ds: &Dataset, mut input: R, mut output: W) -> io::Result<()> {
    let mut lines = LineReader::new(MAX_LINE, READ_CHUNK);
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        let n = lines.fill(&mut input)?;
        let mut go_on = true;
        if n == 0 {
            if let Some(line) = lines.take_rest() {
                handle(ds, line, &mut out, usize::MAX);
            }
            output.write_all(&out)?;
            return output.flush();
        }
        while go_on {
            match lines.next_line() {
                Some(line) => go_on = handle(ds, line, &mut out, usize::MAX),
                None => break,
            }
        }
        output.write_all(&out)?;
        out.clear();
        if !go_on {
            return output.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command_and_refuses_bad_input() {
        assert_eq!(
            parse_spatial(b"i 7 -73.5 40.25"),
            Ok(SpatialCommand::Insert(7, Point::new(-73.5, 40.25)))
        );
        assert_eq!(parse_spatial(b"x 7"), Ok(SpatialCommand::Delete(7)));
        assert_eq!(
            parse_spatial(b"w -1 -2 3 4\r"),
            Ok(SpatialCommand::Window(Rect::new(-1.0, -2.0, 3.0, 4.0)))
        );
        assert_eq!(parse_spatial(b"  "), Ok(SpatialCommand::Nothing));
        assert_eq!(parse_spatial(b"@end"), Ok(SpatialCommand::Quit));
        assert_eq!(parse_spatial(b"@sync"), Ok(SpatialCommand::Sync));
        for bad in [
            &b"i 7 1"[..],
            b"i -1 0 0",
            b"i 7 nan 0",
            b"i 7 inf 0",
            b"x",
            b"w 3 0 1 1",
            b"c 0 0 1",
            b"w 0 0 1 1 9",
            b"p 1 2",
            b"\xff",
        ] {
            assert!(parse_spatial(bad).is_err(), "{bad:?}");
        }
    }
}
