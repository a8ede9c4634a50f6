//! Executing a design for real: encode A's rows, place them, map at the non-stragglers
//! (computing every IV of their stored rows), build the shuffle's messages, let each sender
//! sum its IVs over GF(p), let each receiver cancel what it knows, MDS-decode each reduced
//! column, and compare with A X computed directly.

use std::collections::HashMap;

use ubershuffle_core::rng::seeded_stream;

use super::delivery::{Message, ReduceAssignment, plan_delivery};
use super::design::SchemeDesign;
use super::field::Fp;
use super::matrix::FpMatrix;
use super::mds::RowCode;
use super::placement::Placement;
use super::{MsrError, Ratio};

/// The inner dimension of A and X used when a caller does not choose one.
pub const DEFAULT_INNER: usize = 4;

/// The task: A (M x D), X (D x N) and the reference product Y = A X computed directly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixTask {
    /// A, M x D.
    pub a: FpMatrix,
    /// X, D x N.
    pub x: FpMatrix,
    /// Y = A X, M x N.
    pub y: FpMatrix,
}

impl MatrixTask {
    /// Random A and X over GF(p) from streams 0 and 1 of `seed`, and their product.
    pub fn random(rows: usize, inner: usize, columns: usize, seed: u64) -> MatrixTask {
        let a = FpMatrix::random(rows, inner, &mut seeded_stream(seed, 0));
        let x = FpMatrix::random(inner, columns, &mut seeded_stream(seed, 1));
        let y = a.times(&x);
        MatrixTask { a, x, y }
    }

    /// M.
    pub fn rows(&self) -> usize {
        self.a.rows()
    }

    /// N.
    pub fn columns(&self) -> usize {
        self.x.cols()
    }
}

/// The IVs one non-straggler computed in the map phase: its stored coded rows times every
/// column of X.
#[derive(Clone, Debug)]
struct LocalIvs {
    /// For each coded row, its position among the stored rows (`u32::MAX`: not stored).
    position: Vec<u32>,
    /// Stored rows, ascending.
    rows: Vec<usize>,
    /// `values[p * N + n]`: stored row `rows[p]` times column n.
    values: Vec<Fp>,
    columns: usize,
}

impl LocalIvs {
    fn get(&self, row: usize, column: usize) -> Option<Fp> {
        let p = *self.position.get(row)?;
        (p != u32::MAX).then(|| self.values[p as usize * self.columns + column])
    }
}

/// A design prepared for one task and one set of non-stragglers: coded, placed, mapped and
/// with its messages planned. [`Execution::encode`] and [`Execution::reduce`] run the shuffle
/// and the reduce phase.
#[derive(Clone, Debug)]
pub struct Execution<'a> {
    design: &'a SchemeDesign,
    task: &'a MatrixTask,
    code: RowCode,
    assignment: ReduceAssignment,
    local: Vec<Option<LocalIvs>>,
    messages: Vec<Message>,
}

/// What an execution produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionReport {
    /// IV-sized messages multicast, counted from the messages.
    pub messages: u64,
    /// Messages per phase of the design.
    pub messages_per_phase: Vec<u64>,
    /// IVs each server decoded from messages, per phase (`[server][phase]`; zero for stragglers).
    pub received_per_phase: Vec<Vec<u64>>,
    /// The executed load, messages / (M N).
    pub load: Ratio,
    /// Whether every non-straggler's reduced columns equal those of A X.
    pub product_matches: bool,
}

