//! A record and its encoding as the primary index's value.

use lamina::log::{get_bytes, put_bytes};
use lamina::spatial::Point;

/// A record: an id, a point, indexed fields and an opaque payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Primary key.
    pub id: u64,
    /// The location the spatial index holds.
    pub point: Point,
    /// One value per field index of the dataset, in
    /// [`DatasetOptions::fields`](crate::DatasetOptions::fields)' order.
    pub fields: Vec<Vec<u8>>,
    /// The rest of the record.
    pub payload: Vec<u8>,
}

/// The primary index's value: x and y (f64 little-endian), each field
/// (varint length, bytes; as many as the dataset has field indexes, so a
/// dataset without them stores exactly x, y, payload), then the payload.
pub(crate) fn encode_record(record: &Record) -> Vec<u8> {
    let fields: usize = record.fields.iter().map(|f| f.len() + 5).sum();
    let mut v = Vec::with_capacity(16 + fields + record.payload.len());
    v.extend_from_slice(&record.point.x.to_le_bytes());
    v.extend_from_slice(&record.point.y.to_le_bytes());
    for f in &record.fields {
        put_bytes(&mut v, f);
    }
    v.extend_from_slice(&record.payload);
    v
}

/// Inverse of [`encode_record`] for a dataset with `fields` field indexes;
/// `None` for a malformed value.
pub(crate) fn decode_record(id: u64, value: &[u8], fields: usize) -> Option<Record> {
    let x = f64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    let y = f64::from_le_bytes(value.get(8..16)?.try_into().ok()?);
    let mut rest = value.get(16..)?;
    let fields = (0..fields)
        .map(|_| get_bytes(&mut rest).map(<[u8]>::to_vec))
        .collect::<Option<Vec<_>>>()?;
    Some(Record {
        id,
        point: Point::new(x, y),
        fields,
        payload: rest.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_roundtrip_and_keep_the_fieldless_layout() {
        let r = Record {
            id: 9,
            point: Point::new(1.5, -2.0),
            fields: Vec::new(),
            payload: b"pay".to_vec(),
        };
        let v = encode_record(&r);
        assert_eq!(
            v,
            [&1.5f64.to_le_bytes()[..], &(-2.0f64).to_le_bytes(), b"pay"].concat()
        );
        assert_eq!(decode_record(9, &v, 0), Some(r.clone()));
        let r = Record {
            fields: vec![b"a\0b".to_vec(), Vec::new()],
            ..r
        };
        let v = encode_record(&r);
        assert_eq!(decode_record(9, &v, 2), Some(r));
        assert_eq!(decode_record(9, &v[..17], 2), None);
    }
}
