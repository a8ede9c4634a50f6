//! The [`Transport`] trait.

use std::time::{Duration, Instant};

use crate::TransportError;
use crate::mailbox::InboxLimits;

/// A message tag: a receive takes only messages with its tag, others wait in order.
pub type Tag = u16;

/// The largest tag users may send with; tags above it carry the transport's own collectives.
/// (MPI guarantees tags up to 32767, so every tag fits.)
pub const MAX_USER_TAG: Tag = 0x6fff;

/// Moves byte messages between `size` ranks; rank 0 is the master, ranks `1..size` workers.
///
/// Every blocking wait is bounded by [`Transport::timeout`] unless a call passes its own
/// bound ([`Transport::recv_within`], [`Transport::recv_any_within`]): a receive that gets no
/// matching message, a send the peer does not drain, a collective whose peers do not arrive,
/// each fails within it with an error naming the rank waited for ([`TransportError::peer`]). The
/// timeout bounds each wait for one message, not a whole collective, so it must exceed the time
/// the largest single message takes on the link. Messages between two ranks with the same tag
/// arrive in the order they were sent.
///
/// Time: [`Transport::now`] is the clock to time this rank's work with. On real networks (TCP,
/// MPI, unshaped in-process links) it is real time. On an emulated cluster (shaped in-process
/// links) each rank has a clock of its own that advances by the rank's computing and by the
/// link model, never by host wall time; [`Transport::charge`] and [`Transport::pass`] tell it
/// about modelled computing and idle time, and bounds passed per call are on that clock.
///
/// Not `Send`: the MPI communicator is neither `Send` nor `Sync`; the in-process and TCP
/// transports are both, so they can be moved into the thread of their rank.
pub trait Transport {
    /// This process's rank.
    fn rank(&self) -> usize;

    /// The number of ranks (master plus workers).
    fn size(&self) -> usize;

    /// The timeout of every blocking wait that is not given its own bound.
    fn timeout(&self) -> Duration;

    /// Changes the timeout of every later blocking wait (configuration, e.g. a worker adopting
    /// the master's; a single wait with another bound takes it as an argument instead).
    fn set_timeout(&mut self, timeout: Duration);

