//! [`Membership`]: which workers are in the run, which broadcast group they were last told
//! of, which were lost before the next epoch, and what the last loss was (for the message when
//! none is left).
//!
//! After a loss the survivors re-form the broadcast group: the next attempt first tells every
//! survivor the new group ([`crate::protocol::MasterMessage::Members`]), then broadcasts among
//! them as before, so coded packets keep travelling once to all who need them.

use std::fmt::Display;

use ubershuffle_transport::TransportError;

use crate::RuntimeError;

/// The workers of a run and how they fared.
#[derive(Clone, Debug)]
pub(crate) struct Membership {
    alive: Vec<bool>,
    /// The broadcast group the workers were last told of (every worker until the first
    /// announcement).
    announced: Vec<usize>,
    /// Workers lost before the next epoch started (while receiving their starting caches);
    /// the next epoch's metrics list them.
    lost_before_epoch: Vec<usize>,
    /// Workers taken back in before the next epoch (they joined while the run went on); the
    /// next epoch's metrics list them.
    rejoined_before_epoch: Vec<usize>,
    /// The error behind the last loss, and whether it was a timeout.
    last_loss: Option<(String, bool)>,
}

/// The worker (0-based) a transport failure names, if it names one.
pub(crate) fn lost_worker(e: &TransportError) -> Option<usize> {
    e.peer().filter(|&p| p > 0).map(|p| p - 1)
}

/// The workers of `live` (0-based) to take out for a transport failure `e`: the worker it
/// names when that is one of `live`; for a failure report naming another rank (the master, a
/// rank outside the run, one already gone), the worker that reported it; for an altered piece
/// the master did not judge ([`super::disputes`]), both the worker that relayed it and the one
/// that reported it (the master cannot tell which of them lies). None when `e` names no worker
/// of `live`.
pub(crate) fn blamed_workers(e: &TransportError, live: &[usize]) -> Vec<usize> {
    let worker = |rank: usize| rank.checked_sub(1).filter(|w| live.contains(w));
    match e {
        TransportError::Tampered { sender, receiver, .. } => {
            [*sender, *receiver].into_iter().filter_map(worker).collect()
        }
        TransportError::PeerFailed { peer, reported_by, .. } => {
            worker(*peer).or_else(|| worker(*reported_by)).into_iter().collect()
        }
        _ => lost_worker(e).filter(|w| live.contains(w)).into_iter().collect(),
    }
}

impl Membership {
    /// The membership of a run whose workers' liveness is `alive` (fresh or resumed).
    pub(crate) fn of(alive: Vec<bool>) -> Membership {
        Membership {
            announced: (0..alive.len()).collect(),
            alive,
            lost_before_epoch: Vec::new(),
            rejoined_before_epoch: Vec::new(),
            last_loss: None,
        }
    }

    /// Every worker's liveness (what a checkpoint records).
    pub(crate) fn alive(&self) -> &[bool] {
        &self.alive
    }

    /// The workers still in the run, in order.
    pub(crate) fn live(&self) -> Vec<usize> {
        (0..self.alive.len()).filter(|&w| self.alive[w]).collect()
    }

    /// Whether worker `w` is in the run.
    pub(crate) fn is_alive(&self, w: usize) -> bool {
        self.alive.get(w).copied().unwrap_or(false)
    }

    /// The broadcast group to tell the live workers of, when it is not the one they know.
    pub(crate) fn group_to_announce(&self) -> Option<Vec<usize>> {
        let live = self.live();
        (live != self.announced).then_some(live)
    }

    /// Notes that the workers of `group` were told it.
    pub(crate) fn announced(&mut self, group: Vec<usize>) {
        self.announced = group;
    }

    /// Takes worker `w` out of the run.
    pub(crate) fn lose(&mut self, w: usize) {
        if let Some(a) = self.alive.get_mut(w).filter(|a| **a) {
            *a = false;
            let cause = self.last_loss.as_ref().map_or("", |(c, _)| c.as_str());
            tracing::warn!(worker = w, cause, "worker lost");
        }
    }

    /// Takes worker `w` back in before the next epoch (the epoch will list it as rejoined, and
    /// the broadcast group that includes it is announced before its first broadcast).
    pub(crate) fn rejoin(&mut self, w: usize) {
        if let Some(a) = self.alive.get_mut(w) {
            *a = true;
            self.rejoined_before_epoch.push(w);
            tracing::info!(worker = w, "worker readmitted");
        }
    }

    /// The workers taken back in before this epoch, to be listed by it.
    pub(crate) fn take_rejoined_before_epoch(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.rejoined_before_epoch)
    }

    /// Takes worker `w` out before the next epoch (the epoch will list it as lost).
    pub(crate) fn lose_before_epoch(&mut self, w: usize) {
        self.lose(w);
        self.lost_before_epoch.push(w);
    }

    /// The workers lost before this epoch, to be listed by it.
    pub(crate) fn take_lost_before_epoch(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.lost_before_epoch)
    }

    /// Keeps what made a worker lost, for the message should none be left.
    pub(crate) fn note_loss(&mut self, e: &dyn Display, timed_out: bool) {
        self.last_loss = Some((e.to_string(), timed_out));
    }

    /// The error when no worker is left; `lost` names the workers lost last.
    pub(crate) fn no_workers_left(&self, lost: String) -> RuntimeError {
        let (cause, timed_out) =
            self.last_loss.clone().unwrap_or_else(|| ("a worker left the run".to_string(), false));
        RuntimeError::NoWorkersLeft { lost, cause, timed_out }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losing_a_worker_re_forms_the_broadcast_group_and_is_recorded() {
        let mut members = Membership::of(vec![true; 3]);
        assert_eq!(members.group_to_announce(), None);
        members.lose_before_epoch(1);
        assert_eq!(members.live(), vec![0, 2]);
        assert_eq!(members.group_to_announce(), Some(vec![0, 2]));
        members.announced(vec![0, 2]);
        assert_eq!(members.group_to_announce(), None);
        assert_eq!(members.take_lost_before_epoch(), vec![1]);
        assert!(members.take_lost_before_epoch().is_empty());
        assert_eq!(members.alive(), &[true, false, true]);
        members.rejoin(1);
        assert_eq!(members.group_to_announce(), Some(vec![0, 1, 2]));
        assert_eq!(members.take_rejoined_before_epoch(), vec![1]);
        members.lose(1);
        members.note_loss(&"rank 3 did not respond", true);
        let e = members.no_workers_left("0, 2".into()).to_string();
        assert!(e.contains("lost: 0, 2") && e.contains("rank 3 did not respond"), "{e}");
    }
}
