//! A file's boundary key, held inside the value when it is short.
//!
//! Every [`crate::FileView`] carries its smallest and largest key. As two
//! `Vec<u8>`s they cost two heap allocations for each file made and each
//! copy of one (the planner copies every input of a task), which for the
//! model simulator is tens of millions of allocations and frees per
//! simulation: its keys are eight bytes. An [`InlineKey`] keeps up to
//! [`INLINE`] bytes inline, in the 24 bytes a `Vec<u8>` took, and only
//! longer keys on the heap; it reads as a `[u8]` (`Deref`) and compares,
//! hashes and prints as its bytes do.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The longest key held inline: what fits beside its length and the
/// variant's tag in 24 bytes.
pub const INLINE: usize = 22;

/// A user key, inline up to [`INLINE`] bytes; see the module docs.
#[derive(Clone)]
pub struct InlineKey(Repr);

#[derive(Clone)]
enum Repr {
    /// The key is `bytes[..len]`.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// A key longer than [`INLINE`] bytes.
    Heap(Box<[u8]>),
}

impl InlineKey {
    /// A copy of `key`.
    pub fn new(key: &[u8]) -> InlineKey {
        let mut bytes = [0; INLINE];
        match (bytes.get_mut(..key.len()), u8::try_from(key.len())) {
            (Some(head), Ok(len)) => {
                head.copy_from_slice(key);
                InlineKey(Repr::Inline { len, bytes })
            }
            _ => InlineKey(Repr::Heap(key.into())),
        }
    }

    /// The key's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }
}

impl Default for InlineKey {
    /// The empty key.
    fn default() -> Self {
        InlineKey::new(&[])
    }
}

impl Deref for InlineKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for InlineKey {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for InlineKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<&[u8]> for InlineKey {
    fn from(key: &[u8]) -> InlineKey {
        InlineKey::new(key)
    }
}

impl From<Vec<u8>> for InlineKey {
    /// Keeps a long key's allocation.
    fn from(key: Vec<u8>) -> InlineKey {
        match key.len() {
            0..=INLINE => InlineKey::new(&key),
            _ => InlineKey(Repr::Heap(key.into_boxed_slice())),
        }
    }
}

impl PartialEq for InlineKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for InlineKey {}

impl PartialOrd for InlineKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InlineKey {
    /// The bytes' order.
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl Hash for InlineKey {
    /// As the bytes hash (`Borrow<[u8]>` requires it).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl fmt::Debug for InlineKey {
    /// As the bytes print (a `Vec<u8>` printed the same).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys of every length around the inline limit read back, compare
    /// and print as their bytes (the oracle: `Vec<u8>`), and only the long
    /// ones are on the heap.
    #[test]
    fn keys_behave_as_their_bytes() {
        let keys: Vec<Vec<u8>> = (0..=INLINE + 3)
            .flat_map(|n| [vec![0x61; n], vec![0xff; n], (0..n as u8).collect()])
            .collect();
        for a in &keys {
            let key = InlineKey::new(a);
            assert_eq!(key.as_slice(), a.as_slice());
            assert_eq!(&*InlineKey::from(a.clone()), a.as_slice());
            let inline = matches!(key.0, Repr::Inline { .. });
            assert_eq!(inline, a.len() <= INLINE);
            assert_eq!(format!("{key:?}"), format!("{a:?}"));
            for b in &keys {
                let other = InlineKey::new(b);
                assert_eq!(key.cmp(&other), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(key == other, a == b, "{a:?} vs {b:?}");
            }
        }
        assert_eq!(size_of::<InlineKey>(), size_of::<Vec<u8>>());
        assert!(InlineKey::default().is_empty());
    }
}
