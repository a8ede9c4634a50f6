//! [`SchemeDesign`]: one scheme's choice of outer MDS rate and inner repetition, its shuffle
//! phases and its closed-form load, plus the integrality rules that fix the smallest matrix
//! sizes (rows M of A, columns N of X) at which the design runs with whole intermediate values.

use std::fmt;

use super::combinatorics::{binomial, gcd, lcm};
use super::{MsrError, MsrSetting, Ratio};

/// Which scheme a design belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scheme {
    /// Li, Maddah-Ali and Avestimehr's unified scheme (MDS rate q/K, repetition floor(mu q)).
    Unified,
    /// Zhang and Simeone's improved scheme (our reconstruction: any feasible rate pair).
    Improved,
}

impl Scheme {
    /// The scheme's name in output (`unified`, `improved`).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Unified => "unified",
            Scheme::Improved => "improved",
        }
    }
}

/// One phase of the shuffle. "Redundancy j" IVs are those a receiver needs that exactly j of
/// the other non-stragglers computed; they are delivered in groups of j + 1 non-stragglers,
/// each message a sum of j IVs, one for each of j receivers (multicast gain j).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Deliver every needed IV of redundancy `redundancy`, with gain `redundancy`.
    Full {
        /// j.
        redundancy: usize,
    },
    /// Deliver only `share * M` rows' IVs per column and receiver of redundancy `redundancy`,
    /// spread evenly over the receiver's groups, with gain `redundancy`.
    Partial {
        /// j.
        redundancy: usize,
        /// Rows per column and receiver, as a fraction of M.
        share: Ratio,
    },
    /// Unicast `share * M` rows' IVs per column and receiver, taken from the highest redundancy
    /// at most `from_redundancy` down (one sender each).
    Unicast {
        /// Rows per column and receiver, as a fraction of M.
        share: Ratio,
        /// The highest redundancy drawn from.
        from_redundancy: usize,
    },
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Full { redundancy } => write!(f, "multicast j={redundancy} (all)"),
            Phase::Partial { redundancy, share } => {
                write!(f, "multicast j={redundancy} ({share} of M per column)")
            }
            Phase::Unicast { share, from_redundancy } => {
                write!(f, "unicast ({share} of M per column, redundancy <= {from_redundancy})")
            }
        }
    }
}

/// A scheme's concatenated code and shuffle for one setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemeDesign {
    /// Which scheme.
    pub scheme: Scheme,
    /// The setting it is for.
    pub setting: MsrSetting,
    /// r, the repetition: every coded row is stored at every server of one r-subset.
    pub repetition: usize,
    /// rho = M / (coded rows), the outer MDS code's rate (1: no MDS code).
    pub mds_rate: Ratio,
    /// The fraction of M each server actually stores, r / (K rho) (at most mu).
    pub storage_used: Ratio,
    /// The shuffle phases, highest redundancy first.
    pub phases: Vec<Phase>,
    /// The closed-form load: IV-sized messages divided by M N.
    pub load: Ratio,
}

/// How a number of rows M is laid out by a design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// M, rows of A.
    pub rows: usize,
    /// M / rho, coded rows.
    pub coded_rows: usize,
    /// C(K, r), one batch per r-subset of servers.
    pub batches: usize,
    /// Coded rows per batch.
    pub rows_per_batch: usize,
}

/// `B_j`: the rows (as a fraction of M) a non-straggler needs, per column, that exactly `j`
/// other non-stragglers store: `C(q-1, j) C(K-q, r-j) / (rho C(K, r))` (Li et al.'s `B_j`
/// with rho = q/K; Zhang-Simeone Section III-C with a general rho).
pub fn supply(setting: &MsrSetting, repetition: usize, rate: Ratio, j: usize) -> Result<Ratio, MsrError> {
    let (k, q) = (setting.servers(), setting.wait());
    let batches = Ratio::integer(binomial(k, repetition) as i128);
    let count = binomial(q - 1, j)
        .checked_mul(binomial(k - q, repetition.saturating_sub(j)))
        .ok_or(MsrError::Overflow)?;
    if j > repetition || count == 0 {
        return Ok(Ratio::ZERO);
    }
    Ratio::integer(count as i128).over(rate.times(batches)?)
}

