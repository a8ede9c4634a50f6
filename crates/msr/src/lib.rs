#![doc = include_str!("../README.md")]
//!
//! ## Notation
//! M rows of A, N columns of X; an intermediate value (IV) is one coded row times one column
//! of X, one field element. The **load** L(q) is the number of IV-sized messages multicast in
//! the shuffle divided by M N. The outer MDS code has rate rho (M rows become M / rho coded
//! rows); the inner repetition code cuts the coded rows into C(K, r) equal batches, one per
//! r-subset S of servers, stored at every server of S. For a non-straggler k, an IV it needs
//! has *redundancy* j when exactly j other non-stragglers computed it; per column, the rows of
//! redundancy j it lacks number `B_j M` with
//! `B_j = C(q-1, j) C(K-q, r-j) / (rho C(K, r))` ([`supply`]).
//!
//! ## Unified scheme (Li et al.; Zhang-Simeone eqs. (7)-(9))
//! rho = q/K, r = floor(mu q), mubar = r/q. Load (the statement of Li et al.'s formula):
//! L = 1 - mubar if r <= 1; otherwise, with s_q the smallest s >= 2 such that
//! `sum_{j=s}^{r} B_j <= 1 - mubar`,
//! `L = sum_{j=s_q}^{r} B_j / j + min{1 - mubar - sum_{j=s_q}^{r} B_j, B_{s_q-1} / (s_q - 1)}`
//! (second option only for s_q >= 3). Checks: K=4, mu=1/2 gives 1/2, 2/3, 1/4 for q = 2, 3, 4;
//! K=18, mu=1/3, q=18 gives 1/9.
//!
//! ## Improved scheme (reconstruction)
//! **The worked example (Section III-A) recovered.** Its numbers fix its parameters: rows
//! stored uncoded (no MDS code) on 3-subsets, server 1 needs 10 extra IVs for each of its 3
//! columns (30 in all), the phases deliver 3, then 18, then 9 IVs per server, in 4 groups of
//! three in the second phase. The only setting that gives exactly these counts is **K = 6
//! servers, q = 4 non-stragglers, mu = 1/2, M = 20 rows (one per 3-subset), N = 12 columns**
//! (a brute-force search over K <= 8 with uncoded rows, one per r-subset, and 3 columns per
//! server finds no other; the "K=4, q=3" cannot give 3 and 18 per server). Per server and column: C(5,3) = 10 rows missing, of which 1 is stored at
//! the other three non-stragglers (phase j=3: 4 messages, each a sum of 3 IVs), 6 at two of
//! them (phase j=2: 36 messages of 2 IVs) and 3 at one (unicast: 36 messages). 76 messages /
//! (20 x 12) = **19/60 ~ 0.317 against the unified scheme's 7/20 = 0.35** (r = 2, rho = 2/3).
//! The text also says the unified scheme's multicast gain is limited to 2 there and the new
//! one reaches 3, which fits.
//!
//! **Proposition 1, reconstructed** ([`is_feasible`]): a rate pair (rho, r) is feasible when
//! (10a) `0 < rho <= 1`, r an integer in `1..=K`;
//! (10b) storage: each server stores `r / (K rho)` of M, so `r / (K rho) <= mu`;
//! (10c) reconstruction: the batches stored only at stragglers number C(K-q, r), so the
//! non-stragglers hold `(1 - C(K-q, r)/C(K, r)) M / rho` distinct coded rows, which must be
//! at least M: `rho <= 1 - C(K-q, r) / C(K, r)`.
//! When r > K - q every batch reaches a non-straggler and rho = 1 (no MDS code) is allowed,
//! as in the example (Remark 2; "Case 1" of the proof). The unified pair satisfies all three
//! (the Appendix's eq. (16): `C(K-q, r)/C(K, r) <= (K-q)/K`).
//!
//! **Proposition 2, reconstructed** ([`improved_design_at`]): with `mutilde = r / (K rho)`
//! each server needs `1 - mutilde` of M per column. Phases run from redundancy
//! `min(r, q-1)` down; phase j delivers, in each group of j + 1 non-stragglers, all of each
//! member's redundancy-j rows with gain j, as long as they fit in what is still needed
//! (eq. (13), (14)); the first phase whose rows exceed the rest delivers only the rest, split
//! evenly across groups and senders, still with gain j (eq. (15), "Case 2"). Since MDS
//! decoding accepts *any* M distinct coded rows, a partial delivery is as useful as a whole
//! one. So `L(rho, r) = sum_j min(B_j, rest_j) / j`, filling the demand greedily from the
//! highest gain. (If the paper's "Case 1", s_q at the lowest redundancy present, leaves no
//! rest, the formula agrees: the demand then equals the supply.)
//!
//! **Choosing the pair.** For fixed r, lowering rho raises every `B_j` and lowers the
//! demand, so the load cannot rise: the best rate is the lowest storage allows,
//! `rho = r / (mu K)` (mutilde = mu, all storage used), if (10c) holds there. The improved
//! load is the least of these over r = 1..=floor(mu K) (ties to the larger r). The text
//! agrees that the new rate "is generally lower than (7)" and the repetition "generally
//! larger than (8)"; the abstract's "increase the rate" fits the example, where rho goes
//! from 2/3 to 1 because r goes from 2 to 3.
//!
//! **Never worse than unified** (Remark 3). The unified pair with rho lowered to
//! `floor(mu q)/(mu K) <= q/K` is always a candidate, and at any one pair the greedy load is
//! at most the unified formula: its last term `rest / (s_q - 1)` is below both options of the
//! unified min. Strictly better in the example (19/60 < 7/20) and at K=4, q=3, mu=1/2
//! (5/12 < 2/3).
//!
//! We cannot tell whether the paper restricts rho to a grid (e.g. multiples of 1/K); any
//! rational rho is realisable here by choosing M (subpacketization), so we allow all.
//!
//! ## Execution
//! Over GF(2^31 - 1) ([`Fp`]): A and X are random, the outer code is a Vandermonde
//! (Reed-Solomon) code ([`RowCode`]; the identity at rate 1), batches are placed on subsets
//! ([`Placement`]), the first q finishers map, every message is a real sum of IVs built from
//! the real placement ([`plan_delivery`]), receivers cancel their side information, and each
//! reduced column is MDS-decoded and compared with A X ([`execute`]). The message count is
//! counted from the messages. M and N default to the smallest values for which every count is
//! whole ([`smallest_sizes`]): M makes the coded rows split into C(K, r) batches, and N = q c
//! with c making each phase split evenly among senders and groups.
//!
//! ## Latency
//! Shifted-exponential map times give `E[T_q] = mu N (1 + (H_K - H_{K-q}) / lambda)`
//! ([`expected_map_latency`], eq. (4)), for both schemes at the same q.

