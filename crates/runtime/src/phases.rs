//! [`PhaseTimer`]: one timer that splits a span of a rank's clock into phases, lap by lap, so
//! that the phases add up to the span exactly.

use std::time::{Duration, Instant};

use ubershuffle_transport::Transport;

use crate::cost_model::{Prices, Work};

/// What a rank's time in an epoch went to. The master's laps partition its epoch; a worker
/// times its decoding and training with the same timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Drawing the next assignment and planning it.
    Plan,
    /// Checks: verifying the plan, each worker's checksum of its new records.
    Verify,
    /// Routing the plan and writing each worker's order.
    Route,
    /// Broadcasting the model.
    ModelBroadcast,
    /// XOR-encoding the packets.
    Encode,
    /// Sending the orders and packets until the last worker holds its packets.
    Transmit,
    /// Decoding at a worker (at the master: the part of its wait for updates during which the
    /// worker whose update came last decoded).
    Decode,
    /// Local training at a worker (at the master: likewise).
    Train,
    /// Waiting for updates beyond the last worker's decoding and training: its update on the
    /// wire, a straggler's hold, the deadline.
    Waiting,
    /// Aggregating the updates, the held-out loss, the next caches.
    Aggregate,
}

impl Phase {
    /// Every phase, in the order an epoch goes through them.
    pub const ALL: [Phase; 10] = [
        Phase::Plan,
        Phase::Verify,
        Phase::Route,
        Phase::ModelBroadcast,
        Phase::Encode,
        Phase::Transmit,
        Phase::Decode,
        Phase::Train,
        Phase::Waiting,
        Phase::Aggregate,
    ];

    fn index(self) -> usize {
        Phase::ALL.iter().position(|&p| p == self).unwrap_or(0)
    }
}

/// Time per phase, laps of one clock: each lap charges the time since the previous one to a
/// phase, so the phases partition the time from the start to the last lap.
#[derive(Clone, Debug)]
pub struct PhaseTimer {
    started: Instant,
    last: Instant,
    spent: [Duration; Phase::ALL.len()],
}

impl PhaseTimer {
    /// A timer starting at `now`.
    pub fn start(now: Instant) -> PhaseTimer {
        PhaseTimer { started: now, last: now, spent: [Duration::ZERO; Phase::ALL.len()] }
    }

    /// Charges the time from the previous lap to `now` to `phase`.
    pub fn lap(&mut self, now: Instant, phase: Phase) {
        self.spent[phase.index()] += now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
    }

    /// Moves `amount` (at most what `from` holds) from phase `from` to phase `to`; returns what
    /// was moved.
    pub fn reassign(&mut self, from: Phase, to: Phase, amount: Duration) -> Duration {
        let moved = amount.min(self.spent[from.index()]);
        self.spent[from.index()] -= moved;
        self.spent[to.index()] += moved;
        moved
    }

    /// The time charged to `phase`.
    pub fn spent(&self, phase: Phase) -> Duration {
        self.spent[phase.index()]
    }

    /// The time from the start to the last lap: the sum of every phase.
    pub fn total(&self) -> Duration {
        self.last.saturating_duration_since(self.started)
    }
}

/// A rank's [`PhaseTimer`] over its transport's clock, pricing each lap's work with the run's
/// cost model when there is one (see [`Transport::charge`]).
pub(crate) struct Stopwatch {
    pub(crate) timer: PhaseTimer,
    prices: Option<Prices>,
}

impl Stopwatch {
    /// A stopwatch starting now on `t`'s clock.
    pub(crate) fn start<T: Transport + ?Sized>(t: &T, prices: Option<Prices>) -> Stopwatch {
        Stopwatch { timer: PhaseTimer::start(t.now()), prices }
    }

    /// Charges `work` to `t`'s clock (by the cost model, if any) and ends a lap of `phase`.
    pub(crate) fn lap<T: Transport + ?Sized>(&mut self, t: &mut T, phase: Phase, work: Work) {
        if let Some(prices) = &self.prices {
            t.charge(prices.cost(&work));
        }
        self.timer.lap(t.now(), phase);
    }

    /// Ends a lap of `phase` without work of the rank's own (waiting, moving bytes).
    pub(crate) fn lap_idle<T: Transport + ?Sized>(&mut self, t: &T, phase: Phase) {
        self.timer.lap(t.now(), phase);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_partition_the_span_and_reassigning_keeps_the_sum() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut timer = PhaseTimer::start(t0);
        timer.lap(t0 + ms(3), Phase::Plan);
        timer.lap(t0 + ms(5), Phase::Transmit);
        timer.lap(t0 + ms(12), Phase::Waiting);
        timer.lap(t0 + ms(15), Phase::Transmit);
        assert_eq!((timer.spent(Phase::Plan), timer.spent(Phase::Transmit)), (ms(3), ms(5)));
        assert_eq!(timer.reassign(Phase::Waiting, Phase::Decode, ms(4)), ms(4));
        assert_eq!(timer.reassign(Phase::Waiting, Phase::Train, ms(9)), ms(3));
        let sum: Duration = Phase::ALL.iter().map(|&p| timer.spent(p)).sum();
        assert_eq!((sum, timer.total()), (ms(15), ms(15)));
        assert_eq!(timer.spent(Phase::Waiting), Duration::ZERO);
    }
}
