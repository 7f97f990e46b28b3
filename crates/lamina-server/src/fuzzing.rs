//! Entry points for fuzzing the DSL parser and the server's command loop
//! (used by the `fuzz/` cargo-fuzz targets and by the corpus replay test).
//! Whatever the bytes, each returns normally: `ERROR` replies are correct
//! answers, a panic or hang is a bug. Not part of the crate's API.

use std::sync::Arc;

use lamina::vfs::mem::MemFs;
use lamina::{Db, Options};

use crate::exec::{Control, Mode, Session};
use crate::lines::{Line, LineReader};
use crate::parse::{parse_line, Command};

/// Line limit of the fuzzed command loop: short, so over-long lines are
/// cheap to produce.
const MAX_LINE: usize = 256;

/// Parses `data` as one DSL line.
pub fn parse(data: &[u8]) {
    let _ = parse_line(data);
}

/// Runs `data` as a network session's input through the line reader and
/// the executor against a fresh in-memory database (small buffers, so
/// flushes and compactions happen), returning the replies. Load lines are
/// skipped: they read files of the real filesystem.
pub fn command_loop(data: &[u8]) -> Vec<u8> {
    let fs = MemFs::new();
    let mut opts = Options::default();
    opts.vfs = Arc::new(fs);
    opts.write_buffer_size = 4 * 1024;
    opts.target_file_size = 4 * 1024;
    opts.block_size = 512;
    let Ok(db) = Db::open("/db", opts) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    {
        let mut session = Session::new(&db, Mode::Network);
        // Short lines and small reads exercise the reader's boundaries.
        let mut lines = LineReader::new(MAX_LINE, 61);
        let mut input = data;
        'read: while lines.fill(&mut input).is_ok_and(|n| n > 0) {
            while let Some(line) = lines.next_line() {
                let control = match line {
                    Line::Complete(b) if matches!(parse_line(b), Ok(Command::Load(_))) => {
                        Control::Continue
                    }
                    Line::Complete(b) => session.execute_line(b, &mut out),
                    Line::TooLong => {
                        session.line_too_long(&mut out, MAX_LINE);
                        Control::Continue
                    }
                };
                if control != Control::Continue {
                    break 'read;
                }
            }
            session.apply_pending(&mut out);
        }
        session.apply_pending(&mut out);
    }
    let _ = db.close();
    out
}
