//! [`Disputes`]: the reports that a worker relayed an altered broadcast piece, and what the
//! master does about each (docs/threat-model.md, *Insiders*).
//!
//! The master cannot tell a relayer that altered a piece from a receiver that lies about it:
//! each report is one worker's word against another's. So it routes around the pair (the next
//! attempt's ring, [`ubershuffle_transport::ring_order`], gives the relayer another successor)
//! and keeps count. A relayer whose pieces fail at two different receivers is dropped; so is a
//! receiver that accuses a second peer (one lying relayer costs an honest receiver at most one
//! accusation). When the ring cannot route around the pair (two receivers), both go, as
//! before.

/// The accusations standing in a run: (accuser, accused), workers numbered from 0.
#[derive(Clone, Debug, Default)]
pub(crate) struct Disputes {
    standing: Vec<(usize, usize)>,
}

/// What the master does about one report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Both stay; the epoch restarts with a ring in which they are not neighbours.
    RouteAround,
    /// These workers are dropped.
    Drop(Vec<usize>),
}

impl Disputes {
    /// Judges `accuser`'s report that `accused`, its ring predecessor, relayed an altered
    /// piece; `separable`: whether the next attempt's ring gives `accused` another successor.
    pub(crate) fn judge(&mut self, accuser: usize, accused: usize, separable: bool) -> Verdict {
        let by_another = self.standing.iter().any(|&(a, d)| d == accused && a != accuser);
        let of_another = self.standing.iter().any(|&(a, d)| a == accuser && d != accused);
        let verdict = if by_another {
            // Its pieces failed at two receivers: the second report confirms the first.
            Verdict::Drop(vec![accused])
        } else if of_another {
            Verdict::Drop(vec![accuser])
        } else if !separable {
            Verdict::Drop(vec![accuser, accused])
        } else {
            Verdict::RouteAround
        };
        match &verdict {
            Verdict::Drop(gone) => gone.iter().for_each(|&w| self.forget(w)),
            Verdict::RouteAround => {
                if !self.standing.contains(&(accuser, accused)) {
                    self.standing.push((accuser, accused));
                }
            }
        }
        verdict
    }

    /// Forgets every accusation by or against `worker` (dropped: its accusers are cleared, its
    /// own accusations void; or taken back in as a new process).
    pub(crate) fn forget(&mut self, worker: usize) {
        self.standing.retain(|&(a, d)| a != worker && d != worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_liar_caught_by_two_receivers_goes_alone_and_its_accusers_are_cleared() {
        let mut d = Disputes::default();
        assert_eq!(d.judge(2, 1, true), Verdict::RouteAround);
        assert_eq!(d.judge(2, 1, true), Verdict::RouteAround, "the same report again");
        assert_eq!(d.judge(3, 1, true), Verdict::Drop(vec![1]));
        // Receiver 2 stands cleared: a later liar costs it nothing more.
        assert_eq!(d.judge(2, 0, true), Verdict::RouteAround);
    }

    #[test]
    fn a_receiver_that_accuses_a_second_peer_goes_and_its_first_accusation_with_it() {
        let mut d = Disputes::default();
        assert_eq!(d.judge(2, 1, true), Verdict::RouteAround);
        assert_eq!(d.judge(2, 3, true), Verdict::Drop(vec![2]));
        assert_eq!(d.judge(0, 1, true), Verdict::RouteAround, "worker 1's accuser was dropped");
    }

    #[test]
    fn a_pair_that_cannot_be_routed_around_goes_together() {
        let mut d = Disputes::default();
        assert_eq!(d.judge(1, 0, false), Verdict::Drop(vec![1, 0]));
        assert_eq!(d.judge(2, 3, true), Verdict::RouteAround);
    }
}
