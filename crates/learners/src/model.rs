//! [`Model`] and [`Update`]: what travels between master and workers, with their byte forms.

use ndarray::Array1;

use crate::LearnerError;

/// A model's state: a flat vector of `f64` parameters (the learner says what they mean).
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The parameters.
    pub params: Vec<f64>,
}

impl Model {
    /// A model with these parameters.
    pub fn new(params: Vec<f64>) -> Self {
        Model { params }
    }

    /// The parameters as little-endian `f64`s, back to back.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.params.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Parses [`Model::to_bytes`]; `expected` is the number of parameters the learner needs.
    pub fn from_bytes(bytes: &[u8], expected: usize) -> Result<Self, LearnerError> {
        if bytes.len() != expected * 8 {
            return Err(LearnerError::Malformed {
                what: "model",
                reason: format!(
                    "{} bytes, expected {} parameters ({} bytes)",
                    bytes.len(),
                    expected,
                    expected * 8
                ),
            });
        }
        Ok(Model { params: f64s(bytes) })
    }
}

impl From<Array1<f64>> for Model {
    fn from(params: Array1<f64>) -> Self {
        Model { params: params.to_vec() }
    }
}

impl From<Model> for Array1<f64> {
    fn from(model: Model) -> Self {
        Array1::from(model.params)
    }
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}

/// What a worker sends back after its local work.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// How many data points the worker trained on (the weight of its update).
    pub points: u64,
    /// The content.
    pub body: UpdateBody,
}

/// The content of an [`Update`].
#[derive(Clone, Debug, PartialEq)]
pub enum UpdateBody {
    /// A full parameter vector (e.g. the worker's locally trained model).
    Dense(Vec<f64>),
    /// Changes to some rows of a parameter matrix: `(row id, delta)` with `width` values each
    /// (e.g. the factor rows a matrix-completion worker touched).
    Rows {
        /// Values per row.
        width: usize,
        /// The rows touched, each with its change.
        rows: Vec<(u32, Vec<f64>)>,
    },
}

const DENSE: u8 = 1;
const ROWS: u8 = 2;

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], LearnerError> {
        if self.bytes.len() < n {
            return Err(LearnerError::Malformed {
                what: "update",
                reason: format!("truncated: wanted {n} more bytes, {} left", self.bytes.len()),
            });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, LearnerError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8])))
    }

    fn u32(&mut self) -> Result<u32, LearnerError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or([0; 4])))
    }

    /// `count` f64s, checking the length before allocating.
    fn f64s(&mut self, count: u64) -> Result<Vec<f64>, LearnerError> {
        let bytes =
            count.checked_mul(8).and_then(|b| usize::try_from(b).ok()).ok_or(LearnerError::Malformed {
                what: "update",
                reason: format!("{count} values do not fit in memory"),
            })?;
        Ok(f64s(self.take(bytes)?))
    }
}

impl Update {
    /// The byte form: `tag u8, points u64`, then for dense `len u64, len f64`, for rows
    /// `width u32, count u32, count x (id u32, width f64)`; all little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match &self.body {
            UpdateBody::Dense(values) => {
                out.push(DENSE);
                out.extend(self.points.to_le_bytes());
                out.extend((values.len() as u64).to_le_bytes());
                out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
            }
            UpdateBody::Rows { width, rows } => {
                out.push(ROWS);
                out.extend(self.points.to_le_bytes());
                out.extend((*width as u32).to_le_bytes());
                out.extend((rows.len() as u32).to_le_bytes());
                for (id, values) in rows {
                    out.extend(id.to_le_bytes());
                    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
                }
            }
        }
        out
    }

    /// Parses [`Update::to_bytes`]; every length is checked against the bytes present before
    /// anything is allocated, so a corrupt or hostile update is an error, never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LearnerError> {
        let mut r = Reader { bytes };
        let tag = r.take(1)?[0];
        let points = r.u64()?;
        let body = match tag {
            DENSE => {
                let len = r.u64()?;
                UpdateBody::Dense(r.f64s(len)?)
            }
            ROWS => {
                let width = r.u32()? as usize;
                let count = r.u32()? as usize;
                let per_row = 4 + width * 8;
                if r.bytes.len() != count.saturating_mul(per_row) {
                    return Err(LearnerError::Malformed {
                        what: "update",
                        reason: format!(
                            "{count} rows of width {width} need {} bytes, got {}",
                            count * per_row,
                            r.bytes.len()
                        ),
                    });
                }
                let mut rows = Vec::with_capacity(count);
                for _ in 0..count {
                    let id = r.u32()?;
                    rows.push((id, r.f64s(width as u64)?));
                }
                UpdateBody::Rows { width, rows }
            }
            other => {
                return Err(LearnerError::Malformed {
                    what: "update",
                    reason: format!("unknown tag {other}"),
                });
            }
        };
        if !r.bytes.is_empty() {
            return Err(LearnerError::Malformed {
                what: "update",
                reason: format!("{} trailing bytes", r.bytes.len()),
            });
        }
        Ok(Update { points, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_and_updates_round_trip_through_bytes() {
        let m = Model::new(vec![1.5, -2.0, 0.25]);
        assert_eq!(Model::from_bytes(&m.to_bytes(), 3).unwrap(), m);
        assert!(Model::from_bytes(&m.to_bytes(), 4).is_err());
        for u in [
            Update { points: 7, body: UpdateBody::Dense(vec![0.5, 1.0]) },
            Update {
                points: 3,
                body: UpdateBody::Rows { width: 2, rows: vec![(4, vec![1.0, 2.0]), (9, vec![3.0, -1.0])] },
            },
        ] {
            assert_eq!(Update::from_bytes(&u.to_bytes()).unwrap(), u);
        }
    }

    #[test]
    fn corrupt_updates_are_errors() {
        let u = Update { points: 3, body: UpdateBody::Rows { width: 2, rows: vec![(4, vec![1.0, 2.0])] } };
        let bytes = u.to_bytes();
        for cut in 0..bytes.len() {
            assert!(Update::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = vec![DENSE];
        huge.extend(1u64.to_le_bytes());
        huge.extend(u64::MAX.to_le_bytes());
        assert!(Update::from_bytes(&huge).is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(Update::from_bytes(&extra).is_err());
        assert!(Update::from_bytes(&[9, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
