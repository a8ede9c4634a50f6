//! Who in a ShuffleGroup is alive, judged from heartbeats, without any IO: the caller reads
//! every rank's heartbeat counter (from the job's key-value store, in `ShuffleGroup`) and its
//! own monotonic clock, feeds them in with [`Liveness::observe`], and asks
//! [`Liveness::verdict`] about the ranks it waits on.
//!
//! A rank is alive while its counter keeps changing: a rank that trains for hours is alive, so
//! liveness never depends on how long an epoch takes. A rank whose counter has not changed for
//! `timeout` seconds of the observer's clock died or froze; one that wrote [`CLOSED`] closed its
//! group. Counters, not timestamps: the ranks' clocks need not agree. A rank beats every
//! [`Liveness::period`] seconds and observes as often, so an observer learns of a beat at most
//! a period after it was written, and a rank that dies is named by every rank that watches it
//! (asking for verdicts more often than it observes) within `timeout + 2 * period` seconds of
//! its last beat: the second period is a margin for a busy machine.

/// The heartbeat value of a rank that closed its group.
pub const CLOSED: u64 = u64::MAX;

/// Why a rank waited on is not coming.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Its heartbeat has not changed for `seconds` (at least the timeout).
    Silent {
        /// The rank.
        rank: usize,
        /// Seconds since its heartbeat last changed, on the observer's clock.
        seconds: f64,
    },
    /// It closed its group.
    Closed {
        /// The rank.
        rank: usize,
    },
}

/// What the observer last saw of one rank.
#[derive(Debug, Clone, Copy)]
struct Seen {
    beat: Option<u64>,
    since: f64,
}

/// The liveness of every rank of a group, as one rank sees it (see the module's docs).
#[derive(Debug, Clone)]
pub struct Liveness {
    timeout: f64,
    seen: Vec<Seen>,
}

impl Liveness {
    /// Every one of `world` ranks counts as heard at `now` (seconds of the observer's
    /// monotonic clock); a rank is declared silent after `timeout` seconds without a change.
    pub fn new(world: usize, timeout: f64, now: f64) -> Self {
        Liveness { timeout, seen: vec![Seen { beat: None, since: now }; world] }
    }

    /// Seconds between two heartbeats of a rank and between two observations: a tenth of the
    /// timeout, within 50 ms and 30 s.
    pub fn period(&self) -> f64 {
        (self.timeout / 10.0).clamp(0.05, 30.0)
    }

    /// Records rank `rank`'s heartbeat as read at `now` (`None`: it has not written one yet).
    /// Ranks out of range are ignored.
    pub fn observe(&mut self, rank: usize, beat: Option<u64>, now: f64) {
        if let Some(seen) = self.seen.get_mut(rank)
            && beat.is_some()
            && beat != seen.beat
        {
            *seen = Seen { beat, since: now };
        }
    }

    /// The first of `ranks` that closed its group, else the first silent for longer than the
    /// timeout at `now`, else `None`.
    pub fn verdict(&self, ranks: &[usize], now: f64) -> Option<Verdict> {
        let seen = |r: usize| self.seen.get(r).map(|s| (r, s));
        if let Some((rank, _)) = ranks.iter().filter_map(|&r| seen(r)).find(|(_, s)| s.beat == Some(CLOSED)) {
            return Some(Verdict::Closed { rank });
        }
        self.silent(ranks, now)
    }

    /// The first of `ranks` that has not closed its group and is silent for longer than the
    /// timeout at `now`, else `None`.
    pub fn silent(&self, ranks: &[usize], now: f64) -> Option<Verdict> {
        ranks
            .iter()
            .filter_map(|&r| self.seen.get(r).map(|s| (r, s)))
            .filter(|(_, s)| s.beat != Some(CLOSED))
            .map(|(rank, s)| (rank, now - s.since))
            .find(|&(_, seconds)| seconds > self.timeout)
            .map(|(rank, seconds)| Verdict::Silent { rank, seconds })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_that_keeps_beating_is_alive_however_long_it_trains() {
        let mut live = Liveness::new(3, 5.0, 0.0);
        for t in 1..10_000 {
            let now = f64::from(t) * live.period();
            for r in 0..3 {
                live.observe(r, Some(u64::from(t as u32)), now);
            }
            assert_eq!(live.verdict(&[0, 1, 2], now), None);
        }
    }

    #[test]
    fn a_rank_that_stops_beating_is_named_after_the_timeout_and_not_before() {
        let mut live = Liveness::new(3, 5.0, 0.0);
        live.observe(1, Some(7), 1.0);
        live.observe(2, Some(1), 1.0);
        live.observe(2, Some(1), 5.5); // the same count: no news
        assert_eq!(live.verdict(&[1, 2], 5.9), None);
        live.observe(1, Some(8), 6.0);
        assert_eq!(live.verdict(&[1, 2], 6.2), Some(Verdict::Silent { rank: 2, seconds: 5.2 }));
        assert_eq!(live.verdict(&[1], 6.2), None, "only the ranks asked about are judged");
    }

    #[test]
    fn a_rank_never_heard_counts_from_the_start_and_a_closed_rank_is_named_at_once() {
        let mut live = Liveness::new(2, 2.0, 10.0);
        assert_eq!(live.verdict(&[1], 12.0), None, "silent for the timeout exactly: not yet");
        assert_eq!(live.verdict(&[1], 12.5), Some(Verdict::Silent { rank: 1, seconds: 2.5 }));
        live.observe(0, Some(CLOSED), 12.75);
        assert_eq!(live.verdict(&[0, 1], 12.75), Some(Verdict::Closed { rank: 0 }));
        assert_eq!(
            live.silent(&[0, 1], 12.75),
            Some(Verdict::Silent { rank: 1, seconds: 2.75 }),
            "a closed rank does not hide a silent one"
        );
        assert_eq!(live.verdict(&[7], 100.0), None, "ranks out of range are not judged");
    }

    #[test]
    fn a_dead_rank_is_named_within_timeout_plus_period_of_its_last_beat() {
        // Rank 1 beats every period from t = 0 and dies after its beat at 3.0; the observer
        // reads the beats every period, at phases across a period against the beats, and asks
        // for a verdict every millisecond (as a wait on the rank does: one millisecond of slack).
        let (timeout, last_beat) = (2.0, 3.0);
        for phase in [0.0, 0.05, 0.1, 0.15, 0.199] {
            let mut live = Liveness::new(2, timeout, 0.0);
            let period = live.period();
            let beat_at = |now: f64| (now.min(last_beat) / period).floor() as u64;
            let mut reads = 0u32;
            let named = (0..20_000).map(|ms| f64::from(ms) / 1000.0).find(|&now| {
                if now >= phase + f64::from(reads) * period {
                    live.observe(1, Some(beat_at(now)), now);
                    reads += 1;
                }
                live.verdict(&[1], now).is_some()
            });
            let after = named.map(|t| t - last_beat);
            assert!(
                after.is_some_and(|a| a > timeout && a <= timeout + period + 0.001 + 1e-9),
                "phase {phase}: named {after:?} s after the last beat (timeout {timeout}, period {period})"
            );
        }
    }

    #[test]
    fn the_period_is_a_tenth_of_the_timeout_within_bounds() {
        assert_eq!(Liveness::new(1, 300.0, 0.0).period(), 30.0);
        assert_eq!(Liveness::new(1, 5.0, 0.0).period(), 0.5);
        assert_eq!(Liveness::new(1, 0.1, 0.0).period(), 0.05);
        assert_eq!(Liveness::new(1, 1e6, 0.0).period(), 30.0);
    }
}