/// The greedy shuffle of Zhang-Simeone Section III-C for a rate pair: phases from the highest
/// redundancy down, each delivering all its IVs while they fit in what is still needed, the
/// last one only the rest (eq. (13)-(15)). `demand` is what a server needs per column as a
/// fraction of M. Returns the phases and the load, or `None` when the non-stragglers do not
/// hold enough distinct coded rows.
pub(crate) fn greedy_phases(
    setting: &MsrSetting,
    repetition: usize,
    rate: Ratio,
    demand: Ratio,
) -> Result<Option<(Vec<Phase>, Ratio)>, MsrError> {
    let mut left = demand;
    let mut phases = Vec::new();
    let mut load = Ratio::ZERO;
    let top = repetition.min(setting.wait() - 1);
    for j in (1..=top).rev() {
        if left == Ratio::ZERO {
            break;
        }
        let available = supply(setting, repetition, rate, j)?;
        if available == Ratio::ZERO {
            continue;
        }
        let gain = Ratio::integer(j as i128);
        if available <= left {
            phases.push(Phase::Full { redundancy: j });
            load = load.plus(available.over(gain)?)?;
            left = left.minus(available)?;
        } else {
            phases.push(Phase::Partial { redundancy: j, share: left });
            load = load.plus(left.over(gain)?)?;
            left = Ratio::ZERO;
        }
    }
    Ok((left == Ratio::ZERO).then_some((phases, load)))
}

fn to_usize(v: u128) -> Result<usize, MsrError> {
    usize::try_from(v).map_err(|_| MsrError::Overflow)
}

impl SchemeDesign {
    /// `B_j` for this design's rate pair.
    pub fn supply(&self, j: usize) -> Result<Ratio, MsrError> {
        supply(&self.setting, self.repetition, self.mds_rate, j)
    }

    /// Whether the design uses an outer MDS code (rate below 1); at rate 1 A's rows are
    /// stored uncoded.
    pub fn uses_mds(&self) -> bool {
        self.mds_rate < Ratio::ONE
    }

    /// The smallest M for which the coded rows M / rho split into C(K, r) equal batches: the
    /// numerator of `C(K, r) rho`.
    pub fn smallest_rows(&self) -> Result<u128, MsrError> {
        let batches = Ratio::integer(binomial(self.setting.servers(), self.repetition) as i128);
        Ok(batches.times(self.mds_rate)?.numer() as u128)
    }

    /// The layout of `rows` rows, or an error naming the multiple needed.
    pub fn layout(&self, rows: usize) -> Result<RowLayout, MsrError> {
        let coded = Ratio::integer(rows as i128).over(self.mds_rate)?;
        let batches = binomial(self.setting.servers(), self.repetition);
        let smallest = self.smallest_rows()?;
        if rows == 0 || !coded.is_integer() || !(coded.numer() as u128).is_multiple_of(batches) {
            return Err(MsrError::InfeasibleSize(format!(
                "rows M = {rows} does not suit the {} scheme: M / rate {} must split into C({}, {}) = {batches} equal batches, so M must be a multiple of {smallest}",
                self.scheme.name(),
                self.mds_rate,
                self.setting.servers(),
                self.repetition
            )));
        }
        let coded_rows = to_usize(coded.numer() as u128)?;
        let batches = to_usize(batches)?;
        Ok(RowLayout { rows, coded_rows, batches, rows_per_batch: coded_rows / batches })
    }

    /// Rows per column and receiver of a phase share (an error if not whole).
    pub fn share_rows(&self, share: Ratio, rows: usize) -> Result<usize, MsrError> {
        let v = share.times(Ratio::integer(rows as i128))?;
        if !v.is_integer() {
            return Err(MsrError::InfeasibleSize(format!(
                "rows M = {rows} gives a fractional number of rows ({v}) in a phase of the {} scheme",
                self.scheme.name()
            )));
        }
        to_usize(v.numer() as u128)
    }

    /// The number c of columns each non-straggler reduces must be a multiple of this, so that
    /// every phase splits its IVs evenly among senders (and, for a partial phase, among groups).
    pub fn column_step(&self, rows: usize) -> Result<u128, MsrError> {
        let layout = self.layout(rows)?;
        let (k, q, r) = (self.setting.servers(), self.setting.wait(), self.repetition);
        let mut step: u128 = 1;
        for phase in &self.phases {
            let need = match *phase {
                Phase::Full { redundancy: j } => {
                    let per_group = binomial(k - q, r - j) * layout.rows_per_batch as u128;
                    j as u128 / gcd(j as u128, per_group)
                }
                Phase::Partial { redundancy: j, share } => {
                    let d = self.share_rows(share, rows)? as u128;
                    let spread = binomial(q - 1, j) * j as u128;
                    spread / gcd(spread, d)
                }
                Phase::Unicast { share, .. } => {
                    self.share_rows(share, rows)?;
                    1
                }
            };
            step = lcm(step, need).ok_or(MsrError::Overflow)?;
        }
        Ok(step)
    }

