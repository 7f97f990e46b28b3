//! `SCAN`: cursors issued by the server (the key to resume at, in a table
//! of the last [`MAX_CURSORS`]), `MATCH` globs matched within a work budget.

use std::collections::VecDeque;
use std::ops::Bound;

use super::reply::{array, bulk, error};
use super::{lock, lower, RespState};
use crate::glob::{Glob, OutOfBudget};

/// Key bytes after which a `SCAN` reply ends early (with a cursor).
pub const SCAN_REPLY: usize = 1 << 20;
/// SCAN cursors remembered.
pub const MAX_CURSORS: usize = 4096;
/// Steps of work (a key examined, a byte of a `MATCH` pattern or key
/// compared) after which a `SCAN` reply ends early (with a cursor): tens
/// of milliseconds of one core.
pub const SCAN_WORK: u64 = 1 << 24;

/// SCAN positions by cursor number: the key to resume at.
#[derive(Default)]
pub(super) struct Cursors {
    next: u64,
    live: VecDeque<(u64, Vec<u8>)>,
}

impl Cursors {
    fn issue(&mut self, resume_at: Vec<u8>) -> u64 {
        self.next = self.next.wrapping_add(1).max(1);
        if self.live.len() >= MAX_CURSORS {
            self.live.pop_front();
        }
        self.live.push_back((self.next, resume_at));
        self.next
    }

    fn get(&self, id: u64) -> Option<Vec<u8>> {
        self.live
            .iter()
            .find(|(c, _)| *c == id)
            .map(|(_, k)| k.clone())
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]`.
pub(super) fn scan(state: &RespState, a: &[&[u8]], out: &mut Vec<u8>) -> lamina::Result<()> {
    let Some(cursor) = std::str::from_utf8(a[0])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        error(out, "ERR invalid cursor");
        return Ok(());
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 1;
    while i < a.len() {
        let Some(v) = a.get(i + 1) else {
            error(out, "ERR syntax error");
            return Ok(());
        };
        match lower(a[i]).as_str() {
            "count" => match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) {
                Some(n) if n >= 1 => count = n,
                _ => {
                    error(out, "ERR value is not an integer or out of range");
                    return Ok(());
                }
            },
            "match" => pattern = Some(v),
            "type" => {
                if lower(v) != "string" {
                    // Every key is a string: another type matches none.
                    array(out, 2);
                    bulk(out, b"0");
                    array(out, 0);
                    return Ok(());
                }
            }
            _ => {
                error(out, "ERR syntax error");
                return Ok(());
            }
        }
        i += 2;
    }
    let from = if cursor == 0 {
        Vec::new()
    } else {
        match lock(&state.cursors).get(cursor) {
            Some(k) => k,
            None => {
                error(
                    out,
                    "ERR invalid cursor (expired: this server keeps the last 4096; start again from 0)",
                );
                return Ok(());
            }
        }
    };
    // Like Redis, COUNT bounds the keys examined, not the keys returned.
    // The reply is also cut at SCAN_REPLY bytes of keys, and after
    // SCAN_WORK steps of examining keys (SCAN may always return fewer
    // keys; the cursor goes on from there), so a huge COUNT does not gather
    // the whole key space in memory, nor a costly pattern hold the thread.
    let glob = pattern.map(Glob::new);
    let mut budget = SCAN_WORK;
    let mut keys = Vec::new();
    let mut key_bytes = 0;
    let mut next = None;
    for (examined, kv) in state
        .db
        .scan(Bound::Included(&from), Bound::Unbounded)?
        .enumerate()
    {
        let (k, _) = kv?;
        if examined == count || key_bytes >= SCAN_REPLY || budget == 0 {
            next = Some(k);
            break;
        }
        budget = budget.saturating_sub(1);
        let matched = match &glob {
            None => true,
            Some(g) => match g.matches(&k, &mut budget) {
                Ok(m) => m,
                // Examined first in the next call, with a whole budget.
                Err(OutOfBudget) if examined > 0 => {
                    next = Some(k);
                    break;
                }
                Err(OutOfBudget) => {
                    error(
                        out,
                        &format!("ERR MATCH pattern too costly: more than {SCAN_WORK} steps to match one key"),
                    );
                    return Ok(());
                }
            },
        };
        if matched {
            key_bytes += k.len();
            keys.push(k);
        }
    }
    let cursor = next.map_or(0, |k| lock(&state.cursors).issue(k));
    array(out, 2);
    bulk(out, cursor.to_string().as_bytes());
    array(out, keys.len());
    for k in &keys {
        bulk(out, k);
    }
    Ok(())
}
