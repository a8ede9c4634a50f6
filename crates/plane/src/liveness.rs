//! Who is alive, judged on the engine's own connections, without any IO: the engine tells
//! [`Liveness`] when it heard from a peer (any message) and when it sent one, and asks which
//! peers are owed a heartbeat and which have been silent too long.
//!
//! A peer is alive while it is heard from: one that trains for hours still beats every
//! [`Liveness::period`] seconds, so liveness never depends on how long an epoch takes. Silent
//! for `timeout` seconds of this rank's clock, it died or froze (a process that dies outright
//! is named at once: its connection ends). Each rank beats only on the connections it has (its
//! peers in the plane), so a period costs O(peers) messages per rank and nothing else; the
//! ranks' clocks need not agree. A peer's last beat reaches this rank within the network's
//! delay, so a rank that freezes is named within `timeout` plus that delay plus the driver's
//! wake-up of its last beat: within `timeout + 2 * period`, the bound the plane states.

/// The liveness of every peer as one rank sees it (see the module's docs).
#[derive(Debug, Clone)]
pub struct Liveness {
    timeout: f64,
    heard: Vec<f64>,
    sent: Vec<f64>,
    gone: Vec<bool>,
}

impl Liveness {
    /// `world` ranks, each counted as heard from and sent to at `now` (seconds of this rank's
    /// monotonic clock); a peer is silent after `timeout` seconds without a message.
    pub fn new(world: usize, timeout: f64, now: f64) -> Self {
        Liveness { timeout, heard: vec![now; world], sent: vec![now; world], gone: vec![false; world] }
    }

    /// The timeout.
    pub fn timeout(&self) -> f64 {
        self.timeout
    }

    /// Seconds between two heartbeats on a connection with nothing else to say: a tenth of
    /// the timeout, within 50 ms and 30 s.
    pub fn period(&self) -> f64 {
        (self.timeout / 10.0).clamp(0.05, 30.0)
    }

    /// A message from `rank` arrived at `now`.
    pub fn heard(&mut self, rank: usize, now: f64) {
        if let Some(h) = self.heard.get_mut(rank) {
            *h = now;
        }
    }

    /// A message to `rank` left at `now`.
    pub fn sent(&mut self, rank: usize, now: f64) {
        if let Some(s) = self.sent.get_mut(rank) {
            *s = now;
        }
    }

    /// `rank` is no longer watched (it closed, or it is this rank).
    pub fn forget(&mut self, rank: usize) {
        if let Some(g) = self.gone.get_mut(rank) {
            *g = true;
        }
    }

    /// The watched peers owed a heartbeat at `now` (nothing sent to them for a period).
    pub fn beats_due(&self, now: f64) -> Vec<usize> {
        let period = self.period();
        (0..self.sent.len()).filter(|&r| !self.gone[r] && now - self.sent[r] >= period).collect()
    }

    /// The first watched peer silent for the timeout or longer at `now`, with its seconds.
    pub fn silent(&self, now: f64) -> Option<(usize, f64)> {
        (0..self.heard.len())
            .filter(|&r| !self.gone[r])
            .map(|r| (r, now - self.heard[r]))
            .find(|&(_, seconds)| seconds >= self.timeout)
    }

    /// When something is next due: a heartbeat or a peer's silence.
    pub fn next_due(&self) -> Option<f64> {
        let period = self.period();
        (0..self.heard.len())
            .filter(|&r| !self.gone[r])
            .map(|r| (self.sent[r] + period).min(self.heard[r] + self.timeout))
            .min_by(f64::total_cmp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_keeps_beating_is_alive_however_long_it_trains() {
        let mut live = Liveness::new(3, 5.0, 0.0);
        live.forget(0);
        for t in 1..10_000 {
            let now = f64::from(t) * live.period();
            live.heard(1, now);
            live.heard(2, now);
            assert_eq!(live.silent(now), None);
        }
    }

    #[test]
    fn a_silent_peer_is_named_after_the_timeout_and_not_before() {
        let mut live = Liveness::new(3, 5.0, 0.0);
        live.forget(0);
        live.heard(1, 1.0);
        live.heard(2, 1.0);
        assert_eq!(live.silent(5.9), None);
        live.heard(1, 6.0);
        assert_eq!(live.silent(6.2), Some((2, 5.2)));
        assert_eq!(live.silent(11.0), Some((1, 5.0)), "silent for exactly the timeout");
        live.forget(2);
        assert_eq!(live.silent(6.2), None, "a peer that closed is not judged");
    }

    #[test]
    fn beats_are_owed_a_period_after_the_last_message_sent() {
        let mut live = Liveness::new(3, 1.0, 0.0);
        live.forget(0);
        assert!(live.beats_due(0.05).is_empty());
        live.sent(1, 0.08);
        assert_eq!(live.beats_due(0.1), vec![2]);
        assert_eq!(live.next_due(), Some(0.1), "rank 2's beat is due first");
        assert_eq!(Liveness::new(1, 300.0, 0.0).period(), 30.0);
        assert_eq!(Liveness::new(1, 0.1, 0.0).period(), 0.05);
    }
}
