//! The shuffle as a list of [`Message`]s: which intermediate values (IVs) each multicast message
//! sums, who sends it and who learns what from it. Built from a design's phases, the placement
//! and the actual set of non-stragglers; values are filled in by the senders at execution.
//!
//! A phase of redundancy j works in every group G of j + 1 non-stragglers: each receiver k of G
//! needs the IVs (for its own columns) of the rows stored at exactly the servers G \ {k} among
//! the non-stragglers; those are split into j equal chunks, one per other member, and each
//! member t sends messages that sum one IV from its chunk for every other member. A receiver
//! cancels the other j - 1 IVs of a message, which it computed itself (their rows are stored
//! at G minus another receiver, which contains it).

use std::collections::HashMap;
use std::ops::Range;

use super::MsrError;
use super::combinatorics::{members, subsets_of};
use super::design::{Phase, SchemeDesign};
use super::placement::Placement;

/// One IV inside a message, meant for one receiver: row `row` of the coded matrix times
/// column `column` of X.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Part {
    /// The server meant to learn this IV.
    pub receiver: usize,
    /// The coded row.
    pub row: usize,
    /// The column of X (and of Y).
    pub column: usize,
}

/// One IV-sized message: the sum of its parts' IVs, multicast by `sender` to every non-straggler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Index of the phase (in the design's `phases`) that sent it.
    pub phase: usize,
    /// The sending server.
    pub sender: usize,
    /// The IVs summed, one per receiver.
    pub parts: Vec<Part>,
}

/// Who reduces which columns: the non-straggler at position p (ascending) reduces columns
/// `p c .. (p + 1) c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceAssignment {
    /// The non-stragglers, ascending.
    pub non_stragglers: Vec<usize>,
    /// c = N / q.
    pub columns_per_server: usize,
}

impl ReduceAssignment {
    /// The columns `server` reduces (empty for a straggler).
    pub fn columns(&self, server: usize) -> Range<usize> {
        match self.non_stragglers.iter().position(|&s| s == server) {
            Some(p) => p * self.columns_per_server..(p + 1) * self.columns_per_server,
            None => 0..0,
        }
    }

    /// The non-stragglers as a mask.
    pub fn mask(&self) -> u64 {
        self.non_stragglers.iter().fold(0, |m, &s| m | 1u64 << s)
    }
}

/// The rows receiver `k` of group `group` needs in a phase: those stored, among the
/// non-stragglers `q_mask`, exactly at `group \ {k}` (plus any r - j stragglers).
fn group_rows(placement: &Placement, q_mask: u64, group: u64, k: usize) -> Vec<usize> {
    let others = group & !(1u64 << k);
    let j = others.count_ones() as usize;
    let all = if placement.servers() >= 64 { u64::MAX } else { (1u64 << placement.servers()) - 1 };
    let stragglers = all & !q_mask;
    let Some(extra) = placement.repetition().checked_sub(j) else { return Vec::new() };
    subsets_of(stragglers, extra).flat_map(|t| placement.batch_rows(others | t)).collect()
}

/// Emits the messages of one group from each member's list of `(row, column)` pairs to receive.
fn emit_group(
    group: u64,
    lists: &[Vec<(usize, usize)>],
    phase: usize,
    out: &mut Vec<Message>,
) -> Result<(), MsrError> {
    let who = members(group);
    let j = who.len() - 1;
    let len = lists.first().map_or(0, Vec::len);
    if lists.iter().any(|l| l.len() != len) || !len.is_multiple_of(j) {
        return Err(MsrError::Internal(format!(
            "group {who:?} cannot split its IVs into {j} equal chunks (lengths {:?})",
            lists.iter().map(Vec::len).collect::<Vec<_>>()
        )));
    }
    let chunk = len / j;
    for (ti, &sender) in who.iter().enumerate() {
        for i in 0..chunk {
            let parts = who
                .iter()
                .enumerate()
                .filter(|&(ki, _)| ki != ti)
                .map(|(ki, &receiver)| {
                    let slot = if ti < ki { ti } else { ti - 1 };
                    let (row, column) = lists[ki][slot * chunk + i];
                    Part { receiver, row, column }
                })
                .collect();
            out.push(Message { phase, sender, parts });
        }
    }
    Ok(())
}

