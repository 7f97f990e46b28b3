//! A bounded line reader over any [`Read`].
//!
//! [`LineReader`] reads big chunks and hands out the complete lines it holds
//! without copying them. A line longer than the limit is never buffered whole:
//! its bytes are discarded up to the next newline and it is reported once, as
//! [`Line::TooLong`], in its place in the stream. The reader also tells
//! one unfinished line (or request) from the next
//! ([`LineReader::unfinished`]), for the servers' request deadline.

use std::collections::TryReserveError;
use std::io::{self, Read};

/// Default size of one read.
pub const READ_CHUNK: usize = 256 * 1024;

/// Size of a reader's first read (reads grow from it to the read chunk).
const FIRST_READ: usize = 4 * 1024;

/// Default longest accepted line, excluding the newline.
pub const MAX_LINE: usize = 1024 * 1024;

/// One item of the line stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line, without its `\n` (a trailing `\r` is kept; the parser
    /// ignores it).
    Complete(&'a [u8]),
    /// A line longer than the limit; its bytes were discarded.
    TooLong,
}

/// Splits a byte stream into bounded lines.
#[derive(Debug)]
pub struct LineReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_line: usize,
    read_chunk: usize,
    /// The next read's size: it starts small and doubles while reads fill
    /// it, up to `read_chunk`, so a connection sending little costs little.
    read_size: usize,
    /// Inside an over-long line: drop bytes until the next newline.
    discarding: bool,
    /// Lines (requests) taken so far.
    taken: u64,
    /// Capacity kept for the unfinished item at the buffer's start
    /// ([`LineReader::reserve`]; 0: none).
    reserved: usize,
}

impl Default for LineReader {
    fn default() -> Self {
        LineReader::new(MAX_LINE, READ_CHUNK)
    }
}

impl LineReader {
    /// A reader accepting lines of at most `max_line` bytes, reading up to
    /// `read_chunk` bytes at a time (4 KiB at first, doubling while reads
    /// fill the buffer).
    pub fn new(max_line: usize, read_chunk: usize) -> LineReader {
        LineReader {
            buf: Vec::new(),
            start: 0,
            end: 0,
            max_line,
            read_chunk: read_chunk.max(1),
            read_size: FIRST_READ.min(read_chunk.max(1)),
            discarding: false,
            taken: 0,
            reserved: 0,
        }
    }

    /// Reads once from `r` into the buffer. Returns the number of bytes read;
    /// 0 means end of input. Unconsumed bytes are kept.
    pub fn fill<R: Read + ?Sized>(&mut self, r: &mut R) -> io::Result<usize> {
        self.compact();
        let want = self.end + self.read_size;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let space = self.buf.len() - self.end;
        let n = r.read(&mut self.buf[self.end..])?;
        self.end += n;
        if n == space {
            self.read_size = (self.read_size * 2).min(self.read_chunk);
        }
        Ok(n)
    }

    /// Which unfinished line (or request, for a parser using
    /// [`LineReader::consume`]) is buffered, if one is: the number of
    /// lines taken before it, the same until it is complete.
    pub fn unfinished(&self) -> Option<u64> {
        self.has_partial().then_some(self.taken)
    }

    /// Gives back the buffer's memory beyond the bytes still unconsumed (a
    /// partial line): for a connection gone idle, whose next read may be
    /// far off. The next [`LineReader::fill`] allocates again.
    pub fn release(&mut self) {
        self.compact();
        self.buf.truncate(self.end);
        // A reservation is kept: its untouched part costs no memory, and
        // growing back would copy what arrived.
        self.buf.shrink_to(self.reserved);
        self.read_size = FIRST_READ.min(self.read_chunk);
    }

    /// Moves the unconsumed bytes to the buffer's start.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Makes room at once for the unconsumed bytes to grow to `total`
    /// (and a read beyond): for an item whose length is announced before
    /// it arrives, a Redis bulk string. The buffer then grows in one step
    /// rather than doubling as the bytes come, each doubling a copy and
    /// the allocator perhaps keeping the old buffer resident (an
    /// unfinished 56 MiB request cost twice its size); the room is touched,
    /// and costs memory, only as the bytes arrive. Kept until the next
    /// [`LineReader::consume`]. Up to a read chunk, nothing is reserved:
    /// reads grow the buffer that far anyway. A memory budget counts the
    /// room first: [`LineReader::holding`].
    pub fn reserve(&mut self, total: usize) -> Result<(), TryReserveError> {
        let room = self.room_for(total);
        if room == 0 {
            return Ok(());
        }
        if room > self.buf.capacity() {
            self.compact();
            self.buf.truncate(self.end);
            self.buf.try_reserve_exact(room - self.end)?;
        }
        self.reserved = room;
        Ok(())
    }

