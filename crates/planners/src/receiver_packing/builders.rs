//! Builder threads: the seeds' option matrices ([`Compact`]) built ahead of the packer, in the
//! packer's seed order, against the open set as it stands when each is built.
//!
//! Builder `b` of `k` builds the seeds at positions `b, b + k, ...` of the order and hands each
//! matrix over a bounded channel, so that a builder runs at most [`AHEAD`] seeds ahead; the
//! packer takes them in order. A matrix built against an older open set is refreshed at use
//! ([`Compact::refresh`]), so the plan and the work counted do not depend on the builders.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};

use super::compact::Compact;
use crate::requests::{CacherRows, Requests};

/// Matrices a builder may have ready ahead of the packer.
const AHEAD: usize = 8;

/// Requests below which no builder is started (the matrices are too small to be worth it).
const BUILDERS_FROM_REQUESTS: usize = 20_000;

/// A builder's work for one seed of the order.
pub(super) enum Built {
    /// The seed was served before its turn came.
    Closed,
    /// The seed's matrix.
    Ready(Box<Compact>),
    /// Some candidate had too many options for a matrix.
    Wide,
}

/// The packer's end of the builders.
pub(super) struct Prebuilt {
    from: Vec<Receiver<Built>>,
}

impl Prebuilt {
    /// What was built for the seed at `position` of the order (none without builders). Must be
    /// called for every position, in order.
    pub(super) fn take(&self, position: usize) -> Option<Built> {
        if self.from.is_empty() {
            return None;
        }
        self.from[position % self.from.len()].recv().ok()
    }
}

/// How many builders to start for `requests`: one per core when there are several, none on a
/// single core or for a small instance.
pub(super) fn builders_for(requests: &Requests) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cores < 2 || requests.len() < BUILDERS_FROM_REQUESTS { 0 } else { cores.min(4) }
}

/// Runs `body` with `builders` builder threads building the matrices of `order`'s seeds
/// against `open` (the packer clears it as it serves requests). The builders stop when `body`
/// returns.
pub(super) fn with_builders<R>(
    requests: &Requests,
    rows: &CacherRows,
    order: &[u32],
    open: &[AtomicU64],
    builders: usize,
    body: impl FnOnce(Prebuilt) -> R,
) -> R {
    std::thread::scope(|scope| {
        let mut from = Vec::with_capacity(builders);
        for b in 0..builders {
            let (to, rx) = sync_channel::<Built>(AHEAD);
            from.push(rx);
            scope.spawn(move || {
                for &seed in order.iter().skip(b).step_by(builders) {
                    let seed = seed as usize;
                    let built = if open[seed / 64].load(Ordering::Relaxed) >> (seed % 64) & 1 == 0 {
                        Built::Closed
                    } else {
                        let mut compact = Box::<Compact>::default();
                        if compact.build(requests, rows, |k| open[k].load(Ordering::Relaxed), seed) {
                            Built::Ready(compact)
                        } else {
                            Built::Wide
                        }
                    };
                    if to.send(built).is_err() {
                        break;
                    }
                }
            });
        }
        body(Prebuilt { from })
    })
}