    /// Checks `columns` for this design and `rows`; returns c = N / q.
    pub fn columns_per_server(&self, rows: usize, columns: usize) -> Result<usize, MsrError> {
        let q = self.setting.wait();
        let step = self.column_step(rows)?;
        if columns == 0 || !columns.is_multiple_of(q) || !((columns / q) as u128).is_multiple_of(step) {
            return Err(MsrError::InfeasibleSize(format!(
                "columns N = {columns} does not suit the {} scheme with M = {rows}: N must be a multiple of q * {step} = {}",
                self.scheme.name(),
                q as u128 * step
            )));
        }
        Ok(columns / q)
    }

    /// The closed-form number of IV-sized messages, `load * M * N` (an error if not whole).
    pub fn closed_form_messages(&self, rows: usize, columns: usize) -> Result<u128, MsrError> {
        let v = self.load.times(Ratio::integer(rows as i128))?.times(Ratio::integer(columns as i128))?;
        if !v.is_integer() {
            return Err(MsrError::InfeasibleSize(format!(
                "load {} times M N = {rows} x {columns} is not whole",
                self.load
            )));
        }
        Ok(v.numer() as u128)
    }

    /// A rough count of bytes an execution holds at its peak (the non-stragglers' IVs, the
    /// messages and what each receiver decoded), for callers that skip execution beyond a budget.
    pub fn execution_bytes(&self, rows: usize, columns: usize) -> f64 {
        let (m, n) = (rows as f64, columns as f64);
        let q = self.setting.wait() as f64;
        let coded = m / self.mds_rate.to_f64();
        let gain = self.repetition.min(self.setting.wait().saturating_sub(1)).max(1) as f64;
        // Allocation overheads and vector growth included, measured against peak resident size.
        let ivs = q * (self.storage_used.to_f64() * m * n * 4.0 + coded * 4.0) + m * n * 4.0;
        let messages = self.load.to_f64() * m * n * (64.0 + 32.0 * gain);
        let received = (1.0 - self.storage_used.to_f64()) * m * n * 32.0;
        ivs + messages + received
    }

    /// A rough count of field operations to execute the design at these sizes (encoding,
    /// map, decoding), for callers that skip execution beyond a budget.
    pub fn execution_work(&self, rows: usize, columns: usize, inner: usize) -> f64 {
        let m = rows as f64;
        let coded = m / self.mds_rate.to_f64();
        let q = self.setting.wait() as f64;
        let stored = self.storage_used.to_f64() * m;
        let encode = if self.uses_mds() { coded * m * inner as f64 } else { 0.0 };
        let map = q * stored * inner as f64 * columns as f64;
        let decode = if self.uses_mds() { 3.0 * m * m * columns as f64 } else { m * columns as f64 };
        encode + map + decode + self.load.to_f64() * m * columns as f64 * q
    }
}

/// The smallest M and N at which all `designs` (of one setting) run with whole IVs: M the
/// least common multiple of their smallest rows, then N from [`smallest_columns`].
pub fn smallest_sizes(designs: &[&SchemeDesign]) -> Result<(usize, usize), MsrError> {
    let mut rows: u128 = 1;
    for d in designs {
        rows = lcm(rows, d.smallest_rows()?).ok_or(MsrError::Overflow)?;
    }
    let rows = to_usize(rows)?;
    Ok((rows, smallest_columns(designs, rows)?))
}

/// The smallest N at which all `designs` (of one setting) run with `rows` rows: N = q c with c
/// the least common multiple of their column steps.
pub fn smallest_columns(designs: &[&SchemeDesign], rows: usize) -> Result<usize, MsrError> {
    let mut step: u128 = 1;
    let mut q = 1;
    for d in designs {
        step = lcm(step, d.column_step(rows)?).ok_or(MsrError::Overflow)?;
        q = d.setting.wait();
    }
    to_usize(step.checked_mul(q as u128).ok_or(MsrError::Overflow)?)
}