mod combinatorics;
mod delivery;
mod design;
mod execute;
pub mod field;
mod improved;
mod latency;
mod matrix;
mod mds;
mod params;
mod placement;
mod ratio;
mod unified;

pub use combinatorics::{binomial, subsets_of};
pub use delivery::{Message, Part, ReduceAssignment, plan_delivery};
pub use design::{Phase, RowLayout, Scheme, SchemeDesign, smallest_columns, smallest_sizes, supply};
pub use execute::{DEFAULT_INNER, Execution, ExecutionReport, MatrixTask, execute};
pub use field::Fp;
pub use improved::{improved_candidates, improved_design, improved_design_at, is_feasible};
pub use latency::{MapRound, ShiftedExponential, expected_map_latency, harmonic, sample_map_round};
pub use matrix::FpMatrix;
pub use mds::{RowCode, RowDecoder};
pub use params::{MAX_SERVERS, MsrParams, MsrSetting};
pub use placement::Placement;
pub use ratio::Ratio;
pub use unified::unified_design;

/// Why a map-shuffle-reduce setting, size or execution failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum MsrError {
    /// A parameter is out of range; the message names it.
    #[error("{0}")]
    InvalidParameter(String),
    /// A number that does not parse as a fraction or decimal.
    #[error("'{text}' is not a number: expected a fraction like 1/3 or a decimal like 0.25")]
    BadNumber {
        /// What was given.
        text: String,
    },
    /// Exact arithmetic would overflow: the parameters are too large.
    #[error("exact arithmetic overflowed: the parameters are too large")]
    Overflow,
    /// M or N does not make every count whole; the message names the multiple needed.
    #[error("{0}")]
    InfeasibleSize(String),
    /// A server was asked for an IV it did not compute.
    #[error("server {server} lacks the IV of coded row {row}")]
    MissingIv {
        /// The server.
        server: usize,
        /// The coded row (`usize::MAX`: the server computed nothing).
        row: usize,
    },
    /// A non-straggler ended the shuffle with fewer than M distinct coded rows for a column.
    #[error("server {server} has {have} of the {need} coded rows it needs for column {column}")]
    NotEnoughRows {
        /// The server.
        server: usize,
        /// The column.
        column: usize,
        /// Distinct coded rows it has.
        have: usize,
        /// M.
        need: usize,
    },
    /// A scheme's own invariants failed (a bug, reported rather than panicking).
    #[error("internal error: {0}")]
    Internal(String),
}
