//! Redis's glob patterns, for `SCAN ... MATCH`: `*` (any run of bytes,
//! the empty one too), `?` (any byte), a class `[abc]`, `[^abc]`, `[a-z]`
//! (`\` escapes inside it, a reversed range means the same range, an
//! unclosed class runs to the pattern's end), `\x` (the byte `x`), and any
//! other byte for itself, case included.
//!
//! Matching never backtracks: the pattern's stars cut it into segments
//! whose elements each match one byte, and each segment is taken at its
//! leftmost place after the one before (a later place never leaves more
//! room for the rest, so this is exact). A key is refused at once when it
//! is shorter than the pattern's elements; otherwise the work is at most
//! the pattern's length plus the key's length times the longest segment,
//! O(pattern × key). A class longer than [`SHORT_CLASS`] bytes is read
//! once, into a 256-bit set, so testing a byte against it is one step.
//! Every step is counted against the caller's budget, which bounds the
//! work of one `SCAN` whatever the pattern and keys.

/// A class of at most this many bytes is read from the pattern at each
/// test; a longer one is a bit set made once.
const SHORT_CLASS: usize = 64;

/// The budget ran out before the match was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfBudget;

/// Takes `n` steps from `budget`.
fn spend(budget: &mut u64, n: usize) -> Result<(), OutOfBudget> {
    let n = n as u64;
    if *budget < n {
        *budget = 0;
        return Err(OutOfBudget);
    }
    *budget -= n;
    Ok(())
}

/// A class too long to read at each test, as a set of bytes.
struct LongClass {
    /// Where its `[` is in the pattern.
    start: usize,
    /// Just after it.
    end: usize,
    set: [u64; 4],
}

/// A pattern read once, matched against many keys.
pub(crate) struct Glob<'p> {
    pattern: &'p [u8],
    /// Elements other than stars: the shortest key that can match.
    min_len: usize,
    /// Where the first and the last star are (the same if one).
    stars: Option<(usize, usize)>,
    /// Elements before the first star and after the last one.
    prefix_len: usize,
    suffix_len: usize,
    /// By `start`.
    long_classes: Vec<LongClass>,
}

impl<'p> Glob<'p> {
    /// Reads `pattern` (work linear in its length).
    pub(crate) fn new(pattern: &'p [u8]) -> Self {
        let mut glob = Glob {
            pattern,
            min_len: 0,
            stars: None,
            prefix_len: 0,
            suffix_len: 0,
            long_classes: Vec::new(),
        };
        let mut p = 0;
        while p < pattern.len() {
            let next = match pattern[p] {
                b'*' => {
                    glob.stars = Some(match glob.stars {
                        None => (p, p),
                        Some((first, _)) => (first, p),
                    });
                    glob.suffix_len = 0;
                    p += 1;
                    continue;
                }
                b'[' => {
                    let end = class(pattern, p, 0).1;
                    if end - p > SHORT_CLASS {
                        let set = class_set(pattern, p);
                        glob.long_classes.push(LongClass { start: p, end, set });
                    }
                    end
                }
                b'\\' if p + 1 < pattern.len() => p + 2,
                _ => p + 1,
            };
            glob.min_len += 1;
            if glob.stars.is_none() {
                glob.prefix_len += 1;
            }
            glob.suffix_len += 1;
            p = next;
        }
        glob
    }

