//! When a background delivery may post its next round while the job trains, so that the
//! records travel in the compute windows and not beside DDP's gradients. No IO and no clock of
//! its own: the caller reports each step's all-reduce (from DDP's communication hook: when it
//! began and ended, and the bytes each rank sent and received for it) on its monotonic clock,
//! and asks [`Pace::hold`] before it posts, with the bytes it would then have in flight.
//!
//! The rule: no post while a step's all-reduce is in flight; and once the steps have a rhythm
//! (two windows seen), no post that would still be landing when the next all-reduce is due:
//! the bytes in flight over the link's rate, the rate measured by the all-reduces themselves
//! (their bytes on the wire over their time; a sender moves a message only to a posted receive,
//! so what is posted is what may meet the all-reduce). The hold before a due all-reduce lasts
//! at most until the all-reduce is a median all-reduce late: a job that stops stepping (the
//! epoch's end, an evaluation) is not waited for, and while the training thread itself waits
//! for the delivery nothing is held.

use std::collections::VecDeque;

/// How many recent windows, all-reduces and rates the medians are taken over.
const HISTORY: usize = 8;

/// What [`Pace::hold`] says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hold {
    /// Post now.
    Go,
    /// An all-reduce is in flight: wait for its end.
    UntilEnd,
    /// The next all-reduce is due within the margin: wait at most this many seconds (or until
    /// it has begun and ended).
    For(f64),
}

/// The rhythm of one rank's steps and rounds (see the module's docs).
#[derive(Debug, Default)]
pub struct Pace {
    in_allreduce: bool,
    last_end: Option<f64>,
    windows: VecDeque<f64>,
    allreduces: VecDeque<f64>,
    rates: VecDeque<f64>,
    began_at: f64,
    training_waits: bool,
}

fn push(queue: &mut VecDeque<f64>, value: f64) {
    if value.is_finite() && value >= 0.0 {
        if queue.len() == HISTORY {
            queue.pop_front();
        }
        queue.push_back(value);
    }
}

fn median(queue: &VecDeque<f64>) -> Option<f64> {
    let mut v: Vec<f64> = queue.iter().copied().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

impl Pace {
    /// A rank that has seen no step yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A step's all-reduce began at `now` (its first bucket's hook).
    pub fn began(&mut self, now: f64) {
        if let Some(end) = self.last_end {
            push(&mut self.windows, now - end);
        }
        self.in_allreduce = true;
        self.began_at = now;
    }

    /// The step's all-reduce ended at `now` (its last bucket's completion), having sent and
    /// received `wire_bytes` at each rank.
    pub fn ended(&mut self, now: f64, wire_bytes: f64) {
        if self.in_allreduce {
            let seconds = now - self.began_at;
            push(&mut self.allreduces, seconds);
            if seconds > 0.0 && wire_bytes > 0.0 {
                push(&mut self.rates, wire_bytes / seconds);
            }
        }
        self.in_allreduce = false;
        self.last_end = Some(now);
    }

    /// Whether the training thread waits for the delivery (then nothing is held).
    pub fn set_training_waits(&mut self, waits: bool) {
        self.training_waits = waits;
    }

    /// Whether the delivery may post at `now`, `in_flight` bytes then posted and not landed.
    pub fn hold(&self, now: f64, in_flight: f64) -> Hold {
        if self.training_waits {
            return Hold::Go;
        }
        if self.in_allreduce {
            return Hold::UntilEnd;
        }
        let (Some(end), true) = (self.last_end, self.windows.len() >= 2) else { return Hold::Go };
        let (Some(window), Some(rate)) = (median(&self.windows), median(&self.rates)) else {
            return Hold::Go;
        };
        let margin = in_flight.max(0.0) / rate;
        let due = end + window;
        if now + margin < due {
            return Hold::Go;
        }
        let latest = due + median(&self.allreduces).unwrap_or(0.0);
        if now < latest { Hold::For(latest - now) } else { Hold::Go }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps of a 1 s window then a 0.5 s all-reduce of 50 bytes, from t = 0: 100 bytes/s.
    fn rhythm(steps: usize) -> (Pace, f64) {
        let mut pace = Pace::new();
        let mut t = 0.0;
        for _ in 0..steps {
            t += 1.0;
            pace.began(t);
            t += 0.5;
            pace.ended(t, 50.0);
        }
        (pace, t)
    }

    #[test]
    fn nothing_is_held_before_the_steps_have_a_rhythm() {
        let (pace, t) = rhythm(2);
        assert_eq!(pace.hold(t + 0.95, 10.0), Hold::Go, "one window seen");
        let (pace, t) = rhythm(3);
        let held = pace.hold(t + 0.95, 10.0);
        assert!(
            matches!(held, Hold::For(s) if (s - 0.55).abs() < 1e-9),
            "two windows: the same round is held: {held:?}"
        );
        let mut first = Pace::new();
        first.began(1.0);
        assert_eq!(first.hold(1.1, 0.0), Hold::UntilEnd, "an all-reduce in flight is always waited for");
    }

    #[test]
    fn rounds_stop_when_their_bytes_would_meet_the_due_all_reduce_and_resume_after_it() {
        let (mut pace, t) = rhythm(3);
        assert_eq!(pace.hold(t + 0.5, 10.0), Hold::Go);
        assert_eq!(pace.hold(t + 0.89, 10.0), Hold::Go, "10 bytes land in 0.1 s, before 1.0");
        // 20 bytes would not: held until the all-reduce is a median all-reduce (0.5 s) late.
        assert!(matches!(pace.hold(t + 0.89, 20.0), Hold::For(s) if (s - 0.61).abs() < 1e-9));
        match pace.hold(t + 0.95, 10.0) {
            Hold::For(s) => assert!((s - 0.55).abs() < 1e-9, "{s}"),
            other => panic!("{other:?}"),
        }
        pace.began(t + 1.0);
        assert_eq!(pace.hold(t + 1.2, 0.0), Hold::UntilEnd);
        pace.ended(t + 1.5, 50.0);
        assert_eq!(pace.hold(t + 1.5, 10.0), Hold::Go);
    }

    #[test]
    fn a_job_that_stops_stepping_or_waits_for_the_delivery_is_not_waited_for() {
        let (mut pace, t) = rhythm(3);
        assert_eq!(pace.hold(t + 1.6, 10.0), Hold::Go, "the all-reduce is a median all-reduce late");
        assert!(matches!(pace.hold(t + 0.95, 10.0), Hold::For(s) if (s - 0.55).abs() < 1e-9));
        pace.set_training_waits(true);
        assert_eq!(pace.hold(t + 0.95, 10.0), Hold::Go);
    }
}
