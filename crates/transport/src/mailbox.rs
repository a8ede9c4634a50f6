//! [`Mailbox`]: one rank's inbox with tag matching, shared by the in-process and TCP
//! transports. Deliveries from every peer arrive on one channel; a receive takes the first one
//! matching its sender set and tag and keeps the others, in order, for later receives.
//!
//! On an emulated cluster messages carry a [`Stamp`] (when they left their sender on the
//! emulated timeline) and "first" means the earliest emulated arrival, not the first delivered:
//! [`Mailbox::await_candidates`] waits until every candidate sender has a matching message (or
//! is gone, or stayed silent for a whole real-time bound), and [`Mailbox::earliest`] picks among
//! them.
//!
//! What a rank holds from a peer and has not read is capped per peer ([`Unread`], set by
//! [`crate::Transport::limit_inbox`]): a link's reader counts each message in before it
//! delivers it and the mailbox counts it out when it is received or dropped, so a peer that
//! floods messages no one waits for passes the cap and its link ends, as a lost peer's would.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
        /// When it left its sender on the emulated timeline (emulated in-process links only).
        stamp: Option<Stamp>,
    },
    /// A peer is gone: it closed, failed, or sent a corrupt frame. Comes after its last message.
    Gone {
        /// The peer.
        from: usize,
        /// What was seen.
        detail: String,
    },
}

/// When an emulated message left its sender and how long its bytes take on a link, both on
/// the emulated timeline (durations since the cluster's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// When its first byte left the sender's uplink.
    pub sent: Duration,
    /// How long its bytes occupy a port.
    pub transfer: Duration,
}

/// Bounds on what a rank takes from a peer before it reads it: the longest frame, and the bytes
/// of messages delivered and not yet received. The runtime derives both from the job (see
/// docs/transport.md, "Bounded inboxes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InboxLimits {
    /// The longest frame taken from the peer; a longer one ends its link unread.
    pub max_frame: usize,
    /// The most bytes held for the peer, delivered and unread; a message past it ends the link.
    pub max_unread: usize,
}

impl InboxLimits {
    /// Limits of frames up to `max_frame` bytes and `max_unread` bytes held unread.
    pub fn new(max_frame: usize, max_unread: usize) -> InboxLimits {
        InboxLimits { max_frame, max_unread }
    }
}

/// Per peer: the limits and the bytes held unread, shared by the mailbox (which counts out)
/// and the links' readers (which count in). Unlimited until [`Unread::limit`].
#[derive(Debug)]
pub(crate) struct Unread {
    max_frame: Vec<AtomicUsize>,
    max_unread: Vec<AtomicUsize>,
    held: Vec<AtomicUsize>,
}

impl Unread {
    /// No limits yet, for `size` ranks.
    pub(crate) fn new(size: usize) -> Unread {
        let many = |v: usize| (0..size).map(|_| AtomicUsize::new(v)).collect();
        Unread { max_frame: many(usize::MAX), max_unread: many(usize::MAX), held: many(0) }
    }

    /// Applies `limits` to the messages of `peers` from now on.
    pub(crate) fn limit(&self, peers: &[usize], limits: InboxLimits) {
        for &p in peers {
            if let (Some(f), Some(u)) = (self.max_frame.get(p), self.max_unread.get(p)) {
                f.store(limits.max_frame, Ordering::Relaxed);
                u.store(limits.max_unread, Ordering::Relaxed);
            }
        }
    }

    /// The longest frame to take from `peer`, at most `max`.
    pub(crate) fn max_frame(&self, peer: usize, max: usize) -> usize {
        self.max_frame.get(peer).map_or(max, |f| f.load(Ordering::Relaxed).min(max))
    }