    /// Whether `key` matches, taking a step from `budget` per byte of
    /// pattern or key looked at; [`OutOfBudget`] if it runs out first.
    pub(crate) fn matches(&self, key: &[u8], budget: &mut u64) -> Result<bool, OutOfBudget> {
        spend(budget, 1)?;
        if key.len() < self.min_len {
            return Ok(false);
        }
        let Some((first, last)) = self.stars else {
            return Ok(key.len() == self.min_len && self.segment_at(0, key, budget)?.is_some());
        };
        let end = key.len() - self.suffix_len;
        if self
            .segment_at(0, &key[..self.prefix_len], budget)?
            .is_none()
            || self.segment_at(last + 1, &key[end..], budget)?.is_none()
        {
            return Ok(false);
        }
        // The segments between the first and the last star, each at its
        // leftmost place in what the prefix and the suffix leave.
        let mut need = self.min_len - self.prefix_len - self.suffix_len;
        let mut at = self.prefix_len;
        let mut p = first + 1;
        while p < last {
            if self.pattern[p] == b'*' {
                p += 1;
                continue;
            }
            loop {
                if end - at < need {
                    return Ok(false);
                }
                if let Some((next, len)) = self.segment_at(p, &key[at..end], budget)? {
                    at += len;
                    need -= len;
                    p = next;
                    break;
                }
                at += 1;
            }
        }
        Ok(true)
    }

    /// Matches the elements from `p` up to the next star (or the end)
    /// against the start of `key`: where that star is and how many bytes
    /// they took, or `None` if one does not match or `key` runs out.
    fn segment_at(
        &self,
        mut p: usize,
        key: &[u8],
        budget: &mut u64,
    ) -> Result<Option<(usize, usize)>, OutOfBudget> {
        let mut i = 0;
        while p < self.pattern.len() {
            let c = match self.pattern[p] {
                b'*' => break,
                _ => match key.get(i) {
                    Some(&c) => c,
                    None => return Ok(None),
                },
            };
            spend(budget, 1)?;
            let Some(next) = self.one(p, c, budget)? else {
                return Ok(None);
            };
            p = next;
            i += 1;
        }
        Ok(Some((p, i)))
    }

    /// Whether the element at `p` (not a star) matches `c`: where the next
    /// element starts if it does.
    fn one(&self, p: usize, c: u8, budget: &mut u64) -> Result<Option<usize>, OutOfBudget> {
        let pattern = self.pattern;
        Ok(match pattern[p] {
            b'?' => Some(p + 1),
            b'[' => {
                if let Ok(i) = self.long_classes.binary_search_by_key(&p, |l| l.start) {
                    let l = &self.long_classes[i];
                    let hit = l.set[usize::from(c >> 6)] & (1 << (c & 63)) != 0;
                    hit.then_some(l.end)
                } else {
                    let (hit, end) = class(pattern, p, c);
                    spend(budget, end - p)?;
                    hit.then_some(end)
                }
            }
            b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(p + 2),
            b => (b == c).then_some(p + 1),
        })
    }
}

/// One step of a class's body: a literal byte (escaped or not), a range,
/// or its end.
enum Member {
    Byte(u8),
    Range(u8, u8),
    End,
}

/// Walks the class whose `[` is at `p` as Redis does: whether it is
/// negated, and each member with the place after it.
fn members(pattern: &[u8], p: usize) -> (bool, impl Iterator<Item = (Member, usize)> + '_) {
    let mut j = p + 1;
    let negate = pattern.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut done = false;
    let walk = std::iter::from_fn(move || {
        if done {
            return None;
        }
        let (member, next) = match pattern.get(j) {
            // An unclosed class ends with the pattern.
            None => (Member::End, j),
            Some(b']') => (Member::End, j + 1),
            Some(b'\\') if j + 1 < pattern.len() => (Member::Byte(pattern[j + 1]), j + 2),
            Some(&lo) if pattern.get(j + 1) == Some(&b'-') && j + 2 < pattern.len() => {
                let hi = pattern[j + 2];
                (Member::Range(lo.min(hi), lo.max(hi)), j + 3)
            }
            Some(&b) => (Member::Byte(b), j + 1),
        };
        done = matches!(member, Member::End);
        j = next;
        Some((member, next))
    });
    (negate, walk)
}

/// Whether `c` is in the class whose `[` is at `p`, and just after it.
fn class(pattern: &[u8], p: usize, c: u8) -> (bool, usize) {
    let (negate, walk) = members(pattern, p);
    let mut hit = false;
    let mut end = p + 1;
    for (member, next) in walk {
        hit |= match member {
            Member::Byte(b) => b == c,
            Member::Range(lo, hi) => (lo..=hi).contains(&c),
            Member::End => false,
        };
        end = next;
    }
    (hit != negate, end)
}

