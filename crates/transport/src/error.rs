//! [`TransportError`]: every way moving bytes can fail, naming the rank at fault.

use std::time::Duration;

use crate::frame::FrameError;

/// Why a transport operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A peer did not answer (or did not drain what we sent) within the timeout.
    #[error("rank {peer} did not respond within {after:?} ({op})")]
    Timeout {
        /// The rank waited for.
        peer: usize,
        /// The operation that waited.
        op: &'static str,
        /// The timeout that passed.
        after: Duration,
    },
    /// A peer closed its connection, exited or sent something unreadable.
    #[error("rank {peer} is gone ({op}): {detail}")]
    PeerGone {
        /// The rank.
        peer: usize,
        /// The operation that noticed.
        op: &'static str,
        /// What was seen (closed connection, reset, corrupt frame).
        detail: String,
    },
    /// Another rank reported that `peer` failed during a collective operation.
    #[error("rank {peer} failed ({op}, reported by rank {reported_by}): {detail}")]
    PeerFailed {
        /// The rank at fault.
        peer: usize,
        /// The rank that noticed and reported it.
        reported_by: usize,
        /// The operation.
        op: &'static str,
        /// What the reporter saw.
        detail: String,
    },
    /// A receiver of a pseudo-broadcast saw its ring predecessor `sender` break the protocol:
    /// a piece off the root's digest, a piece of the wrong index or length, a flood of
    /// messages of finished broadcasts. One of the two is lying, and the root cannot tell
    /// which (see docs/transport.md, "Relayed pieces").
    #[error("rank {sender} broke the broadcast ring, as its successor rank {receiver} saw: {detail}")]
    Tampered {
        /// The rank that handed the piece over.
        sender: usize,
        /// The rank that found it wrong.
        receiver: usize,
        /// What was wrong.
        detail: String,
    },
    /// A peer sent a message that breaks the protocol (wrong size, wrong piece).
    #[error("rank {peer} broke the protocol ({op}): {detail}")]
    Protocol {
        /// The rank.
        peer: usize,
        /// The operation.
        op: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A rank outside `0..size`.
    #[error("rank {rank} does not exist (size {size})")]
    NoSuchRank {
        /// The rank asked for.
        rank: usize,
        /// The number of ranks.
        size: usize,
    },
    /// A message to oneself (not supported: the epoch loop never needs it).
    #[error("rank {rank} cannot send to or receive from itself")]
    SelfMessage {
        /// The rank.
        rank: usize,
    },
    /// A tag above [`crate::MAX_USER_TAG`]: those are the transport's own.
    #[error("tag {tag} is reserved for the transport (user tags are 0..={max})")]
    ReservedTag {
        /// The tag.
        tag: u16,
        /// The largest user tag.
        max: u16,
    },
    /// A message longer than the transport's bound.
    #[error("a {len}-byte message exceeds the {max}-byte bound")]
    MessageTooLarge {
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A broadcast group that cannot be used (out of order, or without the root or the caller).
    #[error("broadcast group {detail}")]
    Group {
        /// What is wrong with it.
        detail: String,
    },
    /// Setting up the cluster failed (authentication, too few workers, bad addresses).
    #[error("{0}")]
    Setup(String),
    /// The master refused this worker.
    #[error("the master refused this worker: {reason}")]
    Refused {
        /// The master's reason.
        reason: String,
    },
    /// An I/O error outside any one peer (binding, accepting).
    #[error("{context}: {error}")]
    Io {
        /// What was being done.
        context: String,
        /// The error (in the message, not a separate cause, so it is printed once).
        error: std::io::Error,
    },
    /// A frame failed its checks outside an established link (during setup).
    #[error("bad frame from {from}: {error}")]
    BadFrame {
        /// Who sent it (an address or a rank).
        from: String,
        /// What was wrong.
        error: FrameError,
    },
}

impl TransportError {
    /// The rank at fault, when one is known.
    pub fn peer(&self) -> Option<usize> {
        match self {
            TransportError::Timeout { peer, .. }
            | TransportError::PeerGone { peer, .. }
            | TransportError::PeerFailed { peer, .. }
            | TransportError::Protocol { peer, .. } => Some(*peer),
            TransportError::Tampered { sender, .. } => Some(*sender),
            _ => None,
        }
    }

    /// Whether this is a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, TransportError::Timeout { .. })
    }
}
