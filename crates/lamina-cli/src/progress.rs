//! Progress bars of the long commands (`experiment`, `bench`, `sim`,
//! `repair`): one look, on stderr, and only on a terminal, so that piped
//! output, test captures and CI logs stay exactly as they were.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Work done, its rate and the time left.
const TEMPLATE: &str =
    "{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% {human_pos}/{human_len} {per_sec} ETA {eta_precise} {msg}";

/// Elapsed time while a step of unknown length runs.
const SPINNER: &str = "{prefix} {spinner} [{elapsed_precise}] {msg}";

fn target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar over `len` units of work, hidden unless stderr is a terminal.
pub fn bar(len: u64, prefix: impl Into<String>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), target());
    // The templates are constants: a bad one would fail every test run.
    if let Ok(style) = ProgressStyle::with_template(TEMPLATE) {
        bar.set_style(style);
    }
    bar.set_prefix(prefix.into());
    bar
}

/// A spinner with the elapsed time, for work of unknown length; hidden
/// unless stderr is a terminal.
pub fn spinner(prefix: impl Into<String>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target());
    if let Ok(style) = ProgressStyle::with_template(SPINNER) {
        bar.set_style(style);
    }
    bar.set_prefix(prefix.into());
    if !bar.is_hidden() {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// Prints `line` to stderr above `bar` (or plainly when it is hidden).
pub fn println(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Counts work into a bar in batches, so that threads doing millions of
/// operations do not contend on it.
pub struct Ticker<'a> {
    bar: &'a ProgressBar,
    pending: u64,
}

impl<'a> Ticker<'a> {
    /// A ticker into `bar`.
    pub fn new(bar: &'a ProgressBar) -> Self {
        Ticker { bar, pending: 0 }
    }

    /// One unit done.
    pub fn tick(&mut self) {
        self.pending += 1;
        if self.pending == 1024 {
            self.bar.inc(self.pending);
            self.pending = 0;
        }
    }
}

impl Drop for Ticker<'_> {
    fn drop(&mut self) {
        self.bar.inc(self.pending);
    }
}
