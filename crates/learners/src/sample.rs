//! How a sample is laid out in a fixed-width record (the bytes the shuffle moves).
//!
//! - A regression or classification sample with `d` features: `d + 1` little-endian `f64`s,
//!   the features then the label (`8 (d + 1)` bytes).
//! - A rating of a matrix-completion problem: `row u32, col u32, value f64`, little-endian
//!   (16 bytes).
//! - A user row of a matrix-completion problem (the UberShuffle paper's data point: one user's
//!   row of `m` observed entries): `row u32, count u32`, then `m` slots of `col u32, value f64`,
//!   little-endian; the first `count` slots are the entries, the rest are zero
//!   (`8 + 12 m` bytes).

use crate::LearnerError;

/// The record width of a sample with `features` features.
pub fn sample_width(features: usize) -> usize {
    8 * (features + 1)
}

/// Writes features and label as one record.
pub fn encode_sample(features: &[f64], label: f64) -> Vec<u8> {
    features.iter().chain(std::iter::once(&label)).flat_map(|v| v.to_le_bytes()).collect()
}

/// A view of a sample record: feature `i`, label.
#[derive(Clone, Copy, Debug)]
pub struct SampleView<'a> {
    bytes: &'a [u8],
}

impl<'a> SampleView<'a> {
    /// Wraps `record`, which must be [`sample_width`]`(features)` bytes.
    pub fn new(record: &'a [u8], features: usize) -> Result<Self, LearnerError> {
        if record.len() != sample_width(features) {
            return Err(LearnerError::WrongRecordWidth { len: record.len(), width: sample_width(features) });
        }
        Ok(SampleView { bytes: record })
    }

    fn value(&self, i: usize) -> f64 {
        let b = &self.bytes[8 * i..8 * i + 8];
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// The features.
    pub fn features(&self) -> impl Iterator<Item = f64> + '_ {
        (0..self.bytes.len() / 8 - 1).map(|i| self.value(i))
    }

    /// The label (last value).
    pub fn label(&self) -> f64 {
        self.value(self.bytes.len() / 8 - 1)
    }

    /// `w . x + b` for parameters `[w..., b]` (one more than the features).
    pub fn linear(&self, params: &[f64]) -> f64 {
        let d = params.len() - 1;
        (0..d).map(|i| params[i] * self.value(i)).sum::<f64>() + params[d]
    }
}

/// The record width of a rating.
pub const RATING_WIDTH: usize = 16;

/// One observed entry of a matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rating {
    /// Row (user) index.
    pub row: u32,
    /// Column (item) index.
    pub col: u32,
    /// The observed value.
    pub value: f64,
}

impl Rating {
    /// The record form.
    pub fn to_record(&self) -> [u8; RATING_WIDTH] {
        let mut out = [0u8; RATING_WIDTH];
        out[..4].copy_from_slice(&self.row.to_le_bytes());
        out[4..8].copy_from_slice(&self.col.to_le_bytes());
        out[8..].copy_from_slice(&self.value.to_le_bytes());
        out
    }

    /// Parses a record.
    pub fn from_record(record: &[u8]) -> Result<Self, LearnerError> {
        let bytes: &[u8; RATING_WIDTH] = record
            .try_into()
            .map_err(|_| LearnerError::WrongRecordWidth { len: record.len(), width: RATING_WIDTH })?;
        let [r0, r1, r2, r3, c0, c1, c2, c3, v @ ..] = *bytes;
        Ok(Rating {
            row: u32::from_le_bytes([r0, r1, r2, r3]),
            col: u32::from_le_bytes([c0, c1, c2, c3]),
            value: f64::from_le_bytes(v),
        })
    }
}

/// The record width of a user row with `slots` entry slots.
pub fn rating_row_width(slots: usize) -> usize {
    8 + 12 * slots
}

/// Writes matrix row `row` with its observed `(col, value)` entries as one record of `slots`
/// slots (unused slots are zero).
pub fn encode_rating_row(row: u32, entries: &[(u32, f64)], slots: usize) -> Result<Vec<u8>, LearnerError> {
    if entries.len() > slots {
        return Err(LearnerError::InvalidParameter(format!(
            "row {row} has {} entries, a record holds {slots}",
            entries.len()
        )));
    }
    let mut out = Vec::with_capacity(rating_row_width(slots));
    out.extend_from_slice(&row.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for &(col, value) in entries {
        out.extend_from_slice(&col.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.resize(rating_row_width(slots), 0);
    Ok(out)
}

/// A view of a user-row record: its row and its observed entries.
#[derive(Clone, Copy, Debug)]
pub struct RatingRowView<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> RatingRowView<'a> {
    /// Wraps `record`, which must be [`rating_row_width`]`(slots)` bytes with at most `slots`
    /// entries.
    pub fn new(record: &'a [u8], slots: usize) -> Result<Self, LearnerError> {
        let width = rating_row_width(slots);
        if record.len() != width {
            return Err(LearnerError::WrongRecordWidth { len: record.len(), width });
        }
        let count = u32::from_le_bytes([record[4], record[5], record[6], record[7]]) as usize;
        if count > slots {
            return Err(LearnerError::Malformed {
                what: "record",
                reason: format!("a user row claims {count} entries, it has {slots} slots"),
            });
        }
        Ok(RatingRowView { bytes: record, count })
    }

    /// The matrix row (user).
    pub fn row(&self) -> u32 {
        u32::from_le_bytes([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]])
    }

    /// Number of observed entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the row has no entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The observed entries as ratings.
    pub fn ratings(&self) -> impl Iterator<Item = Rating> + '_ {
        let row = self.row();
        self.bytes[8..8 + 12 * self.count].chunks_exact(12).map(move |e| {
            let col = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let value = f64::from_le_bytes([e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11]]);
            Rating { row, col, value }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let rec = encode_sample(&[1.0, -2.0], 0.5);
        let v = SampleView::new(&rec, 2).unwrap();
        assert_eq!(v.features().collect::<Vec<_>>(), vec![1.0, -2.0]);
        assert_eq!(v.label(), 0.5);
        assert_eq!(v.linear(&[2.0, 1.0, 3.0]), 3.0);
        assert!(SampleView::new(&rec, 3).is_err());
        let r = Rating { row: 3, col: 70_000, value: 4.5 };
        assert_eq!(Rating::from_record(&r.to_record()).unwrap(), r);
        assert!(Rating::from_record(&[0; 15]).is_err());
    }

    #[test]
    fn user_rows_round_trip() {
        let rec = encode_rating_row(7, &[(3, 1.5), (9, -2.0)], 4).unwrap();
        assert_eq!(rec.len(), rating_row_width(4));
        let v = RatingRowView::new(&rec, 4).unwrap();
        assert_eq!((v.row(), v.len()), (7, 2));
        let ratings: Vec<Rating> = v.ratings().collect();
        assert_eq!(
            ratings,
            vec![Rating { row: 7, col: 3, value: 1.5 }, Rating { row: 7, col: 9, value: -2.0 }]
        );
        assert!(encode_rating_row(7, &[(1, 1.0); 5], 4).is_err());
        assert!(RatingRowView::new(&rec, 3).is_err());
        let mut lying = rec.clone();
        lying[4] = 5;
        assert!(RatingRowView::new(&lying, 4).is_err());
    }
}
