//! [`Gate`]: the engine's side of yielding to the gradients. The caller reports each step's
//! all-reduce (DDP's communication hook: when it began and ended, and its bytes on the wire);
//! the gate asks [`Pace`] whether a credit may be granted or a chunk sent now, counts how often
//! the delivery was held and for how long, and how many of its posts (grants and chunks) met an
//! all-reduce in flight: none when yielding, since the engine handles one event at a time and
//! asks the gate before every post.

use crate::pace::{Hold, Pace};

use super::{Figure, Figures};

/// The gate of one rank (see the module's docs).
#[derive(Debug)]
pub(super) struct Gate {
    enabled: bool,
    pace: Pace,
    in_allreduce: bool,
    step_start: f64,
    step_delivering: bool,
    /// Per step since the last take: its all-reduce's seconds, and whether a delivery was in
    /// flight when it began.
    steps: Vec<(f64, bool)>,
    /// When the current hold began, if the delivery is held.
    held_since: Option<f64>,
    held_seconds: f64,
    yields: u64,
    posts: u64,
    posts_during: u64,
    /// When a held delivery should look again (a due all-reduce's hold ends).
    wake: Option<f64>,
}

impl Gate {
    /// A gate that yields when `enabled` (otherwise it only counts).
    pub(super) fn new(enabled: bool) -> Gate {
        Gate {
            enabled,
            pace: Pace::new(),
            in_allreduce: false,
            step_start: 0.0,
            step_delivering: false,
            steps: Vec::new(),
            held_since: None,
            held_seconds: 0.0,
            yields: 0,
            posts: 0,
            posts_during: 0,
            wake: None,
        }
    }

    /// Whether deliveries yield.
    pub(super) fn enabled(&self) -> bool {
        self.enabled
    }

    pub(super) fn began(&mut self, now: f64, delivering: bool) {
        if !self.in_allreduce {
            self.pace.began(now);
            self.in_allreduce = true;
            self.step_start = now;
            self.step_delivering = delivering;
        }
    }

    pub(super) fn ended(&mut self, now: f64, wire_bytes: f64) {
        if self.in_allreduce {
            self.pace.ended(now, wire_bytes);
            self.in_allreduce = false;
            self.steps.push((now - self.step_start, self.step_delivering));
        }
    }

    pub(super) fn training_waits(&mut self, waits: bool) {
        self.pace.set_training_waits(waits);
    }

    /// Whether a post with `in_flight` bytes then posted and not landed may go now; counts it
    /// when it may, and the hold when it may not.
    pub(super) fn may_post(&mut self, now: f64, in_flight: f64) -> bool {
        let hold = if self.enabled { self.pace.hold(now, in_flight) } else { Hold::Go };
        match hold {
            Hold::Go => {
                if let Some(since) = self.held_since.take() {
                    self.held_seconds += now - since;
                }
                self.wake = None;
                self.posts += 1;
                if self.in_allreduce {
                    self.posts_during += 1;
                }
                true
            }
            Hold::UntilEnd | Hold::For(_) => {
                if self.held_since.is_none() {
                    self.held_since = Some(now);
                    self.yields += 1;
                }
                self.wake = match hold {
                    Hold::For(s) => Some(now + s),
                    _ => None,
                };
                false
            }
        }
    }

    /// When a held delivery should look again without an event.
    pub(super) fn wake_at(&self) -> Option<f64> {
        self.wake
    }

    /// The figures since the last take: the steps' all-reduces and the delivery's holds.
    pub(super) fn take(&mut self) -> Figures {
        let steps = std::mem::take(&mut self.steps);
        let mut f = Figures::default();
        let seconds: Vec<f64> = steps.iter().map(|s| s.0).collect();
        f.real("allreduce_seconds", seconds.iter().sum());
        f.count("allreduce_steps", seconds.len() as u64);
        f.set("allreduce_step_seconds", Figure::Reals(seconds));
        f.set("allreduce_step_during_delivery", Figure::Flags(steps.iter().map(|s| s.1).collect()));
        f.real("yield_seconds", std::mem::take(&mut self.held_seconds));
        f.count("yields", std::mem::take(&mut self.yields));
        f.count("delivery_posts", std::mem::take(&mut self.posts));
        f.count("posts_during_allreduce", std::mem::take(&mut self.posts_during));
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yielding_gate_posts_nothing_during_an_all_reduce_and_counts_the_hold() {
        let mut gate = Gate::new(true);
        assert!(gate.may_post(0.0, 10.0));
        gate.began(1.0, true);
        assert!(!gate.may_post(1.1, 10.0));
        assert!(!gate.may_post(1.2, 10.0), "one hold, however often it asks");
        gate.ended(1.5, 100.0);
        assert!(gate.may_post(1.5, 10.0));
        let f = gate.take();
        assert_eq!(
            (f.count_of("yields"), f.count_of("delivery_posts"), f.count_of("posts_during_allreduce")),
            (1, 2, 0)
        );
        let Some(Figure::Real(held)) = f.get("yield_seconds") else { panic!("{f:?}") };
        assert!((held - 0.4).abs() < 1e-9, "held from 1.1 to 1.5: {held}");
        assert_eq!(f.count_of("allreduce_steps"), 1);
    }

    #[test]
    fn a_gate_that_does_not_yield_counts_the_posts_that_meet_an_all_reduce() {
        let mut gate = Gate::new(false);
        gate.began(1.0, true);
        assert!(gate.may_post(1.1, 10.0));
        gate.ended(1.5, 100.0);
        assert!(gate.may_post(1.6, 10.0));
        let f = gate.take();
        assert_eq!(
            (f.count_of("yields"), f.count_of("delivery_posts"), f.count_of("posts_during_allreduce")),
            (0, 2, 1)
        );
    }
}
