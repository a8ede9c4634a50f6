//! Builder threads: the seeds' option matrices ([`Compact`]) built ahead of the packer, in the
//! packer's seed order, against the open set as it stands when each is built.
//!
//! The builders claim the positions of the order one at a time, so that none waits while
//! another has seeds with more options to build, and place each matrix in a window of
//! [`WINDOW`] slots the packer takes in order; a builder waits while the window is full. The
//! packer hands each matrix it has used back, and the builders fill those instead of new ones.
//! A matrix built against an older open set is refreshed at use ([`Compact::refresh`]), so the
//! plan and the work counted do not depend on the builders.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::compact::Compact;
use crate::requests::{CacherRows, Requests};

/// Matrices the builders may have ready (or in hand) ahead of the packer.
const WINDOW: usize = 16;

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

/// What the builders and the packer share.
struct Window {
    state: Mutex<State>,
    /// A builder placed a matrix, or the last builder left.
    placed: Condvar,
    /// The packer took a matrix, or the builders are to stop.
    room: Condvar,
}

/// The window's state, under its lock.
struct State {
    /// The position the next builder claims.
    next: usize,
    /// The position the packer takes next.
    taken: usize,
    /// The built positions `taken..taken + WINDOW`, at `position % WINDOW`.
    slots: Vec<Option<Built>>,
    /// Matrices the packer has used, for the builders to fill again.
    spare: Vec<Compact>,
    /// Builders still running.
    running: usize,
    /// Whether the builders are to stop (the pass ended).
    stop: bool,
}

impl Window {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The packer's end of the builders.
pub(super) struct Prebuilt<'w> {
    window: Option<&'w Window>,
}

impl Prebuilt<'_> {
    /// What was built for the seed at `position` of the order (none without builders, or if
    /// every builder has left). Must be called for every position, in order.
    pub(super) fn take(&self, position: usize) -> Option<Built> {
        let window = self.window?;
        let mut state = window.lock();
        let built = loop {
            if let Some(built) = state.slots[position % WINDOW].take() {
                break Some(built);
            }
            if state.running == 0 {
                break None;
            }
            state = window.placed.wait(state).unwrap_or_else(PoisonError::into_inner);
        };
        state.taken = position + 1;
        window.room.notify_all();
        built
    }

    /// Hands a used matrix back to the builders.
    pub(super) fn recycle(&self, compact: Box<Compact>) {
        if let Some(window) = self.window {
            let mut state = window.lock();
            if state.spare.len() < WINDOW {
                state.spare.push(*compact);
            }
        }
    }
}

/// How many builders to start for `requests`: one per core when there are several, none on a
/// single core or for a small instance.
pub(super) fn builders_for(requests: &Requests) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cores < 2 || requests.len() < BUILDERS_FROM_REQUESTS { 0 } else { cores.min(4) }
}

/// Tells the builders to stop when the packer's pass ends, however it ends.
struct Stopping<'w>(&'w Window);

impl Drop for Stopping<'_> {
    fn drop(&mut self) {
        self.0.lock().stop = true;
        self.0.room.notify_all();
    }
}

/// Counts a builder out of the window when it ends, however it ends.
struct Leaving<'w>(&'w Window);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.lock().running -= 1;
        self.0.placed.notify_all();
    }
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
    body: impl FnOnce(&Prebuilt<'_>) -> R,
) -> R {
    if builders == 0 {
        return body(&Prebuilt { window: None });
    }
    let window = Window {
        state: Mutex::new(State {
            next: 0,
            taken: 0,
            slots: (0..WINDOW).map(|_| None).collect(),
            spare: Vec::new(),
            running: builders,
            stop: false,
        }),
        placed: Condvar::new(),
        room: Condvar::new(),
    };
    std::thread::scope(|scope| {
        for _ in 0..builders {
            let window = &window;
            scope.spawn(move || {
                let _leaving = Leaving(window);
                let mut state = window.lock();
                loop {
                    while !state.stop && state.next < order.len() && state.next >= state.taken + WINDOW {
                        state = window.room.wait(state).unwrap_or_else(PoisonError::into_inner);
                    }
                    if state.stop || state.next >= order.len() {
                        break;
                    }
                    let position = state.next;
                    state.next += 1;
                    let spare = state.spare.pop();
                    drop(state);
                    let (built, unused) = build(requests, rows, open, order[position] as usize, spare);
                    state = window.lock();
                    state.spare.extend(unused);
                    state.slots[position % WINDOW] = Some(built);
                    window.placed.notify_all();
                }
            });
        }
        let _stopping = Stopping(&window);
        body(&Prebuilt { window: Some(&window) })
    })
}

/// Builds `seed`'s matrix against `open`, in `spare` if there is one; also returns the spare
/// matrix if it was not used.
fn build(
    requests: &Requests,
    rows: &CacherRows,
    open: &[AtomicU64],
    seed: usize,
    spare: Option<Compact>,
) -> (Built, Option<Compact>) {
    if open[seed / 64].load(Ordering::Relaxed) >> (seed % 64) & 1 == 0 {
        return (Built::Closed, spare);
    }
    let mut compact = spare.unwrap_or_default();
    if compact.build(requests, rows, |k| open[k].load(Ordering::Relaxed), seed) {
        (Built::Ready(Box::new(compact)), None)
    } else {
        (Built::Wide, Some(compact))
    }
}