/// Builds every message of `design`'s shuffle for this placement and reduce assignment.
pub fn plan_delivery(
    design: &SchemeDesign,
    placement: &Placement,
    assignment: &ReduceAssignment,
    rows: usize,
) -> Result<Vec<Message>, MsrError> {
    let q_mask = assignment.mask();
    let mut out = Vec::new();
    for (phase, spec) in design.phases.iter().enumerate() {
        match *spec {
            Phase::Full { redundancy: j } => {
                for group in subsets_of(q_mask, j + 1) {
                    let lists: Vec<Vec<(usize, usize)>> = members(group)
                        .into_iter()
                        .map(|k| {
                            let cols = assignment.columns(k);
                            group_rows(placement, q_mask, group, k)
                                .into_iter()
                                .flat_map(|row| cols.clone().map(move |col| (row, col)))
                                .collect()
                        })
                        .collect();
                    emit_group(group, &lists, phase, &mut out)?;
                }
            }
            Phase::Partial { redundancy: j, share } => {
                let need = design.share_rows(share, rows)?;
                let mut lists: HashMap<(u64, usize), Vec<(usize, usize)>> = HashMap::new();
                for &k in &assignment.non_stragglers {
                    let groups: Vec<u64> =
                        subsets_of(q_mask & !(1u64 << k), j).map(|h| h | 1u64 << k).collect();
                    let group_rows: Vec<Vec<usize>> =
                        groups.iter().map(|&g| group_rows(placement, q_mask, g, k)).collect();
                    let (g, per_group) = (groups.len(), group_rows.first().map_or(0, Vec::len));
                    if need > g * per_group {
                        return Err(MsrError::Internal(format!(
                            "partial phase j={j}: server {k} needs {need} rows per column, only {} exist",
                            g * per_group
                        )));
                    }
                    // Slot s goes to group s mod g, row (s / g) mod R: consecutive slots of one
                    // column are distinct, and over all columns every group gets the same count.
                    for (n, col) in assignment.columns(k).enumerate() {
                        for s in n * need..(n + 1) * need {
                            let (gi, ri) = (s % g, (s / g) % per_group);
                            lists.entry((groups[gi], k)).or_default().push((group_rows[gi][ri], col));
                        }
                    }
                }
                for group in subsets_of(q_mask, j + 1) {
                    let group_lists: Vec<Vec<(usize, usize)>> = members(group)
                        .into_iter()
                        .map(|k| lists.remove(&(group, k)).unwrap_or_default())
                        .collect();
                    emit_group(group, &group_lists, phase, &mut out)?;
                }
            }
            Phase::Unicast { share, from_redundancy } => {
                let need = design.share_rows(share, rows)?;
                for &k in &assignment.non_stragglers {
                    let mut candidates: Vec<(usize, usize)> = Vec::new(); // (redundancy, batch)
                    for (t, &servers) in placement.batches().iter().enumerate() {
                        let j = (servers & q_mask).count_ones() as usize;
                        if servers & (1u64 << k) == 0 && (1..=from_redundancy).contains(&j) {
                            candidates.push((j, t));
                        }
                    }
                    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                    let b = placement.rows_per_batch();
                    let wanted: Vec<usize> =
                        candidates.iter().flat_map(|&(_, t)| t * b..(t + 1) * b).take(need).collect();
                    if wanted.len() < need {
                        return Err(MsrError::Internal(format!(
                            "unicast: server {k} needs {need} rows per column, only {} exist",
                            wanted.len()
                        )));
                    }
                    for col in assignment.columns(k) {
                        for &row in &wanted {
                            let sender = (placement.holders(row) & q_mask).trailing_zeros() as usize;
                            out.push(Message {
                                phase,
                                sender,
                                parts: vec![Part { receiver: k, row, column: col }],
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}
