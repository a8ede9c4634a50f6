//! What can go wrong in the data plane, as one-line messages that name the rank at fault and
//! what this rank was doing.

use crate::store::StoreError;

/// A failure of the plane at one rank. Every message is one line and names the rank at fault.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PlaneError {
    /// A peer has not been heard from for longer than the timeout: it died or froze.
    #[error(
        "rank {rank} has not been heard from for {seconds:.1} s (it died or froze; timeout {timeout} s): rank {me} was {doing}"
    )]
    Silent {
        /// The silent rank.
        rank: usize,
        /// Seconds since it was last heard, on this rank's clock.
        seconds: f64,
        /// The timeout, as given.
        timeout: f64,
        /// This rank.
        me: usize,
        /// What this rank was doing.
        doing: String,
    },
    /// A peer closed its plane.
    #[error("rank {rank} closed its {plane} while rank {me} was {doing}")]
    PeerClosed {
        /// The rank that closed.
        rank: usize,
        /// What the plane is called at the API (`ShuffleGroup`).
        plane: String,
        /// This rank.
        me: usize,
        /// What this rank was doing.
        doing: String,
    },
    /// A peer stopped because its own plane failed, and said why.
    #[error("rank {rank} stopped while rank {me} was {doing}, because {reason}")]
    PeerFailed {
        /// The rank that stopped.
        rank: usize,
        /// This rank.
        me: usize,
        /// What this rank was doing.
        doing: String,
        /// Why it stopped (one bounded line, as it said).
        reason: String,
    },
    /// A peer's connection ended without a word: its process died or its host went away.
    #[error(
        "rank {rank}'s connection ended while rank {me} was {doing} (it died or its host went away: {detail})"
    )]
    PeerLost {
        /// The rank whose connection ended.
        rank: usize,
        /// This rank.
        me: usize,
        /// What this rank was doing.
        doing: String,
        /// What the connection said.
        detail: String,
    },
    /// This rank's plane was closed (from any thread) while it was waiting.
    #[error("rank {me}'s {plane} was closed while it was {doing}")]
    Closed {
        /// What the plane is called at the API.
        plane: String,
        /// This rank.
        me: usize,
        /// What this rank was doing.
        doing: String,
    },
    /// A peer sent what the protocol does not allow: it costs that peer's part of the job.
    #[error("rank {rank} broke the protocol ({what}) while rank {me} was {doing}")]
    Protocol {
        /// The peer.
        rank: usize,
        /// What was wrong.
        what: String,
        /// This rank.
        me: usize,
        /// What this rank was doing.
        doing: String,
    },
    /// The ranks were given different settings or data sets, or asked for what cannot be
    /// done: a mistake of the caller's, named on every rank.
    #[error("{0}")]
    Mismatch(String),
    /// The rank's record store failed (no room on its file system, a file error).
    #[error("{0}")]
    Store(String),
    /// The records could not be read from the source.
    #[error("{0}")]
    Source(String),
    /// A bug of the plane's.
    #[error("internal error of the data plane: {0}")]
    Internal(String),
}

impl PlaneError {
    /// Whether this is a peer's failure as seen from this rank (the job can go on only by
    /// restarting): every variant but the caller's own mistakes and local store errors.
    pub fn is_peer_failure(&self) -> bool {
        matches!(
            self,
            PlaneError::Silent { .. }
                | PlaneError::PeerClosed { .. }
                | PlaneError::PeerFailed { .. }
                | PlaneError::PeerLost { .. }
                | PlaneError::Protocol { .. }
        )
    }
}

impl From<StoreError> for PlaneError {
    fn from(e: StoreError) -> PlaneError {
        PlaneError::Store(one_line(&e))
    }
}

/// One line: the message and its sources (`a: b: c`), newlines replaced.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text.replace('\n', " ")
}

/// At most `max` characters of `text` on one line (a peer's words are bounded).
pub fn bounded_line(text: &str, max: usize) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(max).collect()
}