impl<'a> Execution<'a> {
    /// Encodes, places and maps `task` by `design`, with `non_stragglers` (any order, distinct)
    /// the servers that finished the map phase; plans the shuffle.
    pub fn prepare(
        design: &'a SchemeDesign,
        task: &'a MatrixTask,
        non_stragglers: &[usize],
    ) -> Result<Execution<'a>, MsrError> {
        let setting = &design.setting;
        let (rows, columns) = (task.rows(), task.columns());
        let mut sorted = non_stragglers.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != setting.wait() || sorted.iter().any(|&s| s >= setting.servers()) {
            return Err(MsrError::InvalidParameter(format!(
                "non-stragglers {non_stragglers:?} must be {} distinct servers below {}",
                setting.wait(),
                setting.servers()
            )));
        }
        let layout = design.layout(rows)?;
        let columns_per_server = design.columns_per_server(rows, columns)?;
        let code = RowCode::new(rows, layout.coded_rows)?;
        let coded = code.encode(&task.a);
        let placement = Placement::new(setting.servers(), design.repetition, layout.coded_rows)?;
        let mut local = vec![None; setting.servers()];
        for &k in &sorted {
            let stored = placement.stored_rows(k);
            let mut position = vec![u32::MAX; layout.coded_rows];
            let mut values = Vec::with_capacity(stored.len() * columns);
            for (p, &row) in stored.iter().enumerate() {
                position[row] = p as u32;
                values.extend((0..columns).map(|n| coded.row_times_column(row, &task.x, n)));
            }
            local[k] = Some(LocalIvs { position, rows: stored, values, columns });
        }
        let assignment = ReduceAssignment { non_stragglers: sorted, columns_per_server };
        let messages = plan_delivery(design, &placement, &assignment, rows)?;
        Ok(Execution { design, task, code, assignment, local, messages })
    }

    /// The planned messages.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Each message's value, computed by its sender from its own IVs (the sum of its parts).
    pub fn encode(&self) -> Result<Vec<Fp>, MsrError> {
        self.messages
            .iter()
            .map(|msg| {
                let Some(ivs) = &self.local[msg.sender] else {
                    return Err(MsrError::MissingIv { server: msg.sender, row: usize::MAX });
                };
                msg.parts.iter().try_fold(Fp::ZERO, |acc, part| {
                    ivs.get(part.row, part.column)
                        .map(|v| acc + v)
                        .ok_or(MsrError::MissingIv { server: msg.sender, row: part.row })
                })
            })
            .collect()
    }

    /// Delivers `values` (one per message) to every non-straggler, which cancels its side
    /// information, MDS-decodes each of its columns from its own and received IVs, and
    /// compares the column with A X.
    pub fn reduce(&self, values: &[Fp]) -> Result<ExecutionReport, MsrError> {
        let (rows, columns) = (self.task.rows(), self.task.columns());
        let servers = self.design.setting.servers();
        let phases = self.design.phases.len();
        if values.len() != self.messages.len() {
            return Err(MsrError::Internal(format!(
                "{} values for {} messages",
                values.len(),
                self.messages.len()
            )));
        }
        let c = self.assignment.columns_per_server;
        let mut received: Vec<Vec<Vec<(usize, Fp)>>> = vec![vec![Vec::new(); c]; servers];
        let mut received_per_phase = vec![vec![0u64; phases]; servers];
        let mut messages_per_phase = vec![0u64; phases];
        for (msg, &value) in self.messages.iter().zip(values) {
            messages_per_phase[msg.phase] += 1;
            for (i, part) in msg.parts.iter().enumerate() {
                let k = part.receiver;
                let ivs = self.local[k].as_ref().ok_or(MsrError::MissingIv { server: k, row: part.row })?;
                let mut v = value;
                for (o, other) in msg.parts.iter().enumerate() {
                    if o != i {
                        v -= ivs
                            .get(other.row, other.column)
                            .ok_or(MsrError::MissingIv { server: k, row: other.row })?;
                    }
                }
                let first = self.assignment.columns(k).start;
                let local_column = part.column.checked_sub(first).filter(|&n| n < c).ok_or_else(|| {
                    MsrError::Internal(format!(
                        "server {k} was sent column {} it does not reduce",
                        part.column
                    ))
                })?;
                received[k][local_column].push((part.row, v));
                received_per_phase[k][msg.phase] += 1;
            }
        }
        let mut product_matches = true;
        for &k in &self.assignment.non_stragglers {
            let ivs = self.local[k].as_ref().ok_or(MsrError::MissingIv { server: k, row: usize::MAX })?;
            // Columns whose decoding sets coincide share one decoder and one interpolation pass.
            let mut by_rows: HashMap<Vec<usize>, Vec<(usize, Vec<Fp>)>> = HashMap::new();
            for (n, column) in self.assignment.columns(k).enumerate() {
                let mut known: Vec<(usize, Fp)> = ivs
                    .rows
                    .iter()
                    .map(|&row| (row, ivs.values[ivs.position[row] as usize * columns + column]))
                    .collect();
                known.extend(received[k][n].iter().copied());
                known.sort_unstable_by_key(|&(row, _)| row);
                if known.windows(2).any(|w| w[0].0 == w[1].0) {
                    return Err(MsrError::Internal(format!(
                        "server {k} received a row it already had (column {column})"
                    )));
                }
                if known.len() < rows {
                    return Err(MsrError::NotEnoughRows { server: k, column, have: known.len(), need: rows });
                }
                known.truncate(rows);
                let (row_set, values): (Vec<usize>, Vec<Fp>) = known.into_iter().unzip();
                by_rows.entry(row_set).or_default().push((column, values));
            }
            for (row_set, group) in by_rows {
                let decoder = self.code.decoder(&row_set)?;
                let (cols, values): (Vec<usize>, Vec<Vec<Fp>>) = group.into_iter().unzip();
                for (column, y) in cols.into_iter().zip(decoder.decode_many(&values)) {
                    product_matches &= y == self.task.y.column(column);
                }
            }
        }
        let messages = self.messages.len() as u64;
        let load = Ratio::new(messages as i128, rows as i128 * columns as i128)?;
        Ok(ExecutionReport { messages, messages_per_phase, received_per_phase, load, product_matches })
    }
}

/// Prepares, encodes and reduces in one go.
pub fn execute(
    design: &SchemeDesign,
    task: &MatrixTask,
    non_stragglers: &[usize],
) -> Result<ExecutionReport, MsrError> {
    let execution = Execution::prepare(design, task, non_stragglers)?;
    let values = execution.encode()?;
    execution.reduce(&values)
}