    /// Counts `len` more bytes held for `peer`; `Err` with the cap (nothing counted) when that
    /// would pass it.
    pub(crate) fn admit(&self, peer: usize, len: usize) -> Result<(), usize> {
        let (Some(held), Some(cap)) = (self.held.get(peer), self.max_unread.get(peer)) else {
            return Ok(());
        };
        let cap = cap.load(Ordering::Relaxed);
        held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_add(len).filter(|&n| n <= cap))
            .map(|_| ())
            .map_err(|_| cap)
    }

    /// Counts out `len` bytes of `peer` (received or dropped).
    fn release(&self, peer: usize, len: usize) {
        if let Some(held) = self.held.get(peer) {
            let _ = held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| Some(h.saturating_sub(len)));
        }
    }
}

/// The detail of a link ended for holding more than `cap` unread bytes.
pub(crate) fn over_cap(cap: usize) -> String {
    format!("sent more than the {cap} bytes a rank holds unread for a peer (messages no one waits for)")
}

/// A message waiting to be received: sender, tag, bytes, emulated stamp.
type Pending = (usize, Tag, Vec<u8>, Option<Stamp>);

/// How waiting for the candidates of an emulated receive ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Candidates {
    /// Every candidate has a matching message, or is gone or silent.
    Settled,
    /// A candidate is gone with nothing matching left: the receive fails naming it.
    Gone(usize),
}

/// A rank's inbox.
#[derive(Debug)]
pub(crate) struct Mailbox {
    inbox: Receiver<Delivery>,
    pending: VecDeque<Pending>,
    /// Messages set aside to be received again later ([`Mailbox::hold`]).
    held: Vec<Pending>,
    /// For each peer that is gone: when it was noticed (a count of departures) and why.
    gone: Vec<Option<(u64, String)>>,
    departures: u64,
    /// Peers that let a whole real-time bound pass without a message an emulated receive
    /// waited for: not waited for again until they send something.
    silent: Vec<bool>,
    /// The bytes held per peer, counted in by the links' readers.
    unread: Arc<Unread>,
}

impl Mailbox {
    /// A mailbox for a cluster of `size` ranks reading `inbox`.
    pub(crate) fn new(size: usize, inbox: Receiver<Delivery>) -> Mailbox {
        Mailbox {
            inbox,
            pending: VecDeque::new(),
            held: Vec::new(),
            gone: vec![None; size],
            departures: 0,
            silent: vec![false; size],
            unread: Arc::new(Unread::new(size)),
        }
    }

    /// The per-peer count of unread bytes, for the links' readers to count messages in.
    pub(crate) fn unread(&self) -> Arc<Unread> {
        Arc::clone(&self.unread)
    }

