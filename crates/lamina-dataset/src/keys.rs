//! The indexes' key codecs: the primary's id keys and the field indexes'
//! ⟨value, id⟩ keys (the spatial index's ⟨point, id⟩ keys are the
//! engine's [`lamina::spatial::Comparator`]).

/// The primary index's key of record `id`: big-endian, so ids sort
/// numerically.
pub(crate) fn primary_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// The key of ⟨`value`, `id`⟩ in a field index: the value with each 0x00
/// written as 0x00 0xFF, then 0x00 0x01, then the id (8 bytes, big-endian).
/// Byte order of these keys is the order of (value, id): the terminator
/// sorts below any continuation of the value.
pub(crate) fn field_key(value: &[u8], id: u64) -> Vec<u8> {
    let mut k = escaped(value);
    k.extend_from_slice(&[0x00, 0x01]);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `value` with each 0x00 written as 0x00 0xFF: a field key of a value `v`
/// sorts at or above `escaped(lo)` exactly when `v >= lo`.
pub(crate) fn escaped(value: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(value.len() + 10);
    for &b in value {
        k.push(b);
        if b == 0 {
            k.push(0xFF);
        }
    }
    k
}

/// Inverse of [`field_key`].
pub(crate) fn parse_field_key(key: &[u8]) -> Option<(Vec<u8>, u64)> {
    let mut value = Vec::new();
    let mut i = 0;
    loop {
        match *key.get(i)? {
            0 => match *key.get(i + 1)? {
                0xFF => value.push(0),
                0x01 => break,
                _ => return None,
            },
            b => {
                value.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let id: [u8; 8] = key.get(i + 2..)?.try_into().ok()?;
    Some((value, u64::from_be_bytes(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{any, Just};

    proptest::proptest! {
        /// Field keys sort as (value, id) and decode back.
        #[test]
        fn field_keys_sort_as_value_then_id(
            a in proptest::collection::vec(proptest::prop_oneof![Just(0u8), Just(1), Just(0xFF), any::<u8>()], 0..6),
            b in proptest::collection::vec(proptest::prop_oneof![Just(0u8), Just(1), Just(0xFF), any::<u8>()], 0..6),
            ia in any::<u64>(),
            ib in any::<u64>(),
        ) {
            let (ka, kb) = (field_key(&a, ia), field_key(&b, ib));
            proptest::prop_assert_eq!(ka.cmp(&kb), (&a, ia).cmp(&(&b, ib)));
            proptest::prop_assert_eq!(parse_field_key(&ka), Some((a.clone(), ia)));
            // The scan bounds of field_range: escaped(lo) <= key < escaped(hi)
            // exactly when lo <= value < hi.
            proptest::prop_assert_eq!(ka >= escaped(&b), a >= b);
            proptest::prop_assert_eq!(ka < escaped(&b), a < b);
        }
    }
}
