//! One store delivery's traffic as the plane logged it, round by round: the store's bytes to
//! each training place, and the places' relay among themselves. Checked once against the
//! number of places, then read with missing rounds (and a place's bytes to itself) as zero,
//! and summed per port for the delivery's limit.

use anyhow::bail;

/// One delivery's rounds, checked: [`Rounds::new`].
#[derive(Clone, Copy, Debug)]
pub struct Rounds<'a> {
    places: usize,
    store: &'a [Vec<u64>],
    relay: &'a [Vec<Vec<u64>>],
}

impl<'a> Rounds<'a> {
    /// The rounds of a delivery to `places` training places: `store[k][i]` the store's bytes
    /// to place `i` in round `k`, `relay[k][i][j]` place `i`'s to place `j` (fewer relay
    /// rounds than store rounds, or an empty round, relay nothing). Fails naming the first
    /// round of another width.
    pub fn new(places: usize, store: &'a [Vec<u64>], relay: &'a [Vec<Vec<u64>>]) -> anyhow::Result<Self> {
        for (k, round) in store.iter().enumerate() {
            if !round.is_empty() && round.len() != places {
                bail!("round {k}: the store's bytes name {} places, not {places}", round.len());
            }
        }
        for (k, round) in relay.iter().enumerate() {
            if !round.is_empty() && (round.len() != places || round.iter().any(|row| row.len() != places)) {
                bail!("round {k}: the relay's bytes are not a {places} x {places} matrix");
            }
        }
        Ok(Rounds { places, store, relay })
    }

    /// Training places.
    pub fn places(&self) -> usize {
        self.places
    }

    /// Rounds of the delivery.
    pub fn count(&self) -> usize {
        self.store.len().max(self.relay.len())
    }

    /// The store's bytes to place `i` in round `k`.
    pub fn store(&self, k: usize, i: usize) -> u64 {
        self.store.get(k).and_then(|r| r.get(i)).copied().unwrap_or(0)
    }

    /// Place `i`'s bytes to place `j` in round `k` (nothing to itself: that costs no link).
    pub fn relay(&self, k: usize, i: usize, j: usize) -> u64 {
        if i == j {
            return 0;
        }
        self.relay.get(k).and_then(|r| r.get(i)).and_then(|row| row.get(j)).copied().unwrap_or(0)
    }

    /// The store's bytes in every round (its uplink's load).
    pub fn store_sent(&self) -> u64 {
        self.sum(|k| (0..self.places).map(|i| self.store(k, i)).sum())
    }

    /// The bytes place `i` receives: from the store and from the other places.
    pub fn place_received(&self, i: usize) -> u64 {
        self.sum(|k| self.store(k, i) + (0..self.places).map(|j| self.relay(k, j, i)).sum::<u64>())
    }

    /// The bytes place `i` sends the other places.
    pub fn place_sent(&self, i: usize) -> u64 {
        self.sum(|k| (0..self.places).map(|j| self.relay(k, i, j)).sum())
    }

    /// The bytes the relay moves, every place and round.
    pub fn relayed(&self) -> u64 {
        (0..self.places).map(|i| self.place_sent(i)).sum()
    }

    /// The most bytes one port carries in the delivery: the store's uplink, or a place's
    /// uplink or downlink, whichever is the most loaded.
    pub fn busiest_port(&self) -> u64 {
        (0..self.places)
            .map(|i| self.place_received(i).max(self.place_sent(i)))
            .fold(self.store_sent(), u64::max)
    }

    /// The largest single message (one round's bytes from one node to another).
    pub fn largest_message(&self) -> u64 {
        (0..self.count())
            .flat_map(|k| {
                (0..self.places).flat_map(move |i| {
                    (0..self.places).map(move |j| self.relay(k, i, j)).chain([self.store(k, i)])
                })
            })
            .max()
            .unwrap_or(0)
    }

    fn sum(&self, per_round: impl Fn(usize) -> u64) -> u64 {
        (0..self.count()).map(per_round).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_sum_the_store_and_the_relay_with_missing_rounds_as_zero() {
        let store = vec![vec![10, 20], vec![], vec![1, 0]];
        let relay = vec![vec![vec![99, 5], vec![7, 99]]];
        let r = Rounds::new(2, &store, &relay).unwrap();
        assert_eq!(r.count(), 3);
        assert_eq!(r.store_sent(), 31);
        // The diagonal (a place to itself) costs no link.
        assert_eq!((r.place_received(0), r.place_sent(0)), (18, 5));
        assert_eq!((r.place_received(1), r.place_sent(1)), (25, 7));
        assert_eq!((r.relayed(), r.busiest_port(), r.largest_message()), (12, 31, 20));
    }

    #[test]
    fn rounds_of_another_width_are_refused() {
        let store = vec![vec![1, 2, 3]];
        let err = Rounds::new(2, &store, &[]).unwrap_err().to_string();
        assert_eq!(err, "round 0: the store's bytes name 3 places, not 2");
        let relay = vec![vec![vec![0, 1], vec![0]]];
        let err = Rounds::new(2, &[], &relay).unwrap_err().to_string();
        assert_eq!(err, "round 0: the relay's bytes are not a 2 x 2 matrix");
    }
}
