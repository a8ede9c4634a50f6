//! The [`Transport`] trait.

use std::time::{Duration, Instant};

use crate::TransportError;

/// A message tag: a receive takes only messages with its tag, others wait in order.
pub type Tag = u16;

/// The largest tag users may send with; tags above it carry the transport's own collectives.
/// (MPI guarantees tags up to 32767, so every tag fits.)
pub const MAX_USER_TAG: Tag = 0x6fff;

/// Moves byte messages between `size` ranks; rank 0 is the master, ranks `1..size` workers.
///
/// Every blocking wait is bounded by [`Transport::timeout`]: a receive that gets no matching
/// message, a send the peer does not drain, a collective whose peers do not arrive, each fails
/// within it with an error naming the rank waited for ([`TransportError::peer`]). The timeout
/// bounds each wait for one message, not a whole collective, so it must exceed the time the
/// largest single message takes on the link. Messages between two ranks with the same tag
/// arrive in the order they were sent.
///
/// Not `Send`: the MPI communicator is neither `Send` nor `Sync`; the in-process and TCP
/// transports are both, so they can be moved into the thread of their rank.
pub trait Transport {
    /// This process's rank.
    fn rank(&self) -> usize;

    /// The number of ranks (master plus workers).
    fn size(&self) -> usize;

    /// The timeout of every blocking wait.
    fn timeout(&self) -> Duration;

    /// Changes the timeout of every later blocking wait.
    fn set_timeout(&mut self, timeout: Duration);

    /// Sends `bytes` to rank `to` with `tag`. May return before the peer has received them.
    fn send(&mut self, to: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError>;

    /// Receives the next message from rank `from` with `tag`.
    fn recv(&mut self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError>;

    /// Receives the first message with `tag` from any of `from`; returns the sender too. A
    /// master collecting updates takes them in arrival order with this.
    fn recv_any(&mut self, from: &[usize], tag: Tag) -> Result<(usize, Vec<u8>), TransportError>;

    /// Broadcast from `root`: at the root `buf` is sent (and left as is); at every other rank
    /// `buf` is replaced by the root's bytes. Every rank must call it with the same root.
    /// Returns at the root once every rank has the bytes (the in-process and TCP transports
    /// wait for acknowledgements; MPI returns when `MPI_Bcast` does).
    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError>;

    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<(), TransportError>;

    /// The clock to time this transport's operations with: real time, except on emulated
    /// links, where it is the rank's emulated time (shaped in-process links count transfers on
    /// the modelled network's schedule, not the emulator's own copies and thread wake-ups).
    fn now(&self) -> Instant {
        Instant::now()
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

/// Checks a send before anything moves: `to` is another rank and the concatenation of `parts`
/// is at most `max` bytes.
pub(crate) fn check_send(
    rank: usize,
    size: usize,
    to: usize,
    parts: &[&[u8]],
    max: usize,
) -> Result<(), TransportError> {
    check_peer(rank, size, to)?;
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > max {
        return Err(TransportError::MessageTooLarge { len, max });
    }
    Ok(())
}

/// Checks that every rank of `from` is another rank.
pub(crate) fn check_peers(rank: usize, size: usize, from: &[usize]) -> Result<(), TransportError> {
    from.iter().try_for_each(|&f| check_peer(rank, size, f))
}

/// The point-to-point half of [`Transport`] for a type that implements
/// [`crate::collectives::Links`] and has `rank`, `size` and `timeout` fields: the same for every
/// transport, written once.
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

        fn recv(&mut self, from: usize, tag: $crate::Tag) -> Result<Vec<u8>, $crate::TransportError> {
            $crate::transport::check_user_tag(tag)?;
            $crate::collectives::Links::recv_from(self, &[from], tag, self.timeout, "recv").map(|(_, b)| b)
        }

        fn recv_any(
            &mut self,
            from: &[usize],
            tag: $crate::Tag,
        ) -> Result<(usize, Vec<u8>), $crate::TransportError> {
            $crate::transport::check_user_tag(tag)?;
            $crate::collectives::Links::recv_from(self, from, tag, self.timeout, "recv")
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
