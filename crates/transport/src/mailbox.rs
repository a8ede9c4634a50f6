//! [`Mailbox`]: one rank's inbox with tag matching, shared by the in-process and TCP
//! transports. Deliveries from every peer arrive on one channel; a receive takes the first one
//! matching its sender set and tag and keeps the others, in order, for later receives.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::{Tag, TransportError};

/// What arrives at a rank.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// A message.
    Message {
        /// The sender.
        from: usize,
        /// Its tag.
        tag: Tag,
        /// Its bytes.
        bytes: Vec<u8>,
        /// When it arrived on the emulated network's schedule (shaped in-process links only).
        arrival: Option<Instant>,
    },
    /// A peer is gone: it closed, failed, or sent a corrupt frame. Comes after its last message.
    Gone {
        /// The peer.
        from: usize,
        /// What was seen.
        detail: String,
    },
}

/// A message waiting to be received: sender, tag, bytes, scheduled arrival.
type Pending = (usize, Tag, Vec<u8>, Option<Instant>);

/// A rank's inbox.
#[derive(Debug)]
pub(crate) struct Mailbox {
    inbox: Receiver<Delivery>,
    pending: VecDeque<Pending>,
    /// For each peer that is gone: when it was noticed (a count of departures) and why.
    gone: Vec<Option<(u64, String)>>,
    departures: u64,
}

impl Mailbox {
    /// A mailbox for a cluster of `size` ranks reading `inbox`.
    pub(crate) fn new(size: usize, inbox: Receiver<Delivery>) -> Mailbox {
        Mailbox { inbox, pending: VecDeque::new(), gone: vec![None; size], departures: 0 }
    }

    /// Why `peer` is gone, if it is and nothing it sent is left unread.
    pub(crate) fn gone(&self, peer: usize) -> Option<&str> {
        self.gone.get(peer).and_then(|g| g.as_ref()).map(|(_, d)| d.as_str())
    }

    /// Of the ranks `among`, the one noticed gone first, and why. (When a departure makes
    /// others give up and leave too, the first one noticed is the cause.)
    pub(crate) fn first_gone(&self, among: &[usize]) -> Option<(usize, &str)> {
        among
            .iter()
            .filter_map(|&p| self.gone.get(p).and_then(|g| g.as_ref()).map(|(at, d)| (*at, p, d.as_str())))
            .min_by_key(|(at, ..)| *at)
            .map(|(_, p, d)| (p, d))
    }

    fn note_gone(&mut self, from: usize, detail: String) {
        if let Some(slot) = self.gone.get_mut(from).filter(|s| s.is_none()) {
            *slot = Some((self.departures, detail));
            self.departures += 1;
        }
    }

    /// Takes the first message with `tag` from any rank of `from`, waiting up to `timeout`.
    /// A peer of `from` that is gone with nothing matching left fails at once with its rank.
    pub(crate) fn recv(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        self.recv_stamped(from, tag, timeout, op).map(|(f, _, b, _)| (f, b))
    }

    /// [`Mailbox::recv`], also returning the message's scheduled arrival, if it has one.
    pub(crate) fn recv_stamped(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<Pending, TransportError> {
        // A timeout too long to add to the clock waits as long as the clock allows (a century).
        let now = Instant::now();
        let deadline =
            now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        let mut scanned = 0;
        loop {
            let found =
                self.pending.iter().skip(scanned).position(|(f, t, ..)| *t == tag && from.contains(f));
            if let Some(message) = found.and_then(|i| self.pending.remove(scanned + i)) {
                return Ok(message);
            }
            scanned = self.pending.len();
            if let Some((peer, detail)) = self.first_gone(from) {
                return Err(TransportError::PeerGone { peer, op, detail: detail.to_string() });
            }
            match self.inbox.recv_deadline(deadline) {
                Ok(Delivery::Message { from, tag, bytes, arrival }) => {
                    self.pending.push_back((from, tag, bytes, arrival));
                }
                Ok(Delivery::Gone { from, detail }) => self.note_gone(from, detail),
                Err(RecvTimeoutError::Timeout) => {
                    let peer = from.iter().copied().min().unwrap_or(0);
                    return Err(TransportError::Timeout { peer, op, after: timeout });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let peer = from.iter().copied().min().unwrap_or(0);
                    return Err(TransportError::PeerGone { peer, op, detail: "every link is closed".into() });
                }
            }
        }
    }

    /// Fails with [`TransportError::PeerGone`] when `peer` is known gone (after taking in what
    /// is waiting): a send to it would go nowhere.
    pub(crate) fn ensure_present(&mut self, peer: usize, op: &'static str) -> Result<(), TransportError> {
        self.poll();
        match self.gone(peer) {
            Some(detail) => Err(TransportError::PeerGone { peer, op, detail: detail.to_string() }),
            None => Ok(()),
        }
    }

    /// Takes in every delivery already waiting, so that `gone` is up to date.
    pub(crate) fn poll(&mut self) {
        while let Ok(d) = self.inbox.try_recv() {
            match d {
                Delivery::Message { from, tag, bytes, arrival } => {
                    self.pending.push_back((from, tag, bytes, arrival));
                }
                Delivery::Gone { from, detail } => self.note_gone(from, detail),
            }
        }
    }
}