    /// Sends `bytes` to rank `to` with `tag`. May return before the peer has received them.
    fn send(&mut self, to: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError>;

    /// Receives the next message from rank `from` with `tag`, waiting at most
    /// [`Transport::timeout`].
    fn recv(&mut self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        let timeout = self.timeout();
        self.recv_within(from, tag, timeout)
    }

    /// Receives the next message from rank `from` with `tag`, waiting at most `timeout` on this
    /// rank's clock ([`Transport::now`]). On an emulated clock the message must arrive within
    /// `timeout` of emulated time (the clock then reads `timeout` later and the message stays
    /// for a later receive), while the real wait for a peer that sends nothing is bounded by
    /// the larger of `timeout` and [`Transport::timeout`].
    fn recv_within(&mut self, from: usize, tag: Tag, timeout: Duration) -> Result<Vec<u8>, TransportError>;

    /// Receives the first message with `tag` from any of `from`, waiting at most
    /// [`Transport::timeout`]; returns the sender too. A master collecting updates takes them
    /// in arrival order with this.
    fn recv_any(&mut self, from: &[usize], tag: Tag) -> Result<(usize, Vec<u8>), TransportError> {
        let timeout = self.timeout();
        self.recv_any_within(from, tag, timeout)
    }

    /// [`Transport::recv_any`] waiting at most `timeout` on this rank's clock (see
    /// [`Transport::recv_within`]). On an emulated clock "first" means the earliest emulated
    /// arrival (ties to the lowest rank): the receive waits until every rank of `from` has sent
    /// a matching message or is gone (or stayed silent for a whole real-time bound), so the
    /// choice does not depend on which thread the host ran first.
    fn recv_any_within(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
    ) -> Result<(usize, Vec<u8>), TransportError>;

    /// Broadcast from `root`: at the root `buf` is sent (and left as is); at every other rank
    /// `buf` is replaced by the root's bytes. Every rank must call it with the same root.
    /// Returns at the root once every rank has the bytes (the in-process and TCP transports
    /// wait for acknowledgements; MPI returns when `MPI_Bcast` does).
    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError>;

    /// Broadcast from `root` to the ranks of `group` only (increasing, the root among them):
    /// how survivors re-form their broadcast after a rank was lost. Every rank of the group
    /// calls it with the same root, group and `id`; ranks outside it take no part. `id` names
    /// the broadcast: messages left over from an abandoned broadcast with another name are
    /// dropped, so callers give each broadcast a name its predecessors did not have (the epoch
    /// loop uses epoch, attempt and chunk). Returns at the root as [`Transport::broadcast`].
    fn broadcast_among(
        &mut self,
        root: usize,
        group: &[usize],
        id: u64,
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError>;

    /// [`Transport::broadcast_among`] with the pseudo-broadcast's ring in arrangement `turn`
    /// ([`crate::ring_order`]; every rank of the group passes the same): a caller that restarts
    /// an abandoned broadcast passes another turn, so that ring neighbours that disputed a
    /// relayed piece are no longer neighbours. Transports that do not relay (MPI) ignore it.
    fn broadcast_turned(
        &mut self,
        root: usize,
        group: &[usize],
        (id, turn): (u64, u32),
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        let _ = turn;
        self.broadcast_among(root, group, id, buf)
    }

    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<(), TransportError>;

    /// The clock to time this rank's operations with: real time, except on an emulated
    /// cluster, where it is this rank's emulated time (see the trait's documentation).
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// Tells the clock that this rank just did computing that a cost model prices at `cost`.
    /// Only a clock that counts modelled computing (an emulated cluster in
    /// `ComputeTime::Charged` mode) advances; every other clock measures computing itself and
    /// ignores it.
    fn charge(&mut self, cost: Duration) {
        let _ = cost;
    }

    /// Lets `duration` pass on this rank's clock, as a rank that holds back would: a real
    /// clock sleeps, an emulated one moves on at once.
    fn pass(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }

    /// Says why this rank is about to leave, so that its peers' errors can say it too (the
    /// in-process transport passes it on with the news that the rank left; a transport whose
    /// peers only see a closed connection ignores it).
    fn leave(&mut self, reason: &str) {
        let _ = reason;
    }

    /// At the master: takes workers that asked to join while the cluster runs into the free
    /// worker ranks `free`, each linked to the workers of `present` and started; returns the
    /// ranks filled, in order (none when nobody waits). A newcomer that fails on the way is
    /// dropped and its rank stays free. Transports whose membership is fixed when they start
    /// (in-process, MPI) admit nobody.
    fn admit_waiting(&mut self, free: &[usize], present: &[usize]) -> Result<Vec<usize>, TransportError> {
        let _ = (free, present);
        Ok(Vec::new())
    }

    /// Caps what this rank takes from each rank of `peers` before reading it ([`InboxLimits`]:
    /// the longest frame, the bytes held unread); a peer past either loses its link, as a
    /// departed one would. Limits come from the job (the runtime derives them from the chunk,
    /// model and plan sizes). Transports whose ranks are threads of one process (in-process)
    /// or that trust their network (MPI) take them as a no-op.
    fn limit_inbox(&mut self, peers: &[usize], limits: InboxLimits) {
        let _ = (peers, limits);
    }

    /// At a worker: waits, each up to the timeout, for the link from each rank of `ranks`
    /// (workers the master admitted while the cluster runs), which replaces the old one. Fails
    /// naming the first rank whose link did not come. Transports whose membership is fixed do
    /// nothing.
    fn await_links(&mut self, ranks: &[usize]) -> Result<(), TransportError> {
        let _ = ranks;
        Ok(())
    }
}

/// Checks a user tag.
pub(crate) fn check_user_tag(tag: Tag) -> Result<(), TransportError> {
    if tag > MAX_USER_TAG {
        return Err(TransportError::ReservedTag { tag, max: MAX_USER_TAG });
    }
    Ok(())
}

/// Checks that `peer` is another existing rank.
pub(crate) fn check_peer(rank: usize, size: usize, peer: usize) -> Result<(), TransportError> {
    if peer >= size {
        return Err(TransportError::NoSuchRank { rank: peer, size });
    }
    if peer == rank {
        return Err(TransportError::SelfMessage { rank });
    }
    Ok(())
}

/// Bytes of a collective's own header (its name, a piece's length and index) that a message
/// may carry beyond a transport's `max_message`, so that a broadcast of `max_message` bytes
/// fits whichever way it is sent.
pub const COLLECTIVE_HEADER_BYTES: usize = 64;

/// Checks a send before anything moves: `to` is another rank and the concatenation of `parts`
/// is at most `max` bytes (plus [`COLLECTIVE_HEADER_BYTES`] of a collective's header).
pub(crate) fn check_send(
    rank: usize,
    size: usize,
    to: usize,
    parts: &[&[u8]],
    max: usize,
) -> Result<(), TransportError> {
    check_peer(rank, size, to)?;
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > max.saturating_add(COLLECTIVE_HEADER_BYTES) {
        return Err(TransportError::MessageTooLarge { len, max });
    }
    Ok(())
}

/// Checks that every rank of `from` is another rank.
pub(crate) fn check_peers(rank: usize, size: usize, from: &[usize]) -> Result<(), TransportError> {
    from.iter().try_for_each(|&f| check_peer(rank, size, f))
}

/// The point-to-point half of [`Transport`] for a real-time type that implements
/// [`crate::collectives::Links`] and has `rank`, `size` and `timeout` fields: the same for the
/// TCP and MPI transports, written once.
macro_rules! point_to_point_via_links {
    () => {
        fn rank(&self) -> usize {
            self.rank
        }

        fn size(&self) -> usize {
            self.size
        }

        fn timeout(&self) -> std::time::Duration {
            self.timeout
        }

        fn send(&mut self, to: usize, tag: $crate::Tag, bytes: &[u8]) -> Result<(), $crate::TransportError> {
            $crate::transport::check_user_tag(tag)?;
            $crate::collectives::Links::send_parts(self, to, tag, &[bytes], "send")
        }

        fn recv_within(
            &mut self,
            from: usize,
            tag: $crate::Tag,
            timeout: std::time::Duration,
        ) -> Result<Vec<u8>, $crate::TransportError> {
            $crate::transport::check_user_tag(tag)?;
            $crate::collectives::Links::recv_from(self, &[from], tag, timeout, "recv").map(|(_, b)| b)
        }

        fn recv_any_within(
            &mut self,
            from: &[usize],
            tag: $crate::Tag,
            timeout: std::time::Duration,
        ) -> Result<(usize, Vec<u8>), $crate::TransportError> {
            $crate::transport::check_user_tag(tag)?;
            $crate::collectives::Links::recv_from(self, from, tag, timeout, "recv")
        }
    };
}
pub(crate) use point_to_point_via_links;

/// The accessors of [`crate::collectives::Links`] for a type with `rank`, `size`, `timeout` and
/// `max_message` fields.
macro_rules! links_accessors {
    () => {
        fn rank(&self) -> usize {
            self.rank
        }

        fn size(&self) -> usize {
            self.size
        }

        fn wait_timeout(&self) -> std::time::Duration {
            self.timeout
        }

        fn max_message(&self) -> usize {
            self.max_message
        }
    };
}
pub(crate) use links_accessors;