    /// The room [`LineReader::reserve`] makes for an item of `total`
    /// bytes: the item and a read beyond, or none up to a read chunk.
    fn room_for(&self, total: usize) -> usize {
        if total <= self.read_chunk {
            0
        } else {
            total.saturating_add(self.read_chunk)
        }
    }

    /// What the unfinished item at the buffer's start holds, for a memory
    /// budget: its bytes buffered, or the room kept for it if larger,
    /// counting the room [`LineReader::reserve`] of `total` would make
    /// (0: none), so that it can be counted before it is made.
    pub fn holding(&self, total: usize) -> usize {
        self.buffered()
            .len()
            .max(self.reserved)
            .max(self.room_for(total))
    }

    /// The bytes read and not yet consumed, for a parser of another
    /// framing (the Redis protocol) sharing this buffer and its reads.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks the first `n` buffered bytes consumed: a complete request of
    /// another framing.
    pub fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
        if n > 0 {
            self.taken += 1;
        }
        self.reserved = 0;
    }

    /// The next complete line, if one is buffered.
    pub fn next_line(&mut self) -> Option<Line<'_>> {
        let pending = &self.buf[self.start..self.end];
        let Some(i) = memchr::memchr(b'\n', pending) else {
            if self.discarding || pending.len() > self.max_line {
                // Drop what we have of the over-long line.
                self.discarding = true;
                self.start = 0;
                self.end = 0;
            }
            // Shrink back after a burst of huge lines.
            if self.start == self.end && self.buf.len() > 4 * self.read_chunk {
                self.start = 0;
                self.end = 0;
                self.buf.truncate(self.read_chunk);
                self.buf.shrink_to(self.read_chunk);
            }
            return None;
        };
        let line_start = self.start;
        self.start += i + 1;
        self.taken += 1;
        if self.discarding {
            self.discarding = false;
            return Some(Line::TooLong);
        }
        if i > self.max_line {
            return Some(Line::TooLong);
        }
        Some(Line::Complete(&self.buf[line_start..line_start + i]))
    }

    /// At end of input: the unterminated last line, if any (consumed).
    pub fn take_rest(&mut self) -> Option<Line<'_>> {
        if self.discarding {
            self.discarding = false;
            self.start = self.end;
            return Some(Line::TooLong);
        }
        if self.start == self.end {
            return None;
        }
        let s = self.start;
        self.start = self.end;
        if self.end - s > self.max_line {
            return Some(Line::TooLong);
        }
        Some(Line::Complete(&self.buf[s..self.end]))
    }

    /// Whether part of a line is buffered (or being discarded).
    pub fn has_partial(&self) -> bool {
        self.discarding || self.start < self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader returning the given pieces one `read` at a time.
    struct Pieces(Vec<Vec<u8>>);
    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let p = &mut self.0[0];
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            p.drain(..n);
            if p.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    type Collected = (Vec<Option<Vec<u8>>>, Option<Option<Vec<u8>>>);

    fn collect(r: &mut LineReader, input: &mut dyn Read) -> Collected {
        let mut out = Vec::new();
        loop {
            while let Some(l) = r.next_line() {
                out.push(match l {
                    Line::Complete(b) => Some(b.to_vec()),
                    Line::TooLong => None,
                });
            }
            if r.fill(input).unwrap() == 0 {
                break;
            }
        }
        let rest = r.take_rest().map(|l| match l {
            Line::Complete(b) => Some(b.to_vec()),
            Line::TooLong => None,
        });
        (out, rest)
    }

    #[test]
    fn splits_lines_across_reads() {
        let mut r = LineReader::new(100, 3);
        let mut input = Pieces(vec![
            b"p 1 2\ng".to_vec(),
            b" 1\n\nr 1".to_vec(),
            b" 5".to_vec(),
        ]);
        let (lines, rest) = collect(&mut r, &mut input);
        assert_eq!(
            lines,
            vec![
                Some(b"p 1 2".to_vec()),
                Some(b"g 1".to_vec()),
                Some(b"".to_vec())
            ]
        );
        assert_eq!(rest, Some(Some(b"r 1 5".to_vec())));
    }

    #[test]
    fn too_long_lines_are_reported_once_in_place() {
        let mut r = LineReader::new(10, 4);
        let long = vec![b'x'; 1000];
        let mut data = b"g 1\n".to_vec();
        data.extend_from_slice(&long);
        data.extend_from_slice(b"\ng 2\n");
        data.extend_from_slice(&[b'y'; 11]);
        data.extend_from_slice(b"\n");
        data.extend_from_slice(&[b'z'; 10]);
        data.extend_from_slice(b"\n");
        let mut input = Pieces(data.chunks(7).map(|c| c.to_vec()).collect());
        let (lines, rest) = collect(&mut r, &mut input);
        assert_eq!(
            lines,
            vec![
                Some(b"g 1".to_vec()),
                None,
                Some(b"g 2".to_vec()),
                None,
                Some(vec![b'z'; 10])
            ]
        );
        assert_eq!(rest, None);
        // Memory stays bounded by the limit plus a chunk or so.
        assert!(r.buf.len() <= 64, "{}", r.buf.len());
    }

    #[test]
    fn too_long_unterminated_tail() {
        let mut r = LineReader::new(10, 64);
        let mut input = Pieces(vec![vec![b'x'; 500]]);
        let (lines, rest) = collect(&mut r, &mut input);
        assert!(lines.is_empty());
        assert_eq!(rest, Some(None));
    }

    #[test]
    fn an_unfinished_line_keeps_its_identity_until_it_ends() {
        let mut r = LineReader::new(100, 64);
        assert_eq!(r.unfinished(), None);
        r.fill(&mut &b"p 1"[..]).unwrap();
        let first = r.unfinished().unwrap();
        r.fill(&mut &b" 2"[..]).unwrap();
        assert_eq!(r.unfinished(), Some(first));
        r.fill(&mut &b"\ng 1\ng"[..]).unwrap();
        assert_eq!(r.unfinished(), Some(first));
        while r.next_line().is_some() {}
        let second = r.unfinished().unwrap();
        assert_ne!(second, first);
        r.fill(&mut &b" 2\n"[..]).unwrap();
        assert!(r.next_line().is_some());
        assert_eq!(r.unfinished(), None);
        r.fill(&mut &b"*1\r\n$1"[..]).unwrap();
        let third = r.unfinished().unwrap();
        assert_ne!(third, second);
        r.consume(4);
        assert_eq!(r.unfinished(), Some(third + 1));
    }

    #[test]
    fn a_reserved_item_arrives_without_the_buffer_moving() {
        let mut r = LineReader::new(64, 16);
        let item = vec![b'x'; 1000];
        let mut input = Pieces(item.chunks(7).map(|c| c.to_vec()).collect());
        r.fill(&mut input).unwrap();
        // Within a read chunk nothing is reserved.
        r.reserve(16).unwrap();
        assert_eq!(r.reserved, 0);
        r.reserve(1000).unwrap();
        let (at, room) = (r.buf.as_ptr(), r.buf.capacity());
        assert!(room >= 1000 + 16, "{room}");
        while r.buffered().len() < 1000 {
            assert!(r.fill(&mut input).unwrap() > 0);
            // A pause in the middle gives back nothing reserved.
            r.release();
        }
        assert_eq!(r.buffered(), &item[..]);
        assert_eq!((r.buf.as_ptr(), r.buf.capacity()), (at, room));
        // Consumed, the item's room goes at the next release.
        r.consume(1000);
        r.release();
        assert_eq!(r.buf.capacity(), 0);
    }

    #[test]
    fn an_item_holds_its_room_before_the_room_is_made() {
        let mut r = LineReader::new(64, 16);
        r.fill(&mut &b"*1\r\n$1000\r\nab"[..]).unwrap();
        // Within a read chunk: the bytes buffered.
        assert_eq!(r.holding(16), 13);
        // The room for the whole item and a read, before it is made and
        // while it is kept.
        assert_eq!(r.holding(1013), 1013 + 16);
        r.reserve(1013).unwrap();
        assert_eq!(r.holding(0), 1013 + 16);
        // Consumed, the item holds nothing.
        r.consume(13);
        assert_eq!(r.holding(0), 0);
    }

    #[test]
    fn one_big_read_many_lines() {
        let mut r = LineReader::default();
        let text: String = (0..10_000).map(|i| format!("p {i} {i}\n")).collect();
        let mut input = Pieces(vec![text.into_bytes()]);
        let (lines, rest) = collect(&mut r, &mut input);
        assert_eq!(lines.len(), 10_000);
        assert_eq!(rest, None);
        assert!(!r.has_partial());
    }
}