/// The bytes the class whose `[` is at `p` matches.
fn class_set(pattern: &[u8], p: usize) -> [u64; 4] {
    let (negate, walk) = members(pattern, p);
    let mut set = [0u64; 4];
    let mut add = |lo: u8, hi: u8| {
        for (w, word) in set.iter_mut().enumerate() {
            // This word's bytes are 64·w ..= 64·w + 63.
            let base = 64 * w;
            let (lo, hi) = (usize::from(lo).max(base), usize::from(hi).min(base + 63));
            if lo <= hi {
                let bits = u64::MAX >> (63 - (hi - lo)) << (lo - base);
                *word |= bits;
            }
        }
    };
    for (member, _) in walk {
        match member {
            Member::Byte(b) => add(b, b),
            Member::Range(lo, hi) => add(lo, hi),
            Member::End => {}
        }
    }
    if negate {
        set = set.map(|w| !w);
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn glob(pattern: &[u8], key: &[u8]) -> bool {
        let mut budget = u64::MAX;
        Glob::new(pattern).matches(key, &mut budget).unwrap()
    }

    /// Redis's `stringmatchlen` (util.c) transcribed as plainly as
    /// possible, recursion and all; only a star also matches an empty
    /// rest (Redis's loop `while (stringLen)` never tries it, so there
    /// `**` does not match an empty key; SCAN's own `*` does).
    fn redis(pattern: &[u8], string: &[u8]) -> bool {
        let (mut p, mut s) = (0usize, 0usize);
        while p < pattern.len() && s < string.len() {
            match pattern[p] {
                b'*' => {
                    while p + 1 < pattern.len() && pattern[p + 1] == b'*' {
                        p += 1;
                    }
                    if p + 1 == pattern.len() {
                        return true;
                    }
                    return (s..=string.len())
                        .any(|from| redis(&pattern[p + 1..], &string[from..]));
                }
                b'?' => {}
                b'[' => {
                    p += 1;
                    let not = pattern.get(p) == Some(&b'^');
                    if not {
                        p += 1;
                    }
                    let mut matched = false;
                    loop {
                        let left = pattern.len() - p;
                        if pattern.get(p) == Some(&b'\\') && left >= 2 {
                            p += 1;
                            if pattern[p] == string[s] {
                                matched = true;
                            }
                        } else if pattern.get(p) == Some(&b']') {
                            break;
                        } else if left == 0 {
                            p -= 1;
                            break;
                        } else if left >= 3 && pattern[p + 1] == b'-' {
                            let (mut start, mut end) = (pattern[p], pattern[p + 2]);
                            if start > end {
                                std::mem::swap(&mut start, &mut end);
                            }
                            p += 2;
                            if string[s] >= start && string[s] <= end {
                                matched = true;
                            }
                        } else if pattern[p] == string[s] {
                            matched = true;
                        }
                        p += 1;
                    }
                    if not {
                        matched = !matched;
                    }
                    if !matched {
                        return false;
                    }
                }
                b'\\' if pattern.len() - p >= 2 => {
                    p += 1;
                    if pattern[p] != string[s] {
                        return false;
                    }
                }
                c => {
                    if c != string[s] {
                        return false;
                    }
                }
            }
            p += 1;
            s += 1;
        }
        if s == string.len() {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
        }
        p == pattern.len() && s == string.len()
    }

    #[test]
    fn globs_match_like_redis() {
        for (p, s, want) in [
            ("*", "anything", true),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("user:*", "user:42", true),
            ("user:*", "users", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-c]llo", "hbllo", true),
            ("h[c-a]llo", "hbllo", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("a\\", "a\\", true),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b", "xxaxxbx", false),
            ("[abc", "b", true),
            ("[^", "z", true),
            ("[]", "]", false),
            // A range may end at `]`, which then does not close the class.
            ("[a-]x", "]", true),
            ("[a-]x", "x", true),
            ("[a-]x", "]x", false),
            ("*[*]", "ab*", true),
        ] {
            assert_eq!(glob(p.as_bytes(), s.as_bytes()), want, "{p} {s}");
            assert_eq!(redis(p.as_bytes(), s.as_bytes()), want, "oracle: {p} {s}");
        }
    }

    /// Short random patterns and keys over a small alphabet (so matches,
    /// classes, ranges and escapes all happen), against the transcription
    /// of Redis's matcher.
    #[test]
    fn random_patterns_agree_with_redis() {
        const PATTERN: &[u8] = b"ab*?[]^-\\";
        const KEY: &[u8] = b"ab-]^\\*";
        let mut rng = StdRng::seed_from_u64(39);
        let mut matched = 0;
        for _ in 0..200_000 {
            let pattern: Vec<u8> = (0..rng.gen_range(0..9))
                .map(|_| PATTERN[rng.gen_range(0..PATTERN.len())])
                .collect();
            let key: Vec<u8> = (0..rng.gen_range(0..9))
                .map(|_| KEY[rng.gen_range(0..KEY.len())])
                .collect();
            let want = redis(&pattern, &key);
            matched += usize::from(want);
            assert_eq!(
                glob(&pattern, &key),
                want,
                "{:?} {:?}",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&key)
            );
        }
        // Both outcomes are well represented.
        assert!(matched > 5_000, "{matched}");
    }

    /// Classes over the short bound take the bit-set path: the same
    /// answers as reading them.
    #[test]
    fn long_classes_match_as_short_ones() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..300 {
            let body: Vec<u8> = (0..rng.gen_range(SHORT_CLASS..3 * SHORT_CLASS))
                .map(|_| match rng.gen_range(b' '..=b'~') {
                    b']' => b'-',
                    b => b,
                })
                .collect();
            let negate = if rng.gen() { "^" } else { "" };
            let pattern = [b"*[", negate.as_bytes(), &body, b"]"].concat();
            let g = Glob::new(&pattern);
            assert_eq!(g.long_classes.len(), 1);
            for c in 0..=255u8 {
                let key = [b'x', c];
                let mut budget = u64::MAX;
                assert_eq!(g.matches(&key, &mut budget), Ok(redis(&pattern, &key)));
            }
        }
    }

    /// Patterns that make a backtracking matcher take time quadratic (or
    /// worse) in their length: 1.5 MB against long keys takes work linear
    /// in pattern and key here.
    #[test]
    fn huge_patterns_take_linear_work() {
        let stars: Vec<u8> = b"*a".repeat(750_000);
        let class_bomb = [&b"*["[..], &vec![b'x'; 1_500_000]].concat();
        let keys = [vec![b'a'; 1 << 20], vec![b'b'; 1 << 20], b"short".to_vec()];
        for (pattern, key, want) in [
            (&stars, &keys[0], true),
            (&stars, &keys[1], false),
            (&stars, &keys[2], false),
            (&class_bomb, &keys[0], false),
            (&class_bomb, &keys[1], false),
        ] {
            let mut budget = u64::MAX;
            assert_eq!(Glob::new(pattern).matches(key, &mut budget), Ok(want));
            let steps = u64::MAX - budget;
            let bound = 4 * (pattern.len() + key.len()) as u64;
            assert!(steps <= bound, "{steps} steps, bound {bound}");
        }
    }

    /// A long segment that nearly matches everywhere is the costly case
    /// (its length times the key's): the budget stops it.
    #[test]
    fn the_budget_stops_a_costly_match() {
        let pattern = [&b"*"[..], &vec![b'a'; 1000], b"b*"].concat();
        let key = vec![b'a'; 100_000];
        let mut budget = 1_000_000;
        assert_eq!(
            Glob::new(&pattern).matches(&key, &mut budget),
            Err(OutOfBudget)
        );
        assert_eq!(budget, 0);
        let mut budget = u64::MAX;
        assert_eq!(Glob::new(&pattern).matches(&key, &mut budget), Ok(false));
    }
}