    /// Takes out the waiting message at `i`, counting its bytes out.
    fn remove(&mut self, i: usize) -> Option<Pending> {
        let message = self.pending.remove(i)?;
        self.unread.release(message.0, message.2.len());
        Some(message)
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

    /// [`Mailbox::recv`], also returning the message's emulated stamp, if it has one.
    pub(crate) fn recv_stamped(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<Pending, TransportError> {
        let deadline = deadline_after(timeout);
        let mut scanned = 0;
        loop {
            let found =
                self.pending.iter().skip(scanned).position(|(f, t, ..)| *t == tag && from.contains(f));
            if let Some(message) = found.and_then(|i| self.remove(scanned + i)) {
                return Ok(message);
            }
            scanned = self.pending.len();
            if let Some((peer, detail)) = self.first_gone(from) {
                return Err(TransportError::PeerGone { peer, op, detail: detail.to_string() });
            }
            match self.inbox.recv_deadline(deadline) {
                Ok(d) => self.take_in(d),
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
            self.take_in(d);
        }
    }

    /// Takes `peer` back after it was gone (a new link replaces the old one, whose deliveries
    /// have all been taken in): forgets its departure and whatever it sent before.
    pub(crate) fn revive(&mut self, peer: usize) {
        if let Some(g) = self.gone.get_mut(peer) {
            *g = None;
        }
        if let Some(s) = self.silent.get_mut(peer) {
            *s = false;
        }
        self.pending.retain(|m| m.0 != peer);
        self.held.retain(|m| m.0 != peer);
        // What the old link delivered is gone with it.
        self.unread.release(peer, usize::MAX);
    }

    fn take_in(&mut self, d: Delivery) {
        match d {
            Delivery::Message { from, tag, bytes, stamp } => {
                if let Some(s) = self.silent.get_mut(from) {
                    *s = false;
                }
                self.pending.push_back((from, tag, bytes, stamp));
            }
            Delivery::Gone { from, detail } => self.note_gone(from, detail),
        }
    }

    /// The first waiting message from `from` with `tag`: its position.
    fn first_matching(&self, from: usize, tag: Tag) -> Option<usize> {
        self.pending.iter().position(|(f, t, ..)| *f == from && *t == tag)
    }

    /// Waits (in real time, until `deadline`) until each rank of `from` has a message with
    /// `tag` waiting, or is gone, or is silent, and one has a message; candidates still without
    /// one at the deadline become silent. A candidate gone with nothing matching ends the wait
    /// at once.
    pub(crate) fn await_candidates(&mut self, from: &[usize], tag: Tag, deadline: Instant) -> Candidates {
        loop {
            self.poll();
            let (mut settled, mut any) = (true, false);
            for &f in from {
                if self.first_matching(f, tag).is_some() {
                    any = true;
                    continue;
                }
                if self.gone(f).is_some() {
                    return Candidates::Gone(f);
                }
                settled &= self.silent.get(f).copied().unwrap_or(true);
            }
            // Silent candidates are not waited for again, but when nothing else is there they
            // get the whole bound once more.
            if settled && any {
                return Candidates::Settled;
            }
            match self.inbox.recv_deadline(deadline) {
                Ok(d) => self.take_in(d),
                Err(_) => {
                    for &f in from {
                        if self.first_matching(f, tag).is_none()
                            && let Some(s) = self.silent.get_mut(f)
                        {
                            *s = true;
                        }
                    }
                    return Candidates::Settled;
                }
            }
        }
    }

    /// Of the first waiting message with `tag` of each rank of `from`, the one that left its
    /// sender first (ties to the lowest rank): its sender and stamp. (A receiving port takes
    /// messages in the order they reach it, first come first served.)
    pub(crate) fn earliest(&self, from: &[usize], tag: Tag) -> Option<(usize, Stamp)> {
        from.iter()
            .filter_map(|&f| {
                let i = self.first_matching(f, tag)?;
                let stamp =
                    self.pending[i].3.unwrap_or(Stamp { sent: Duration::ZERO, transfer: Duration::ZERO });
                Some((f, stamp))
            })
            .min_by_key(|&(f, stamp)| (stamp.sent, f))
    }

    /// Sets a received message aside until [`Mailbox::release_held`] (its emulated stamp is
    /// gone: it counts as arrived); it counts as unread again.
    pub(crate) fn hold(&mut self, from: usize, tag: Tag, bytes: Vec<u8>) {
        if let Err(cap) = self.unread.admit(from, bytes.len()) {
            self.note_gone(from, over_cap(cap));
            return;
        }
        self.held.push((from, tag, bytes, None));
    }

    /// Puts the messages set aside back in front of the waiting ones, in the order they came.
    pub(crate) fn release_held(&mut self) {
        for message in self.held.drain(..).rev() {
            self.pending.push_front(message);
        }
    }

    /// Takes the first waiting message from `from` with `tag` (there must be one: see
    /// [`Mailbox::earliest`]).
    pub(crate) fn take(&mut self, from: usize, tag: Tag) -> Option<Vec<u8>> {
        let i = self.first_matching(from, tag)?;
        self.remove(i).map(|(_, _, bytes, _)| bytes)
    }
}

/// The instant `timeout` from now; a timeout too long to add to the clock waits as long as the
/// clock allows (a century).
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}
