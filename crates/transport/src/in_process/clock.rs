//! [`NodeClock`]: the emulated clock of one rank of an emulated cluster.
//!
//! As in SimGrid's SMPI (on-line simulation), each rank's computing is measured and injected
//! into its own simulated clock, and its communication is priced by a network model: the clock
//! advances by the CPU time of the rank's own thread while the rank computes
//! ([`ComputeTime::ThreadCpu`]) or only by what the program charges from a cost model
//! ([`ComputeTime::Charged`]), and by the link model while it sends and receives. Host wall
//! time never enters it, so neither the number of host cores nor their load does.

use std::thread::{self, ThreadId};
use std::time::Duration;

use cpu_time::ThreadTime;

/// How an emulated rank's clock counts the rank's computing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ComputeTime {
    /// The CPU time of the rank's thread (a per-thread CPU clock) between transport calls:
    /// what a node of its own would spend, however many emulated nodes share the host's cores.
    /// It varies a little from run to run (caches, frequency).
    #[default]
    ThreadCpu,
    /// Only what the program charges with [`crate::Transport::charge`] (a cost model's price
    /// of the work done): two runs give identical times.
    Charged,
}

impl ComputeTime {
    /// The name used on command lines and in results.
    pub fn name(self) -> &'static str {
        match self {
            ComputeTime::ThreadCpu => "thread-cpu",
            ComputeTime::Charged => "charged",
        }
    }
}

/// A rank's emulated clock: emulated time since the cluster started. Between transport calls
/// it runs with the thread's CPU time (in [`ComputeTime::ThreadCpu`] mode); inside them it
/// stands still, so that the emulator's own copies are not charged to the modelled node.
#[derive(Clone, Debug)]
pub(crate) struct NodeClock {
    /// Emulated time at the last [`NodeClock::stop`].
    at: Duration,
    compute: ComputeTime,
    /// Where the thread's CPU clock stood when the clock last started, and in which thread
    /// (the CPU time of another thread means nothing here); `None` while stopped.
    running_since: Option<(ThreadId, Duration)>,
}

/// The calling thread's CPU time (zero where the platform cannot tell).
fn thread_cpu() -> Duration {
    ThreadTime::try_now().map(|t| t.as_duration()).unwrap_or(Duration::ZERO)
}

impl NodeClock {
    /// A clock at zero, stopped until its rank's first transport call returns.
    pub(crate) fn new(compute: ComputeTime) -> NodeClock {
        NodeClock { at: Duration::ZERO, compute, running_since: None }
    }

    /// The emulated time now.
    pub(crate) fn now(&self) -> Duration {
        self.at + self.computed()
    }

    /// CPU time the thread spent since the clock started (zero when stopped, charged, or read
    /// from another thread).
    fn computed(&self) -> Duration {
        match (self.compute, self.running_since) {
            (ComputeTime::ThreadCpu, Some((thread, cpu))) if thread == thread::current().id() => {
                thread_cpu().saturating_sub(cpu)
            }
            _ => Duration::ZERO,
        }
    }

    /// Stops the clock (entering a transport call), folding in the computing since it started.
    pub(crate) fn stop(&mut self) {
        self.at += self.computed();
        self.running_since = None;
    }

    /// Starts it again (leaving a transport call).
    pub(crate) fn start(&mut self) {
        if self.compute == ComputeTime::ThreadCpu {
            self.running_since = Some((thread::current().id(), thread_cpu()));
        }
    }

    /// Moves the (stopped) clock on to `at`, if that is later.
    pub(crate) fn advance_to(&mut self, at: Duration) {
        self.at = self.at.max(at);
    }

    /// Adds `by` to the clock.
    pub(crate) fn advance_by(&mut self, by: Duration) {
        self.at = self.at.saturating_add(by);
    }

    /// How the clock counts computing.
    pub(crate) fn compute(&self) -> ComputeTime {
        self.compute
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(d: Duration) {
        let start = thread_cpu();
        let mut x = 0u64;
        while thread_cpu().saturating_sub(start) < d {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn thread_cpu_counts_computing_not_sleeping() {
        let mut clock = NodeClock::new(ComputeTime::ThreadCpu);
        clock.start();
        std::thread::sleep(Duration::from_millis(30));
        spin(Duration::from_millis(20));
        clock.stop();
        let t = clock.now();
        assert!(t >= Duration::from_millis(20) && t < Duration::from_millis(28), "{t:?}");
        // Stopped: inside a transport call nothing is charged.
        spin(Duration::from_millis(5));
        assert_eq!(clock.now(), t);
    }

    #[test]
    fn charged_clocks_move_only_when_told() {
        let mut clock = NodeClock::new(ComputeTime::Charged);
        clock.start();
        spin(Duration::from_millis(5));
        assert_eq!(clock.now(), Duration::ZERO);
        clock.advance_by(Duration::from_millis(7));
        clock.advance_to(Duration::from_millis(3));
        assert_eq!(clock.now(), Duration::from_millis(7));
    }
}
