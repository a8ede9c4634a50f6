//! Gradient-coded gradient descent under stragglers (Tandon, Lei, Dimakis and Karampatziakis;
//! Johri, Yardi and Bodas, "Approximate gradient coding for heterogeneous nodes").
//!
//! The training data is split into `n` partitions; a worker holds the partitions of the role it
//! plays (see [`learner`]). Each iteration worker `w` plays a role `i` of the
//! encoding matrix `B` ([`ubershuffle_gradient_codes`]) and sends `sum_j B[i][j] g_j`; the master waits
//! for the workers the straggler model marks on time, decodes their roles with the least-squares
//! combination and steps (the late ones' results are dropped).
//! Shuffling the roles each iteration ([`ubershuffle_gradient_codes::RoleShuffle`]) keeps persistently
//! slow workers from always blocking the same partitions.
//!
//! - [`glm`]: the losses (least squares, logistic) and their partial gradients over records,
//! - [`expected`]: the expected decoding error three ways (the paper's Theorems 1-2, exact
//!   enumeration, Monte Carlo), averaged over the class draw or for exactly `m` slow workers,
//! - [`learner`]: the executed descent, a [`crate::Learner`] of the master/worker runtime
//!   (`ubershuffle_runtime`), which runs it over threads, TCP processes or MPI ranks.

pub mod expected;
pub mod glm;
pub mod learner;
